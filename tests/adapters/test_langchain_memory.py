"""The evidence allowance on LangChain: the search tool, message assembly, the agent middleware."""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain_core")

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
)
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import BaseTool, StructuredTool
from pydantic import Field

from recallpack import ConfigError, RecallResult, count_tokens
from recallpack.adapters.langchain import BudgetedRetriever
from recallpack.adapters.langchain.memory import (
    NO_MATCH,
    aassemble_messages,
    assemble_messages,
    evidence_allowance,
    memory_search_tool,
    recall_remaining,
)
from recallpack.allowance import KEY_ENV, Allowance, Receipt, WithheldReason, issue_receipt, verify

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # langchain-community's sunset notice
    from langchain_community.retrievers import BM25Retriever

TOK = "cl100k_base"
ROOT = Path(__file__).resolve().parents[2]
SURROGATE = json.loads('"\\ud800"')  # a lone surrogate: a valid str, not valid UTF-8
NOTES = [
    "Alice works at Initech as a payments engineer and owns the refunds service.",
    "Alice moved from Paris to Berlin in March and now works on the Berlin team.",
    "Bob prefers green tea to coffee and takes it without sugar.",
    "Bob is on call for the payments service during the first week of every month.",
    "The quarterly review moved to Thursday at 10:00 in the large meeting room.",
    "Carol's flight to Lisbon leaves at 07:40 from terminal 2 on Friday.",
    "The staging database was migrated to Postgres 16 over the weekend.",
    "Dave is allergic to peanuts; the team lunch order must avoid them.",
    "The office wifi password rotates every Monday and is posted in the kitchen.",
    "Erin leads the onboarding working group and runs the Tuesday sessions.",
    "The refunds service retries failed payouts three times before paging on call.",
    "Initech's fiscal year starts in February, so the Q1 review is in May.",
]
QUERIES = ["Alice", "payments", "Bob tea", "review Thursday", "Lisbon flight", "refunds service"]
ITEM_LINE = re.compile(r"^- \*\*", re.MULTILINE)
MARKER = "[recallpack: search result omitted"


def items_in(text: str) -> int:
    """Items in a rendered block: its top-level labelled bullets (evidence lines are indented)."""
    return len(ITEM_LINE.findall(text))


def retriever(max_tokens: int = 2048, k: int = 4) -> BudgetedRetriever:
    """A real BM25 retriever over real notes, wrapped by recallpack, searching exactly ``k`` deep."""
    return BudgetedRetriever(BM25Retriever.from_texts(NOTES, k=k), max_tokens=max_tokens, fetch_k=k)


def call(tool: BaseTool, query: str, call_id: str) -> ToolMessage:
    """Run ``tool`` the way an agent's tool node does: from a tool call, to a ToolMessage."""
    message = tool.invoke(ToolCall(name=tool.name, args={"query": query}, id=call_id, type="tool_call"))
    assert isinstance(message, ToolMessage)
    return message


def asks(*calls: tuple[str, str], name: str = "memory_search") -> AIMessage:
    """An AI message making the given (query, call id) tool calls, in parallel."""
    return AIMessage(
        content="",
        tool_calls=[{"name": name, "args": {"query": q}, "id": i, "type": "tool_call"} for q, i in calls],
    )


def conversation(tool: BaseTool, *queries: str) -> list[BaseMessage]:
    """A human turn, then one search per query, each call followed by its result."""
    messages: list[BaseMessage] = [HumanMessage("What do we know about Alice and payments?")]
    for n, query in enumerate(queries):
        messages += [asks((query, f"call-{n}")), call(tool, query, f"call-{n}")]
    return messages


def shown_evidence(messages: Sequence[BaseMessage], automatic: str = "") -> list[str]:
    """The evidence blocks a model request shows: search results that are not markers, plus
    the automatic recall block."""
    blocks = [
        str(m.content)
        for m in messages
        if isinstance(m, ToolMessage) and m.name == "memory_search" and not str(m.content).startswith(MARKER)
    ]
    return [*blocks, automatic] if automatic else blocks


def pairs_intact(messages: Sequence[BaseMessage]) -> bool:
    """Every tool result answers an earlier tool call, and each call has at most one result."""
    asked: set[str] = set()
    answered: list[str] = []
    for message in messages:
        if isinstance(message, AIMessage):
            asked |= {str(c["id"]) for c in message.tool_calls}
        if isinstance(message, ToolMessage):
            if message.tool_call_id not in asked:
                return False
            answered.append(message.tool_call_id)
    return len(answered) == len(set(answered))


# -- the tool ----------------------------------------------------------------------------------


