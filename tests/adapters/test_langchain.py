"""The LangChain adapter: BudgetedRetriever, as_evidence, render_evidence, BudgetCompressor."""

from __future__ import annotations

import asyncio
import copy
import importlib
import inspect
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

pytest.importorskip("langchain_core")

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableLambda, RunnablePassthrough
from langchain_core.vectorstores import InMemoryVectorStore
from langchain_tests.integration_tests import RetrieversIntegrationTests
from pydantic import Field

from recallpack import (
    BudgetError,
    ConfigError,
    LaneError,
    PolicyError,
    Reader,
    RecallpackWarning,
    Scope,
    UpstreamError,
    count_tokens,
)
from recallpack.adapters.langchain import (
    BudgetCompressor,
    BudgetedRetriever,
    EvidenceRenderer,
    render_evidence,
)

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # langchain-community's sunset notice
    from langchain_community.retrievers import BM25Retriever

ROOT = Path(__file__).resolve().parents[2]
MODULES = ("argparse", "getopt", "json", "csv", "pathlib", "shutil", "subprocess", "logging",
           "collections", "itertools", "functools", "re", "datetime", "heapq", "textwrap",
           "difflib", "pickle", "tempfile", "zipfile", "contextlib")  # fmt: skip


def stdlib_docs() -> list[Document]:
    """Paragraphs of real standard-library docstrings, each a Document with its module."""
    docs = []
    for name in MODULES:
        text = inspect.getdoc(importlib.import_module(name)) or ""
        for number, paragraph in enumerate(p.strip() for p in text.split("\n\n")):
            if len(paragraph) > 40:
                docs.append(
                    Document(
                        page_content=paragraph,
                        metadata={"module": name, "paragraph": number},
                        id=f"{name}-{number}",
                    )
                )
    return docs


DOCS = stdlib_docs()
QUERY = "parse command line arguments"


def bm25(k: int = 4) -> BM25Retriever:
    return BM25Retriever.from_documents(DOCS, k=k)


class Recorder(BaseRetriever):
    """An upstream that returns fixed output and records every call with its kwargs."""

    output: Any
    calls: list[dict[str, Any]] = Field(default_factory=list)

    def _get_relevant_documents(self, query: str, *, run_manager: Any, **kwargs: Any) -> Any:
        self.calls.append({"query": query, **kwargs})
        return self.output

    async def _aget_relevant_documents(self, query: str, *, run_manager: Any, **kwargs: Any) -> Any:
        self.calls.append({"query": query, **kwargs})
        return self.output


class Failing(BaseRetriever):
    """An upstream that raises the error it holds."""

    error: Any

    def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list[Document]:
        raise self.error

    async def _aget_relevant_documents(self, query: str, *, run_manager: Any) -> list[Document]:
        raise self.error


class Blocking(BaseRetriever):
    """An async upstream that signals it started, then waits forever for ``release``."""

    started: Any = Field(default_factory=asyncio.Event)
    release: Any = Field(default_factory=asyncio.Event)
    seen: list[str] = Field(default_factory=list)
    docs: list[Document] = Field(default_factory=list)

    def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list[Document]:
        raise AssertionError("the sync path must not be taken under ainvoke")

    async def _aget_relevant_documents(self, query: str, *, run_manager: Any) -> list[Document]:
        self.started.set()
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.seen.append("cancelled")
            raise
        return self.docs


class Runs(BaseCallbackHandler):
    """Records each retriever run: its name, id, parent id and tags."""

    run_inline = True

    def __init__(self) -> None:
        self.runs: list[dict[str, Any]] = []

    def on_retriever_start(
        self,
        serialized: dict[str, Any],
        query: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        tags: list[str] | None = None,
        **kwargs: Any,
    ) -> None:
        self.runs.append(
            {"name": kwargs.get("name"), "id": run_id, "parent": parent_run_id, "tags": tags or []}
        )


