"""LlamaIndex instrumentation sees each packing: RecallPackedEvent with its query, span and report."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

pytest.importorskip("llama_index.core")

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.llms import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import NodeWithScore, TextNode

from recallpack._bench.llamaindex import build_index, stdlib_paragraphs
from recallpack.adapters.llamaindex import BudgetedRetriever, BudgetPostprocessor
from tests.adapters.llamaindex_events import Collect

SECRET = "a withheld node's text never reaches an instrumentation handler"
QUERIES = ("how are command line arguments parsed", "how is a temporary file created")


@pytest.fixture(scope="module")
def retriever() -> BudgetedRetriever:
    index = build_index(stdlib_paragraphs(300))
    return BudgetedRetriever(index.as_retriever(similarity_top_k=12), max_tokens=400)


def test_retrieve_emits_the_query_the_span_and_the_report(handler: Collect, retriever: BudgetedRetriever) -> None:
    """retrieve(query): one event, naming the query, inside a span, with the text-free report."""
    result = retriever.recall(QUERIES[0])
    (event,) = handler.events
    assert event.query == QUERIES[0] and event.span_id and event.component == "BudgetedRetriever"
    assert event.report == result.report
    assert event.data["report"]["items_selected"] == result.report.items_selected > 0
    assert len(event.data["trace"]) + event.data["unreached"] == result.report.candidates
    assert all("preview" not in row for row in event.data["trace"])


async def test_gathered_queries_each_get_their_own_event(handler: Collect, retriever: BudgetedRetriever) -> None:
    """Under asyncio.gather each query's event names that query, its own span, and its own report."""
    results = await asyncio.gather(*(retriever.arecall(q) for q in QUERIES))
    by_query = {event.query: event for event in handler.events}
    assert sorted(by_query) == sorted(QUERIES) and len(handler.events) == 2
    for query, result in zip(QUERIES, results):
        assert by_query[query].report == result.report
    assert by_query[QUERIES[0]].span_id != by_query[QUERIES[1]].span_id
    assert all(e.span_id and "aretrieve_with_result" in e.span_id for e in handler.events)


async def test_gathered_aretrieve_events_are_each_in_their_own_span(handler: Collect, retriever: BudgetedRetriever) -> None:
    """aretrieve (LlamaIndex's own spanned entry point) concurrently: one event per span, per query."""
    kept = await asyncio.gather(*(retriever.aretrieve(q) for q in QUERIES))
    assert {e.query for e in handler.events} == set(QUERIES)
    assert len({e.span_id for e in handler.events}) == 2
    for query, nodes in zip(QUERIES, kept):
        (event,) = [e for e in handler.events if e.query == query]
        assert event.report.items_selected == len(nodes)


def test_postprocessor_in_a_query_engine_names_the_query(handler: Collect) -> None:
    """BudgetPostprocessor in an engine: the event names the engine's query and withholds text."""
    nodes = [NodeWithScore(node=TextNode(text=SECRET, metadata={"scope_ids": ["org-1"]}), score=2.0)]
    nodes += [NodeWithScore(node=TextNode(text=t), score=1.0) for t in stdlib_paragraphs(6)]

    class Fixed(BaseRetriever):
        def _retrieve(self, query_bundle: Any) -> list[NodeWithScore]:
            return list(nodes)

    engine = RetrieverQueryEngine.from_args(Fixed(), llm=MockLLM(), node_postprocessors=[BudgetPostprocessor(max_tokens=200)])
    engine.query("what does the module do?")
    (event,) = handler.events
    assert event.query == "what does the module do?" and event.component == "BudgetPostprocessor"
    assert event.report.items_withheld == 1
    assert SECRET not in json.dumps(event.data) and SECRET not in event.model_dump_json()


def test_no_handler_means_no_event_data_is_built(retriever: BudgetedRetriever, monkeypatch: pytest.MonkeyPatch) -> None:
    """With no event handler anywhere, the event's data (the trace rows) is never made."""
    from recallpack import RecallResult

    root = get_dispatcher()
    monkeypatch.setattr(root, "event_handlers", [])
    monkeypatch.setattr(RecallResult, "to_event", lambda self: pytest.fail("built for nobody"))
    assert retriever.retrieve(QUERIES[1])


def test_llamaindex_default_handlers_build_no_event(retriever: BudgetedRetriever, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only LlamaIndex's own NullEventHandler on the root (its default): it would drop the
    event, so neither the event nor its data is built; the retrieve is unchanged."""
    from llama_index.core.instrumentation.event_handlers import NullEventHandler

    from recallpack import RecallResult
    from recallpack.adapters.llamaindex import RecallPackedEvent

    root = get_dispatcher()
    monkeypatch.setattr(root, "event_handlers", [NullEventHandler()])
    monkeypatch.setattr(RecallResult, "to_event", lambda self: pytest.fail("built for nobody"))
    monkeypatch.setattr(RecallPackedEvent, "__init__", lambda self, **data: pytest.fail("built for nobody"))
    kept = retriever.retrieve(QUERIES[1])
    monkeypatch.undo()
    assert kept == retriever.retrieve(QUERIES[1])
