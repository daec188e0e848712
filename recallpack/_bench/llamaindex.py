"""LlamaIndex section of ``python -m recallpack.bench``: what BudgetPostprocessor adds to a retrieve.

Over a 10,000-node VectorStoreIndex of real text (paragraphs of the standard library's own
source, read offline), each query's nodes are fetched once, then three sides are timed in the
same run: the retriever's ``retrieve`` alone, ``BudgetPostprocessor.postprocess_nodes`` on those
nodes, with the query, as a query engine hands it (``query_bundle``): under a query the default
``passages`` policy picks passages, the same work the LangChain section's ``BudgetedRetriever``
does (without one it only keeps whole nodes in order, a fraction of that work); and
``BudgetedRetriever`` over a retriever that hands back the same nodes. Each side runs ``REPEAT``
times per query, interleaved with the others, the side that goes first rotating, and its best
time on each query counts (the retrieve's numpy is memory-bound, and swings with whatever else
the machine does). The overhead is the sum of the postprocessor's bests over the sum of the
retrieve's, so the machine's speed cancels out. The tokenizer's count cache is emptied before
every run, so a repeat counts every text again, as the first did (docs/performance.md, "The guard").

The offline embedding it indexes with, ``HashingEmbedding``, lives in :mod:`recallpack.testing`.
"""

from __future__ import annotations

import time

from llama_index.core import VectorStoreIndex
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.embeddings import BaseEmbedding
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from recallpack._bench.timing import interleaved_best
from recallpack.adapters.llamaindex import BudgetedRetriever, BudgetPostprocessor
from recallpack.testing import HashingEmbedding, source_paragraphs

__all__ = ["HashingEmbedding", "stdlib_paragraphs", "build_index", "run", "measure"]


NODES = 10_000
QUERIES = 20
FETCH_K = 50
MAX_TOKENS = 2048
TARGET = 0.10
#: Runs of each side per query: its best counts.
REPEAT = 3


class _Replay(BaseRetriever):
    """Returns the nodes fetched for the query: isolates BudgetedRetriever's own work from search."""

    def __init__(self, nodes: dict[str, list[NodeWithScore]]) -> None:
        super().__init__()
        self.nodes = nodes

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self.nodes[query_bundle.query_str]


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


def measure(asked: int = QUERIES, repeat: int = REPEAT) -> tuple[list[str], dict[str, float]]:
    """The section's lines over ``asked`` queries, each side the best of ``repeat`` runs, and its
    figure: what BudgetPostprocessor adds, as a share of retrieve (``"overhead"``; none when the
    corpus is too small)."""
    started = time.perf_counter()
    texts = stdlib_paragraphs(NODES + asked)
    corpus, queries = texts[:NODES], [" ".join(t.split()[:12]) for t in texts[NODES:]]
    if len(corpus) < NODES or not queries:
        return [f"llamaindex: skipped, only {len(texts)} stdlib paragraphs found"], {}
    index = build_index(corpus)
    built = time.perf_counter() - started

    retriever = index.as_retriever(similarity_top_k=FETCH_K)
    postprocessor = BudgetPostprocessor(max_tokens=MAX_TOKENS)
    warm = "warm up the tokenizer"
    postprocessor.postprocess_nodes(retriever.retrieve(warm), query_bundle=QueryBundle(warm))
    fetched = {query: retriever.retrieve(query) for query in queries}  # each side packs these
    budgeted = BudgetedRetriever(_Replay(fetched), max_tokens=MAX_TOKENS)
    kept_nodes: dict[str, int] = {}

    def postprocessed(query: str) -> None:
        # As a query engine calls it: with the query (its passages are what is timed).
        nodes = postprocessor.postprocess_nodes(fetched[query], query_bundle=QueryBundle(query))
        kept_nodes[query] = len(nodes)

    # A repeat must count every text again, as the first run of a query did (one shared cache).
    tokenizers = {postprocessor.packer.tokenizer_used, budgeted.packer.tokenizer_used}

    def fresh() -> None:
        for tokenizer in tokenizers:
            tokenizer._cache.clear()

    best = interleaved_best(queries, [retriever.retrieve, postprocessed, budgeted.retrieve], repeat, fresh)
    retrieve_s, post_s, budgeted_s = (sum(side) for side in best)
    kept = sum(kept_nodes.values())

    n = len(queries)
    ratio = post_s / retrieve_s
    budgeted_ratio = budgeted_s / retrieve_s
    return [
        f"llamaindex: {len(corpus):,} nodes (stdlib paragraphs, HashingEmbedding), index built "
        f"in {built:.1f} s; {n} queries, top_k={FETCH_K}, max_tokens={MAX_TOKENS}, each side the "
        f"best of {repeat} runs a query",
        f"  retrieve alone:             {1000 * retrieve_s / n:8.2f} ms/query",
        f"  BudgetPostprocessor adds:   {1000 * post_s / n:8.2f} ms/query "
        f"= {ratio:.1%} of retrieve (target < {TARGET:.0%}) {'ok' if ratio < TARGET else 'MISS'}",
        f"  BudgetedRetriever adds:     {1000 * budgeted_s / n:8.2f} ms/query "
        f"= {budgeted_ratio:.1%} of retrieve (the rendered Markdown budget)",
        f"  nodes kept per query:       {kept / n:8.1f} of {FETCH_K}",
    ], {"overhead": ratio}


if __name__ == "__main__":
    print("\n".join(run()))
