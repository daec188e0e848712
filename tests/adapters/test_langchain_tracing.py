"""LangChain tracing sees each packing: a custom event with the report, and LangSmith's parameters."""

from __future__ import annotations

import inspect
import json
import warnings
from typing import Any
from uuid import UUID

import pytest

pytest.importorskip("langchain_core")

from langchain_core.callbacks import AsyncCallbackHandler, BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableLambda, RunnablePassthrough
from langchain_core.vectorstores import InMemoryVectorStore

from recallpack.adapters.langchain import (
    REPORT_EVENT,
    BudgetCompressor,
    BudgetedRetriever,
    EvidenceRenderer,
)
from recallpack.packing.results.result import RecallResult
from recallpack.testing import HashingEmbeddings

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # langchain-community's sunset notice
    from langchain_community.retrievers import BM25Retriever

SECRET = "the withheld item's text must never reach a trace"
MODULES = ("argparse", "json", "csv", "pathlib", "shutil", "logging", "textwrap", "difflib")


def docs() -> list[Document]:
    """The stdlib's docstrings, and one scoped Document no reader may see."""
    found = [Document(page_content=inspect.getdoc(__import__(m)) or m, metadata={"source": m}) for m in MODULES]
    scoped = Document(page_content=f"{SECRET}: parse command line arguments, csv rows, copy a file tree",
                      metadata={"scope_ids": ["org-9"]})
    return [scoped, *found]


class Collect(BaseCallbackHandler):
    """A callback handler that keeps every custom event and every retriever start's metadata."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Any, UUID]] = []
        self.starts: list[dict[str, Any]] = []

    def on_custom_event(self, name: str, data: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self.events.append((name, data, run_id))

    def on_retriever_start(self, serialized: Any, query: str, *, metadata: dict[str, Any] | None = None,
                           **kwargs: Any) -> None:
        self.starts.append(dict(metadata or {}))


def bm25() -> BM25Retriever:
    return BM25Retriever.from_documents(docs(), k=len(docs()))


def assert_text_free(data: Any) -> None:
    """The event names no text: not the withheld item's, not a kept one's."""
    dumped = json.dumps(data)
    assert SECRET not in dumped
    assert inspect.getdoc(json)[:40] not in dumped


def test_invoke_dispatches_the_report_to_a_callback_handler() -> None:
    """retriever.invoke with a handler: one custom event, the report of this call, text-free."""
    handler = Collect()
    retriever = BudgetedRetriever(retriever=bm25(), max_tokens=300)
    kept = retriever.invoke("parse command line arguments", config={"callbacks": [handler]})
    assert [name for name, *_ in handler.events] == [REPORT_EVENT]
    _, data, _ = handler.events[0]
    report = data["report"]
    assert report["items_selected"] == len(kept) > 0
    assert report["items_withheld"] == 1 and report["reasons"]["no_reader"] == 1
    assert report["items_selected"] + report["items_dropped"] + report["items_withheld"] == len(docs())
    assert report["tokenizer_used"] == "cl100k_base" and report["policy"] == "passages"  # the adapters' default
    assert report["max_tokens"] == 300 and 0 < report["tokens_used"] <= 300
    assert data["summary"].startswith(f"kept {len(kept)} of {len(docs())}")
    outcomes = [row["outcome"] for row in data["trace"]]
    assert outcomes.count("withheld") == 1 and outcomes.count("selected") == len(kept)
    assert len(data["trace"]) + data["unreached"] == len(docs())
    assert_text_free(data)


def test_cut_spans_reach_the_event() -> None:
    """A cut's kept character ranges (passages, the adapters' default) are in the event's trace row."""
    handler = Collect()
    manual = Document(page_content=inspect.getdoc(json) or "", metadata={"source": "json"})
    retriever = BudgetedRetriever(retriever=RunnableLambda(lambda q: [manual]), max_tokens=150)
    retriever.invoke("pretty-print with json.tool", config={"callbacks": [handler]})
    (row,) = handler.events[0][1]["trace"]
    assert row["cut"] == "passages" and row["kept_spans"] and handler.events[0][1]["report"]["items_cut"] == 1


async def test_astream_events_shows_the_report_as_on_custom_event() -> None:
    """astream_events(version="v2") carries the report as an on_custom_event of the retriever's run."""
    retriever = BudgetedRetriever(retriever=bm25(), max_tokens=300)
    events = [e async for e in retriever.astream_events("parse command line arguments", version="v2")]
    kinds = [e["event"] for e in events]
    assert kinds[0] == "on_retriever_start" and kinds[-1] == "on_retriever_end"
    custom = [e for e in events if e["event"] == "on_custom_event"]
    assert [e["name"] for e in custom] == [REPORT_EVENT]
    assert custom[0]["run_id"] == events[0]["run_id"]  # the retriever's own run
    assert custom[0]["data"]["report"]["items_withheld"] == 1
    assert_text_free(custom[0]["data"])


