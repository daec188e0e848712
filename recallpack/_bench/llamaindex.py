"""LlamaIndex section of ``python -m recallpack.bench``: what BudgetPostprocessor adds to a retrieve.

Over a 10,000-node VectorStoreIndex of real text (paragraphs of the standard library's own
source, read offline), each query is timed twice in the same run: the retriever's ``retrieve``
alone, then ``BudgetPostprocessor.postprocess_nodes`` on what it returned, with the query, as a
query engine hands it (``query_bundle``): under a query the default ``passages`` policy picks
passages, the same work the LangChain section's ``BudgetedRetriever`` does (without one it only
keeps whole nodes in order, a fraction of that work). The overhead is the ratio of their totals,
so the machine's speed cancels out. Each query is asked once, so the tokenizer's count cache is
not flattering the number.

The offline embedding it indexes with, ``HashingEmbedding``, lives in :mod:`recallpack.testing`.
"""

from __future__ import annotations

import time

from llama_index.core import VectorStoreIndex
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.embeddings import BaseEmbedding
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from recallpack.adapters.llamaindex import BudgetedRetriever, BudgetPostprocessor
from recallpack.testing import HashingEmbedding, source_paragraphs

__all__ = ["HashingEmbedding", "stdlib_paragraphs", "build_index", "run", "measure"]


NODES = 10_000
QUERIES = 20
FETCH_K = 50
MAX_TOKENS = 2048
TARGET = 0.10


class _Replay(BaseRetriever):
    """Returns the nodes it was last given: isolates BudgetedRetriever's own work from search."""

    def __init__(self) -> None:
        super().__init__()
        self.nodes: list[NodeWithScore] = []

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self.nodes


def stdlib_paragraphs(limit: int, min_words: int = 8) -> list[str]:
    """Up to ``limit`` paragraphs of the standard library's source files, in a fixed order."""
    return [text for _, _, text in source_paragraphs(limit, min_words)]


def build_index(texts: list[str], embed_model: BaseEmbedding | None = None) -> VectorStoreIndex:
    """A VectorStoreIndex over ``texts``, embedded once up front (no batching round trips)."""
    model = embed_model or HashingEmbedding()
    nodes = [
        TextNode(text=text, id_=f"node-{i}", embedding=model.get_text_embedding(text))
        for i, text in enumerate(texts)
    ]
    return VectorStoreIndex(nodes, embed_model=model)


def run() -> list[str]:
    """Printable lines: retrieve alone vs the postprocessor on its output, as a ratio."""
    return measure()[0]


def measure(asked: int = QUERIES) -> tuple[list[str], dict[str, float]]:
    """The section's lines over ``asked`` queries, and its figure: what BudgetPostprocessor adds,
    as a share of retrieve (``"overhead"``; none when the corpus is too small)."""
    started = time.perf_counter()
    texts = stdlib_paragraphs(NODES + asked)
    corpus, queries = texts[:NODES], [" ".join(t.split()[:12]) for t in texts[NODES:]]
    if len(corpus) < NODES or not queries:
        return [f"llamaindex: skipped, only {len(texts)} stdlib paragraphs found"], {}
    index = build_index(corpus)
    built = time.perf_counter() - started

    retriever = index.as_retriever(similarity_top_k=FETCH_K)
    postprocessor = BudgetPostprocessor(max_tokens=MAX_TOKENS)
    replay = _Replay()
    budgeted = BudgetedRetriever(replay, max_tokens=MAX_TOKENS)
    warm = "warm up the tokenizer"
    postprocessor.postprocess_nodes(retriever.retrieve(warm), query_bundle=QueryBundle(warm))

    retrieve_s = post_s = budgeted_s = 0.0
    kept = 0
    for query in queries:  # interleaved, so drift in the machine's speed hits both sides alike
        t0 = time.perf_counter()
        nodes = retriever.retrieve(query)
        t1 = time.perf_counter()
        # As a query engine calls it: with the query (its passages are what is timed).
        kept += len(postprocessor.postprocess_nodes(nodes, query_bundle=QueryBundle(query)))
        t2 = time.perf_counter()
        replay.nodes = nodes
        budgeted.retrieve(query)
        t3 = time.perf_counter()
        retrieve_s += t1 - t0
        post_s += t2 - t1
        budgeted_s += t3 - t2

    n = len(queries)
    ratio = post_s / retrieve_s
    budgeted_ratio = budgeted_s / retrieve_s
    return [
        f"llamaindex: {len(corpus):,} nodes (stdlib paragraphs, HashingEmbedding), index built "
        f"in {built:.1f} s; {n} queries, top_k={FETCH_K}, max_tokens={MAX_TOKENS}",
        f"  retrieve alone:             {1000 * retrieve_s / n:8.2f} ms/query",
        f"  BudgetPostprocessor adds:   {1000 * post_s / n:8.2f} ms/query "
        f"= {ratio:.1%} of retrieve (target < {TARGET:.0%}) {'ok' if ratio < TARGET else 'MISS'}",
        f"  BudgetedRetriever adds:     {1000 * budgeted_s / n:8.2f} ms/query "
        f"= {budgeted_ratio:.1%} of retrieve (the rendered Markdown budget)",
        f"  nodes kept per query:       {kept / n:8.1f} of {FETCH_K}",
    ], {"overhead": ratio}


if __name__ == "__main__":
    print("\n".join(run()))
