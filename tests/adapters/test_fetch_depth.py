"""The adapters ask an upstream that says its depth for enough candidates to fill the budget.

Real retrievers over the standard library's docstring paragraphs: LangChain's InMemoryVectorStore
and BM25Retriever, LlamaIndex's VectorStoreIndex and BM25Retriever. The caller's retriever is never
changed; ``fetch_k`` still decides when given; a budget left unused for want of candidates says so
and names the setting to raise.
"""

from __future__ import annotations

import warnings

import pytest

pytest.importorskip("langchain_core")
pytest.importorskip("llama_index.core")

from langchain_core.documents import Document
from langchain_core.vectorstores import InMemoryVectorStore
from llama_index.core import VectorStoreIndex
from llama_index.core.llms import MockLLM
from llama_index.core.schema import TextNode

from recallpack.adapters import langchain as lc
from recallpack.adapters import llamaindex as li
from recallpack.packing.limits import fetch_depth
from recallpack.testing import HashingEmbedding, HashingEmbeddings, paragraphs

QUESTION = "how do I parse command line arguments"
PARAGRAPHS = paragraphs()[:500]

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # langchain-community's sunset notice
    from langchain_community.retrievers import BM25Retriever as LangChainBM25
from llama_index.retrievers.bm25 import BM25Retriever as LlamaBM25  # noqa: E402


@pytest.fixture(scope="module")
def store() -> InMemoryVectorStore:
    docs = [Document(page_content=text, metadata={"source": module}) for module, text in PARAGRAPHS]
    return InMemoryVectorStore.from_documents(docs, HashingEmbeddings())


@pytest.fixture(scope="module")
def index() -> VectorStoreIndex:
    nodes = [TextNode(text=text, metadata={"module": module}) for module, text in PARAGRAPHS]
    return VectorStoreIndex(nodes, embed_model=HashingEmbedding())


def test_the_rule() -> None:
    """ceil(max_tokens / 50), at most 100, at most twice max_items, never below the upstream's own."""
    assert [fetch_depth(t) for t in (1, 50, 51, 2000, 2048, 16384)] == [1, 1, 2, 40, 41, 100]
    assert fetch_depth(2000, max_items=3) == 6 and fetch_depth(2000, own=60) == 60
    assert fetch_depth(120, own=4) == 4


def test_a_vector_store_retriever_is_asked_for_enough_to_fill_the_budget(store: InMemoryVectorStore) -> None:
    """as_retriever() (k=4) under max_tokens=2000: 40 candidates asked, the budget filled, the caller's k kept."""
    upstream = store.as_retriever()
    result = lc.BudgetedRetriever(upstream, max_tokens=2000).recall(QUESTION)
    report = result.report
    assert report.candidates == 40 and report.fetch_depth == 40 and report.fetch_knob == "fetch_k"
    assert report.items_selected > 4 and report.tokens_used > 1500 and not report.ran_dry
    assert upstream.search_kwargs == {}
    smaller = lc.BudgetedRetriever(upstream, max_tokens=2000).recall(QUESTION, max_tokens=500)
    assert smaller.report.candidates == 10  # per call: the depth follows that call's budget


def test_mmr_search_grows_its_candidate_pool_with_the_depth(store: InMemoryVectorStore) -> None:
    """search_type="mmr": the k asked for gets an MMR pool at least as large."""
    upstream = store.as_retriever(search_type="mmr")
    assert lc.BudgetedRetriever(upstream, max_tokens=2000).recall(QUESTION).report.candidates == 40


def test_a_deeper_upstream_of_its_own_keeps_its_depth(store: InMemoryVectorStore) -> None:
    """A retriever already set to k=60 is asked for 60, not fewer."""
    upstream = store.as_retriever(search_kwargs={"k": 60})
    assert lc.BudgetedRetriever(upstream, max_tokens=2000).recall(QUESTION).report.candidates == 60


def test_bm25_is_deepened_on_a_copy() -> None:
    """LangChain's BM25Retriever (k=4) is asked for 40 through a copy: the caller's object keeps k=4."""
    bm25 = LangChainBM25.from_texts([text for _, text in PARAGRAPHS])
    result = lc.BudgetedRetriever(bm25, max_tokens=2000).recall(QUESTION)
    assert result.report.candidates == 40 and bm25.k == 4