class Prompts(BaseCallbackHandler):
    """Records the messages every chat model call received."""

    run_inline = True

    def __init__(self) -> None:
        self.prompts: list[list[BaseMessage]] = []

    def on_chat_model_start(
        self, serialized: dict[str, Any], messages: list[list[BaseMessage]], **kwargs: Any
    ) -> None:
        self.prompts.extend(messages)


def texts(docs: list[Document]) -> list[str]:
    return [d.page_content for d in docs]


def doc(text: str, **metadata: Any) -> Document:
    return Document(page_content=text, metadata=metadata)


# -- LangChain's own standard suite ----------------------------------------------------------------


class TestBudgetedRetrieverStandard(RetrieversIntegrationTests):
    """LangChain's standard retriever tests, wrapping a real BM25 retriever."""

    @property
    def retriever_constructor(self) -> type[BudgetedRetriever]:
        return BudgetedRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"retriever": bm25(), "max_tokens": 2048, "fetch_k": 8}

    @property
    def retriever_query_example(self) -> str:
        return QUERY


# -- invoke, ainvoke, batch ------------------------------------------------------------------------


def test_invoke_keeps_a_prefix_of_the_upstream_ranking_within_budget() -> None:
    """With policy='prefix', invoke returns the upstream's top documents, in its order, and their block fits."""
    upstream = bm25(k=10)
    retriever = BudgetedRetriever(retriever=upstream, max_tokens=300, policy="prefix")
    kept = retriever.invoke(QUERY)
    ranked = upstream.invoke(QUERY)
    assert 0 < len(kept) < len(ranked)
    assert texts(kept) == texts(ranked)[: len(kept)]
    block = render_evidence.invoke(kept)
    assert count_tokens(block) <= 300


async def test_ainvoke_equals_invoke() -> None:
    """ainvoke keeps the same documents with the same metadata as invoke."""
    retriever = BudgetedRetriever(retriever=bm25(k=10), max_tokens=400)
    assert await retriever.ainvoke(QUERY) == retriever.invoke(QUERY)


async def test_batch_and_abatch_equal_invoke_per_query() -> None:
    """batch and abatch give, per query, what invoke gives."""
    retriever = BudgetedRetriever(retriever=bm25(k=10), max_tokens=300)
    queries = [QUERY, "compress files into an archive", "regular expression matching"]
    expected = [retriever.invoke(q) for q in queries]
    assert retriever.batch(queries) == expected
    assert await retriever.abatch(queries) == expected


async def test_ainvoke_awaits_the_upstreams_ainvoke() -> None:
    """ainvoke takes the upstream's async path (the sync one raises in this upstream)."""
    upstream = Blocking(docs=[doc("async only")])
    upstream.release.set()
    kept = await BudgetedRetriever(retriever=upstream).ainvoke("q")
    assert texts(kept) == ["async only"]


def test_wraps_a_plain_runnable_and_a_callable() -> None:
    """A Runnable str -> list[Document] and a plain callable both work as the upstream."""
    make = lambda q: [doc(f"about {q}")]  # noqa: E731
    for upstream in (RunnableLambda(make), make):
        assert texts(BudgetedRetriever(retriever=upstream).invoke("x")) == ["about x"]


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_upstream_run_nests_under_the_wrapper(mode: str) -> None:
    """The upstream's retriever run is a child of the BudgetedRetriever's run."""
    runs = Runs()
    retriever = BudgetedRetriever(retriever=bm25())
    if mode == "sync":
        retriever.invoke(QUERY, {"callbacks": [runs]})
    else:
        await retriever.ainvoke(QUERY, {"callbacks": [runs]})
    outer, inner = runs.runs
    assert outer["name"] == "BudgetedRetriever" and outer["parent"] is None
    assert inner["name"] == "BM25Retriever" and inner["parent"] == outer["id"]


# -- per-call overrides and validation -------------------------------------------------------------


def test_per_call_max_tokens_and_k_override_the_constructor() -> None:
    """invoke(max_tokens=...) and invoke(k=...) / invoke(max_items=...) apply to that call only."""
    retriever = BudgetedRetriever(retriever=bm25(k=10), max_tokens=2048)
    full = retriever.invoke(QUERY)
    small = retriever.invoke(QUERY, max_tokens=150)
    assert len(small) < len(full)
    assert count_tokens(render_evidence.invoke(small)) <= 150
    assert len(retriever.invoke(QUERY, k=2)) == 2
    assert len(retriever.invoke(QUERY, max_items=1)) == 1
    assert retriever.invoke(QUERY) == full


