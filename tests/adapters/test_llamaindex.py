"""BudgetPostprocessor: the context a LlamaIndex engine hands its LLM fits max_tokens.

Engines are real (a VectorStoreIndex over standard-library text with a hashing embedding that
runs locally); the LLM is LlamaIndex's MockLLM, recording every prompt it receives.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

pytest.importorskip("llama_index.core")

from llama_index.core import Settings, VectorStoreIndex
from llama_index.core.bridge.pydantic import Field
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.llms import CompletionResponse, MockLLM
from llama_index.core.llms.callbacks import llm_completion_callback
from llama_index.core.prompts import PromptTemplate
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import ImageNode, MetadataMode, NodeWithScore, TextNode

from recallpack import (
    BudgetError,
    ConfigError,
    LaneError,
    PolicyError,
    Reader,
    Scope,
    TokenizerError,
    count_tokens,
)
from recallpack._bench.llamaindex import HashingEmbedding, build_index, stdlib_paragraphs
from recallpack.adapters.llamaindex import BudgetPostprocessor, RecallPackedEvent

QA = PromptTemplate("<context>\n{context_str}\n</context>\nQuestion: {query_str}\nAnswer: ")
CONTEXT = re.compile(r"<context>\n(.*)\n</context>", re.DOTALL)
QUERY = "parse command line arguments and options"
BUDGET = 300


class RecordingLLM(MockLLM):
    """MockLLM that keeps every prompt it is asked to complete, exactly as received."""

    prompts: list[str] = Field(default_factory=list, exclude=True)

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        self.prompts.append(prompt)
        return CompletionResponse(text="an answer")


def context_of(prompt: str) -> str:
    match = CONTEXT.search(prompt)
    assert match, f"no <context> in prompt: {prompt[:200]!r}"
    return match.group(1)


@pytest.fixture(scope="module")
def index() -> VectorStoreIndex:
    return build_index(stdlib_paragraphs(400), HashingEmbedding())


@pytest.fixture
def llm() -> RecordingLLM:
    return RecordingLLM()


def nws(text: str, score: float | None = 1.0, **metadata: Any) -> NodeWithScore:
    return NodeWithScore(node=TextNode(text=text, metadata=metadata), score=score)


def texts(nodes: list[NodeWithScore]) -> list[str]:
    return [n.node.get_content(metadata_mode=MetadataMode.NONE) for n in nodes]


# -- inside real engines ------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["compact", "simple_summarize"])
def test_query_engine_context_fits_max_tokens(index: VectorStoreIndex, llm: RecordingLLM, mode: str) -> None:
    """as_query_engine with the postprocessor: the one context the LLM gets fits the budget."""
    engine = index.as_query_engine(
        llm=llm,
        similarity_top_k=30,
        response_mode=mode,
        text_qa_template=QA,
        node_postprocessors=[BudgetPostprocessor(max_tokens=BUDGET)],
    )
    response = engine.query(QUERY)
    assert len(llm.prompts) == 1
    context = context_of(llm.prompts[0])
    assert count_tokens(context) <= BUDGET
    assert 1 < len(response.source_nodes) < 30
    shown = [n.node.get_content(metadata_mode=MetadataMode.LLM) for n in response.source_nodes]
    if mode == "compact":
        assert context == "\n\n".join(t.strip() for t in shown)
    else:  # SimpleSummarize formats a one-item list into the prompt: its str() is what is seen
        assert context == str(["\n".join(shown)])


def test_without_the_postprocessor_the_same_context_is_over_budget(
    index: VectorStoreIndex, llm: RecordingLLM
) -> None:
    """Control: the retrieved nodes alone overflow the budget, so the fit above is the postprocessor's."""
    engine = index.as_query_engine(llm=llm, similarity_top_k=30, text_qa_template=QA)
    engine.query(QUERY)
    assert count_tokens(context_of(llm.prompts[0])) > BUDGET


def test_the_postprocessor_fills_the_budget(index: VectorStoreIndex) -> None:
    """The first node left out (prefix policy) really would not have fit: no budget is wasted."""
    retrieved = index.as_retriever(similarity_top_k=30).retrieve(QUERY)
    kept, result = BudgetPostprocessor(max_tokens=BUDGET).pack_nodes(retrieved)
    costs = [count_tokens(n.node.get_content(metadata_mode=MetadataMode.LLM)) + 1 for n in retrieved]
    assert sum(costs[: len(kept)]) <= BUDGET < sum(costs[: len(kept) + 1])
    assert result.report.reasons == {"over_budget": 30 - len(kept)}


