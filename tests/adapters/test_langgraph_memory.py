"""A create_agent agent's memory in a LangGraph store: the search tool and automatic recall read the
run's user, stay within the request's evidence allowance, and never show another user's items."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph.store.base")
pytest.importorskip("langchain.agents")

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.runtime import Runtime
from langgraph.store.memory import InMemoryStore
from pydantic import Field

from recallpack import ConfigError, Reader, count_tokens
from recallpack.adapters.langchain import BudgetedRetriever
from recallpack.adapters.langgraph import StoreRetriever
from recallpack.adapters.langgraph.memory import StoreMemoryMiddleware, store_memory_tool
from recallpack.allowance import Allowance, verify
from recallpack.testing import paragraphs

TOK = "cl100k_base"


@dataclass
class UserContext:
    user_id: str


class Recording(GenericFakeChatModel):
    """A fake chat model that records every list of messages it is sent and can bind tools."""

    received: list[list[BaseMessage]] = Field(default_factory=list)

    def bind_tools(self, tools: Any, **kwargs: Any) -> Recording:  # type: ignore[override]
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.received.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def by_user(runtime: Runtime[UserContext]) -> Reader:
    return Reader(id=runtime.context.user_id)


def store() -> InMemoryStore:
    """Three users' facts and episodes: real paragraphs, each signed by its owner."""
    texts = [text for _, text in paragraphs()]
    memory = InMemoryStore()
    for u, user in enumerate(("alice", "bob", "carol")):
        for i in range(8):
            memory.put(("users", user, "facts"), f"f{i}", {"text": f"{texts[u * 16 + i]} (noted for {user})"})
            memory.put(("users", user, "episodes"), f"e{i}", {"text": f"{texts[u * 16 + 8 + i]} (said by {user})"})
    return memory


def shared_lanes(**settings: Any) -> BudgetedRetriever:
    """Facts and episodes under every user's prefix, scoped by the user in each namespace: another
    user's items are fetched and withheld, so the depth (fetch_k) covers every user's."""
    facts = StoreRetriever(namespace=("users",), scope_from=1)
    return BudgetedRetriever.from_lanes({"facts": facts, "working_memory": facts.model_copy()}, tokenizer=TOK,
                                        fetch_k=60, **settings)  # fmt: skip


def per_user_lanes(**settings: Any) -> BudgetedRetriever:
    """Facts and episodes under the run's own user's namespace ({user_id} from its context)."""
    return BudgetedRetriever.from_lanes(
        {"facts": StoreRetriever(namespace=("users", "{user_id}", "facts"), scope_from=1),
         "working_memory": StoreRetriever(namespace=("users", "{user_id}", "episodes"), scope_from=1)},
        tokenizer=TOK, **settings,
    )  # fmt: skip


def searches(*queries: str) -> Iterator[AIMessage]:
    """The fake model's script: one search per query, then an answer."""
    for i, query in enumerate(queries):
        yield AIMessage("", tool_calls=[{"name": "memory_search", "args": {"query": query}, "id": f"c{i}"}])
    yield AIMessage("done")


def evidence_in(request: list[BaseMessage]) -> list[str]:
    """The evidence blocks one model request shows: automatic recall and each shown tool result."""
    shown = []
    if request and isinstance(request[0], SystemMessage) and "> Recalled" in str(request[0].content):
        content = str(request[0].content)
        shown.append(content[content.index("> Recalled") :])
    shown += [str(m.content) for m in request if isinstance(m, ToolMessage) and "> Recalled" in str(m.content)]
    return shown


@pytest.mark.parametrize("lanes", [shared_lanes, per_user_lanes], ids=["scoped", "per-user"])
@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_each_request_shows_its_users_memory_within_the_allowance(lanes: Any, mode: str) -> None:
    """Every model request's evidence fits the allowance and is the run's user's alone."""
    memory = lanes(max_tokens=400)
    allowance = Allowance(max_tokens=500, max_blocks=2)
    for user in ("alice", "bob", "carol"):
        model = Recording(messages=searches("module functions", "file format", "arguments"))
        agent = create_agent(
            model, tools=[store_memory_tool(memory, reader=by_user, allowance=allowance)],
            middleware=[StoreMemoryMiddleware(memory, allowance, reader=by_user)],
            store=store(), context_schema=UserContext, system_prompt="Answer from memory.",
        )  # fmt: skip
        state = {"messages": [HumanMessage("What do you remember about the module?")]}
        context = UserContext(user)
        final = agent.invoke(state, context=context) if mode == "sync" else await agent.ainvoke(state, context=context)
        assert len(model.received) == 4
        for request in model.received:
            shown = evidence_in(request)
            assert sum(count_tokens(text, TOK) for text in shown) <= allowance.max_tokens
            others = {"alice", "bob", "carol"} - {user}
            assert not any(f"for {o})" in t or f"by {o})" in t or f"/users/{o}/" in t for t in shown for o in others)
        assert evidence_in(model.received[0]), "automatic recall found the user's own memory"
        results = [m for m in final["messages"] if isinstance(m, ToolMessage)]
        assert len(results) == 3 and all(verify(m.content, m.artifact) for m in results)
        assert any(f"/users/{user}/" in m.content for m in results)