def test_per_call_reader_withholds_and_names_scopes() -> None:
    """invoke(reader=...) withholds what the reader cannot read and names the scopes it can."""
    upstream = Recorder(output=[doc("club notes", scope_ids=["org-1"]), doc("mine", scope_ids="u-7")])
    retriever = BudgetedRetriever(retriever=upstream)
    reader = Reader(id="u-7", scopes={"org-1": Scope(name="book-club")})
    kept = retriever.invoke("q", reader=reader)
    assert [d.metadata["scopes"] for d in kept] == [["book-club"], ["private"]]
    stranger = Reader(id="u-9")
    assert retriever.invoke("q", reader=stranger) == []
    assert retriever.recall("q", reader=stranger).report.items_withheld == 2


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"max_tokens": 0}, BudgetError),
        ({"max_tokens": "300"}, BudgetError),
        ({"max_tokens": 10**6}, BudgetError),
        ({"k": 0}, BudgetError),
        ({"max_items": 1.5}, BudgetError),
        ({"k": 2, "max_items": 3}, ConfigError),
        ({"fetch_k": -1}, BudgetError),
        ({"reader": "u-7"}, ConfigError),
        ({"max_token": 300}, ConfigError),
    ],
)
@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_bad_per_call_values_raise_before_the_upstream_is_called(
    kwargs: dict[str, Any], error: type[Exception], mode: str
) -> None:
    """Invalid per-call settings raise the core's error and the upstream is never called."""
    upstream = Recorder(output=[doc("x")])
    retriever = BudgetedRetriever(retriever=upstream)
    with pytest.raises(error):
        if mode == "sync":
            retriever.invoke("q", **kwargs)
        else:
            await retriever.ainvoke("q", **kwargs)
    assert upstream.calls == []


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"max_tokens": 0}, BudgetError),
        ({"max_tokens": "300"}, BudgetError),
        ({"max_tokens": 4096, "max_tokens_ceiling": 1024}, BudgetError),
        ({"k": 0}, BudgetError),
        ({"k": 2, "max_items": 3}, ConfigError),
        ({"fetch_k": 0}, BudgetError),
        ({"policy": "smallest-first"}, PolicyError),
        ({"lane": "episodic"}, LaneError),
        ({"on_unknown_lane": "guess"}, ConfigError),
        ({"tokenizer": 42}, ConfigError),
        ({"template": Path("no/such/template.j2")}, ConfigError),
        ({"lane_budgets": {"episodic": 100}}, LaneError),
        ({"lane_budgets": {"source": -1}}, BudgetError),
        ({"reader": "u-7"}, ConfigError),
        ({"retriever": 42}, ConfigError),
        ({"retriever": None}, ConfigError),
    ],
)
def test_bad_constructor_values_raise_recallpack_errors(
    kwargs: dict[str, Any], error: type[Exception]
) -> None:
    """A bad setting at construction raises recallpack's error, not pydantic's."""
    with pytest.raises(error):
        BudgetedRetriever(**{"retriever": Recorder(output=[]), **kwargs})


def test_lane_budgets_cap_a_provenance() -> None:
    """lane_budgets stop a provenance taking more once its own budget is full."""
    upstream = Recorder(output=[doc(p.page_content, lane="facts") for p in DOCS[:4]] + DOCS[4:8])
    kept = BudgetedRetriever(retriever=upstream, lane_budgets={"derived": 120}, policy="prefix").invoke("q")
    derived = [d for d in kept if d.metadata["provenance"] == "derived"]
    assert 0 < len(derived) < 4
    assert sum(d.metadata["token_count"] for d in derived) <= 120
    assert [d.metadata["provenance"] for d in kept].count("source") == 4