async def test_retriever_query_engine_sync_and_async(index: VectorStoreIndex, llm: RecordingLLM) -> None:
    """RetrieverQueryEngine.from_args with the postprocessor: query and aquery both fit."""
    engine = RetrieverQueryEngine.from_args(
        index.as_retriever(similarity_top_k=30),
        llm=llm,
        text_qa_template=QA,
        node_postprocessors=[BudgetPostprocessor(max_tokens=BUDGET)],
    )
    sync = engine.query(QUERY)
    asynchronous = await engine.aquery(QUERY)
    assert len(llm.prompts) == 2
    assert llm.prompts[0] == llm.prompts[1]
    assert count_tokens(context_of(llm.prompts[0])) <= BUDGET
    assert texts(sync.source_nodes) == texts(asynchronous.source_nodes)


def test_context_chat_engine_fits_max_tokens(index: VectorStoreIndex, llm: RecordingLLM) -> None:
    """as_chat_engine(chat_mode="context"): the documents in the system prompt fit the budget."""
    engine = index.as_chat_engine(
        chat_mode="context",
        llm=llm,
        similarity_top_k=30,
        context_template="<context>\n{context_str}\n</context>\n",
        node_postprocessors=[BudgetPostprocessor(max_tokens=BUDGET)],
    )
    response = engine.chat(QUERY)
    assert len(llm.prompts) == 1
    assert count_tokens(context_of(llm.prompts[0])) <= BUDGET
    assert 1 < len(response.source_nodes) < 30


def test_engine_built_from_settings(llm: RecordingLLM) -> None:
    """With Settings.llm and Settings.embed_model set globally instead of passed in, it still fits."""
    saved = Settings._llm, Settings._embed_model
    Settings.llm, Settings.embed_model = llm, HashingEmbedding()
    try:
        index = VectorStoreIndex([TextNode(text=t) for t in stdlib_paragraphs(200)])
        engine = index.as_query_engine(
            similarity_top_k=20,
            text_qa_template=QA,
            node_postprocessors=[BudgetPostprocessor(max_tokens=120)],
        )
        engine.query(QUERY)
    finally:
        Settings._llm, Settings._embed_model = saved
    assert len(llm.prompts) == 1
    assert 0 < count_tokens(context_of(llm.prompts[0])) <= 120


# -- what comes back ----------------------------------------------------------------------------


def test_added_fields_change_nothing_the_llm_or_embedding_sees() -> None:
    """The five evidence fields are in metadata but excluded from the LLM and embedding views."""
    node = TextNode(text="Alice works at Initech.", metadata={"file_name": "people.txt"})
    kept = BudgetPostprocessor(max_tokens=100).postprocess_nodes([NodeWithScore(node=node, score=0.5)])
    copy = kept[0].node
    assert {"provenance", "evidence_label", "scopes", "resource_uri", "token_count"} <= set(copy.metadata)
    assert copy.metadata["evidence_label"] == "Source excerpt"
    for mode in (MetadataMode.LLM, MetadataMode.EMBED):
        assert copy.get_content(metadata_mode=mode) == node.get_content(metadata_mode=mode)


def test_caller_nodes_are_not_mutated() -> None:
    """Input NodeWithScores and nodes are left exactly as they were; the output holds copies."""
    inputs = [
        nws(f"Paragraph {i} about retrieval budgets.", 1.0 - i / 10, file_name="a.txt") for i in range(5)
    ]
    before = [n.model_dump() for n in inputs]
    kept = BudgetPostprocessor(max_tokens=100).postprocess_nodes(inputs)
    assert [n.model_dump() for n in inputs] == before
    assert kept and all(k is not i and k.node is not i.node for k, i in zip(kept, inputs))
    assert all(k.node.node_id == i.node.node_id for k, i in zip(kept, inputs))


def test_rank_order_and_scores_are_kept_including_none() -> None:
    """Kept nodes stay in input order with their own scores; None scores are not reordered."""
    inputs = [
        nws("first text", None),
        nws("second text", 0.2),
        nws("third text", None),
        nws("fourth text", 0.9),
    ]
    kept = BudgetPostprocessor(max_tokens=100).postprocess_nodes(inputs)
    assert texts(kept) == ["first text", "second text", "third text", "fourth text"]
    assert [k.score for k in kept] == [None, 0.2, None, 0.9]


