"""recallpack in LlamaIndex's ``Memory``: a memory block whose evidence fits its budget exactly.

:class:`EvidenceMemoryBlock` is a ``BaseMemoryBlock[str]`` for
``Memory.from_defaults(memory_blocks=[...], token_limit=...)``, and so for any agent that takes a
``memory=`` (``FunctionAgent``, ``ReActAgent``). On each ``aget`` it recalls from any LlamaIndex
retriever with the latest user message as the query and returns the rendered evidence block,
``max_tokens`` or fewer counted exactly. When the memory is over its ``token_limit``, LlamaIndex
asks the block to ``atruncate(content, tokens_to_truncate)``: the block packs the same recalled
nodes again into exactly ``tokens(content) - tokens_to_truncate`` tokens or fewer, so the memory
lands within its limit with the most evidence that fits, where LlamaIndex's own blocks are
dropped whole or never truncated.

>>> from llama_index.core.memory import Memory
>>> from llama_index.core.retrievers import BaseRetriever
>>> from llama_index.core.schema import NodeWithScore, TextNode
>>> class Notes(BaseRetriever):
...     def _retrieve(self, query_bundle):
...         return [NodeWithScore(node=TextNode(text="The user's cat is called Miso."), score=1.0)]
>>> block = EvidenceMemoryBlock(name="notes", retriever=Notes(), max_tokens=128)
>>> memory = Memory.from_defaults(memory_blocks=[block], token_limit=2000)
>>> "Miso" in memory.get(input="What is my cat called?")[0].content
True
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from recallpack.adapters.shared.extras import require

require("llama_index.core", extra="llamaindex", feature=__name__)

import llama_index.core.instrumentation as instrument
from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.bridge.pydantic import Field, PrivateAttr, field_validator, model_validator
from llama_index.core.memory.memory import BaseMemoryBlock
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle

from recallpack.adapters.llamaindex.nodes import MALFORMED, apack_nodes, malformed
from recallpack.adapters.llamaindex.settings import metadata_mode_of, settings_tokenizer, source_of
from recallpack.adapters.shared.components import PackerComponent
from recallpack.adapters.shared.depth import deepened
from recallpack.packing.errors import ConfigError
from recallpack.packing.pipeline import Pipeline
from recallpack.packing.results.result import RecallResult
from recallpack.packing.sources import depths
from recallpack.packing.validation import check_max_items

__all__ = ["EvidenceMemoryBlock"]

# Re-exported without __all__, hence the ignore; this is how LlamaIndex's own modules get it.
dispatcher = instrument.get_dispatcher(__name__)  # type: ignore[attr-defined]

#: How many recent blocks a block remembers the recall of, to repack one that LlamaIndex asks it
#: to truncate (Memory asks right after the aget that made it; a few cover concurrent sessions).
_REMEMBERED = 16


@dataclass(frozen=True)
class _Recalled:
    """What one recall packed: its query, what the retriever returned, how deep it was asked."""

    query: str
    outputs: Sequence[object]
    asked: Sequence[int | None]


def latest_user_text(messages: Sequence[ChatMessage] | None) -> str | None:
    """The text of the latest user message that has any (the query a recall answers), or None."""
    for message in reversed(messages or ()):
        if message.role == MessageRole.USER and (text := (message.content or "").strip()):
            return text
    return None


class EvidenceMemoryBlock(PackerComponent, BaseMemoryBlock[str]):
    """A LlamaIndex memory block of evidence recalled from ``retriever``, within ``max_tokens``.

    ``aget`` recalls with the latest user message as the query and returns the rendered
    evidence block (``""`` when there is no user message or nothing was kept): its tokens, as
    the block's tokenizer counts them, are ``max_tokens`` or fewer. ``atruncate(content, n)``
    packs the nodes of that recall again into ``tokens(content) - n`` tokens or fewer (no new
    retrieval); it returns None only when that is below :attr:`least_tokens`, where no evidence
    fits, or for content this block did not recall. Each packing emits
    :class:`~recallpack.adapters.llamaindex.RecallPackedEvent` (``component="EvidenceMemoryBlock"``).

    Takes every Packer setting by name (``policy``, ``tokenizer``, ``reader``, ...), as the other
    LlamaIndex components do; ``fetch_k`` is how many nodes to ask the retriever for, and
    ``metadata_mode`` which view of a node is its text. Counting is exact only when the block
    counts as the Memory does: give both the same tokenizer (LlamaIndex's default, cl100k_base,
    is the block's too, and ``Settings.tokenizer`` reaches both). ``priority`` is 1 or more: a
    priority-0 block is never truncated by LlamaIndex, so it could push the memory past its limit.
    The block reads only: it keeps nothing of what the memory puts.
    """

    retriever: Any = Field(description="Any LlamaIndex retriever: what the block recalls from.")
    priority: int = Field(
        default=1,
        description="Truncation order in Memory (lowest first); 1 or more, so Memory can truncate it.",
    )
    accept_short_term_memory: bool = Field(
        default=False, description="The block reads from its retriever and stores nothing put to it."
    )
    fetch_k: int | None = Field(default=None, description="How many nodes to ask the retriever for.")
    metadata_mode: MetadataMode = Field(
        default=MetadataMode.NONE, description="The view of each node that is its text."
    )

    _pipeline: Pipeline[NodeWithScore] = PrivateAttr()
    _recalled: OrderedDict[str, _Recalled] = PrivateAttr(default_factory=OrderedDict)

    @field_validator("priority")
    @classmethod
    def _truncatable(cls, value: int) -> int:
        if value < 1:
            raise ConfigError(
                f"priority={value} would never be truncated by LlamaIndex's Memory (0 means never), "
                "so the block could push the memory past token_limit; use priority=1 or more",
                field="priority",
            )
        return value

    @field_validator("fetch_k", mode="before")
    @classmethod
    def _fetch_depth(cls, value: object) -> int | None:
        return check_max_items(value, "fetch_k")

    @field_validator("metadata_mode", mode="before")
    @classmethod
    def _mode(cls, value: object) -> MetadataMode:
        return metadata_mode_of(value)

    @model_validator(mode="after")
    def _retriever_pipeline(self) -> EvidenceMemoryBlock:
        source = source_of(self.retriever, self.fetch_k, "retriever")
        self._pipeline = Pipeline([source], items=self._items, fetch_k=self.fetch_k)
        return self

    def _host_settings(self) -> dict[str, Any]:
        # The tokenizer a user set in LlamaIndex's Settings is the Memory's too: count with it.
        user = settings_tokenizer()
        return {"tokenizer": user} if getattr(self, "tokenizer") is None and user is not None else {}  # noqa: B009

    @classmethod
    def class_name(cls) -> str:
        return "EvidenceMemoryBlock"

    @property
    def least_tokens(self) -> int:
        """The fewest tokens any evidence block of this block's settings fits in: below it,
        :meth:`atruncate` returns None."""
        return self.packer.least_tokens

    def tokens(self, content: str) -> int:
        """``content``'s tokens, counted by the block's tokenizer (as its budget is)."""
        return self.packer.tokenizer_used.count(content)

    # -- recall ------------------------------------------------------------------------------------

    @dispatcher.span
    async def _aget(self, messages: list[ChatMessage] | None = None, **block_kwargs: Any) -> str:
        query = latest_user_text(messages)
        if query is None:
            return ""
        asked = depths(self._pipeline.sources, self.packer.max_tokens, self.packer.max_items, self.fetch_k)
        try:
            outputs = [await deepened(self.retriever, asked[0]).aretrieve(QueryBundle(query))]
        except MALFORMED as exc:
            raise malformed(type(self.retriever).__name__, exc) from exc
        recalled = _Recalled(query, outputs, asked)
        return self._remembered(recalled, await self._packed(recalled, self.packer.max_tokens))

    async def _aput(self, messages: list[ChatMessage]) -> None:
        """Nothing: the block recalls from its retriever, which the memory does not write to."""

    @dispatcher.span
    async def atruncate(self, content: str, tokens_to_truncate: int) -> str | None:
        """``content`` packed again into ``tokens(content) - tokens_to_truncate`` tokens or fewer,
        from the nodes of the recall that rendered it; None when no evidence fits in that (or the
        content is not one this block recalled, so there is nothing to repack)."""
        if not isinstance(content, str) or not content:
            return None
        if tokens_to_truncate <= 0:
            return content
        recalled = self._recalled.get(content)
        if recalled is not None:
            self._recalled.move_to_end(content)  # asked again: the last to forget
        target = self.tokens(content) - tokens_to_truncate
        if recalled is None or target < self.least_tokens:
            return None
        return self._remembered(recalled, await self._packed(recalled, target)) or None

    async def _packed(self, recalled: _Recalled, max_tokens: int) -> RecallResult:
        packer = self.packer.replace(max_tokens=max_tokens)  # the same plan, this budget
        _, result = await apack_nodes(
            self._pipeline, packer, recalled.query, recalled.outputs, self.class_name(),
            self.metadata_mode, recalled.asked,
        )  # fmt: skip
        return result

    def _remembered(self, recalled: _Recalled, result: RecallResult) -> str:
        """The block ``result`` rendered, remembered with what it was packed from (bounded)."""
        content = result.to_markdown()
        if content:
            self._recalled[content] = recalled
            self._recalled.move_to_end(content)
            while len(self._recalled) > _REMEMBERED:
                self._recalled.popitem(last=False)
        return content