def test_k_is_max_items_at_construction() -> None:
    """k=, LangChain's name, sets max_items."""
    retriever = BudgetedRetriever(retriever=bm25(k=10), k=2)
    assert retriever.max_items == 2
    assert len(retriever.invoke(QUERY)) == 2


# -- fetch_k: the upstream's search depth ----------------------------------------------------------


def test_fetch_k_reaches_a_retriever_that_takes_kwargs_as_k() -> None:
    """fetch_k is passed as k= to an upstream whose _get_relevant_documents takes **kwargs."""
    upstream = Recorder(output=[doc("x")])
    retriever = BudgetedRetriever(retriever=upstream, fetch_k=30)
    retriever.invoke("q")
    retriever.invoke("q", fetch_k=7)
    assert upstream.calls == [{"query": "q", "k": 30}, {"query": "q", "k": 7}]


def test_no_fetch_k_leaves_the_upstream_alone() -> None:
    """Without fetch_k the upstream is called with no k at all."""
    upstream = Recorder(output=[doc("x")])
    BudgetedRetriever(retriever=upstream, k=3).invoke("q")
    assert upstream.calls == [{"query": "q"}]


def test_fetch_k_reaches_bm25_through_a_copy() -> None:
    """BM25Retriever (a k field, no kwargs) is searched fetch_k deep; the caller's keeps its k."""
    upstream = bm25(k=4)
    result = BudgetedRetriever(retriever=upstream, fetch_k=9).recall(QUERY)
    assert result.report.candidates == 9
    assert upstream.k == 4


async def test_fetch_k_reaches_a_vector_store_retriever() -> None:
    """A VectorStoreRetriever is searched fetch_k deep, sync and async."""
    store = InMemoryVectorStore.from_documents(DOCS, DeterministicFakeEmbedding(size=16))
    retriever = BudgetedRetriever(retriever=store.as_retriever(), fetch_k=11)
    assert retriever.recall(QUERY).report.candidates == 11
    assert (await retriever.arecall(QUERY)).report.candidates == 11


def test_fetch_k_that_cannot_be_forwarded_warns() -> None:
    """fetch_k on an upstream that takes no k warns instead of being ignored silently."""
    with pytest.warns(RecallpackWarning, match="fetch_k=5"):
        BudgetedRetriever(retriever=RunnableLambda(lambda q: []), fetch_k=5)


# -- what comes back -------------------------------------------------------------------------------


def test_metadata_is_kept_and_extended_and_upstream_documents_are_not_mutated() -> None:
    """Kept copies carry the upstream metadata plus recallpack's five keys; originals unchanged."""
    originals = [
        Document(
            page_content="Alice works at Initech.",
            metadata={"source": "hr.txt", "artifact_id": "a 1", "artifact_content_id": "c/2"},
            id="doc-1",
        ),
        Document(page_content="Bob likes tea.", metadata={"source": "notes.txt", "lane": "facts"}),
    ]
    before = copy.deepcopy(originals)
    kept = BudgetedRetriever(retriever=Recorder(output=originals)).invoke("q")
    assert originals == before
    assert all(k is not o for k, o in zip(kept, originals, strict=True))
    first, second = kept
    assert first.id == "doc-1"
    assert first.metadata["source"] == "hr.txt"
    assert first.metadata["provenance"] == "source"
    assert first.metadata["evidence_label"] == "Source excerpt"
    assert first.metadata["resource_uri"] == "recallpack://artifacts/a%201/contents/c%2F2"
    assert first.metadata["scopes"] == []
    assert first.metadata["token_count"] > 0
    assert second.metadata["evidence_label"] == "Derived memory"
    assert second.metadata["resource_uri"] == "notes.txt"  # the loader's source is its citation


def test_truncate_policy_cuts_the_page_content_of_the_copy_only() -> None:
    """Under policy="truncate" the last kept copy holds the cut text; the original is whole."""
    long_text = " ".join(DOCS[i].page_content for i in range(len(DOCS)))
    original = doc(long_text)
    retriever = BudgetedRetriever(retriever=Recorder(output=[original]), max_tokens=60, policy="truncate", cut="head")
    kept = retriever.invoke("q")
    assert len(kept) == 1
    assert kept[0].page_content.endswith("…")
    assert long_text.startswith(kept[0].page_content[:-1])
    assert original.page_content == long_text
    assert count_tokens(render_evidence.invoke(kept)) <= 60


