"""One gate order for every policy and host: an item that will be withheld is gated by its scopes
first, never validated, and never named; the call answers with the rest."""

from __future__ import annotations

import json
import logging
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recallpack import POLICIES, CandidateError, LaneError, Reader, Scope, recall

#: Every text, source, id and metadata value of a withheld item holds this: it must appear nowhere.
MARK = "WITHHELDzq"
READABLE = ["Paris is the capital of France.", "The Loire is the longest river in France.",
            "Lyon sits where the Rhone meets the Saone."]
QUESTION = "What is the capital of France?"
READER = Reader(id="me", scopes={"org-1": Scope(name="one", description="first org")})

#: Scope metadata that withholds an item from READER (or from no reader): unheld, or malformed.
withholding_scopes = st.sampled_from([["org-9"], "org-9", ["me", "org-9"], [], "", 0, None, [1], [""], False,
                                      ["\ud800"], {"a": 1}])
#: What else may be wrong with a withheld item: nothing of it may be looked at.
bad_fields = st.fixed_dictionaries({}, optional={
    "score": st.sampled_from([math.nan, math.inf, -math.inf, 10**400]),
    "lane": st.sampled_from([f"{MARK}-lane", 7, None]),
    "start_index": st.sampled_from([-5, 10**9, f"{MARK}", 3]),
    "start_char": st.sampled_from([9, 0]),
    "end_char": st.sampled_from([2, 10**6]),
    "parent_hash": st.just(f"{MARK}-parent"),
    "artifact_id": st.sampled_from([f"{MARK}-artifact", 5]),
    "artifact_content_id": st.just(f"{MARK}-v1"),
})


def withheld_metadata(i: int, scopes: object, bad: dict[str, Any]) -> dict[str, Any]:
    return {"scope_ids": scopes, "source": f"{MARK}/hr/layoffs-{i}.md", "note": f"{MARK} metadata {i}", **bad}


def assert_unnamed(*seen: object) -> None:
    """Nothing seen holds the withheld items' marker (their text, source, id or metadata)."""
    for thing in seen:
        assert MARK not in (thing if isinstance(thing, str) else repr(thing))


def log_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [f"{r.getMessage()} {r.__dict__!r}" for r in caplog.records]


# -- the core, given mappings --------------------------------------------------------------------

mapping_bad = st.fixed_dictionaries({}, optional={
    "score": st.sampled_from([math.nan, math.inf, "0.5", True]),
    "lane": st.sampled_from([f"{MARK}-lane", 3]),
    "span": st.sampled_from([{"parent": MARK, "start": 9, "end": 2}, {"parent": "", "start": 0, "end": 10**6}, 7]),
    "artifact_id": st.sampled_from([5, b"x"]),
    "metadata": st.just({"source": f"{MARK}.md"}),
    "modality": st.sampled_from([3, "image"]),
    "unknown_field": st.just(MARK),
    "text": st.sampled_from([None, 12, b"bytes", f"{MARK} text"]),
})


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    withheld=st.lists(st.tuples(withholding_scopes, mapping_bad), max_size=8),
    where=st.lists(st.integers(0, 20), max_size=8),
    policy=st.sampled_from(POLICIES),
    reader=st.sampled_from([None, READER]),
)
def test_withheld_mappings_with_anything_wrong_are_withheld_and_unnamed(
    caplog: pytest.LogCaptureFixture, withheld: list[tuple[object, dict[str, Any]]], where: list[int],
    policy: str, reader: Reader | None,
) -> None:
    """Any number of withheld mappings, anything else wrong with them: the call answers, nothing names them."""
    caplog.clear()
    candidates: list[Any] = [{"text": t, "metadata": {"source": f"doc{n}.md"}} for n, t in enumerate(READABLE)]
    for i, (scopes, bad) in enumerate(withheld):
        item = {"text": f"{MARK} secret {i}", **bad, "scope_ids": scopes}
        candidates.insert(where[i] % (len(candidates) + 1) if i < len(where) else 0, item)
    with caplog.at_level(logging.DEBUG, logger="recallpack"):
        result = recall(candidates, max_tokens=400, policy=policy, query=QUESTION, reader=reader)
    assert result.report.items_withheld == len(withheld)
    assert result.report.items_selected == len(READABLE)
    assert "Paris is the capital of France." in result.to_markdown()
    assert_unnamed(result.to_markdown(), result.to_event(), result.trace.rows(), result.report.summary(),
                   *log_lines(caplog))


@pytest.mark.parametrize("policy", POLICIES)
def test_a_readable_malformed_item_keeps_its_clear_error(policy: str) -> None:
    """The caller's own readable item, malformed: the same error as before, naming it."""
    with pytest.raises(CandidateError, match=r"candidates\[1\].*score"):
        recall([{"text": "a"}, {"text": "b", "score": math.nan, "scope_ids": ["org-1"]}], reader=READER,
               policy=policy, query="b")
    with pytest.raises(LaneError, match="bogus"):
        recall([{"text": "b", "lane": "bogus"}], policy=policy, query="b")


