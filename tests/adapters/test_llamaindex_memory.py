"""EvidenceMemoryBlock in LlamaIndex's Memory: exact to its budget, repacked exactly when Memory
asks it to truncate, over a real BM25 retriever on SQuAD and XQuAD paragraphs (English, German,
Chinese); an agent with a fake function-calling LLM sees the evidence."""

from __future__ import annotations

import re
from functools import cache

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.llms.mock import MockFunctionCallingLLMWithChatMemoryOfLastCall
from llama_index.core.memory import Memory, StaticMemoryBlock
from llama_index.core.schema import TextNode
from llama_index.core.utils import get_tokenizer
from llama_index.retrievers.bm25 import BM25Retriever

from recallpack._bench import languages, quality
from recallpack.adapters.llamaindex import BudgetedRetriever
from recallpack.adapters.llamaindex.memory import EvidenceMemoryBlock
from recallpack.packing.errors import ConfigError
from tests.adapters.llamaindex_events import Collect

COUNT = get_tokenizer()  # LlamaIndex's own counter: what Memory counts with


def tokens(text: str) -> int:
    return len(COUNT(text))


@cache
def squad() -> tuple[list[TextNode], list[quality.Question]]:
    articles, questions = quality.load_questions()
    nodes = [TextNode(text=p["text"]) for a in articles[:3] for p in a["paragraphs"]]
    return nodes, [q for q in questions if q.article < 3]


@cache
def xquad(language: str) -> tuple[list[TextNode], list[str]]:
    articles = languages.load()[language][:2]
    nodes = [TextNode(text=p["text"]) for a in articles for p in a["paragraphs"]]
    return nodes, [qa["question"] for a in articles for p in a["paragraphs"] for qa in p["qas"]]


def bm25(nodes: list[TextNode], k: int = 10) -> BM25Retriever:
    return BM25Retriever.from_defaults(nodes=nodes, similarity_top_k=k)


def user(text: str) -> list[ChatMessage]:
    return [ChatMessage(role="assistant", content="Hello."), ChatMessage(role="user", content=text)]


@pytest.mark.parametrize("max_tokens", [64, 200, 700])
async def test_aget_is_the_rendered_block_within_max_tokens_counted_exactly(max_tokens: int) -> None:
    """aget recalls with the latest user message and its block's exact count is max_tokens or fewer."""
    nodes, questions = squad()
    block = EvidenceMemoryBlock(name="evidence", retriever=bm25(nodes), max_tokens=max_tokens)
    for question in questions[:12]:
        content = await block.aget(user(question.text))
        assert content and tokens(content) <= max_tokens
        assert block.tokens(content) == tokens(content)


async def test_the_latest_user_message_is_the_query(handler: Collect) -> None:
    """The block recalls for the latest user message, not an earlier one."""
    nodes, questions = squad()
    block = EvidenceMemoryBlock(name="evidence", retriever=bm25(nodes), max_tokens=400)
    first, last = questions[0], questions[-1]
    messages = [ChatMessage(role="user", content=first.text), ChatMessage(role="assistant", content="..."),
                ChatMessage(role="user", content=last.text)]  # fmt: skip
    await block.aget(messages)
    assert [e.query for e in handler.events] == [last.text]


async def test_no_user_message_recalls_nothing() -> None:
    """Without a user message there is no query, and the block is empty (Memory skips it)."""
    nodes, _ = squad()
    block = EvidenceMemoryBlock(name="evidence", retriever=bm25(nodes), max_tokens=200)
    assert await block.aget([ChatMessage(role="assistant", content="Hi")]) == ""
    assert await block.aget(None) == ""