def test_fetch_k_still_decides_and_an_unused_budget_names_it(store: InMemoryVectorStore) -> None:
    """fetch_k=3 asks for 3; the budget left mostly unused says the upstream ran dry and to raise fetch_k."""
    result = lc.BudgetedRetriever(store.as_retriever(), max_tokens=2000, fetch_k=3).recall(QUESTION)
    report = result.report
    assert report.candidates == 3 and report.fetch_depth == 3 and report.ran_dry
    assert "ran dry at the 3 candidates asked for; raise fetch_k" in report.summary()


def test_a_small_corpus_says_there_is_no_more(store: InMemoryVectorStore) -> None:
    """A store with three documents: the report says it had only 3 of the 40 asked for."""
    small = InMemoryVectorStore.from_documents(
        [Document(page_content=text) for _, text in PARAGRAPHS[:3]], HashingEmbeddings()
    )
    report = lc.BudgetedRetriever(small.as_retriever(), max_tokens=2000).recall(QUESTION).report
    assert report.ran_dry and "had only 3 matches of the 40 asked for" in report.summary()


def test_an_upstream_that_says_no_depth_is_left_alone() -> None:
    """A plain function upstream is called as it is; its report names no knob."""
    texts = [text for _, text in PARAGRAPHS[:5]]
    report = lc.BudgetedRetriever(lambda q: [Document(page_content=t) for t in texts]).recall(QUESTION).report
    assert report.candidates == 5 and report.fetch_knob is None and not report.ran_dry


def test_max_items_caps_the_depth_at_twice_the_cap(store: InMemoryVectorStore) -> None:
    """With k=3 (max_items), the upstream is asked for 6: room for duplicates, no more."""
    assert lc.BudgetedRetriever(store.as_retriever(), max_tokens=2000, k=3).recall(QUESTION).report.candidates == 6


def test_a_llamaindex_vector_retriever_is_deepened_on_a_copy(index: VectorStoreIndex) -> None:
    """index.as_retriever() (similarity_top_k=2) is asked for 40; the caller's keeps 2."""
    upstream = index.as_retriever()
    result = li.BudgetedRetriever(upstream, max_tokens=2000).recall(QUESTION)
    assert result.report.candidates == 40 and result.report.fetch_depth == 40
    assert upstream.similarity_top_k == 2  # type: ignore[attr-defined]
    assert result.report.tokens_used > 1000


def test_a_llamaindex_bm25_retriever_is_asked_for_no_more_than_it_holds() -> None:
    """llama_index's BM25Retriever over 30 nodes: asked for 30 (it refuses more), the report says it ran out."""
    nodes = [TextNode(text=text) for _, text in PARAGRAPHS[:30]]
    bm25 = LlamaBM25.from_defaults(nodes=nodes, similarity_top_k=2)
    report = li.BudgetedRetriever(bm25, max_tokens=4000).recall(QUESTION).report
    assert report.candidates == 30 and bm25.similarity_top_k == 2
    big = LlamaBM25.from_defaults(nodes=[TextNode(text=t) for _, t in PARAGRAPHS], similarity_top_k=2)
    assert li.BudgetedRetriever(big, max_tokens=2000).recall(QUESTION).report.candidates == 40


def test_a_postprocessor_cannot_fetch_more_and_says_so(index: VectorStoreIndex) -> None:
    """In a query engine with similarity_top_k=2 and a 2000-token budget, the report names similarity_top_k."""
    engine = index.as_query_engine(llm=MockLLM(max_tokens=4), node_postprocessors=[li.BudgetPostprocessor(max_tokens=2000)])
    report = li.report_of(engine.query(QUESTION))
    assert report is not None and report.candidates == 2 and report.ran_dry
    assert "cannot fetch more; raise similarity_top_k on the retriever before it" in report.summary()


def test_a_compressor_cannot_fetch_more_and_names_the_base_retrievers_k(store: InMemoryVectorStore) -> None:
    """A ContextualCompressionRetriever over k=4: the compressor's report says to raise k."""
    compressor = lc.BudgetCompressor(max_tokens=2000)
    docs = store.as_retriever().invoke(QUESTION)
    report = compressor.compress(docs, QUESTION).report
    assert report.candidates == 4 and report.ran_dry and "raise k on the retriever before it" in report.summary()