def test_nodes_without_text_are_dropped_with_reason_no_text() -> None:
    """An ImageNode and an empty TextNode are dropped as no_text and counted in the report."""
    inputs = [
        nws("A caption-less image follows."),
        NodeWithScore(node=ImageNode(image_url="https://example.invalid/cat.png"), score=0.8),
        NodeWithScore(node=TextNode(text="   ", metadata={"title": "only metadata"}), score=0.7),
        nws("And some text after it."),
    ]
    kept, result = BudgetPostprocessor(max_tokens=100).pack_nodes(inputs)
    assert texts(kept) == ["A caption-less image follows.", "And some text after it."]
    report = result.report
    assert report.reasons == {"no_text": 2}
    assert (report.items_selected, report.items_dropped, report.items_withheld) == (2, 2, 0)
    assert [e.reason for e in result.trace][1:3] == ["no_text", "no_text"]


def test_truncate_policy_cuts_the_node_the_llm_sees() -> None:
    """policy="truncate": the last kept node shows exactly its cut text, ending in "…", and fits."""
    long = " ".join(f"word{i}" for i in range(400))
    inputs = [nws("Short opening paragraph."), nws(long, 0.5, file_name="long.txt")]
    kept, result = BudgetPostprocessor(max_tokens=60, policy="truncate").pack_nodes(inputs)
    assert len(kept) == 2 and result.report.truncated
    shown = [k.node.get_content(metadata_mode=MetadataMode.LLM) for k in kept]
    assert shown[1].endswith("…") and shown[1].startswith("file_name: long.txt")
    assert shown[1] == result.evidence[1].text
    assert count_tokens("\n\n".join(shown)) <= 60
    assert inputs[1].node.text == long


def test_reader_withholds_nodes_in_scopes_it_does_not_hold() -> None:
    """A node scoped to an organization the reader is not in is withheld, never shown."""
    reader = Reader(id="u-1", scopes={"org-1": Scope(name="book-club")})
    inputs = [
        nws("Mine.", scope_ids=["u-1"]),
        nws("Another org's secret.", scope_ids=["org-2"]),
        nws("The club's.", scope_ids="org-1"),
    ]
    kept, result = BudgetPostprocessor(max_tokens=100, reader=reader).pack_nodes(inputs)
    assert texts(kept) == ["Mine.", "The club's."]
    assert [k.node.metadata["scopes"] for k in kept] == [["private"], ["book-club"]]
    assert result.report.items_withheld == 1


def test_lane_from_metadata_sets_the_label() -> None:
    """metadata["lane"] picks the provenance label; a fixed lane= overrides it."""
    inputs = [nws("A fact.", lane="facts"), nws("Said earlier.", lane="working_memory")]
    by_metadata = BudgetPostprocessor(max_tokens=100).postprocess_nodes(inputs)
    assert [k.node.metadata["evidence_label"] for k in by_metadata] == [
        "Derived memory",
        "Recent session memory",
    ]
    fixed = BudgetPostprocessor(max_tokens=100, lane="sources").postprocess_nodes(inputs)
    assert {k.node.metadata["provenance"] for k in fixed} == {"source"}


def test_max_items_caps_the_nodes() -> None:
    """max_items keeps at most that many however much budget is left."""
    kept, result = BudgetPostprocessor(max_items=2).pack_nodes([nws(f"text {i}") for i in range(5)])
    assert len(kept) == 2 and result.report.reasons == {"over_item_cap": 3}


async def test_apostprocess_nodes_matches_postprocess_nodes() -> None:
    """The async path keeps the same nodes with the same metadata as the sync one."""
    inputs = [nws(f"Paragraph number {i} " * 10, 1 / (i + 1)) for i in range(20)]
    processor = BudgetPostprocessor(max_tokens=150)
    sync = processor.postprocess_nodes(inputs, query_str="q")
    asynchronous = await processor.apostprocess_nodes(inputs, query_str="q")
    assert [n.model_dump() for n in sync] == [n.model_dump() for n in asynchronous]
    assert 0 < len(sync) < 20


def test_a_packed_event_carries_the_report() -> None:
    """Instrumentation handlers receive a RecallPackedEvent with the report, inside a span."""

    class Collect(BaseEventHandler):
        events: list[BaseEvent] = []

        def handle(self, event: BaseEvent, **kwargs: Any) -> None:
            self.events.append(event)

    handler = Collect()
    root = get_dispatcher()
    root.add_event_handler(handler)
    try:
        BudgetPostprocessor(max_tokens=100).postprocess_nodes([nws("hello there")])
    finally:
        root.event_handlers.remove(handler)
    packed = [e for e in handler.events if isinstance(e, RecallPackedEvent)]
    assert len(packed) == 1
    assert packed[0].report.items_selected == 1 and packed[0].span_id is not None