def test_scores_from_metadata_reach_the_trace() -> None:
    """A numeric metadata score or relevance_score is the candidate's score in the trace."""
    upstream = Recorder(output=[doc("a", score=0.9), doc("b", relevance_score=0.4), doc("c", score="high")])
    trace = BudgetedRetriever(retriever=upstream).recall("q").trace
    assert [entry.score for entry in trace] == [0.9, 0.4, None]


def test_recall_returns_the_result_of_one_call() -> None:
    """recall() calls the upstream once and its evidence is what invoke would keep."""
    upstream = Recorder(output=DOCS[:12])
    retriever = BudgetedRetriever(retriever=upstream, max_tokens=300)
    result = retriever.recall("q")
    assert len(upstream.calls) == 1
    kept = retriever.invoke("q")
    assert [e.text for e in result.evidence] == texts(kept)
    assert result.report.candidates == 12
    assert result.report.items_selected == len(kept) < 12


async def test_arecall_returns_the_result_of_one_ainvoke() -> None:
    """arecall() awaits one upstream call and reports every candidate it returned."""
    upstream = Recorder(output=DOCS[:12])
    result = await BudgetedRetriever(retriever=upstream, max_tokens=300).arecall("q")
    assert len(upstream.calls) == 1
    assert len(result.trace) == 12
    assert count_tokens(result.to_markdown()) <= 300


# -- bad input and faults --------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_non_document_output_names_position_and_type(mode: str) -> None:
    """An upstream returning a dict among Documents raises UpstreamError naming both."""
    retriever = BudgetedRetriever(retriever=Recorder(output=[doc("ok"), {"page_content": "no"}]))
    with pytest.raises(UpstreamError, match=r"dict at position 1"):
        if mode == "sync":
            retriever.invoke("q")
        else:
            await retriever.ainvoke("q")


def test_output_that_is_not_a_list_is_an_upstream_error() -> None:
    """An upstream returning a string instead of a list raises UpstreamError naming str."""
    with pytest.raises(UpstreamError, match=r"returned a str"):
        BudgetedRetriever(retriever=RunnableLambda(lambda q: "just text")).invoke("q")


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_upstream_exception_reaches_the_caller_unchanged(mode: str) -> None:
    """The exception an upstream raises is the one the caller gets."""
    error = TimeoutError("search backend timed out")
    retriever = BudgetedRetriever(retriever=Failing(error=error))
    with pytest.raises(TimeoutError) as caught:
        if mode == "sync":
            retriever.invoke("q")
        else:
            await retriever.ainvoke("q")
    assert caught.value is error