def test_tool_returns_the_block_with_its_receipt_as_artifact() -> None:
    """The search tool's result is the rendered block; its artifact is a receipt for it."""
    budgeted = retriever()
    tool = budgeted.as_tool()
    assert tool.name == "memory_search" and tool.response_format == "content_and_artifact"
    message = call(tool, "Alice", "c1")
    assert message.content == budgeted.recall("Alice").to_markdown()
    assert isinstance(message.artifact, Receipt) and verify(message.content, message.artifact)
    assert message.artifact.items == items_in(str(message.content)) > 0
    assert message.artifact.tokens == count_tokens(str(message.content), TOK)


async def test_tool_async_result_equals_the_sync_one() -> None:
    """ainvoke of the tool gives the same block and receipt as invoke."""
    tool = retriever().as_tool()
    sync = call(tool, "payments", "c1")
    result = await tool.ainvoke(
        ToolCall(name="memory_search", args={"query": "payments"}, id="c1", type="tool_call")
    )
    assert (result.content, result.artifact) == (sync.content, sync.artifact)


def test_tool_caps_each_search_to_the_allowance() -> None:
    """A search never returns more than a whole allowance, so every block can fit one request."""
    tool = retriever(max_tokens=2048, k=12).as_tool(allowance=Allowance(max_items=3, max_tokens=90))
    receipt = call(tool, "the", "c1").artifact
    assert isinstance(receipt, Receipt)
    assert 0 < receipt.items <= 3 and receipt.tokens <= 90


def test_tool_with_nothing_found_answers_with_a_receipted_notice() -> None:
    """A search that keeps nothing answers NO_MATCH, with a zero-item receipt for those bytes."""
    empty = BudgetedRetriever(retriever=RunnableLambda(lambda q: []))
    message = call(memory_search_tool(empty), "anything", "c1")
    assert message.content == NO_MATCH
    assert isinstance(message.artifact, Receipt) and message.artifact.items == 0
    assert verify(NO_MATCH, message.artifact)


def test_tool_takes_any_object_with_recall() -> None:
    """memory_search_tool duck-types: any object with recall(query) -> RecallResult will do."""
    budgeted = retriever()

    class Plain:
        def recall(self, query: str, **kwargs: Any) -> RecallResult:
            return budgeted.recall(query, **kwargs)

    message = call(memory_search_tool(Plain(), name="notes"), "Bob tea", "c1")
    assert message.name == "notes" and verify(message.content, message.artifact)  # type: ignore[arg-type]


def test_tool_rejects_a_retriever_without_recall() -> None:
    """Something without recall() is refused when the tool is made, saying what to wrap it in."""
    with pytest.raises(ConfigError, match="BudgetedRetriever"):
        memory_search_tool(BM25Retriever.from_texts(NOTES))  # type: ignore[arg-type]


# -- assembling messages -----------------------------------------------------------------------


def test_parallel_search_blocks_share_the_allowance() -> None:
    """Three parallel results that only two fit: the oldest is marked, the pairs stay intact."""
    tool = retriever(k=2).as_tool()
    results = [call(tool, q, f"c{n}") for n, q in enumerate(QUERIES[:3])]
    messages: list[BaseMessage] = [
        HumanMessage("hi"),
        asks(*((q, f"c{n}") for n, q in enumerate(QUERIES[:3]))),
        *results,
    ]
    receipts = [m.artifact for m in results]
    allowance = Allowance(max_tokens=receipts[1].tokens + receipts[2].tokens)  # type: ignore[union-attr]
    view = assemble_messages(messages, allowance)
    assert view.assembly.reason(0) is WithheldReason.OVER_TOKENS
    assert str(view.messages[2].content).startswith(MARKER)
    assert view.messages[3:] == messages[3:]
    assert pairs_intact(view.messages) and len(view.messages) == len(messages)


def test_repeated_search_is_shown_once() -> None:
    """The same search twice: the newer result is shown, the older one is marked a repeat."""
    tool = retriever().as_tool()
    messages = conversation(tool, "Alice", "Bob tea", "Alice")
    view = assemble_messages(messages)
    assert view.assembly.reason(0) is WithheldReason.DUPLICATE
    assert "appears later" in str(view.messages[2].content)
    kept = [messages[4], messages[6]]
    assert view.messages[6] is messages[6]
    assert view.assembly.items_used == sum(m.artifact.items for m in kept)  # type: ignore[attr-defined]


def test_deferred_tool_call_is_assembled_where_its_result_arrives() -> None:
    """A result arriving later than its call (and a call still pending) assemble by position."""
    tool = retriever().as_tool()
    late, early = call(tool, "Alice", "c1"), call(tool, "Lisbon flight", "c2")
    messages: list[BaseMessage] = [
        HumanMessage("hi"),
        asks(("Alice", "c1"), ("Lisbon flight", "c2"), ("Bob tea", "c3")),
        early,
        HumanMessage("and?"),
        late,  # c3 never answered yet: its call stays as it is
    ]
    allowance = Allowance(max_blocks=1)
    view = assemble_messages(messages, allowance)
    assert view.positions == (2, 4)
    assert view.messages[4] is late and str(view.messages[2].content).startswith(MARKER)
    assert view.messages[1] is messages[1] and pairs_intact(view.messages)


