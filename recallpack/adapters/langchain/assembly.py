"""Assembling a LangChain conversation within one evidence allowance: which recall results one
model request shows, the markers in place of the rest, and where automatic recall goes. What
``recallpack.adapters.langchain.memory`` builds its functions, Runnable and middleware on."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.prompt_values import PromptValue
from langchain_core.tools import BaseTool

from recallpack.adapters.shared.components import check_recall_settings
from recallpack.allowance import (
    Allowance,
    Assembly,
    Block,
    ContextSource,
    Recaller,
    ReceiptKey,
    Remaining,
    arecall_remaining,
    as_allowance,
    as_recaller,
    assemble,
    check_receipt_settings,
    context_for,
    looks_like_receipt,
    omission_texts,
    recall_remaining,
)
from recallpack.packing.errors import ConfigError
from recallpack.packing.results.result import RecallResult
from recallpack.packing.tokenizers import get_tokenizer
from recallpack.packing.validation import check_each

__all__ = [
    "AssembledMessages",
    "AssemblyRules",
    "as_messages",
    "evidence_blocks",
    "last_human_text",
    "system_with",
]


@dataclass(frozen=True)
class AssembledMessages:
    """What one model request may show (``messages``: the input's own objects, copies with a
    marker where a block is withheld, automatic recall's block in the system message), and why.
    ``positions[i]`` is the message index of ``assembly``'s block ``i``."""

    messages: list[BaseMessage]
    assembly: Assembly
    positions: tuple[int, ...]
    automatic: RecallResult | None = None
    left: Remaining | None = None  # what the kept blocks and the markers left of the allowance

    @property
    def remaining(self) -> Remaining:
        """What automatic recall may still take (before it ran): the markers are charged too."""
        return self.assembly.remaining if self.left is None else self.left

    def placed(self) -> AssembledMessages:
        """These messages with automatic recall's block placed in them."""
        # The automatic block joins a leading system message, or a new first one (APIs refuse others).
        shown, at = self.messages, self.positions
        text = self.automatic.to_markdown() if self.automatic else ""
        if text:
            lead = shown[0] if shown and isinstance(shown[0], SystemMessage) else None
            shown = [system_with(lead, text), *shown[1 if lead else 0 :]]
            at = at if lead else tuple(p + 1 for p in at)  # a new first message: the blocks move down
        return dataclasses.replace(self, messages=shown, positions=at)


@dataclass(frozen=True)
class AssemblyRules:
    """The settings of an assembly, checked once where they are given, and the assembly itself."""

    allowance: Allowance
    tool_names: frozenset[str]
    marker: str
    key: ReceiptKey | None
    context: ContextSource
    retriever: Recaller | None

    @classmethod
    def make(
        cls, *args: object, per_call: bool = False, overrides: Mapping[str, Any] | None = None
    ) -> AssemblyRules:
        """From (allowance, tool_names, marker, key, context, retriever) as the caller gave them;
        ``overrides``, the recall settings automatic recall will pass, are checked here too."""
        allowance, tool_names, marker, key, context, retriever = args
        if isinstance(tool_names, (str, BaseTool)):  # a lone name would be read as a set of letters
            tool_names = (tool_names,)
        names = frozenset(
            t.name if isinstance(t, BaseTool) else t
            for t in (tool_names if isinstance(tool_names, Collection) else [0])
        )
        if not names or not all(isinstance(n, str) and n for n in names):
            raise ConfigError(f"tool_names={tool_names!r} must name the recall tools (names or the tools)")
        try:
            str.format(marker, reason="", code="")  # type: ignore[arg-type]
        except (TypeError, KeyError, IndexError, ValueError, AttributeError):
            raise ConfigError(
                f"marker={marker!r} must be a str with no fields but {{reason}} and {{code}}"
            ) from None
        context = check_receipt_settings(key, context, per_call=per_call)
        recaller = None if retriever is None else as_recaller(retriever)
        check_recall_settings(recaller, overrides or {})
        return cls(as_allowance(allowance), names, marker, key, context, recaller)  # type: ignore[arg-type]

    def view(self, messages: object, query: object, source: object) -> tuple[AssembledMessages, str]:
        """The assembled messages (no automatic recall yet) and the query for automatic recall."""
        if query is not None and not isinstance(query, str):
            raise ConfigError(f"query={query!r} must be a str (or None for the last human message)")
        listed = as_messages(messages)
        blocks, positions = evidence_blocks(listed, self.tool_names)
        assembly = assemble(blocks, self.allowance, key=self.key, context=context_for(self.context, source))
        count = get_tokenizer(getattr(self.retriever, "tokenizer", None)).count  # as blocks are
        texts, left = omission_texts(assembly, self.marker, count)
        shown = list(listed)  # a new list: the caller's list and messages stay as they were
        for index, text in texts.items():
            # A copy keeping tool_call_id, name, artifact: the pair holds, the receipt travels.
            shown[positions[index]] = listed[positions[index]].model_copy(update={"content": text})
        turn = "" if self.retriever is None else (last_human_text(shown) if query is None else query)
        return AssembledMessages(shown, assembly, tuple(positions), left=left), turn

    def run(
        self, messages: object, overrides: Mapping[str, Any], query: object, source: object
    ) -> AssembledMessages:
        """The assembled messages and automatic recall for the turn (not yet placed in them)."""
        view, turn = self.view(messages, query, source)
        auto = recall_remaining(self.retriever, turn, view.remaining, **overrides) if turn else None
        return dataclasses.replace(view, automatic=auto)

    async def arun(
        self, messages: object, overrides: Mapping[str, Any], query: object, source: object
    ) -> AssembledMessages:
        view, turn = self.view(messages, query, source)
        auto = await arecall_remaining(self.retriever, turn, view.remaining, **overrides) if turn else None
        return dataclasses.replace(view, automatic=auto)


def as_messages(value: object) -> list[BaseMessage]:
    """``value`` (a list of messages, a PromptValue, or a state with ``messages``) as a list."""
    if isinstance(value, PromptValue):
        return list(value.to_messages())
    if isinstance(value, dict) and "messages" in value:
        value = value["messages"]
    if not isinstance(value, Sequence) or isinstance(value, str):
        raise ConfigError(f"expected a list of messages (or a PromptValue), got {type(value).__name__}")
    check_each(value, BaseMessage, lambda i, message: ConfigError(
        f"messages[{i}] is a {type(message).__name__}; expected a LangChain BaseMessage"
    ))
    return list(value)


def evidence_blocks(
    messages: Sequence[BaseMessage], tool_names: frozenset[str]
) -> tuple[list[Block], list[int]]:
    """The recall results among ``messages``, oldest first, with their message positions.

    A result is a recall tool's when the AI tool call it answers (and its own name, when it has
    one) is in ``tool_names``: without a receipt it is legacy, and if it failed it is withheld.
    Another tool's result that presents a receipt, or that answers a recall call under another
    name, is foreign and withheld; any other result is left alone.
    """
    call_names: dict[str, str] = {}
    blocks: list[Block] = []
    positions: list[int] = []
    for index, message in enumerate(messages):
        if isinstance(message, AIMessage):
            call_names.update({str(c["id"]): c["name"] for c in message.tool_calls if c.get("id")})
        if not isinstance(message, ToolMessage):
            continue
        names = {n for n in (call_names.get(message.tool_call_id), message.name) if n}
        receipt = message.artifact if looks_like_receipt(message.artifact) else None
        if names & tool_names or receipt is not None:
            ours = len(names) == 1 and names <= tool_names
            blocks.append(
                Block(message.content, receipt, message.tool_call_id, message.status == "error", not ours)
            )
            positions.append(index)
    return blocks, positions


def last_human_text(messages: Sequence[BaseMessage]) -> str:
    """The text of the last human message: what automatic recall searches for by default."""
    return next((m.text for m in reversed(messages) if isinstance(m, HumanMessage)), "")


def system_with(system: SystemMessage | None, text: str) -> SystemMessage:
    """``system`` (or a new system message) with ``text`` appended: where automatic recall goes."""
    content = "" if system is None else system.content
    if isinstance(content, str):
        joined: Any = f"{content}\n\n{text}" if content else text
    else:
        joined = [*content, {"type": "text", "text": text}]
    return SystemMessage(content=joined) if system is None else system.model_copy(update={"content": joined})