async def test_cancelling_ainvoke_cancels_the_upstream() -> None:
    """Cancelling the outer ainvoke task cancels the upstream's pending ainvoke."""
    upstream = Blocking()
    task = asyncio.ensure_future(BudgetedRetriever(retriever=upstream).ainvoke("q"))
    await asyncio.wait_for(upstream.started.wait(), timeout=10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert upstream.seen == ["cancelled"]


def test_unknown_metadata_lane_raises_listing_the_kinds() -> None:
    """A metadata lane that is not a lane kind raises LaneError that lists the kinds."""
    retriever = BudgetedRetriever(retriever=Recorder(output=[doc("x", lane="episodic")]))
    with pytest.raises(LaneError, match="working_memory") as caught:
        retriever.invoke("q")
    assert "episodic" in str(caught.value)


def test_unknown_metadata_lane_can_fall_back_to_the_default() -> None:
    """on_unknown_lane="default" packs an unknown lane as a source excerpt."""
    upstream = Recorder(output=[doc("x", lane="episodic")])
    kept = BudgetedRetriever(retriever=upstream, on_unknown_lane="default").invoke("q")
    assert kept[0].metadata["evidence_label"] == "Source excerpt"


def test_lane_key_and_fixed_lane() -> None:
    """lane_key picks the metadata key; a fixed lane= overrides whatever metadata says."""
    upstream = Recorder(output=[doc("x", kind="working_memory", lane="facts")])
    by_key = BudgetedRetriever(retriever=upstream, lane_key="kind").invoke("q")
    fixed = BudgetedRetriever(retriever=upstream, lane="profile").invoke("q")
    assert by_key[0].metadata["provenance"] == "session"
    assert fixed[0].metadata["provenance"] == "derived"


# -- lanes -----------------------------------------------------------------------------------------


def test_from_lanes_fuses_by_rank_and_counts_a_shared_document_once() -> None:
    """A document both lanes found leads the fused list, appears once, and others interleave."""
    shared = doc("Alice works at Initech.")
    sources = Recorder(output=[doc("source one"), shared, doc("source two")])
    facts = Recorder(output=[Document(page_content=shared.page_content), doc("fact one")])
    retriever = BudgetedRetriever.from_lanes({"sources": sources, "facts": facts})
    result = retriever.recall("q")
    kept = retriever.invoke("q")
    assert texts(kept)[0] == shared.page_content
    assert texts(kept).count(shared.page_content) == 1
    assert set(texts(kept)) == {"Alice works at Initech.", "source one", "source two", "fact one"}
    assert result.report.candidates == 4
    labels = {d.page_content: d.metadata["evidence_label"] for d in kept}
    assert labels["fact one"] == "Derived memory"
    assert labels["source one"] == "Source excerpt"


def test_from_lanes_weights_favour_a_lane() -> None:
    """A heavier lane's first document outranks the other lane's first document."""
    lanes = {
        "sources": Recorder(output=[doc("from sources")]),
        "facts": Recorder(output=[doc("from facts")]),
    }
    plain = BudgetedRetriever.from_lanes(lanes).invoke("q")
    weighted = BudgetedRetriever.from_lanes(lanes, weights={"facts": 2.0}).invoke("q")
    assert texts(plain) == ["from sources", "from facts"]
    assert texts(weighted) == ["from facts", "from sources"]


def test_from_lanes_forwards_fetch_k_and_tags_each_lane_run() -> None:
    """Each lane gets fetch_k as its k, and its run nests under the wrapper tagged with the lane."""
    sources, facts = Recorder(output=[doc("s")]), Recorder(output=[doc("f")])
    runs = Runs()
    BudgetedRetriever.from_lanes({"sources": sources, "facts": facts}, fetch_k=5).invoke(
        "q", {"callbacks": [runs]}
    )
    assert sources.calls == facts.calls == [{"query": "q", "k": 5}]
    outer, *lane_runs = runs.runs
    assert [r["parent"] for r in lane_runs] == [outer["id"], outer["id"]]
    assert {tag for r in lane_runs for tag in r["tags"]} >= {"lane:sources", "lane:facts"}


async def test_from_lanes_calls_lanes_concurrently_under_ainvoke() -> None:
    """Each lane waits for the other to start: only concurrent calls can finish."""
    first, second = Blocking(docs=[doc("one")]), Blocking(docs=[doc("two")])
    second.started = first.release  # first can finish only once second has started,
    first.started = second.release  # and second only once first has
    retriever = BudgetedRetriever.from_lanes({"sources": first, "working_memory": second})
    kept = await asyncio.wait_for(retriever.ainvoke("q"), timeout=10)
    assert sorted(texts(kept)) == ["one", "two"]


async def test_from_lanes_failure_cancels_the_other_lanes() -> None:
    """When one lane raises under ainvoke, the lane still running is cancelled."""
    slow = Blocking()
    retriever = BudgetedRetriever.from_lanes(
        {"sources": slow, "facts": Failing(error=KeyError("index gone"))}
    )
    with pytest.raises(KeyError):
        await asyncio.wait_for(retriever.ainvoke("q"), timeout=10)  # a hang must fail, not stall
    assert slow.seen == ["cancelled"]


@pytest.mark.parametrize(
    ("lanes", "kwargs", "error"),
    [
        ({"episodic": None}, {}, LaneError),
        ({}, {}, ConfigError),
        ({"sources": None}, {"weights": {"facts": 2.0}}, ConfigError),
        ({"sources": None}, {"lane": "facts"}, ConfigError),
    ],
)
def test_from_lanes_rejects_bad_lanes(
    lanes: dict[str, Any], kwargs: dict[str, Any], error: type[Exception]
) -> None:
    """Unknown lane names, no lanes, weights for absent lanes and lane= with lanes all raise."""
    lanes = {name: Recorder(output=[]) for name in lanes}
    with pytest.raises(error):
        BudgetedRetriever.from_lanes(lanes, **kwargs)


# -- evidence in a chain ---------------------------------------------------------------------------


PROMPT = ChatPromptTemplate.from_messages(
    [("system", "Evidence:\n<evidence>\n{context}</evidence>"), ("human", "{question}")]
)


def evidence_in(prompt: list[BaseMessage]) -> str:
    system = str(prompt[0].content)
    return system.split("<evidence>\n", 1)[1].rsplit("</evidence>", 1)[0]


@pytest.mark.parametrize("tokenizer", ["cl100k_base", "chars"])
@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_as_evidence_in_an_lcel_chain_fits_the_budget(tokenizer: str, mode: str) -> None:
    """The evidence block the model receives through an LCEL chain fits max_tokens."""
    retriever = BudgetedRetriever(retriever=bm25(k=10), max_tokens=250, tokenizer=tokenizer)
    model = FakeMessagesListChatModel(responses=[AIMessage(content="ok")])
    chain = {"context": retriever.as_evidence(), "question": RunnablePassthrough()} | PROMPT | model
    prompts = Prompts()
    if mode == "sync":
        chain.invoke(QUERY, {"callbacks": [prompts]})
    else:
        await chain.ainvoke(QUERY, {"callbacks": [prompts]})
    block = evidence_in(prompts.prompts[0])
    assert block == retriever.recall(QUERY).to_markdown()
    assert "**Source excerpt**" in block
    assert count_tokens(block, tokenizer) <= 250


def test_as_evidence_applies_overrides_and_rejects_bad_ones_early() -> None:
    """as_evidence(max_tokens=...) applies to each call; a bad override fails at once."""
    retriever = BudgetedRetriever(retriever=bm25(k=10), max_tokens=2048)
    block = retriever.as_evidence(max_tokens=120).invoke(QUERY)
    assert 0 < count_tokens(block) <= 120
    with pytest.raises(BudgetError):
        retriever.as_evidence(max_tokens=0)


def test_as_evidence_nests_the_retriever_run_under_the_chain() -> None:
    """The retriever's run is a child of the evidence step, and the upstream's of the retriever."""
    runs = Runs()
    retriever = BudgetedRetriever(retriever=bm25())
    ({"context": retriever.as_evidence()} | RunnableLambda(lambda x: x)).invoke(QUERY, {"callbacks": [runs]})
    outer, inner = runs.runs
    assert outer["parent"] is not None  # the recallpack_evidence step
    assert inner["parent"] == outer["id"]


def test_render_evidence_renders_anyones_documents() -> None:
    """render_evidence turns plain Documents into the block, content indented and inert."""
    block = render_evidence.invoke([doc("Alice works at Initech."), doc("{{ 7*7 }}", lane="facts")])
    assert block.count("- **") == 2
    assert "    Alice works at Initech." in block
    assert "    {{ 7*7 }}" in block
    assert "**Derived memory**" in block


def test_render_evidence_of_recallpack_documents_is_the_same_block() -> None:
    """Rendering a BudgetedRetriever's own output reproduces its evidence block, labels included."""
    lanes = {"sources": Recorder(output=DOCS[:6]), "facts": Recorder(output=DOCS[6:12])}
    retriever = BudgetedRetriever.from_lanes(lanes, max_tokens=500)
    kept = retriever.invoke("q")
    assert render_evidence.invoke(kept) == retriever.recall("q").to_markdown()
    assert "**Derived memory**" in render_evidence.invoke(kept)


async def test_evidence_renderer_with_a_budget_fits_it() -> None:
    """EvidenceRenderer(max_tokens=...) packs what it is given to that budget, sync and async."""
    renderer = EvidenceRenderer(max_tokens=120)
    block = renderer.invoke(DOCS[:10])
    assert block == await renderer.ainvoke(DOCS[:10])
    assert 0 < count_tokens(block) <= 120
    assert block.count("- **") < 10


def test_render_evidence_rejects_non_documents() -> None:
    """render_evidence names the position and type of an input that is not a Document."""
    with pytest.raises(UpstreamError, match="str at position 0"):
        render_evidence.invoke(["plain text"])  # type: ignore[list-item]


# -- the compressor --------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_budget_compressor_in_contextual_compression_retriever(mode: str) -> None:
    """ContextualCompressionRetriever with BudgetCompressor(policy='prefix') returns a budgeted prefix."""
    compression = pytest.importorskip("langchain_classic.retrievers")
    base = bm25(k=10)
    retriever = compression.ContextualCompressionRetriever(
        base_compressor=BudgetCompressor(max_tokens=250, policy="prefix"), base_retriever=base
    )
    kept = retriever.invoke(QUERY) if mode == "sync" else await retriever.ainvoke(QUERY)
    ranked = base.invoke(QUERY)
    assert 0 < len(kept) < len(ranked)
    assert texts(kept) == texts(ranked)[: len(kept)]
    assert all(d.metadata["evidence_label"] == "Source excerpt" for d in kept)
    assert count_tokens(render_evidence.invoke(kept)) <= 250


def test_budget_compressor_last_in_a_pipeline() -> None:
    """In a DocumentCompressorPipeline after a text splitter, it packs the split chunks."""
    compressors = pytest.importorskip("langchain_classic.retrievers.document_compressors")
    splitters = pytest.importorskip("langchain_text_splitters")
    pipeline = compressors.DocumentCompressorPipeline(
        transformers=[
            splitters.CharacterTextSplitter(separator="\n", chunk_size=120, chunk_overlap=0),
            BudgetCompressor(max_tokens=200, k=4),
        ]
    )
    kept = pipeline.compress_documents(DOCS[:5], QUERY)
    assert len(kept) == 4
    assert all(len(d.page_content) <= 120 for d in kept)
    assert count_tokens(render_evidence.invoke(list(kept))) <= 200


def test_budget_compressor_does_not_mutate_its_input() -> None:
    """compress_documents returns copies and leaves the input documents as they were."""
    inputs = [doc("one", lane="facts"), doc("two")]
    before = copy.deepcopy(inputs)
    kept = BudgetCompressor().compress_documents(inputs, "q")
    assert inputs == before
    assert [d.metadata["provenance"] for d in kept] == ["derived", "source"]


# -- the example and the import boundary -----------------------------------------------------------


def test_example_chain_runs_and_its_prompt_evidence_fits_the_budget() -> None:
    """examples/langchain_chain.py runs offline and the evidence in its prompt fits the budget."""
    run = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / "langchain_chain.py"),
            QUERY,
            "--max-tokens",
            "300",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    block = run.stdout.split("<evidence>\n", 1)[1].split("</evidence>", 1)[0]
    assert "**Source excerpt**" in block
    assert count_tokens(block) <= 300
    assert "kept " in run.stdout.split("== report", 1)[1]


def test_import_recallpack_loads_no_langchain() -> None:
    """import recallpack alone imports no langchain module; only the adapter does."""
    code = (
        "import sys, recallpack; assert not [m for m in sys.modules if m.startswith('langchain')]; "
        "import recallpack.adapters.langchain; assert 'langchain_core' in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_as_tool_delegates_to_the_memory_module() -> None:
    """as_tool() builds the memory_search tool from recallpack.adapters.langchain.memory."""
    pytest.importorskip("recallpack.adapters.langchain.memory")
    tool = BudgetedRetriever(retriever=bm25()).as_tool()
    assert tool.name == "memory_search"