def test_legacy_results_without_receipt_are_marked() -> None:
    """A memory_search result without a receipt is withheld; other tools' results are left alone."""
    tool = retriever().as_tool()
    fresh = call(tool, "Alice", "c2")
    legacy = ToolMessage(content=str(fresh.content), tool_call_id="c1")  # no name, no artifact
    other = ToolMessage(content="22°C and sunny", tool_call_id="c3", name="weather")
    messages: list[BaseMessage] = [
        HumanMessage("hi"),
        asks(("Alice", "c1")),
        legacy,
        asks(("Alice", "c2")),
        fresh,
        AIMessage(content="", tool_calls=[{"name": "weather", "args": {}, "id": "c3"}]),
        other,
    ]
    view = assemble_messages(messages)
    assert view.assembly.reason(0) is WithheldReason.NO_RECEIPT
    assert "no receipt" in str(view.messages[2].content)
    assert view.messages[4] is fresh and view.messages[6] is other
    assert view.positions == (2, 4)


def test_byte_receipt_mismatch_is_marked() -> None:
    """A result whose content was changed after its receipt was issued is withheld."""
    tool = retriever().as_tool()
    messages = conversation(tool, "Alice")
    edited = messages[2].model_copy(update={"content": str(messages[2].content).replace("Berlin", "Rome")})
    view = assemble_messages([*messages[:2], edited])
    assert view.assembly.reason(0) is WithheldReason.RECEIPT_MISMATCH
    assert "do not match" in str(view.messages[2].content)


def test_one_payload_cannot_present_anothers_receipt() -> None:
    """A big result carrying a small result's receipt is withheld; the small one is kept."""
    tool = retriever(k=12).as_tool()
    small, big = call(tool, "Lisbon flight", "c1"), call(tool, "the", "c2")
    impostor = big.model_copy(update={"artifact": small.artifact})
    messages: list[BaseMessage] = [
        HumanMessage("hi"),
        asks(("Lisbon flight", "c1"), ("the", "c2")),
        small,
        impostor,
    ]
    view = assemble_messages(messages, Allowance(max_items=small.artifact.items))  # type: ignore[union-attr]
    assert view.assembly.kept == (0,) and view.assembly.reason(1) is WithheldReason.RECEIPT_MISMATCH


def test_original_messages_keep_their_content_while_the_model_sees_the_marker() -> None:
    """Withheld results are copies with the marker; the input messages and list are unchanged."""
    tool = retriever().as_tool()
    messages = conversation(tool, "Alice", "payments", "Bob tea")
    before = copy.deepcopy(messages)
    view = assemble_messages(messages, Allowance(max_blocks=1))
    assert messages == before  # neither the list nor any message was changed
    for position in (2, 4):
        original, seen = messages[position], view.messages[position]
        assert seen is not original and str(seen.content).startswith(MARKER)
        assert isinstance(seen, ToolMessage) and isinstance(original, ToolMessage)
        assert (seen.tool_call_id, seen.name, seen.artifact) == (
            original.tool_call_id,
            original.name,
            original.artifact,
        )
        assert verify(original.content, original.artifact)  # type: ignore[arg-type]


def test_corrections_are_shown_after_the_allowance_is_exhausted() -> None:
    """A corrections tool's result is shown even when the allowance has room for nothing else."""
    corrections = BudgetedRetriever(
        retriever=BM25Retriever.from_texts(["Correction: Alice left Initech in May."], k=1)
    )
    fix = memory_search_tool(corrections, name="memory_corrections", correction=True)
    tool = retriever().as_tool()
    messages = [
        *conversation(tool, "Alice"),
        asks(("Alice", "fix"), name=fix.name),
        call(fix, "Alice", "fix"),
    ]
    allowance = Allowance(max_items=1, max_tokens=1, max_blocks=1)
    view = assemble_messages(messages, allowance, tool_names=("memory_search", "memory_corrections"))
    assert view.messages[4] is messages[4] and view.assembly.corrections == (1,)
    assert str(view.messages[2].content).startswith(MARKER)
    assert view.remaining.items == 1  # the correction was not charged