def test_without_a_reader_scoped_items_are_withheld_from_the_tool() -> None:
    """Scoped memory searched with no reader shows nothing: it fails closed."""
    memory = per_user_lanes(max_tokens=300)
    model = Recording(messages=searches("module"))
    agent = create_agent(model, tools=[store_memory_tool(memory)], store=store(), context_schema=UserContext)
    final = agent.invoke({"messages": [HumanMessage("hi")]}, context=UserContext("alice"))
    (result,) = [m for m in final["messages"] if isinstance(m, ToolMessage)]
    assert result.content == "No memory matched this query."


def test_a_fixed_reader_is_every_requests_reader() -> None:
    """reader=Reader(...) reads every request, whatever the run's context."""
    memory = shared_lanes(max_tokens=300)
    model = Recording(messages=searches())
    agent = create_agent(model, middleware=[StoreMemoryMiddleware(memory, reader=Reader(id="bob"))], store=store(),
                         context_schema=UserContext)  # fmt: skip
    agent.invoke({"messages": [HumanMessage("module functions")]}, context=UserContext("alice"))
    (shown,) = evidence_in(model.received[0])
    assert "/users/bob/" in shown and "/users/alice/" not in shown


@pytest.mark.parametrize("reader", ["alice", 3])
def test_a_reader_that_is_not_a_reader_is_refused(reader: Any) -> None:
    """reader= must be a Reader or a function of the Runtime, and the function must return a Reader."""
    with pytest.raises(ConfigError, match="must be a Reader") as caught:
        StoreMemoryMiddleware(per_user_lanes(), reader=reader)
    assert caught.value.field == "reader"
    with pytest.raises(ConfigError, match="must be a Reader"):
        store_memory_tool(per_user_lanes(), reader=reader)


def test_a_reader_function_returning_a_name_is_refused() -> None:
    """A reader function returning something else than a Reader fails the request, naming it."""
    model = Recording(messages=searches())
    middleware = StoreMemoryMiddleware(per_user_lanes(), reader=lambda runtime: runtime.context.user_id)
    agent = create_agent(model, middleware=[middleware], store=store(), context_schema=UserContext)
    with pytest.raises(ConfigError, match="reader\\(runtime\\) returned str"):
        agent.invoke({"messages": [HumanMessage("module")]}, context=UserContext("alice"))


def test_the_agent_memory_example_labels_both_memories_per_user() -> None:
    """examples/agent_memory.py: each user's block within budget, both labels, no other user's item."""
    script = Path(__file__).resolve().parents[2] / "examples" / "agent_memory.py"
    out = subprocess.run([sys.executable, str(script), "--max-tokens", "260"], capture_output=True, text=True,
                         check=True, timeout=120).stdout  # fmt: skip
    alice, bob = out.split("== bob asks:")
    assert "/users/alice/facts#" in alice and "/users/bob/" not in alice
    assert "/users/bob/facts#" in bob and "/users/alice/" not in bob
    for block in (alice, bob):
        assert "**Derived memory**" in block and "**Recent session memory**" in block
        used = re.search(r"-- (\d+) of 260 tokens \(the block counts (\d+)\)", block)
        assert used and used.group(1) == used.group(2) and int(used.group(1)) <= 260


def test_the_tool_with_a_fixed_reader_works_outside_a_graph() -> None:
    """store_memory_tool(reader=Reader(...)) searches as that reader, in a graph or not."""
    retriever = BudgetedRetriever(StoreRetriever(store=store(), namespace=("users",), scope_from=1), max_tokens=300,
                                  fetch_k=60, tokenizer=TOK)  # fmt: skip
    text = store_memory_tool(retriever, reader=Reader(id="carol")).invoke({"query": "module"})
    assert "/users/carol/" in text and "/users/alice/" not in text and "/users/bob/" not in text


def test_a_reader_function_outside_a_graph_is_refused() -> None:
    """A reader function needs the run's Runtime: outside a graph the search says so."""
    tool = store_memory_tool(per_user_lanes(), reader=by_user)
    with pytest.raises(ConfigError, match="runs in no graph") as caught:
        tool.invoke({"query": "module"})
    assert caught.value.field == "reader"
