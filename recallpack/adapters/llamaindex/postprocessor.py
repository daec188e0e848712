"""recallpack for LlamaIndex: a token budget as a node postprocessor, a retriever, a query engine.

Handed on by :mod:`recallpack.adapters.llamaindex`, the public path, whose docstring introduces them.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

from recallpack.adapters.shared.extras import require

require("llama_index.core", extra="llamaindex", feature=__name__)

import llama_index.core.instrumentation as instrument
from llama_index.core.bridge.pydantic import Field, PrivateAttr, field_validator, model_validator
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle

from recallpack.adapters.llamaindex.events import RecallPackedEvent
from recallpack.adapters.llamaindex.nodes import REPORT_KEY, apack_nodes, pack_nodes, report_of
from recallpack.adapters.llamaindex.retriever import BudgetedRetriever, EvidenceQueryEngine
from recallpack.adapters.llamaindex.settings import settings_tokenizer
from recallpack.adapters.llamaindex.splitter import TokenWindowNodeParser
from recallpack.adapters.llamaindex.views import EveryModeView
from recallpack.adapters.shared.components import PackerComponent
from recallpack.packing.errors import ConfigError
from recallpack.packing.pipeline import Pipeline, Source
from recallpack.packing.results.result import RecallResult

__all__ = [
    "BudgetPostprocessor",
    "BudgetedRetriever",
    "EvidenceQueryEngine",
    "RecallPackedEvent",
    "RESPONSE_MODES",
    "REPORT_KEY",
    "report_of",
    "TokenWindowNodeParser",
]

# Re-exported without __all__, hence the ignore; this is how LlamaIndex's own modules get it.
dispatcher = instrument.get_dispatcher(__name__)  # type: ignore[attr-defined]

#: The response modes whose context BudgetPostprocessor's budget bounds (all of them at once: it
#: cannot know which one its engine runs, see EveryModeView).
RESPONSE_MODES = (
    "compact",
    "refine",
    "tree_summarize",
    "accumulate",
    "compact_accumulate",
    "simple_summarize",
)


def _query_str(query_bundle: QueryBundle | str | None) -> str | None:
    """A postprocessor's query: a str is taken as the query, as LlamaIndex retrievers take one."""
    return query_bundle if isinstance(query_bundle, str) else getattr(query_bundle, "query_str", None)


def _deprecated_response_mode(mode: object, modes: Sequence[str]) -> str | None:
    """``BudgetPostprocessor(response_mode=...)``, checked and warned about: it changes nothing."""
    if mode is None:
        return None
    if str(getattr(mode, "value", mode)) not in modes:
        raise ConfigError(
            f"response_mode={mode!r} is not a response mode; use one of: {', '.join(modes)} "
            "(or leave it out: the budget holds in every mode)"
        )
    warnings.warn(
        "BudgetPostprocessor(response_mode=...) is deprecated and changes nothing: the budget "
        "now holds in every response mode; leave it out",
        DeprecationWarning,
        stacklevel=5,
    )
    return str(getattr(mode, "value", mode))


# --- BudgetPostprocessor ---------------------------------------------------------------------


class BudgetPostprocessor(PackerComponent, BaseNodePostprocessor):
    """Keep the nodes, in rank order, whose content the LLM will see fits ``max_tokens``.

    Each node costs its content in ``metadata_mode`` (the LLM's view by default). A
    postprocessor cannot know its engine's ``response_mode``, so the context is counted as the
    longest of what each mode shows (compact's blank-line join, which tree_summarize and the
    context chat engine share; simple_summarize's quoted one-line form; each node alone, as
    refine and accumulate show them): the budget holds in every mode, with any prompt. Scores
    and order are kept. Nodes without text are dropped with reason ``no_text``. Each kept node
    carries the report of its own packing (:func:`report_of` reads it from a response);
    :meth:`pack_nodes` returns it too. Invalid settings raise at construction.
    """

    metadata_mode: MetadataMode = Field(
        default=MetadataMode.LLM, description="The view of each node that is counted."
    )
    response_mode: str | None = Field(
        default=None,
        description="Deprecated, and ignored: the budget holds in every response mode.",
    )

    _last_result: RecallResult | None = PrivateAttr(default=None)
    _handed: Pipeline[NodeWithScore] = PrivateAttr()

    @field_validator("response_mode", mode="before")
    @classmethod
    def _known_mode(cls, mode: object) -> str | None:
        return _deprecated_response_mode(mode, RESPONSE_MODES)

    @model_validator(mode="after")
    def _handed_pipeline(self) -> BudgetPostprocessor:
        # Built once, as the Packer is. A postprocessor cannot fetch more than it is handed: the
        # engine's similarity_top_k can.
        self._handed = Pipeline([Source()], items=self._items, knob="similarity_top_k")
        return self

    def _host_settings(self) -> dict[str, Any]:
        # A synthesizer shows the LLM the node texts joined, not recallpack's Markdown block, so
        # the budget covers that context, as the mode that shows the most builds it.
        user = settings_tokenizer()
        spec = getattr(self, "tokenizer")  # noqa: B009
        settings: dict[str, Any] = {"join": EveryModeView(spec if spec is not None else user)}
        if spec is None and user is not None:
            settings["tokenizer"] = user
        return settings

    @classmethod
    def class_name(cls) -> str:
        return "BudgetPostprocessor"

    @property
    def last_result(self) -> RecallResult | None:
        """Deprecated: the RecallResult of the most recent call, shared across concurrent
        queries. Use :func:`report_of` on a response, or :meth:`pack_nodes`."""
        warnings.warn(
            "BudgetPostprocessor.last_result is deprecated (concurrent queries overwrite it); use "
            "recallpack.adapters.llamaindex.report_of(response) or pack_nodes()",
            DeprecationWarning,
            stacklevel=2,
        )
        return self._last_result

    @dispatcher.span
    def pack_nodes(
        self, nodes: Sequence[NodeWithScore], query: str | None = None
    ) -> tuple[list[NodeWithScore], RecallResult]:
        """The kept node copies and the RecallResult (report and trace) of this one call."""
        kept, self._last_result = pack_nodes(
            self._handed, self.packer, query, [nodes], self.class_name(), self.metadata_mode
        )
        return kept, self._last_result

    @dispatcher.span
    async def apack_nodes(
        self, nodes: Sequence[NodeWithScore], query: str | None = None
    ) -> tuple[list[NodeWithScore], RecallResult]:
        """:meth:`pack_nodes` for async engines: an embedding model is never called on the loop."""
        kept, self._last_result = await apack_nodes(
            self._handed, self.packer, query, [nodes], self.class_name(), self.metadata_mode
        )
        return kept, self._last_result

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        return self.pack_nodes(nodes, _query_str(query_bundle))[0]

    async def _apostprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        return (await self.apack_nodes(nodes, _query_str(query_bundle)))[0]