def test_a_request_at_exactly_the_allowance_leaves_nothing_for_automatic_recall() -> None:
    """A search filling the allowance exactly is shown; automatic recall is not even called."""
    budgeted = retriever()
    messages = conversation(budgeted.as_tool(), "Alice")
    receipt = messages[2].artifact  # type: ignore[attr-defined]
    exact = Allowance(max_items=receipt.items, max_tokens=receipt.tokens, max_blocks=1)

    class Counting:
        calls = 0

        def recall(self, query: str, **kwargs: Any) -> RecallResult:
            Counting.calls += 1
            return budgeted.recall(query, **kwargs)

    view = assemble_messages(messages, exact, retriever=Counting())
    assert view.messages == messages and view.remaining.exhausted
    assert view.automatic is None and Counting.calls == 0
    one_short = Allowance(max_items=receipt.items, max_tokens=receipt.tokens - 1)
    assert assemble_messages(messages, one_short).assembly.kept == ()


def test_automatic_plus_deliberate_evidence_in_one_request() -> None:
    """Automatic recall takes only what the searches left; together they fit the allowance."""
    budgeted = retriever(k=12)
    messages = [SystemMessage("Be brief."), *conversation(budgeted.as_tool(), "Alice", "Bob tea")]
    allowance = Allowance(max_items=10, max_tokens=300)
    view = assemble_messages(messages, allowance, retriever=budgeted)
    assert view.automatic is not None
    automatic = view.automatic.to_markdown()
    assert view.messages[0].content == f"Be brief.\n\n{automatic}" and messages[0].content == "Be brief."
    shown = shown_evidence(view.messages, automatic)
    assert sum(count_tokens(t, TOK) for t in shown) <= allowance.max_tokens
    assert sum(items_in(t) for t in shown) <= allowance.max_items
    alone = budgeted.recall("What do we know about Alice and payments?")
    assert 0 < view.automatic.report.items_selected < alone.report.items_selected


def test_automatic_recall_without_a_system_message_adds_one_at_the_front() -> None:
    """With no system message, the automatic block becomes a new one, first in the list."""
    budgeted = retriever()
    view = assemble_messages([HumanMessage("Where does Alice work?")], retriever=budgeted)
    assert isinstance(view.messages[0], SystemMessage)
    assert view.messages[0].content == budgeted.recall("Where does Alice work?").to_markdown()


def test_recall_remaining_keeps_the_retrievers_own_smaller_budget() -> None:
    """Automatic recall stays within the retriever's own max_tokens when that is smaller."""
    result = recall_remaining(retriever(max_tokens=80, k=12), "the", Allowance())
    assert result is not None and result.report.max_tokens == 80


def test_replaying_the_same_conversation_gives_the_same_assembly() -> None:
    """Replaying a conversation, also after a checkpoint turned receipts into dicts, is identical."""
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    tool = retriever().as_tool()
    messages = conversation(tool, "Alice", "payments", "Alice", "refunds service")
    serde = JsonPlusSerializer()
    restored = [serde.loads_typed(serde.dumps_typed(m)) for m in messages]
    assert isinstance(restored[2].artifact, dict)
    allowance = Allowance(max_items=6, max_tokens=250, max_blocks=2)
    first, again, replayed = (assemble_messages(m, allowance) for m in (messages, messages, restored))
    assert first.assembly == again.assembly == replayed.assembly
    assert [m.content for m in first.messages] == [m.content for m in replayed.messages]


async def test_async_assembly_equals_sync() -> None:
    """aassemble_messages (automatic recall through arecall) gives the same view."""
    budgeted = retriever()
    messages = conversation(budgeted.as_tool(), "Alice", "Bob tea")
    sync = assemble_messages(messages, Allowance(max_tokens=200), retriever=budgeted)
    view = await aassemble_messages(messages, Allowance(max_tokens=200), retriever=budgeted)
    assert view.messages == sync.messages and view.assembly == sync.assembly


def test_assemble_messages_rejects_non_messages() -> None:
    """A list holding something other than messages is refused, naming the position."""
    with pytest.raises(ConfigError, match=r"messages\[1\]"):
        assemble_messages([HumanMessage("hi"), "not a message"])  # type: ignore[list-item]


# -- the Runnable ------------------------------------------------------------------------------


class Recording(GenericFakeChatModel):
    """A fake chat model that records every list of messages it is sent and can bind tools."""

    received: list[list[BaseMessage]] = Field(default_factory=list)

    def bind_tools(self, tools: Any, **kwargs: Any) -> Recording:  # type: ignore[override]
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.received.append(list(messages))
        return super()._generate(messages, *args, **kwargs)  # async runs this too