# -- the hosts -----------------------------------------------------------------------------------


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    withheld=st.lists(st.tuples(withholding_scopes, bad_fields), min_size=1, max_size=6),
    reader=st.sampled_from([None, READER]),
    first=st.booleans(),
)
def test_langchain_withheld_documents_never_sink_the_call_nor_are_named(
    caplog: pytest.LogCaptureFixture, withheld: list[tuple[object, dict[str, Any]]], reader: Reader | None,
    first: bool,
) -> None:
    """LangChain: any withheld Documents, anything wrong with them: it answers; no error, log or event names them."""
    pytest.importorskip("langchain_core")
    from langchain_core.callbacks import BaseCallbackHandler
    from langchain_core.documents import Document
    from langchain_core.runnables import RunnableLambda

    from recallpack.adapters import langchain as lc

    class Collect(BaseCallbackHandler):
        def __init__(self) -> None:
            self.events: list[Any] = []

        def on_custom_event(self, name: str, data: Any, **kwargs: Any) -> None:
            self.events.append((name, data))

    caplog.clear()
    readable = [Document(page_content=t, metadata={"source": f"doc{n}.md"}) for n, t in enumerate(READABLE)]
    hidden = [Document(page_content=f"{MARK} secret {i}", id=f"{MARK}-id-{i}", metadata=withheld_metadata(i, s, b))
              for i, (s, b) in enumerate(withheld)]
    docs = [*hidden, *readable] if first else [*readable, *hidden]
    retriever = lc.BudgetedRetriever(retriever=RunnableLambda(lambda q: docs), max_tokens=400, reader=reader)
    handler = Collect()
    with caplog.at_level(logging.DEBUG, logger="recallpack"):
        kept = retriever.invoke(QUESTION, config={"callbacks": [handler]})
        result = retriever.recall(QUESTION)
    assert any("Paris is the capital" in d.page_content for d in kept)
    assert result.report.items_withheld == len(hidden)
    assert handler.events and all(name == lc.REPORT_EVENT for name, _ in handler.events)
    assert_unnamed(json.dumps([data for _, data in handler.events]), [d.metadata for d in kept],
                   result.to_markdown(), result.to_event(), *log_lines(caplog))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    withheld=st.lists(st.tuples(withholding_scopes, bad_fields), min_size=1, max_size=6),
    score=st.sampled_from([math.nan, math.inf, 0.5, None]),
    reader=st.sampled_from([None, READER]),
)
def test_llamaindex_withheld_nodes_never_sink_the_call_nor_are_named(
    caplog: pytest.LogCaptureFixture, withheld: list[tuple[object, dict[str, Any]]], score: float | None,
    reader: Reader | None,
) -> None:
    """LlamaIndex: any withheld nodes (a NaN score too): it answers; no error, log or event names them."""
    pytest.importorskip("llama_index.core")
    from llama_index.core.instrumentation import get_dispatcher
    from llama_index.core.instrumentation.event_handlers import BaseEventHandler
    from llama_index.core.instrumentation.events import BaseEvent
    from llama_index.core.retrievers import BaseRetriever as LlamaRetriever
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

    from recallpack.adapters import llamaindex as li

    nodes = [NodeWithScore(node=TextNode(text=t, metadata={"file_path": f"doc{n}.md"}), score=1.0)
             for n, t in enumerate(READABLE)]
    nodes += [NodeWithScore(node=TextNode(text=f"{MARK} secret {i}", id_=f"{MARK}-id-{i}",
                                          metadata=withheld_metadata(i, s, b)), score=score)
              for i, (s, b) in enumerate(withheld)]

    class Upstream(LlamaRetriever):
        def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
            return list(reversed(nodes))

    class Collect(BaseEventHandler):
        events: list[BaseEvent] = []

        def handle(self, event: BaseEvent, **kwargs: Any) -> None:
            self.events.append(event)

    caplog.clear()
    handler = Collect(events=[])
    root = get_dispatcher()
    root.add_event_handler(handler)
    try:
        with caplog.at_level(logging.DEBUG, logger="recallpack"):
            kept = li.BudgetedRetriever(Upstream(), max_tokens=400, reader=reader).retrieve(QUESTION)
            post = li.BudgetPostprocessor(max_tokens=400, reader=reader).postprocess_nodes(nodes, query_str=QUESTION)
    finally:
        root.event_handlers.remove(handler)
    assert any("Paris is the capital" in k.node.get_content() for k in kept)
    assert any("Paris is the capital" in k.node.get_content() for k in post)
    # The upstream's own RetrievalEndEvent carries all it returned: that is the user's retriever
    # speaking. Every event of recallpack's components (its retriever's span, the packing) is checked.
    ours = [e for e in handler.events if not (e.span_id or "").startswith(f"{Upstream.__name__}.")]
    assert any(isinstance(e, li.RecallPackedEvent) for e in ours)
    assert_unnamed([e.model_dump() for e in ours], [k.node.metadata for k in (*kept, *post)], *log_lines(caplog))