@pytest.mark.parametrize("language", ["de", "zh"])
async def test_other_languages_fit_exactly_and_truncate_exactly(language: str) -> None:
    """XQuAD German and Chinese paragraphs: the block and its repack both fit, counted exactly."""
    nodes, questions = xquad(language)
    block = EvidenceMemoryBlock(name="evidence", retriever=bm25(nodes), max_tokens=300)
    for question in questions[:6]:
        content = await block.aget(user(question))
        assert 0 < tokens(content) <= 300
        smaller = await block.atruncate(content, tokens(content) // 2)
        assert smaller is not None and tokens(smaller) <= tokens(content) - tokens(content) // 2


@cache
def recalled_block() -> tuple[EvidenceMemoryBlock, str, str]:
    """One block and one recall of it, shared by the hypothesis examples (no refetch per example)."""
    import asyncio

    nodes, questions = squad()
    block = EvidenceMemoryBlock(name="evidence", retriever=bm25(nodes), max_tokens=900)
    query = questions[3].text
    return block, query, asyncio.run(block.aget(user(query)))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(min_value=1, max_value=1000))
def test_atruncate_gives_back_exactly_what_is_asked_or_more(cut: int) -> None:
    """atruncate(content, n) is tokens(content) - n or fewer, and None only when no evidence fits."""
    import asyncio

    block, query, content = recalled_block()
    smaller = asyncio.run(block.atruncate(content, cut))
    target = tokens(content) - cut
    if smaller is not None:
        assert smaller and tokens(smaller) <= target
    else:  # dropped whole only where no smaller block holds any evidence at all
        same = BudgetedRetriever(block.retriever, max_tokens=900)
        assert target < block.least_tokens or not same.recall(query, max_tokens=target).to_markdown()


async def test_atruncate_of_nothing_to_cut_is_the_content_and_of_unknown_content_none() -> None:
    """A cut of 0 keeps the content; content this block never recalled cannot be repacked."""
    block, _, content = recalled_block()
    assert await block.atruncate(content, 0) == content
    assert await block.atruncate("some text no recall rendered", 3) is None
    assert await block.atruncate([], 3) is None  # type: ignore[arg-type]  # Memory passes [] for an empty block


def memory_block_text(messages: list[ChatMessage], name: str) -> str:
    """The text Memory put between ``<name>`` tags of its memory message ('' if it has none)."""
    system = "\n".join(m.content or "" for m in messages if m.role == "system")
    found = re.search(rf"<{name}>\s*(.*?)\s*</{name}>", system, re.S)
    return found.group(1) if found else ""


def history() -> list[ChatMessage]:
    nodes, _ = squad()
    text = nodes[0].text
    return [ChatMessage(role="user", content=text), ChatMessage(role="assistant", content="Noted.")]


async def memory_tokens(memory: Memory, name: str, question: str) -> tuple[int, str]:
    """What Memory sends, counted as Memory budgets it: the chat history and the block's content."""
    messages = await memory.aget(input=question)
    text = memory_block_text(messages, name)
    chat = sum(tokens(m.content or "") for m in messages if m.role != "system")
    return chat + tokens(text), text


@pytest.mark.parametrize("token_limit", [500, 650, 800, 1200])
async def test_in_memory_the_evidence_block_never_makes_it_exceed_token_limit(token_limit: int) -> None:
    """Memory with the evidence block stays within token_limit, keeping evidence when it can."""
    nodes, questions = squad()
    block = EvidenceMemoryBlock(name="evidence", retriever=bm25(nodes), max_tokens=700)
    memory = Memory.from_defaults(memory_blocks=[block], token_limit=token_limit, chat_history=history())
    used, text = await memory_tokens(memory, "evidence", questions[5].text)
    assert used <= token_limit
    chat = sum(tokens(m.content or "") for m in history())
    if token_limit - chat >= block.least_tokens + 40:  # room for a block: it is kept, smaller
        assert text


@settings(max_examples=25, deadline=None)
@given(room=st.integers(min_value=1, max_value=1200), question=st.integers(min_value=0, max_value=40))
def test_any_token_limit_holds_with_the_block_and_keeps_evidence_where_it_fits(room: int, question: int) -> None:
    """For any token_limit above the chat history, Memory with the block stays within it, counted
    exactly, and the block is dropped only where no evidence fits in what the history leaves."""
    import asyncio

    block, _, _ = recalled_block()
    query = squad()[1][question].text
    chat = sum(tokens(m.content or "") for m in history())
    memory = Memory.from_defaults(memory_blocks=[block], token_limit=chat + room, chat_history=history())
    used, text = asyncio.run(memory_tokens(memory, "evidence", query))
    assert used <= chat + room
    if not text:  # what Memory asked the block to give back left it `room` tokens
        same = BudgetedRetriever(block.retriever, max_tokens=900)
        assert room < block.least_tokens or not same.recall(query, max_tokens=min(room, 900)).to_markdown()


