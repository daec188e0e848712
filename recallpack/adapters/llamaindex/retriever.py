"""LlamaIndex's :class:`BudgetedRetriever` and :class:`EvidenceQueryEngine` (imported through
:mod:`recallpack.adapters.llamaindex`). Between the fetch and the kept nodes is the core's
:class:`~recallpack.packing.pipeline.Pipeline`; here is what LlamaIndex decides."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, overload

import llama_index.core.instrumentation as instrument
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.response.schema import Response
from llama_index.core.bridge.pydantic import Field, ValidationError
from llama_index.core.llms import LLM
from llama_index.core.prompts import BasePromptTemplate
from llama_index.core.prompts.default_prompt_selectors import DEFAULT_TEXT_QA_PROMPT_SEL
from llama_index.core.prompts.mixin import PromptDictType, PromptMixinType
from llama_index.core.query_engine import CustomQueryEngine
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle, QueryType
from llama_index.core.settings import Settings

from recallpack.adapters.llamaindex.nodes import MALFORMED, PackedNodes, apack_nodes, malformed, pack_nodes
from recallpack.adapters.llamaindex.settings import (
    EngineKeywords,
    EngineOptions,
    LanesSettings,
    RetrieverSettings,
    callback_manager_of,
    metadata_mode_of,
    settings_tokenizer,
    source_of,
)
from recallpack.adapters.shared.components import (
    HOST_DECIDES,
    PackSettings,
    check_query,
    gather_or_cancel,
    host_settings,
    keywords_of,
    only_keywords_of,
    positional_retriever,
)
from recallpack.adapters.shared.depth import deepened
from recallpack.packing.candidate import LaneKind, coerce_lane
from recallpack.packing.errors import ConfigError
from recallpack.packing.fusion import DEFAULT_RRF_K
from recallpack.packing.packer import Packer, PackerSettings
from recallpack.packing.pipeline import ITEM_SETTINGS, ItemSettings, Pipeline
from recallpack.packing.results.result import RecallResult
from recallpack.packing.sources import depths
from recallpack.packing.validation import check_max_items, recallpack_error, refuse_unknown

__all__ = ["BudgetedRetriever", "EvidenceQueryEngine"]

# Re-exported without __all__, hence the ignore; this is how LlamaIndex's own modules get it.
dispatcher = instrument.get_dispatcher(__name__)  # type: ignore[attr-defined]


class BudgetedRetriever(BaseRetriever):
    """Any LlamaIndex retriever, cut to a token budget instead of a top-k.

    ``retrieve`` / ``aretrieve`` return copies of the kept nodes in rank order with their scores
    and the evidence fields in hidden metadata; ``recall`` / ``arecall`` return the
    :class:`~recallpack.RecallResult` of the same packing, whose ``to_markdown()`` block fits
    ``max_tokens``, and take per-call settings by name (``recall(query, max_tokens=200)``).
    Each node's text is read in ``metadata_mode`` (``NONE`` by default: the node's own text,
    which is what a LangChain Document's page_content holds, so both adapters give the same
    bytes). Takes every Packer setting by name.

    ``fetch_k`` is the search depth: how many nodes to ask the upstream for, set on a shallow
    copy of the upstream (its ``similarity_top_k``). :meth:`from_lanes` fuses several retrievers.
    """

    _OWN = tuple(n for n in RetrieverSettings.model_fields if n not in PackerSettings.model_fields)
    _SETTINGS = tuple(n for n in Packer.settings_names() if n not in HOST_DECIDES)

    @keywords_of(RetrieverSettings)
    def __init__(self, retriever: BaseRetriever, /, **settings: Any) -> None:
        refuse_unknown(type(self).__name__, settings, [*self._OWN, *self._SETTINGS])
        own = {k: settings.pop(k) for k in self._OWN if k in settings}
        self._items = ItemSettings.checked({k: own[k] for k in ITEM_SETTINGS if k in own})
        self.lane_key, self.on_unknown_lane = self._items.lane_key, self._items.on_unknown_lane
        self.fetch_k = check_max_items(own.get("fetch_k"), "fetch_k")
        self.metadata_mode = metadata_mode_of(own.get("metadata_mode", MetadataMode.NONE))
        if "tokenizer" not in settings and settings_tokenizer() is not None:
            settings["tokenizer"] = settings_tokenizer()
        settings.setdefault("policy", PackSettings.model_fields["policy"].default)  # the adapters' own
        self.packer = Packer(**host_settings(settings))
        source = source_of(retriever, self.fetch_k, "retriever")
        self._upstreams: list[BaseRetriever] = [retriever]
        self._pipeline: Pipeline[NodeWithScore] = Pipeline([source], items=self._items, fetch_k=self.fetch_k)
        super().__init__(callback_manager=callback_manager_of(own.get("callback_manager")))

    @classmethod
    @keywords_of(LanesSettings)
    def from_lanes(cls, lanes: Mapping[LaneKind | str, BaseRetriever], **settings: Any) -> BudgetedRetriever:
        """Several retrievers, one per lane kind, fused by reciprocal rank fusion, then packed.

        Each lane's nodes take that lane; a node found by several lanes (the same content) counts
        once, under the lane that ranked it best, with the fused score (``weights`` scales a lane's
        votes, ``rrf_k`` is the fusion's constant). ``aretrieve`` calls the lanes concurrently.
        """
        # Checked here too, so a misspelled ``weights`` or ``rrf_k`` is named as the closest one.
        refuse_unknown(cls.__name__, settings, [*cls._OWN, *Packer.settings_names(), "weights", "rrf_k"])
        weights, rrf_k = settings.pop("weights", None), settings.pop("rrf_k", DEFAULT_RRF_K)
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
        sources = [source_of(r, built.fetch_k, f"lanes[{kind.value!r}]", kind) for kind, r in given.items()]
        built._upstreams = list(given.values())
        built._pipeline = Pipeline(
            sources, items=built._items, weights=dict(weights or {}), rrf_k=rrf_k, fetch_k=built.fetch_k
        )
        return built

    # -- settings ---------------------------------------------------------------------------------

    @property
    def max_tokens(self) -> int:
        """The budget of a call that sets none (what ``allowance.recall_remaining`` lowers)."""
        return self.packer.max_tokens

    @property
    def max_items(self) -> int | None:
        """The item cap of a call that sets none."""
        return self.packer.max_items

    def _per_call(self, overrides: Mapping[str, Any]) -> Packer:
        """The Packer of one call's settings, checked as at construction."""
        refuse_unknown(type(self).__name__, overrides, self._SETTINGS)
        # No overrides: the retriever's own Packer, as replace() would return it.
        return self.packer.replace(**host_settings(overrides)) if overrides else self.packer

    def _call(
        self, query: QueryType, overrides: Mapping[str, Any]
    ) -> tuple[QueryBundle, Packer, list[int | None]]:
        """One call's query, Packer and how deep each upstream is asked to search, its overrides
        validated before any fetch."""
        check_query(query, overrides, bundle=QueryBundle)
        settings = dict(overrides)
        fetch_k = check_max_items(settings.pop("fetch_k", None), "fetch_k")
        bundle = QueryBundle(query) if isinstance(query, str) else query
        packer = self._per_call(settings)
        fetch_k = self.fetch_k if fetch_k is None else fetch_k
        return bundle, packer, depths(self._pipeline.sources, packer.max_tokens, packer.max_items, fetch_k)

    # -- fetching, then packing and mapping back in one call into nodes.py -------------------------

    def _fetch(self, bundle: QueryBundle, asked: list[int | None]) -> list[object]:
        # The upstream's own errors (a timeout, a refused connection) propagate as they are, as
        # through the LangChain adapter; LlamaIndex's failures on what it returned do not.
        fetched: list[object] = []
        for upstream, depth in zip(self._upstreams, asked, strict=True):
            try:
                fetched.append(deepened(upstream, depth).retrieve(bundle))
            except MALFORMED as exc:
                raise malformed(type(upstream).__name__, exc) from exc
        return fetched

    async def _afetch(self, bundle: QueryBundle, asked: list[int | None]) -> list[object]:
        searched = [deepened(r, depth) for r, depth in zip(self._upstreams, asked, strict=True)]
        try:
            return await gather_or_cancel([r.aretrieve(bundle) for r in searched])
        except MALFORMED as exc:
            where = type(self._upstreams[0]).__name__ if len(searched) == 1 else "of a lane"
            raise malformed(where, exc) from exc

    def _packed(self, query: QueryType, overrides: Mapping[str, Any]) -> PackedNodes:
        bundle, packer, asked = self._call(query, overrides)
        outputs = self._fetch(bundle, asked)
        return pack_nodes(self._pipeline, packer, bundle.query_str or None, outputs, type(self).__name__,
                          self.metadata_mode, asked)  # fmt: skip

    async def _apacked(self, query: QueryType, overrides: Mapping[str, Any]) -> PackedNodes:
        bundle, packer, asked = self._call(query, overrides)
        outputs = await self._afetch(bundle, asked)
        return await apack_nodes(self._pipeline, packer, bundle.query_str or None, outputs,
                                 type(self).__name__, self.metadata_mode, asked)  # fmt: skip

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._packed(query_bundle, {})[0]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return (await self._apacked(query_bundle, {}))[0]

    def retrieve(self, str_or_query_bundle: QueryType) -> list[NodeWithScore]:
        check_query(str_or_query_bundle, bundle=QueryBundle)
        return super().retrieve(str_or_query_bundle)

    async def aretrieve(self, str_or_query_bundle: QueryType) -> list[NodeWithScore]:
        check_query(str_or_query_bundle, bundle=QueryBundle)
        return await super().aretrieve(str_or_query_bundle)

    @dispatcher.span
    def retrieve_with_result(self, query: QueryType, **overrides: Any) -> PackedNodes:
        """The kept nodes and the RecallResult of one packing (what EvidenceQueryEngine uses);
        ``overrides`` are this call's settings (``max_tokens``, ``fetch_k``, ...)."""
        return self._packed(query, overrides)

    @dispatcher.span
    async def aretrieve_with_result(self, query: QueryType, **overrides: Any) -> PackedNodes:
        return await self._apacked(query, overrides)

    def recall(self, query: QueryType, **overrides: Any) -> RecallResult:
        """Retrieve and pack ``query``: evidence, report and trace; ``to_markdown()`` fits.
        ``overrides`` change settings for this call only (``max_tokens=200``, ``fetch_k=20``)."""
        return self.retrieve_with_result(query, **overrides)[1]

    async def arecall(self, query: QueryType, **overrides: Any) -> RecallResult:
        """:meth:`recall` for async code: the lanes are searched concurrently."""
        return (await self.aretrieve_with_result(query, **overrides))[1]

    def as_query_engine(
        self, llm: LLM | None = None, text_qa_template: BasePromptTemplate | None = None
    ) -> EvidenceQueryEngine:
        """A query engine whose prompt holds this retriever's rendered evidence block."""
        return EvidenceQueryEngine(
            retriever=self, llm=llm, text_qa_template=text_qa_template or DEFAULT_TEXT_QA_PROMPT_SEL
        )


class EvidenceQueryEngine(CustomQueryEngine):
    """Answer from the rendered evidence block, which fills the prompt's ``{context_str}``.

    Unlike a synthesizer, which joins raw node texts, the LLM gets recallpack's Markdown block:
    provenance labels, scopes, "evidence, not instructions", and the block's whole text within
    the retriever's ``max_tokens``. The response's source nodes are the kept nodes, and its
    metadata holds the report under ``"recallpack_report"``.
    """

    retriever: BudgetedRetriever = Field(description="Retrieves and packs the evidence.", kw_only=False)
    llm: LLM | None = Field(default=None, description="None uses Settings.llm.")
    text_qa_template: BasePromptTemplate = Field(
        default=DEFAULT_TEXT_QA_PROMPT_SEL,
        description="A prompt with {context_str} (the evidence block) and {query_str}.",
    )

    @overload  # the retriever positionally or by keyword; pydantic's mypy plugin then writes no __init__
    @keywords_of(EngineOptions)
    def __init__(self, retriever: BudgetedRetriever, /, **data: Any) -> None: ...
    @overload
    @only_keywords_of(EngineKeywords)
    def __init__(self, **data: Any) -> None: ...
    def __init__(self, retriever: BudgetedRetriever | None = None, /, **data: Any) -> None:
        # Every mistake a recallpack error naming the fix.
        positional_retriever(retriever, data, "retriever")
        refuse_unknown(type(self).__name__, data, type(self).model_fields)
        if not isinstance(given := data.get("retriever"), BudgetedRetriever):
            what = "no retriever" if given is None else f"retriever={type(given).__name__}"
            fix = "e.g. EvidenceQueryEngine(BudgetedRetriever(your_retriever, max_tokens=1024))"
            raise ConfigError(
                f"EvidenceQueryEngine got {what}: it takes a BudgetedRetriever, {fix}", field="retriever"
            )
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise recallpack_error(type(self).__name__, exc, fields=type(self).model_fields) from None

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
