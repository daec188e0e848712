"""recallpack for LlamaIndex: a token budget as a node postprocessor, a retriever, a query engine.

Three ways in, each native to LlamaIndex:

- :class:`BudgetPostprocessor` goes in ``node_postprocessors=[...]`` of any query or chat engine.
  It counts what the LLM is shown (each node in ``metadata_mode``, joined as the response mode
  that shows the most joins them), so the context the synthesizer builds fits ``max_tokens`` in
  every ``response_mode``. Each kept node carries its query's report (:func:`report_of`).
- :class:`BudgetedRetriever` wraps any LlamaIndex retriever (or several, fused by reciprocal rank
  fusion) and packs what it returns; ``recall(query)`` gives the whole
  :class:`~recallpack.RecallResult`. It budgets the rendered Markdown evidence block, exactly as
  the LangChain adapter does, so both hosts give the same bytes for the same upstream items.
- :class:`EvidenceQueryEngine` puts that rendered block itself into the prompt.

All three take every :class:`~recallpack.Packer` setting by name. They hand the core only
Candidates, and never mutate the caller's nodes: kept nodes are copies carrying the five public
evidence fields in metadata hidden from the LLM and embedding views. When the user set
``Settings.tokenizer``, it is what counts, unless ``tokenizer=`` says otherwise.

>>> from llama_index.core.schema import NodeWithScore, TextNode
>>> nodes = [NodeWithScore(node=TextNode(text="Paris is the capital of France."), score=0.9)]
>>> kept = BudgetPostprocessor(max_tokens=64).postprocess_nodes(nodes)
>>> kept[0].node.metadata["evidence_label"], kept[0].score
('Source excerpt', 0.9)
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from recallpack.adapters._extras import require

require("llama_index.core", extra="llamaindex", feature=__name__)

import llama_index.core.instrumentation as instrument
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.response.schema import Response
from llama_index.core.bridge.pydantic import Field, PrivateAttr, field_validator
from llama_index.core.callbacks import CallbackManager
from llama_index.core.llms import LLM
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.prompts import BasePromptTemplate
from llama_index.core.prompts.default_prompt_selectors import DEFAULT_TEXT_QA_PROMPT_SEL
from llama_index.core.prompts.mixin import PromptDictType, PromptMixinType
from llama_index.core.query_engine import CustomQueryEngine
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle, QueryType
from llama_index.core.settings import Settings

from recallpack.adapters._common import (
    PackerComponent,
    PackSettings,
    check_query,
    gather_or_cancel,
    item_settings,
    keywords_of,
)
from recallpack.adapters._llamaindex_events import RecallPackedEvent, packed
from recallpack.adapters._llamaindex_nodes import (
    MALFORMED,
    REPORT_KEY,
    EveryModeView,
    callback_manager_of,
    deprecated_response_mode,
    fetch_noted,
    kept_nodes,
    malformed,
    metadata_mode_of,
    node_candidates,
    query_str,
    report_of,
    retriever_with_depth,
    settings_tokenizer,
)
from recallpack.adapters.llamaindex_splitter import TokenWindowNodeParser
from recallpack.packing.candidate import Candidate, LaneKind, coerce_lane
from recallpack.packing.errors import ConfigError
from recallpack.packing.fusion import DEFAULT_RRF_K, check_rrf_k, check_weights, fuse
from recallpack.packing.packer import Packer, PackerSettings
from recallpack.packing.result import RecallResult
from recallpack.packing.translate import candidate_from
from recallpack.packing.validation import check_max_items, refuse_unknown

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

    @field_validator("response_mode", mode="before")
    @classmethod
    def _known_mode(cls, mode: object) -> str | None:
        return deprecated_response_mode(mode, RESPONSE_MODES)

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
        candidates = node_candidates(nodes, self.metadata_mode, self._candidate_maker())
        made = self.packer.recall(candidates, query=query).with_fetch(None, "similarity_top_k")
        result = packed(self.class_name(), query, made)
        self._last_result = result
        return kept_nodes(nodes, result), result

    @dispatcher.span
    async def apack_nodes(
        self, nodes: Sequence[NodeWithScore], query: str | None = None
    ) -> tuple[list[NodeWithScore], RecallResult]:
        """:meth:`pack_nodes` for async engines: an embedding model is never called on the loop."""
        candidates = node_candidates(nodes, self.metadata_mode, self._candidate_maker())
        made = (await self.packer.arecall(candidates, query=query)).with_fetch(None, "similarity_top_k")
        result = packed(self.class_name(), query, made)
        self._last_result = result
        return kept_nodes(nodes, result), result

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        return self.pack_nodes(nodes, query_str(query_bundle))[0]

    async def _apostprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        return (await self.apack_nodes(nodes, query_str(query_bundle)))[0]


# --- BudgetedRetriever -----------------------------------------------------------------------


class _RetrieverSettings(PackSettings):
    """What :class:`BudgetedRetriever` takes by keyword: every setting but ``join``, and these."""

    fetch_k: int | None = None
    metadata_mode: MetadataMode = MetadataMode.NONE
    callback_manager: CallbackManager | None = None


class BudgetedRetriever(BaseRetriever):
    """Any LlamaIndex retriever, cut to a token budget instead of a top-k.

    ``retrieve`` / ``aretrieve`` return copies of the kept nodes in rank order with their scores
    and the evidence fields in hidden metadata; ``recall`` / ``arecall`` return the
    :class:`~recallpack.RecallResult` of the same packing, whose ``to_markdown()`` block fits
    ``max_tokens``. Each node's text is read in ``metadata_mode`` (``NONE`` by default: the
    node's own text, which is what a LangChain Document's page_content holds, so both adapters
    give the same bytes). Takes every Packer setting by name.

    ``fetch_k`` is the search depth: how many nodes to ask the upstream for, set on a shallow
    copy of the upstream (its ``similarity_top_k``). :meth:`from_lanes` fuses several retrievers.
    """

    _OWN = tuple(n for n in _RetrieverSettings.model_fields if n not in PackerSettings.model_fields)

    @keywords_of(_RetrieverSettings)
    def __init__(self, retriever: BaseRetriever, /, **settings: Any) -> None:
        owner = type(self).__name__
        refuse_unknown(owner, settings, [*self._OWN, *(n for n in Packer.settings_names() if n != "join")])
        own = {k: settings.pop(k) for k in self._OWN if k in settings}
        self._lane, self.lane_key, self.on_unknown_lane = item_settings(own)
        self.fetch_k = check_max_items(own.get("fetch_k"), "fetch_k")
        self.metadata_mode = metadata_mode_of(own.get("metadata_mode", MetadataMode.NONE))
        if "tokenizer" not in settings and settings_tokenizer() is not None:
            settings["tokenizer"] = settings_tokenizer()
        settings.setdefault("policy", PackSettings.model_fields["policy"].default)  # the adapters' own
        self.packer = Packer(**settings)
        self._upstream = retriever_with_depth(retriever, self.fetch_k, "retriever", self.packer)
        self._lanes: dict[LaneKind, BaseRetriever] | None = None
        self._weights: dict[LaneKind, float] = {}
        self._rrf_k = DEFAULT_RRF_K
        super().__init__(callback_manager=callback_manager_of(own.get("callback_manager")))

    @classmethod
    def from_lanes(
        cls,
        lanes: Mapping[LaneKind | str, BaseRetriever],
        *,
        weights: Mapping[LaneKind | str, float] | None = None,
        rrf_k: int = DEFAULT_RRF_K,
        **settings: Any,
    ) -> BudgetedRetriever:
        """Several retrievers, one per lane kind, fused by reciprocal rank fusion, then packed.

        Each lane's nodes take that lane; a node found by several lanes (the same content) counts
        once, under the lane that ranked it best, with the fused score. ``aretrieve`` calls the
        lanes concurrently.
        """
        # Checked here too, so a misspelled ``weights`` or ``rrf_k`` is named as the closest one.
        refuse_unknown(cls.__name__, settings, [*cls._OWN, *Packer.settings_names(), "weights", "rrf_k"])
        if not isinstance(lanes, Mapping) or not lanes:
            raise ConfigError(
                f"lanes={lanes!r:.60} must be a non-empty mapping of lane name to retriever, "
                "e.g. {'sources': retriever}"
            )
        if "lane" in settings:
            raise ConfigError("from_lanes takes each lane from its key; do not pass lane=")
        given: dict[LaneKind, BaseRetriever] = {}
        for name, retriever in lanes.items():
            kind = coerce_lane(name, field="lane name")
            if kind in given:
                raise ConfigError(f"lane {kind.value!r} is given twice")
            given[kind] = retriever
        built = cls(next(iter(given.values())), **settings)
        resolved = {
            kind: retriever_with_depth(r, built.fetch_k, f"lanes[{kind.value!r}]", built.packer)
            for kind, r in given.items()
        }
        built._lanes = resolved
        built._weights = check_weights(dict(weights or {}), list(resolved))
        built._rrf_k = check_rrf_k(rrf_k)
        return built

    # -- fetching and packing ---------------------------------------------------------------------

    def _make(self, text: str, metadata: Mapping[str, Any], position: int, **kwargs: Any) -> Candidate:
        lane = kwargs.pop("lane", None) or self._lane
        return candidate_from(
            text, metadata, position=position, lane=lane, lane_key=self.lane_key,
            on_unknown_lane=self.on_unknown_lane, **kwargs,
        )

    def _fuse(
        self, ranked: Mapping[LaneKind, Sequence[NodeWithScore]]
    ) -> tuple[list[NodeWithScore], list[LaneKind]]:
        per_lane = {lane: node_candidates(nodes, MetadataMode.NONE, self._make, [lane] * len(nodes))
                    for lane, nodes in ranked.items()}  # fmt: skip
        fused = fuse(per_lane, weights=self._weights, k=self._rrf_k)
        nodes = [NodeWithScore(node=ranked[f.lane][f.index].node, score=f.candidate.score) for f in fused]
        return nodes, [f.lane for f in fused]

    def _searched(self) -> list[BaseRetriever]:
        return [self._upstream] if self._lanes is None else list(self._lanes.values())

    def _fetch(self, bundle: QueryBundle) -> tuple[list[NodeWithScore], list[LaneKind] | None]:
        # The upstream's own errors (a timeout, a refused connection) propagate as they are, as
        # through the LangChain adapter; LlamaIndex's failures on what it returned do not.
        upstream = self._upstream
        try:
            if self._lanes is None:
                return list(upstream.retrieve(bundle)), None
            ranked = {}
            for kind, upstream in self._lanes.items():
                ranked[kind] = list(upstream.retrieve(bundle))
        except MALFORMED as exc:
            raise malformed(type(upstream).__name__, exc) from exc
        return self._fuse(ranked)

    async def _afetch(self, bundle: QueryBundle) -> tuple[list[NodeWithScore], list[LaneKind] | None]:
        try:
            if self._lanes is None:
                return list(await self._upstream.aretrieve(bundle)), None
            results = await gather_or_cancel([r.aretrieve(bundle) for r in self._lanes.values()])
        except MALFORMED as exc:
            where = type(self._upstream).__name__ if self._lanes is None else "of a lane"
            raise malformed(where, exc) from exc
        return self._fuse({lane: list(nodes) for lane, nodes in zip(self._lanes, results)})

    def _finish(
        self, bundle: QueryBundle, nodes: list[NodeWithScore], result: RecallResult
    ) -> tuple[list[NodeWithScore], RecallResult]:
        # Saying how deep the upstreams searched, for a budget left unused.
        result = packed(type(self).__name__, bundle.query_str or None, fetch_noted(result, self._searched()))
        return kept_nodes(nodes, result), result

    def _pack(
        self, bundle: QueryBundle, nodes: list[NodeWithScore], lanes: list[LaneKind] | None
    ) -> tuple[list[NodeWithScore], RecallResult]:
        candidates = node_candidates(nodes, self.metadata_mode, self._make, lanes)
        return self._finish(bundle, nodes, self.packer.recall(candidates, query=bundle.query_str or None))

    async def _apack(
        self, bundle: QueryBundle, nodes: list[NodeWithScore], lanes: list[LaneKind] | None
    ) -> tuple[list[NodeWithScore], RecallResult]:
        candidates = node_candidates(nodes, self.metadata_mode, self._make, lanes)
        query = bundle.query_str or None
        return self._finish(bundle, nodes, await self.packer.arecall(candidates, query=query))

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._pack(query_bundle, *self._fetch(query_bundle))[0]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return (await self._apack(query_bundle, *await self._afetch(query_bundle)))[0]

    def retrieve(self, str_or_query_bundle: QueryType) -> list[NodeWithScore]:
        check_query(str_or_query_bundle, bundle=QueryBundle)
        return super().retrieve(str_or_query_bundle)

    async def aretrieve(self, str_or_query_bundle: QueryType) -> list[NodeWithScore]:
        check_query(str_or_query_bundle, bundle=QueryBundle)
        return await super().aretrieve(str_or_query_bundle)

    @dispatcher.span
    def retrieve_with_result(self, query: QueryType) -> tuple[list[NodeWithScore], RecallResult]:
        """The kept nodes and the RecallResult of one packing (what EvidenceQueryEngine uses)."""
        check_query(query, bundle=QueryBundle)
        bundle = QueryBundle(query) if isinstance(query, str) else query
        return self._pack(bundle, *self._fetch(bundle))

    @dispatcher.span
    async def aretrieve_with_result(self, query: QueryType) -> tuple[list[NodeWithScore], RecallResult]:
        check_query(query, bundle=QueryBundle)
        bundle = QueryBundle(query) if isinstance(query, str) else query
        return await self._apack(bundle, *await self._afetch(bundle))

    def recall(self, query: QueryType) -> RecallResult:
        """Retrieve and pack ``query``: evidence, report and trace; ``to_markdown()`` fits."""
        return self.retrieve_with_result(query)[1]

    async def arecall(self, query: QueryType) -> RecallResult:
        return (await self.aretrieve_with_result(query))[1]

    def as_query_engine(
        self, llm: LLM | None = None, text_qa_template: BasePromptTemplate | None = None
    ) -> EvidenceQueryEngine:
        """A query engine whose prompt holds this retriever's rendered evidence block."""
        return EvidenceQueryEngine(
            retriever=self, llm=llm, text_qa_template=text_qa_template or DEFAULT_TEXT_QA_PROMPT_SEL
        )