@pytest.mark.parametrize("token_limit", [500, 650])
async def test_llamaindex_own_blocks_exceed_the_limit_or_are_dropped_whole(token_limit: int) -> None:
    """A StaticMemoryBlock of the same evidence: at priority 0 the memory goes past token_limit;
    at priority 1 it is dropped whole, where the evidence block keeps a smaller block."""
    nodes, questions = squad()
    question = questions[5].text
    evidence = EvidenceMemoryBlock(name="evidence", retriever=bm25(nodes), max_tokens=700)
    content = await evidence.aget(user(question))
    never = Memory.from_defaults(memory_blocks=[StaticMemoryBlock(name="static", static_content=content)],
                                 token_limit=token_limit, chat_history=history())  # fmt: skip
    assert (await memory_tokens(never, "static", question))[0] > token_limit
    whole = Memory.from_defaults(memory_blocks=[StaticMemoryBlock(name="static", static_content=content, priority=1)],
                                 token_limit=token_limit, chat_history=history())  # fmt: skip
    assert (await memory_tokens(whole, "static", question))[1] == ""
    ours = Memory.from_defaults(memory_blocks=[evidence], token_limit=token_limit, chat_history=history())
    used, text = await memory_tokens(ours, "evidence", question)
    assert used <= token_limit and text


async def test_each_packing_emits_the_event_named_by_the_block(handler: Collect) -> None:
    """aget and atruncate each emit RecallPackedEvent with the query and the block's name."""
    nodes, questions = squad()
    block = EvidenceMemoryBlock(name="evidence", retriever=bm25(nodes), max_tokens=300)
    content = await block.aget(user(questions[0].text))
    await block.atruncate(content, 100)
    assert [e.component for e in handler.events] == ["EvidenceMemoryBlock"] * 2
    assert {e.query for e in handler.events} == {questions[0].text}
    assert handler.events[1].report.max_tokens == tokens(content) - 100


# LlamaIndex's workflows read every member of the agent, pydantic's deprecated ones too: their warnings.
@pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecatedSince20")
@pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecatedSince211")
async def test_a_function_agent_with_the_block_sees_the_evidence() -> None:
    """A FunctionAgent with a fake function-calling LLM gets the recalled evidence in its prompt."""
    nodes, questions = squad()
    question = questions[0]
    block = EvidenceMemoryBlock(name="evidence", retriever=bm25(nodes), max_tokens=500)
    memory = Memory.from_defaults(memory_blocks=[block], token_limit=1500)
    llm = MockFunctionCallingLLMWithChatMemoryOfLastCall()
    agent = FunctionAgent(tools=[], llm=llm, system_prompt="Answer from the evidence.")
    await agent.run(user_msg=question.text, memory=memory)
    shown = memory_block_text(llm.last_chat_messages or [], "evidence")
    assert shown and tokens(shown) <= 500 and quality.answered(shown, question.answers)


def test_settings_are_checked_where_they_are_given() -> None:
    """priority 0, a retriever that is not one, and a misspelled setting are ConfigErrors naming the field."""
    nodes, _ = squad()
    with pytest.raises(ConfigError, match="priority") as error:
        EvidenceMemoryBlock(name="e", retriever=bm25(nodes), priority=0)
    assert error.value.field == "priority"
    with pytest.raises(ConfigError, match="retriever"):
        EvidenceMemoryBlock(name="e", retriever="not a retriever")
    with pytest.raises(ConfigError, match="max_tokens"):
        EvidenceMemoryBlock(name="e", retriever=bm25(nodes), max_token=100)
    with pytest.raises(ConfigError, match="max_tokens"):
        EvidenceMemoryBlock(name="e", retriever=bm25(nodes), max_tokens=2)
