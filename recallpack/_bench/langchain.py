"""LangChain section of ``python -m recallpack.bench``: what BudgetedRetriever adds to a retrieve.

Over an ``InMemoryVectorStore`` of 10,000 real documents (paragraphs of the standard library's
own source, read offline; the same corpus as the LlamaIndex section), each query is timed twice
in the same run: the vector store retriever's own ``invoke``, and ``BudgetedRetriever.invoke``
wrapping it (which calls that same ``invoke`` inside). The overhead is the ratio of their
totals, so the machine's speed cancels out. The two sides alternate which goes first, so
neither always benefits from a warm cache; each query's documents are packed only once, so the
tokenizer's count cache does not flatter the number.
"""

from __future__ import annotations

import time

from langchain_core.documents import Document
from langchain_core.vectorstores import InMemoryVectorStore

from recallpack.adapters.langchain import BudgetedRetriever
from recallpack.testing import HashingEmbeddings, source_paragraphs

__all__ = ["HashingEmbeddings", "stdlib_documents", "run", "measure"]

DOCUMENTS = 10_000
QUERIES = 40
FETCH_K = 50
MAX_TOKENS = 2048
TARGET = 0.10


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


def measure(asked: int = QUERIES) -> tuple[list[str], dict[str, float]]:
    """The section's lines over ``asked`` queries, and its figure: the overhead, as a share of
    the upstream's own invoke (``"overhead"``; none when the corpus is too small)."""
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

    upstream = store.as_retriever(search_kwargs={"k": FETCH_K})
    budgeted = BudgetedRetriever(retriever=upstream, max_tokens=MAX_TOKENS, fetch_k=FETCH_K)
    budgeted.invoke("warm up the tokenizer and the code paths")
    upstream.invoke("warm up the vector store")

    alone_s = wrapped_s = 0.0
    kept = tokens = 0
    for i, query in enumerate(queries):
        # Interleaved, alternating which side goes first, so drift and warm caches hit both alike.
        for side in (0, 1) if i % 2 else (1, 0):
            t0 = time.perf_counter()
            if side:
                kept_docs = budgeted.invoke(query)
            else:
                upstream.invoke(query)
            elapsed = time.perf_counter() - t0
            if side:
                wrapped_s += elapsed
                kept += len(kept_docs)
                tokens += sum(d.metadata["token_count"] for d in kept_docs)
            else:
                alone_s += elapsed

    n = len(queries)
    overhead = (wrapped_s - alone_s) / alone_s
    verdict = "ok" if overhead < TARGET else "MISS"
    return [
        f"langchain: {len(corpus):,} documents (stdlib paragraphs, HashingEmbeddings) in an "
        f"InMemoryVectorStore, built in {built:.1f} s; {n} queries, fetch_k={FETCH_K}, "
        f"max_tokens={MAX_TOKENS}",
        f"  VectorStoreRetriever.invoke alone: {1000 * alone_s / n:8.2f} ms/query",
        f"  BudgetedRetriever.invoke:          {1000 * wrapped_s / n:8.2f} ms/query",
        f"  {verdict:<4} overhead: {overhead:+.1%} of the upstream's own invoke (target < {TARGET:.0%})",
        f"  kept per query: {kept / n:.1f} of {FETCH_K} documents, {tokens / n:.0f} tokens of items",
    ], {"overhead": overhead}


if __name__ == "__main__":
    print("\n".join(run()))
