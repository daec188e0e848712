"""LangChain section of ``python -m recallpack.bench``: what BudgetedRetriever adds to a retrieve.

Over an ``InMemoryVectorStore`` of 10,000 real documents (paragraphs of the standard library's
own source, read offline; the same corpus as the LlamaIndex section), each query is timed on two
sides in the same run: the vector store retriever's own ``invoke``, and ``BudgetedRetriever.invoke``
wrapping it (which calls that same ``invoke`` inside). Each side runs ``REPEAT`` times per query,
interleaved with the other, the side that goes first alternating, and each side's best time on
each query counts: the upstream's ~100 ms of numpy over 10,000 embeddings is memory-bound, so a
single run of it swings with whatever else the machine does, and the best of a few is the one
nothing cut into. The overhead is the sum of the wrapped side's bests over the sum of the upstream's,
less one, so the machine's speed cancels out. The tokenizer's count cache is emptied before every
run, so a repeat counts every text again, as the first run did (see docs/performance.md, "The guard").
"""

from __future__ import annotations

import time
from typing import Any

from langchain_core.documents import Document
from langchain_core.runnables import RunnableConfig
from langchain_core.vectorstores import InMemoryVectorStore, VectorStoreRetriever
from pydantic import PrivateAttr

from recallpack._bench.timing import interleaved_best
from recallpack.adapters.langchain import BudgetedRetriever
from recallpack.testing import HashingEmbeddings, source_paragraphs

__all__ = ["HashingEmbeddings", "stdlib_documents", "run", "measure"]

DOCUMENTS = 10_000
QUERIES = 40
FETCH_K = 50
MAX_TOKENS = 2048
TARGET = 0.10
#: Runs of each side per query: its best counts.
REPEAT = 3


class _Clocked(VectorStoreRetriever):
    """The vector store's retriever, keeping how long its last ``invoke`` took: inside a
    BudgetedRetriever call, the upstream's part of it."""

    _spent: float = PrivateAttr(default=0.0)

    def invoke(self, input: str, config: RunnableConfig | None = None, **kwargs: Any) -> list[Document]:
        started = time.perf_counter()
        try:
            return super().invoke(input, config, **kwargs)
        finally:
            self._spent = time.perf_counter() - started


def stdlib_documents(limit: int, min_words: int = 8) -> list[Document]:
    """Up to ``limit`` paragraphs of the standard library's source files, in a fixed order,
    each with its file and position as metadata."""
    return [
        Document(page_content=text, metadata={"artifact_id": name, "artifact_content_id": str(number)})
        for name, number, text in source_paragraphs(limit, min_words)
    ]


def run() -> list[str]:
    """Printable lines: the vector store retriever alone vs wrapped, as a ratio in one run."""
    return measure()[0]


def measure(asked: int = QUERIES, repeat: int = REPEAT) -> tuple[list[str], dict[str, float]]:
    """The section's lines over ``asked`` queries, each side the best of ``repeat`` runs, and its
    figure: the overhead, as a share of the upstream's own invoke (``"overhead"``; none when the
    corpus is too small)."""
    started = time.perf_counter()
    docs = stdlib_documents(DOCUMENTS + asked)
    corpus, queries = (
        docs[:DOCUMENTS],
        [" ".join(d.page_content.split()[:12]) for d in docs[DOCUMENTS:]],
    )
    if len(corpus) < DOCUMENTS or not queries:
        return [f"langchain: skipped, only {len(docs)} stdlib paragraphs found"], {}
    store = InMemoryVectorStore(HashingEmbeddings())
    store.add_documents(corpus)
    built = time.perf_counter() - started

    # What store.as_retriever(search_kwargs=...) builds, clocked.
    upstream = _Clocked(vectorstore=store, search_kwargs={"k": FETCH_K}, tags=store.as_retriever().tags)
    budgeted = BudgetedRetriever(retriever=upstream, max_tokens=MAX_TOKENS, fetch_k=FETCH_K)
    budgeted.invoke("warm up the tokenizer and the code paths")
    upstream.invoke("warm up the vector store")

    kept_docs: dict[str, list[Document]] = {}
    own = dict.fromkeys(queries, float("inf"))

    def wrapped(query: str) -> None:
        started = time.perf_counter()
        kept_docs[query] = budgeted.invoke(query)
        # What the wrapped call took besides its own upstream's invoke, in this same run.
        own[query] = min(own[query], time.perf_counter() - started - upstream._spent)

    # A repeat must count every text again, as the first run of a query did.
    count_cache = budgeted.packer.tokenizer_used._cache
    alone, wrapped_best = interleaved_best(queries, [upstream.invoke, wrapped], repeat, count_cache.clear)
    alone_s, wrapped_s, own_s = sum(alone), sum(wrapped_best), sum(own.values())
    kept = sum(len(found) for found in kept_docs.values())
    tokens = sum(d.metadata["token_count"] for found in kept_docs.values() for d in found)

    n = len(queries)
    overhead, apart = own_s / alone_s, (wrapped_s - alone_s) / alone_s
    verdict = "ok" if overhead < TARGET else "MISS"
    return [
        f"langchain: {len(corpus):,} documents (stdlib paragraphs, HashingEmbeddings) in an "
        f"InMemoryVectorStore, built in {built:.1f} s; {n} queries, fetch_k={FETCH_K}, "
        f"max_tokens={MAX_TOKENS}, each side the best of {repeat} runs a query",
        f"  VectorStoreRetriever.invoke alone: {1000 * alone_s / n:8.2f} ms/query",
        f"  BudgetedRetriever.invoke:          {1000 * wrapped_s / n:8.2f} ms/query",
        f"  {verdict:<4} overhead: {overhead:+.1%} of the upstream's own invoke (target < {TARGET:.0%}): "
        f"{1000 * own_s / n:.2f} ms/query besides the upstream's invoke inside it",
        f"       the two sides' bests apart: {apart:+.1%} (the upstream's own swing in it)",
        f"  kept per query: {kept / n:.1f} of {FETCH_K} documents, {tokens / n:.0f} tokens of items",
    ], {"overhead": overhead}


if __name__ == "__main__":
    print("\n".join(run()))
