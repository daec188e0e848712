"""Bad input to the LangChain memory tool, assembly and middleware: recallpack errors naming the field.

``BAD_INPUTS`` is importable, so a suite-wide table can include these rows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("langchain_core")

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolCall
from langchain_core.runnables import RunnableLambda

from recallpack import BudgetError, ConfigError, RecallpackError
from recallpack.adapters.langchain import BudgetedRetriever
from recallpack.adapters.langchain.memory import (
    assemble_messages,
    evidence_allowance,
    memory_search_tool,
)

MESSAGES: list[BaseMessage] = [HumanMessage("hi"), AIMessage("hello")]


def retriever() -> BudgetedRetriever:
    """A real BudgetedRetriever (finding nothing), so only the argument under test is wrong."""
    return BudgetedRetriever(retriever=RunnableLambda(lambda q: []))


def tool(**kwargs: Any) -> Any:
    return memory_search_tool(retriever(), **kwargs)


def search_with(**kwargs: Any) -> Any:
    """Build the tool and run one search: for settings only a call can check."""
    call = ToolCall(name="memory_search", args={"query": "x"}, id="c1", type="tool_call")
    return tool(**kwargs).invoke(call)


def middleware(**kwargs: Any) -> Any:
    from recallpack.adapters.langchain.memory import EvidenceAllowanceMiddleware

    return EvidenceAllowanceMiddleware(**kwargs)


BAD_INPUTS: list[object] = [
    pytest.param(
        lambda: memory_search_tool(object()),
        ConfigError,
        r"retriever=object.*BudgetedRetriever",
        id="tool-retriever",
    ),  # type: ignore[arg-type]
    pytest.param(
        lambda: tool(name=""), ConfigError, r"name='' must be a non-empty str", id="tool-name-empty"
    ),
    pytest.param(lambda: tool(description=5), ConfigError, r"description=5", id="tool-description-int"),
    pytest.param(lambda: tool(allowance=5), BudgetError, r"allowance=5", id="tool-allowance-int"),
    pytest.param(lambda: tool(correction="yes"), ConfigError, r"correction='yes'", id="tool-correction-str"),
    pytest.param(lambda: tool(key=5), ConfigError, r"key=5 must be a str or bytes", id="tool-key-int"),
    pytest.param(lambda: tool(key="short"), ConfigError, r"at least 16", id="tool-key-short"),
    pytest.param(
        lambda: tool(context={"sesion": "s"}), ConfigError, r"did you mean 'session'", id="tool-context-typo"
    ),
    pytest.param(lambda: tool(context=5), ConfigError, r"context=5 must be a mapping", id="tool-context-int"),
    pytest.param(
        lambda: search_with(context=lambda config: {"owner": 5}),
        ConfigError,
        r"context\['owner'\]=5",
        id="tool-context-fn-bad",
    ),
    pytest.param(
        lambda: assemble_messages("hello"), ConfigError, r"list of messages", id="assemble-messages-str"
    ),  # type: ignore[arg-type]
    pytest.param(
        lambda: assemble_messages([HumanMessage("hi"), "x"]),
        ConfigError,
        r"messages\[1\]",
        id="assemble-message-str",
    ),  # type: ignore[list-item]
    pytest.param(
        lambda: assemble_messages(MESSAGES, tool_names=5),
        ConfigError,
        r"tool_names=5",
        id="assemble-tool-names-int",
    ),  # type: ignore[arg-type]
    pytest.param(
        lambda: assemble_messages(MESSAGES, tool_names=[""]),
        ConfigError,
        r"tool_names=\[''\]",
        id="assemble-tool-names-empty",
    ),
    pytest.param(
        lambda: assemble_messages(MESSAGES, marker="{oops}"),
        ConfigError,
        r"marker='\{oops\}'",
        id="assemble-marker-field",
    ),
    pytest.param(
        lambda: assemble_messages(MESSAGES, marker=5), ConfigError, r"marker=5", id="assemble-marker-int"
    ),  # type: ignore[arg-type]
    pytest.param(
        lambda: assemble_messages(MESSAGES, {"max_items": 3}),
        BudgetError,
        r"allowance=",
        id="assemble-allowance-dict",
    ),  # type: ignore[arg-type]
    pytest.param(
        lambda: assemble_messages(MESSAGES, retriever=retriever(), query=5),
        ConfigError,
        r"query=5",
        id="assemble-query-int",
    ),  # type: ignore[arg-type]
    pytest.param(
        lambda: assemble_messages(MESSAGES, retriever=object()),
        ConfigError,
        r"retriever=object",
        id="assemble-retriever",
    ),  # type: ignore[arg-type]
    pytest.param(
        lambda: assemble_messages(MESSAGES, context=lambda _: {}),
        ConfigError,
        r"context= must be a mapping here",
        id="assemble-context-fn",
    ),  # type: ignore[arg-type]
    pytest.param(
        lambda: assemble_messages(MESSAGES, key=b"k"), ConfigError, r"key is 1 bytes", id="assemble-key-short"
    ),
    pytest.param(
        lambda: evidence_allowance(tool_names=None),
        ConfigError,
        r"tool_names=None",
        id="runnable-tool-names-none",
    ),  # type: ignore[arg-type]
    pytest.param(
        lambda: middleware(retriever=5), ConfigError, r"retriever=int", id="middleware-retriever-int"
    ),
    pytest.param(
        lambda: middleware(allowance="all"), BudgetError, r"allowance='all'", id="middleware-allowance-str"
    ),
    pytest.param(
        lambda: middleware(context={"user": "a"}),
        ConfigError,
        r"context key 'user' is unknown",
        id="middleware-context-key",
    ),
]


class LlamaLike:
    """A recaller whose recall takes the query alone (as LlamaIndex's BudgetedRetriever's does)."""

    tokenizer = None

    def recall(self, query: str) -> Any:
        raise AssertionError("never called: the settings are refused first")


# Recall settings are checked where they are given, by each of the four, not at the first call.
RECALL_SETTINGS = [
    (settings, error, match, kind)
    for settings, error, match, kind in (
        ({"max_token": 100}, ConfigError, r"did you mean 'max_tokens'", "typo"),
        ({"max_tokens": -1}, BudgetError, r"max_tokens", "negative-budget"),
        ({"max_tokens": "100"}, BudgetError, r"max_tokens", "str-budget"),
        ({"max_tokens": 100.0}, BudgetError, r"max_tokens", "float-budget"),
        ({"max_items": True}, BudgetError, r"max_items", "bool-cap"),
        ({"k": 0}, BudgetError, r"k=0", "k-zero"),
        ({"fetch_k": "all"}, BudgetError, r"fetch_k", "fetch-k-str"),
        ({"policy": "nope"}, ConfigError, r"policy", "policy"),
        ({"lane_budgets": {"facts": True}}, BudgetError, r"lane_budgets\['facts'\]", "lane-budget-bool"),
        ({"join": "\n".join}, ConfigError, r"join", "host-decides-join"),
        ({"reader": None, "tokenizer": 5}, ConfigError, r"tokenizer", "tokenizer-int"),
    )
]
BUILT_WITH = {
    "tool": lambda **settings: memory_search_tool(retriever(), **settings),
    "runnable": lambda **settings: evidence_allowance(retriever=retriever(), **settings),
    "middleware": lambda **settings: middleware(retriever=retriever(), **settings),
    "assemble": lambda **settings: assemble_messages(MESSAGES, retriever=retriever(), **settings),
}
BAD_INPUTS += [
    pytest.param(lambda build=build, settings=settings: build(**settings), error, match, id=f"{name}-recall-{kind}")
    for name, build in BUILT_WITH.items()
    for settings, error, match, kind in RECALL_SETTINGS
]
BAD_INPUTS += [
    pytest.param(lambda: memory_search_tool(LlamaLike(), max_tokens=100), ConfigError,
                 r"LlamaLike.recall takes no setting 'max_tokens'", id="tool-recaller-takes-no-settings"),
    pytest.param(lambda: evidence_allowance(max_tokens=100), ConfigError, r"without retriever=",
                 id="runnable-settings-without-retriever"),
    pytest.param(lambda: middleware(max_items=3), ConfigError, r"without retriever=",
                 id="middleware-settings-without-retriever"),
    pytest.param(lambda: assemble_messages(MESSAGES, k=3), ConfigError, r"without retriever=",
                 id="assemble-settings-without-retriever"),
]


@pytest.mark.parametrize(("probe", "error", "match"), BAD_INPUTS)
def test_bad_input_raises_a_recallpack_error(
    probe: Callable[[], object], error: type[RecallpackError], match: str
) -> None:
    """Each bad input raises the named recallpack error (never a bare TypeError), naming the field."""
    with pytest.raises(error, match=match) as caught:
        probe()
    assert isinstance(caught.value, RecallpackError)