# -- settings -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("settings", "error"),
    [
        ({"max_tokens": 0}, BudgetError),
        ({"max_tokens": "2048"}, BudgetError),
        ({"max_tokens": True}, BudgetError),
        ({"max_tokens": 20000}, BudgetError),
        ({"max_items": 0}, BudgetError),
        ({"policy": "largest_first"}, PolicyError),
        ({"tokenizer": "no-such-encoding"}, TokenizerError),
        ({"lane": "episodic"}, LaneError),
        ({"on_unknown_lane": "ignore"}, ConfigError),
        ({"reader": {"id": 3}}, ConfigError),
        ({"response_mode": "generation"}, ConfigError),
    ],
)
def test_invalid_settings_raise_the_core_errors_at_construction(
    settings: dict[str, Any], error: type
) -> None:
    """Each bad setting raises recallpack's own error when the postprocessor is built."""
    with pytest.raises(error):
        BudgetPostprocessor(**settings)


def test_a_raised_ceiling_allows_a_larger_budget() -> None:
    """max_tokens above 16384 is accepted once max_tokens_ceiling is raised with it."""
    assert BudgetPostprocessor(max_tokens=20000, max_tokens_ceiling=20000).max_tokens == 20000


def test_round_trips_through_to_dict_and_from_dict() -> None:
    """to_dict / from_dict (and to_json / from_json) rebuild an equal postprocessor."""
    processor = BudgetPostprocessor(
        max_tokens=512,
        max_items=7,
        policy="skip",
        tokenizer="o200k_base",
        lane="facts",
        reader=Reader(id="u-1", scopes={"org-1": Scope(name="team", description="the team")}),
        dedupe=False,
        metadata_mode=MetadataMode.NONE,
    )
    data = processor.to_dict()
    assert data["class_name"] == BudgetPostprocessor.class_name() == "BudgetPostprocessor"
    for rebuilt in (BudgetPostprocessor.from_dict(data), BudgetPostprocessor.from_json(processor.to_json())):
        assert rebuilt.to_dict() == data
        assert rebuilt.reader == processor.reader
        nodes = [nws("one", lane="sources"), nws("one"), nws("two")]
        assert texts(rebuilt.postprocess_nodes(nodes)) == texts(processor.postprocess_nodes(nodes))


# -- the bound, for any nodes -------------------------------------------------------------------

_TEXT = st.text(
    alphabet=st.sampled_from(list("abc xyz.,;:!?'\"\n\t-_{}()[]0123456789é日本🎉")), min_size=0, max_size=120
)


@hypothesis_settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    contents=st.lists(
        st.tuples(_TEXT, st.dictionaries(st.sampled_from(["title", "page"]), _TEXT, max_size=2))
    ),
    room=st.integers(min_value=0, max_value=200),
    policy=st.sampled_from(["prefix", "skip", "truncate"]),
    tokenizer=st.sampled_from(["cl100k_base", "o200k_base", "chars"]),
)
def test_the_context_as_the_synthesizer_builds_it_always_fits(
    contents: list[tuple[str, dict[str, str]]], room: int, policy: str, tokenizer: str
) -> None:
    """Property: any nodes, budget, policy, tokenizer: the context of every response mode fits, in order."""
    inputs = [nws(text, None, **metadata) for text, metadata in contents]
    max_tokens = BudgetPostprocessor(tokenizer=tokenizer).packer.least_tokens + room
    processor = BudgetPostprocessor(max_tokens=max_tokens, policy=policy, tokenizer=tokenizer)
    kept, result = processor.pack_nodes(inputs)
    shown = [k.node.get_content(metadata_mode=MetadataMode.LLM) for k in kept]
    views = ["\n\n".join(t.strip() for t in shown if t.strip()), str(["\n".join(shown)]), *shown]
    if kept:
        assert max(count_tokens(v, tokenizer) for v in views) == result.report.tokens_used <= max_tokens
    ranks = list(result.selected_ranks)
    assert ranks == sorted(ranks)
    for rank, copy in zip(ranks, kept):
        assert copy.node.node_id == inputs[rank].node.node_id
    report = result.report
    assert report.items_selected + report.items_dropped + report.items_withheld == len(inputs)


def test_no_nodes_in_no_nodes_out() -> None:
    """An empty retrieval is an empty result with a report of zero candidates, not an error."""
    kept, result = BudgetPostprocessor().pack_nodes([])
    assert kept == [] and result.report.candidates == 0 and result.report.tokens_used == 0