def scripted(*replies: AIMessage) -> Recording:
    return Recording(messages=iter(replies))


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_runnable_in_a_chain_shows_the_model_the_marker(mode: str) -> None:
    """prompt | evidence_allowance(...) | model: the model sees markers, the input is unchanged."""
    budgeted = retriever()
    history = conversation(budgeted.as_tool(), "Alice", "payments", "Bob tea")
    prompt = ChatPromptTemplate.from_messages([("system", "Be brief."), MessagesPlaceholder("history")])
    model = scripted(AIMessage("ok"))
    chain = prompt | evidence_allowance(Allowance(max_blocks=2), retriever=budgeted) | model
    before = copy.deepcopy(history)
    if mode == "sync":
        chain.invoke({"history": history})
    else:
        await chain.ainvoke({"history": history})
    (sent,) = model.received
    assert str(sent[3].content).startswith(MARKER) and sent[5] == history[4]
    assert history == before and str(sent[0].content).startswith("Be brief.\n\n")


# -- the agent middleware ----------------------------------------------------------------------

create_agent = pytest.importorskip("langchain.agents").create_agent
from recallpack.adapters.langchain.memory import EvidenceAllowanceMiddleware  # noqa: E402


def tool_turns() -> Iterator[AIMessage]:
    """The fake model's script: a search, two parallel searches, a repeat, then an answer."""
    yield asks(("Alice", "a1"))
    yield asks(("payments", "a2"), ("refunds service", "a3"))
    yield asks(("Alice", "a4"))
    yield AIMessage("Alice works on payments at Initech.")


def request_evidence(request: list[BaseMessage], automatic: bool) -> list[str]:
    """The evidence blocks in one recorded model request (system-message recall included)."""
    auto = ""
    if automatic and isinstance(request[0], SystemMessage):
        content = str(request[0].content)
        auto = content[content.index("> Recalled") :] if "> Recalled" in content else ""
    return shown_evidence(request, auto)


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_agent_middleware_bounds_every_model_request(mode: str) -> None:
    """create_agent with the middleware: each model request stays within the allowance."""
    budgeted = retriever(k=3)
    model = scripted(*tool_turns())
    allowance = Allowance(max_items=5, max_tokens=260, max_blocks=2)
    agent = create_agent(
        model,
        tools=[budgeted.as_tool()],
        middleware=[EvidenceAllowanceMiddleware(allowance, retriever=budgeted)],
        system_prompt="Answer from memory.",
    )
    state = {"messages": [HumanMessage("Where does Alice work, and on what?")]}
    final = agent.invoke(state) if mode == "sync" else await agent.ainvoke(state)

    assert len(model.received) == 4
    for request in model.received:
        shown = request_evidence(request, automatic=True)
        assert sum(count_tokens(t, TOK) for t in shown) <= allowance.max_tokens
        assert sum(items_in(t) for t in shown) <= allowance.max_items
        assert pairs_intact(request)
    last = model.received[-1]
    assert any(str(m.content).startswith(MARKER) for m in last)  # the searches did not all fit
    assert len(shown_evidence(last)) <= allowance.max_blocks
    # The agent's state keeps every search result as the tool returned it.
    results = [m for m in final["messages"] if isinstance(m, ToolMessage)]
    assert len(results) == 4 and all(verify(m.content, m.artifact) for m in results)
    assert final["messages"][-1].content == "Alice works on payments at Initech."


def test_agent_middleware_without_automatic_recall_only_marks() -> None:
    """Without a retriever the middleware leaves the system prompt alone and only bounds results."""
    model = scripted(*tool_turns())
    agent = create_agent(
        model,
        tools=[retriever(k=3).as_tool()],
        middleware=[EvidenceAllowanceMiddleware(Allowance(max_blocks=1))],
        system_prompt="Answer from memory.",
    )
    agent.invoke({"messages": [HumanMessage("Where does Alice work?")]})
    for request in model.received:
        assert request[0].content == "Answer from memory."
        assert len(shown_evidence(request)) <= 1


# -- the invariant -----------------------------------------------------------------------------

_SEARCHES: dict[str, ToolMessage] = {}
_RETRIEVER = retriever(k=4)
_TOOL = _RETRIEVER.as_tool()