# --- EvidenceQueryEngine ---------------------------------------------------------------------


class EvidenceQueryEngine(CustomQueryEngine):
    """Answer from the rendered evidence block, which fills the prompt's ``{context_str}``.

    Unlike a synthesizer, which joins raw node texts, the LLM gets recallpack's Markdown block:
    provenance labels, scopes, "evidence, not instructions", and the block's whole text within
    the retriever's ``max_tokens``. The response's source nodes are the kept nodes, and its
    metadata holds the report under ``"recallpack_report"``.
    """

    retriever: BudgetedRetriever = Field(description="Retrieves and packs the evidence.")
    llm: LLM | None = Field(default=None, description="None uses Settings.llm.")
    text_qa_template: BasePromptTemplate = Field(
        default=DEFAULT_TEXT_QA_PROMPT_SEL,
        description="A prompt with {context_str} (the evidence block) and {query_str}.",
    )

    @classmethod
    def class_name(cls) -> str:
        return "EvidenceQueryEngine"

    def _get_prompts(self) -> PromptDictType:
        return {"text_qa_template": self.text_qa_template}

    def _update_prompts(self, prompts: PromptDictType) -> None:
        if "text_qa_template" in prompts:
            self.text_qa_template = prompts["text_qa_template"]

    def _get_prompt_modules(self) -> PromptMixinType:
        return {}

    def _response(self, answer: str, nodes: list[NodeWithScore], result: RecallResult) -> Response:
        report = result.report.model_dump(mode="json")
        return Response(response=answer, source_nodes=nodes, metadata={"recallpack_report": report})

    def custom_query(self, query_str: str) -> Response:
        nodes, result = self.retriever.retrieve_with_result(query_str)
        llm = self.llm or Settings.llm
        answer = llm.predict(self.text_qa_template, context_str=result.to_markdown(), query_str=query_str)
        return self._response(answer, nodes, result)

    async def acustom_query(self, query_str: str) -> Response:
        nodes, result = await self.retriever.aretrieve_with_result(query_str)
        llm = self.llm or Settings.llm
        answer = await llm.apredict(
            self.text_qa_template, context_str=result.to_markdown(), query_str=query_str
        )
        return self._response(answer, nodes, result)