async def test_as_evidence_in_a_chain_streams_the_report() -> None:
    """as_evidence() inside an LCEL chain: astream_events of the chain shows the packing's report."""
    retriever = BudgetedRetriever(retriever=bm25(), max_tokens=200)
    prompt = ChatPromptTemplate.from_messages([("system", "Evidence:\n{context}"), ("human", "{question}")])
    chain = {"context": retriever.as_evidence(), "question": RunnablePassthrough()} | prompt
    events = [e async for e in chain.astream_events("how do I copy a file tree", version="v2")]
    custom = [e for e in events if e["event"] == "on_custom_event"]
    assert len(custom) == 1 and custom[0]["name"] == REPORT_EVENT
    assert custom[0]["data"]["report"]["max_tokens"] == 200


def test_compressor_reports_into_the_compression_retrievers_run() -> None:
    """BudgetCompressor under langchain_classic's ContextualCompressionRetriever dispatches into that run."""
    from langchain_classic.retrievers import ContextualCompressionRetriever

    handler = Collect()
    retriever = ContextualCompressionRetriever(base_compressor=BudgetCompressor(max_tokens=250),
                                               base_retriever=bm25())
    kept = retriever.invoke("write csv rows", config={"callbacks": [handler]})
    assert len(handler.events) == 1 and handler.events[0][1]["report"]["items_selected"] == len(kept)
    assert_text_free(handler.events[0][1])


async def test_async_compressor_reports_with_adispatch() -> None:
    """acompress_documents under ainvoke reports through the async callback manager."""
    from langchain_classic.retrievers import ContextualCompressionRetriever

    handler = Collect()
    retriever = ContextualCompressionRetriever(base_compressor=BudgetCompressor(max_tokens=250),
                                               base_retriever=bm25())
    kept = await retriever.ainvoke("write csv rows", config={"callbacks": [handler]})
    assert [name for name, *_ in handler.events] == [REPORT_EVENT]
    assert handler.events[0][1]["report"]["items_selected"] == len(kept)


def test_outside_any_run_nothing_is_dispatched_and_nothing_raises() -> None:
    """A compressor called directly (no parent run): dispatch_custom_event would raise; it is skipped."""
    kept = BudgetCompressor(max_tokens=250).compress_documents(docs(), "write csv rows")
    assert kept and all("evidence_label" in d.metadata for d in kept)


async def test_ainvoke_reports_to_an_async_run() -> None:
    """ainvoke with a handler: the event arrives once, from the async path."""
    handler = Collect()
    retriever = BudgetedRetriever(retriever=bm25(), max_tokens=300)
    kept = await retriever.ainvoke("parse command line arguments", config={"callbacks": [handler]})
    assert len(handler.events) == 1 and handler.events[0][1]["report"]["items_selected"] == len(kept)


def test_render_evidence_reports_into_its_own_run() -> None:
    """EvidenceRenderer.invoke with a handler dispatches the report of its packing."""
    handler = Collect()
    block = EvidenceRenderer(max_tokens=200).invoke(docs()[:3], config={"callbacks": [handler]})
    assert block and len(handler.events) == 1 and handler.events[0][1]["report"]["max_tokens"] == 200


def test_ls_params_keep_the_upstream_store_and_add_the_budget() -> None:
    """on_retriever_start's metadata: the vector store's provider and embedding, and ls_max_tokens/ls_policy."""
    store = InMemoryVectorStore.from_documents(docs()[:4], HashingEmbeddings())
    retriever = BudgetedRetriever(retriever=store.as_retriever(), max_tokens=300, policy="skip")
    handler = Collect()
    retriever.invoke("json", config={"callbacks": [handler]})
    retriever.invoke("json", config={"callbacks": [handler]}, max_tokens=120)
    ours = handler.starts[0]  # the budgeted retriever's run starts first, then the upstream's
    assert ours["ls_vector_store_provider"] == "InMemoryVectorStore"
    assert ours["ls_embedding_provider"] == "HashingEmbeddings"
    assert ours["ls_retriever_name"] == "budgeted"
    assert (ours["ls_max_tokens"], ours["ls_policy"]) == (300, "skip")
    later = [s for s in handler.starts if s.get("ls_max_tokens") == 120]
    assert later and later[0]["ls_vector_store_provider"] == "InMemoryVectorStore"