def searched(query: str, call_id: str) -> ToolMessage:
    """A real search result (cached per query: BM25 is deterministic) under ``call_id``."""
    if query not in _SEARCHES:
        _SEARCHES[query] = call(_TOOL, query, "cached")
    return _SEARCHES[query].model_copy(update={"tool_call_id": call_id})


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    turns=st.lists(
        st.lists(
            st.tuples(st.sampled_from(QUERIES), st.sampled_from(["ok", "ok", "ok", "legacy", "tamper"])),
            min_size=1,
            max_size=3,
        ),
        max_size=6,
    ),
    max_items=st.integers(1, 15),
    max_tokens=st.integers(1, 500),
    max_blocks=st.integers(1, 5),
)
def test_evidence_a_model_request_shows_never_exceeds_the_allowance(
    turns: list[list[tuple[str, str]]], max_items: int, max_tokens: int, max_blocks: int
) -> None:
    """Property: searches shown plus automatic recall stay within max_items and max_tokens."""
    allowance = Allowance(max_items=max_items, max_tokens=max_tokens, max_blocks=max_blocks)
    messages: list[BaseMessage] = [HumanMessage("What do we know about Alice and payments?")]
    for t, turn in enumerate(turns):
        ids = [(query, f"t{t}-{n}") for n, (query, _) in enumerate(turn)]
        messages.append(asks(*ids))
        for (query, kind), (_, call_id) in zip(turn, ids, strict=True):
            result = searched(query, call_id)
            if kind == "legacy":
                result = result.model_copy(update={"artifact": None})
            elif kind == "tamper":
                result = result.model_copy(update={"content": str(result.content) + " (edited)"})
            messages.append(result)
    view = assemble_messages(messages, allowance, retriever=_RETRIEVER)
    automatic = view.automatic.to_markdown() if view.automatic is not None else ""
    shown = shown_evidence(view.messages, automatic)
    assert sum(count_tokens(t, TOK) for t in shown) <= allowance.max_tokens
    assert sum(items_in(t) for t in shown) <= allowance.max_items
    assert pairs_intact(view.messages) and len(view.messages) == len(messages) + bool(automatic)


# -- fail closed: foreign, failed, other-context and keyed results ------------------------------

BIG = "word " * 2400  # 2,401 tokens in cl100k_base


def foreign_tool(name: str = "web_fetch") -> BaseTool:
    """Not a recall tool: it returns 2,401 tokens with a receipt marking them a free correction."""

    def fetch(query: str) -> tuple[str, Receipt]:
        return BIG, issue_receipt(BIG, items=1, tokenizer=TOK, correction=True)

    return StructuredTool.from_function(
        func=fetch, name=name, description="Fetch a page.", response_format="content_and_artifact"
    )


@pytest.mark.parametrize("keyed", [False, True], ids=["unkeyed", "keyed"])
def test_another_tool_cannot_pass_a_big_correction_through(
    keyed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A non-memory tool's 2,401-token "correction" receipt is withheld against an allowance of 200."""
    if keyed:  # the foreign tool runs in the same process, so it can mint keyed receipts too
        monkeypatch.setenv(KEY_ENV, "k" * 32)
    fetched = call(foreign_tool(), "anything", "f1")
    assert fetched.artifact.tokens == 2401 and verify(fetched.content, fetched.artifact)  # type: ignore[union-attr]
    messages = [HumanMessage("hi"), asks(("anything", "f1"), name="web_fetch"), fetched]
    view = assemble_messages(messages, Allowance(max_tokens=200))
    assert view.assembly.reason(0) is WithheldReason.FOREIGN
    assert view.assembly.corrections == () and view.assembly.tokens_used == 0
    assert str(view.messages[2].content).startswith(MARKER) and "not from a memory search" in str(
        view.messages[2].content
    )
    assert BIG not in [m.content for m in view.messages]


def test_a_result_under_another_name_than_its_call_is_foreign() -> None:
    """A result named like the recall tool answering another tool's call (or vice versa) is withheld."""
    real = call(retriever().as_tool(), "Alice", "c1")
    renamed = real.model_copy(update={"name": "weather"})
    messages = [HumanMessage("hi"), asks(("Alice", "c1")), renamed]
    assert assemble_messages(messages).assembly.reason(0) is WithheldReason.FOREIGN
    posing = [HumanMessage("hi"), asks(("Alice", "c1"), name="weather"), real]
    assert assemble_messages(posing).assembly.reason(0) is WithheldReason.FOREIGN


def test_only_the_recall_tools_named_count() -> None:
    """A recall tool under a custom name counts when named in tool_names (by name or the tool)."""
    tool = retriever().as_tool(name="notes")
    messages = [HumanMessage("hi"), asks(("Alice", "c1"), name="notes"), call(tool, "Alice", "c1")]
    assert assemble_messages(messages).assembly.reason(0) is WithheldReason.FOREIGN
    assert assemble_messages(messages, tool_names=["notes"]).assembly.kept == (0,)
    assert assemble_messages(messages, tool_names=[tool]).assembly.kept == (0,)


def test_a_failed_search_is_replaced_by_the_marker_and_not_counted() -> None:
    """A recall result with status="error" is never shown and never counted, receipt or not."""
    good = call(retriever().as_tool(), "Alice", "c2")
    failed = ToolMessage(
        content="Error: upstream timed out; partial: Alice's salary is 90k",
        tool_call_id="c1",
        name="memory_search",
        status="error",
        artifact=good.artifact,
    )
    messages = [HumanMessage("hi"), asks(("Alice", "c1"), ("Alice", "c2")), failed, good]
    view = assemble_messages(messages)
    assert view.assembly.reason(0) is WithheldReason.FAILED and view.assembly.kept == (1,)
    assert "salary" not in str(view.messages[2].content) and "the search failed" in str(
        view.messages[2].content
    )
    assert view.messages[2].status == "error" and view.assembly.items_used == good.artifact.items  # type: ignore[union-attr]


def test_tool_binds_receipts_to_the_context_from_the_call() -> None:
    """context= as a function of the RunnableConfig binds each receipt to its thread's session."""
    tool = retriever().as_tool(context=lambda config: {"session": config["configurable"]["thread_id"]})
    message = tool.invoke(
        ToolCall(name="memory_search", args={"query": "Alice"}, id="c1", type="tool_call"),
        {"configurable": {"thread_id": "t-1"}},
    )
    assert message.artifact.session == "t-1"
    messages = [HumanMessage("hi"), asks(("Alice", "c1")), message]
    assert assemble_messages(messages, context={"session": "t-1"}).assembly.kept == (0,)
    other = assemble_messages(messages, context={"session": "t-2"})
    assert other.assembly.reason(0) is WithheldReason.OTHER_CONTEXT
    assert "another owner, session or run" in str(other.messages[2].content)


def test_keyed_tool_and_assembly() -> None:
    """A tool with key= issues keyed receipts: kept with that key, withheld with another or none."""
    tool = retriever().as_tool(key="k" * 32)
    messages = conversation(tool, "Alice")
    assert messages[2].artifact.keyed  # type: ignore[attr-defined]
    assert assemble_messages(messages, key="k" * 32).assembly.kept == (0,)
    for key in ("o" * 32, None):
        assert assemble_messages(messages, key=key).assembly.reason(0) is WithheldReason.RECEIPT_MISMATCH


def test_memory_tool_survives_lone_surrogates() -> None:
    """A document whose text and id hold a lone surrogate gives a block and a verifying receipt."""
    bad = SURROGATE
    docs = RunnableLambda(lambda q: [Document(page_content=f"Alice {bad} works at Initech", id=f"doc-{bad}")])
    tool = memory_search_tool(BudgetedRetriever(retriever=docs))
    message = call(tool, f"Alice {bad}", "c1")
    # The packer repairs the text at its boundary: the model sees U+FFFD, and so does the receipt.
    assert bad not in str(message.content) and "\ufffd" in str(message.content)
    assert verify(message.content, message.artifact)  # type: ignore[arg-type]
    assert assemble_messages([HumanMessage("hi"), asks(("Alice", "c1")), message]).assembly.kept == (0,)


CHECKPOINT = """
import sys
from langchain_community.retrievers import BM25Retriever
from langchain_core.messages import AIMessage, HumanMessage, ToolCall
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from recallpack.adapters.langchain import BudgetedRetriever
from recallpack.adapters.langchain.memory import assemble_messages

serde, path = JsonPlusSerializer(), sys.argv[2]
if sys.argv[1] == "issue":
    tool = BudgetedRetriever(retriever=BM25Retriever.from_texts(["Alice works at Initech."])).as_tool()
    call = ToolCall(name="memory_search", args={"query": "Alice"}, id="c1", type="tool_call")
    messages = [HumanMessage("hi"), AIMessage("", tool_calls=[call]), tool.invoke(call)]
    kind, data = serde.dumps_typed(messages)
    open(path, "wb").write(data)
else:
    messages = serde.loads_typed(("msgpack", open(path, "rb").read()))
    view = assemble_messages(messages)
    print(view.assembly.kept, [w.reason.value for w in view.assembly.withheld])
"""


def test_tool_receipts_survive_a_checkpoint_in_a_new_process_with_the_same_key(tmp_path: Path) -> None:
    """A checkpointed search result is kept by a new process with the same key, not another key."""

    def run(key: str, *args: str) -> str:
        env = {**os.environ, KEY_ENV: key, "PYTHONPATH": str(ROOT)}
        code = ["-W", "ignore::DeprecationWarning", "-c", CHECKPOINT, *args]
        return subprocess.run(
            [sys.executable, *code], env=env, capture_output=True, text=True, check=True
        ).stdout

    saved = str(tmp_path / "checkpoint.bin")
    run("k" * 32, "issue", saved)
    assert run("k" * 32, "check", saved).strip() == "(0,) []"
    assert run("o" * 32, "check", saved).strip() == "() ['receipt_mismatch']"


def test_agent_middleware_withholds_results_of_another_session() -> None:
    """create_agent: receipts for another session never reach the model; this session's do."""
    model = scripted(asks(("Alice", "a1")), AIMessage("done"))
    tool = retriever().as_tool(context={"session": "s-2"})
    session = EvidenceAllowanceMiddleware(context=lambda request: {"session": "s-1"})
    agent = create_agent(model, tools=[tool], middleware=[session], system_prompt="Answer.")
    agent.invoke({"messages": [HumanMessage("Where does Alice work?")]})
    last = model.received[-1]
    assert isinstance(last[-1], ToolMessage) and str(last[-1].content).startswith(MARKER)
    same = scripted(asks(("Alice", "a1")), AIMessage("done"))
    mine = EvidenceAllowanceMiddleware(context=lambda request: {"session": "s-2"})
    create_agent(same, tools=[tool], middleware=[mine]).invoke({"messages": [HumanMessage("Alice?")]})
    assert "Initech" in str(same.received[-1][-1].content)


# -- the markers are bounded too -------------------------------------------------------------------

KINDS = ["kept-or-over", "no_receipt", "failed", "foreign", "edited"]


def many_results(n: int, kinds: Sequence[str]) -> list[BaseMessage]:
    """A human turn, then ``n`` search calls and results, each of one of ``kinds`` in turn: a
    receipted block (kept while it fits), no receipt, a failed search, another tool's result
    presenting a receipt, a block edited after its receipt."""
    from recallpack.allowance import issue_receipt as receipt_of

    messages: list[BaseMessage] = [HumanMessage("What do we know about Alice and payments?")]
    for i in range(n):
        kind = kinds[i % len(kinds)]
        text = f"- **Derived memory**\n\n    Note {i}: {NOTES[i % len(NOTES)]}\n"
        receipt: Any = receipt_of(text, items=1, tokenizer=TOK)
        name = "other_tool" if kind == "foreign" else "memory_search"
        if kind == "no_receipt":
            receipt = None
        elif kind == "edited":
            text = text.replace("Note", "NOTE")
        messages += [
            asks((f"query {i}", f"c{i}"), name=name),
            ToolMessage(content=text, tool_call_id=f"c{i}", name=name, artifact=receipt,
                        status="error" if kind == "failed" else "success"),
        ]
    return messages


def recall_shown(result: Any) -> int:
    """Tokens of what the request shows of recall: the recall tools' results as they now read
    (blocks and markers) and the automatic block."""
    shown = sum(count_tokens(str(result.messages[p].content), TOK) for p in result.positions)
    return shown + (result.automatic.report.tokens_used if result.automatic else 0)


def longest_marker() -> int:
    from recallpack.adapters.langchain.memory import DEFAULT_MARKER

    return max(count_tokens(DEFAULT_MARKER.format(reason=r.text, code=r.value), TOK) for r in WithheldReason)


def test_two_hundred_withheld_results_add_at_most_one_marker_over_the_allowance() -> None:
    """200 search results under a 400-token allowance: what recall shows, markers included, stays
    within 400 plus one marker (it was over 3,000 tokens of markers)."""
    result = assemble_messages(many_results(200, ["kept-or-over"]), Allowance(max_tokens=400, max_items=200))
    assert len(result.assembly.withheld) > 150
    assert recall_shown(result) <= 400 + longest_marker()
    newest = max(w.index for w in result.assembly.withheld)
    assert str(result.messages[result.positions[newest]].content).startswith(MARKER)
    assert pairs_intact(result.messages) and len(result.messages) == 401


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(min_value=0, max_value=120),
    budget=st.integers(min_value=1, max_value=700),
    kinds=st.lists(st.sampled_from(KINDS), min_size=1, max_size=5),
    automatic=st.booleans(),
    marker=st.sampled_from([None, "[omitted: {code}]", "[recallpack: {reason}; this search result is not part of this request and must not be used]"]),
)
def test_recall_and_its_markers_stay_within_the_allowance(
    n: int, budget: int, kinds: list[str], automatic: bool, marker: str | None
) -> None:
    """Whatever was withheld and why, blocks, markers and automatic recall together take at most
    the allowance plus one marker; every call keeps its result, the newest withheld its marker."""
    from recallpack.adapters.langchain.memory import DEFAULT_MARKER

    fmt = DEFAULT_MARKER if marker is None else marker
    allowance = Allowance(max_tokens=budget, max_items=1_000, max_blocks=1_000)
    result = assemble_messages(
        many_results(n, kinds), allowance, retriever=retriever() if automatic else None,
        marker=fmt,
    )  # fmt: skip
    one_marker = max(count_tokens(fmt.format(reason=r.text, code=r.value), TOK) for r in WithheldReason)
    assert recall_shown(result) <= budget + one_marker
    assert pairs_intact(result.messages) and len(result.messages) == 1 + 2 * n + (1 if result.automatic else 0)
    withheld = {w.index: w.reason for w in result.assembly.withheld}
    for index in withheld:
        shown = str(result.messages[result.positions[index]].content)
        assert shown in ("", fmt.format(reason=withheld[index].text, code=withheld[index].value))
    if withheld:
        newest = max(withheld)
        assert str(result.messages[result.positions[newest]].content) != ""