def test_ls_params_of_a_plain_runnable_upstream() -> None:
    """An upstream that is no retriever has no provider to keep; the budget is still there."""
    retriever = BudgetedRetriever(retriever=RunnableLambda(lambda q: docs()), max_tokens=99)
    params = retriever._get_ls_params()
    assert params["ls_max_tokens"] == 99 and "ls_vector_store_provider" not in params


class Runs(BaseCallbackHandler):
    """Records each retriever run: its name and metadata at the start, its documents at the end."""

    def __init__(self) -> None:
        self.runs: dict[UUID, dict[str, Any]] = {}

    def on_retriever_start(self, serialized: Any, query: str, *, run_id: UUID, parent_run_id: UUID | None = None,
                           name: str | None = None, metadata: dict[str, Any] | None = None, **kwargs: Any) -> None:
        self.runs[run_id] = {"name": name, "parent": parent_run_id, "metadata": dict(metadata or {})}

    def on_retriever_end(self, documents: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self.runs[run_id]["documents"] = [d.page_content for d in documents]


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_recall_is_traced_as_the_same_retriever_run_as_invoke(mode: str) -> None:
    """recall()/arecall() open the retriever run invoke() opens: same name, LangSmith metadata,
    tags, kept documents and report event, with the upstream's run nested under it."""
    retriever = BudgetedRetriever(retriever=bm25(), max_tokens=300, tags=["mine"])
    query = "parse command line arguments"
    via_invoke, via_recall = Runs(), Runs()
    if mode == "sync":
        kept = retriever.invoke(query, config={"callbacks": [via_invoke], "run_name": "memory"})
        result = retriever.recall(query, {"callbacks": [via_recall], "run_name": "memory"})
    else:
        kept = await retriever.ainvoke(query, config={"callbacks": [via_invoke], "run_name": "memory"})
        result = await retriever.arecall(query, {"callbacks": [via_recall], "run_name": "memory"})
    for runs in (via_invoke, via_recall):
        (outer,) = [run for run in runs.runs.values() if run["parent"] is None]
        assert outer["name"] == "memory" and outer["metadata"]["ls_max_tokens"] == 300
        assert outer["documents"] == [d.page_content for d in kept]
        assert len(runs.runs) == 2  # the BM25 upstream's run, nested under it
    assert [e.text for e in result.evidence] == [d.page_content for d in kept]


class Ignoring(Collect):
    """Implements on_custom_event, but tells LangChain it ignores custom events."""

    @property
    def ignore_custom_event(self) -> bool:
        return True


class NoCustom(BaseCallbackHandler):
    """Records retriever starts only: the base on_custom_event, which does nothing."""

    def __init__(self) -> None:
        self.started = 0

    def on_retriever_start(self, serialized: Any, query: str, **kwargs: Any) -> None:
        self.started += 1


class AsyncNoCustom(AsyncCallbackHandler):
    """An async handler that records retriever starts and keeps the base on_custom_event."""

    def __init__(self) -> None:
        self.started = 0

    async def on_retriever_start(self, serialized: Any, query: str, **kwargs: Any) -> None:
        self.started += 1


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_listening_handler_gets_the_calls_whole_report(mode: str) -> None:
    """A handler that implements on_custom_event receives exactly the call's to_event(), once."""
    handler = Collect()
    retriever = BudgetedRetriever(retriever=bm25(), max_tokens=300)
    query, config = "parse command line arguments", {"callbacks": [handler]}
    result = retriever.recall(query, config) if mode == "sync" else await retriever.arecall(query, config)
    assert [(name, data) for name, data, _ in handler.events] == [(REPORT_EVENT, result.to_event())]
    assert handler.events[0][1]["report"]["items_withheld"] == 1


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_no_report_is_built_when_no_handler_asks(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """No handler, one that ignores custom events, one without on_custom_event: the event is never built."""
    retriever = BudgetedRetriever(retriever=bm25(), max_tokens=300)
    query = "parse command line arguments"
    expected = [d.page_content for d in retriever.invoke(query)]
    monkeypatch.setattr(RecallResult, "to_event", lambda self: pytest.fail("built for nobody"))
    handlers = [Ignoring(), NoCustom(), AsyncNoCustom()]
    for config in (None, {"callbacks": handlers}):
        kept = retriever.invoke(query, config) if mode == "sync" else await retriever.ainvoke(query, config)
        assert [d.page_content for d in kept] == expected
    assert handlers[0].events == [] and handlers[1].started == handlers[2].started == 2  # ours and BM25's
