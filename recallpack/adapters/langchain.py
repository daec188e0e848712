"""LangChain adapter: a budgeted drop-in retriever, evidence for LCEL prompts, a compressor.

Everything here is translation: LangChain ``Document``s become recallpack ``Candidate``s, a
:class:`~recallpack.Packer` packs them, and the kept evidence is mapped back onto copies of the
Documents. Every Packer setting is taken by the same name (``max_tokens``, ``policy``,
``reader``, ...). Needs the ``langchain`` extra (langchain-core 1.x); ``import recallpack``
never imports this module.

>>> from langchain_core.documents import Document
>>> from langchain_core.runnables import RunnableLambda
>>> upstream = RunnableLambda(lambda q: [Document(page_content="Paris is in France.")])
>>> docs = BudgetedRetriever(retriever=upstream, max_tokens=64).invoke("where is Paris?")
>>> docs[0].metadata["evidence_label"]
'Source excerpt'
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from recallpack.adapters._extras import require

require("langchain_core", extra="langchain", feature=__name__)

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
    Callbacks,
)
from langchain_core.documents import BaseDocumentCompressor, Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from langchain_core.runnables.base import RunnableSerializable
from pydantic import BaseModel, Field, PrivateAttr, model_validator

from recallpack.adapters._common import PackerComponent, check_query, gather_or_cancel
from recallpack.adapters._depth import Forward, depth_for, forwarding, own_depth, search_kwargs_for
from recallpack.adapters._langchain_documents import documents_of, kept_documents, listed
from recallpack.adapters._langchain_events import REPORT_EVENT, areport, report, retriever_ls_params
from recallpack.adapters.langchain_splitter import TokenWindowSplitter
from recallpack.packing.candidate import Candidate, LaneKind, coerce_lane
from recallpack.packing.errors import ConfigError, RecallpackWarning
from recallpack.packing.fusion import DEFAULT_RRF_K, check_rrf_k, check_weights, fuse
from recallpack.packing.packer import Packer
from recallpack.packing.result import RecallResult
from recallpack.packing.translate import score_from
from recallpack.packing.validation import check_max_items

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool

__all__ = [
    "REPORT_EVENT",
    "BudgetedRetriever",
    "BudgetCompressor",
    "EvidenceRenderer",
    "render_evidence",
    "TokenWindowSplitter",
]

Upstream = Runnable[str, list[Document]]
#: LangChain's own retriever kwarg (BaseRetriever.invoke reads it and passes it on).
_IGNORED = ("verbose",)
#: A private kwarg through which recall()/arecall() get the RecallResult of their own call.
#: A kwarg, not a context variable: a nested BudgetedRetriever upstream must not see it.
_SINK = "_recallpack_result"


class _LangChainComponent(PackerComponent):
    """Documents in, Candidates to the Packer, copies of the kept Documents out."""

    if TYPE_CHECKING:
        # LangChain's name for max_items, so type checkers accept it as validation does; at run
        # time it is not a field: _k_is_max_items moves it to max_items.
        k: int | None = None

    @classmethod
    def _aliases(cls) -> tuple[str, ...]:
        return ("k",)

    @model_validator(mode="before")
    @classmethod
    def _k_is_max_items(cls, data: Any) -> Any:
        # LangChain's retrievers call the number of results ``k``; recallpack calls it max_items.
        if isinstance(data, dict) and "k" in data:
            data = dict(data)
            data["max_items"] = _k_or_max_items(data.pop("k"), data.get("max_items", "unset"))
        return data

    def _candidates(self, docs: Sequence[Document]) -> list[Candidate]:
        make = self._candidate_maker()
        return [make(doc.page_content, doc.metadata, i, score=score_from(doc.metadata, i))
                for i, doc in enumerate(docs)]  # fmt: skip


def _k_or_max_items(k: object, max_items: object) -> int | None:
    k = check_max_items(k, "k")
    if max_items != "unset" and max_items != k:
        raise ConfigError(f"k={k!r} and max_items={max_items!r} disagree; pass one (k is max_items)")
    return k


def _lane_map(lanes: object) -> dict[Any, Any]:
    if not isinstance(lanes, Mapping):
        raise ConfigError(f"lanes={lanes!r:.60} must be a mapping of lane name to retriever")
    return dict(lanes)


def _upstream_fields(data: dict[str, Any]) -> dict[str, Any]:
    """The upstream fields checked and normalised: a callable wrapped, lanes keyed by LaneKind."""
    data = dict(data)
    check_max_items(data.get("fetch_k"), "fetch_k")
    upstream = data.get("retriever")
    if upstream is not None and not isinstance(upstream, Runnable):
        if not callable(upstream):
            raise ConfigError(
                f"retriever={upstream!r} must be a retriever, a Runnable str -> list[Document], "
                "or a callable doing the same"
            )
        data["retriever"] = RunnableLambda(upstream)
    if data.get("lanes") is not None:
        lanes = _lane_map(data["lanes"])
        data["lanes"] = {coerce_lane(n, field=f"lanes key {n!r}"): r for n, r in lanes.items()}
        data["weights"] = check_weights(data.get("weights"), list(data["lanes"])) or None
    check_rrf_k(data.get("rrf_k", DEFAULT_RRF_K))
    return data


class _Call:
    """One call's Packer and search depths, after its overrides are validated (before any fetch)."""

    __slots__ = ("packer", "fetch_k", "sink", "depths")

    def __init__(self, owner: BudgetedRetriever, kwargs: Mapping[str, Any], query: object = "") -> None:
        check_query(query, kwargs)
        overrides = {k: v for k, v in kwargs.items() if k not in _IGNORED and k != _SINK}
        if "k" in overrides:
            overrides["max_items"] = _k_or_max_items(overrides.pop("k"), overrides.get("max_items", "unset"))
        self.fetch_k = check_max_items(overrides.pop("fetch_k", owner.fetch_k), "fetch_k")
        self.packer: Packer = owner._per_call(overrides)
        self.sink: list[RecallResult] = kwargs.get(_SINK, [])  # recall() reads it; invoke() drops it
        packer = self.packer
        self.depths = {
            lane: depth_for(forward, owner._own[lane], self.fetch_k, packer.max_tokens, packer.max_items)
            for lane, forward in owner._forward.items()
        }

    def noted(self, result: RecallResult) -> RecallResult:
        """``result``, saying how deep the upstreams were asked to search (for a budget left unused)."""
        depths = list(self.depths.values())
        if all(depth is None for depth in depths):
            return result
        total = None if None in depths else sum(d for d in depths if d is not None)
        return result.with_fetch(total, "fetch_k")


class BudgetedRetriever(_LangChainComponent, BaseRetriever):
    """A retriever that returns what fits ``max_tokens`` of the upstream's results, in rank order.

    Wraps any retriever or ``Runnable[str, list[Document]]`` (``retriever=``), or several, one
    per lane (:meth:`from_lanes`). Kept Documents are copies of the upstream's, with
    ``provenance``, ``evidence_label``, ``scopes``, ``resource_uri`` and ``token_count`` added to
    their metadata. Per call, ``invoke`` takes any Packer setting (``max_tokens``, ``k`` or
    ``max_items``, ``reader`` where none is configured, ...) and ``fetch_k``, all validated
    before the upstream is called.

    ``fetch_k`` is the search depth: how many candidates the upstream is asked for, separate
    from how many come back. ``None`` leaves the upstream's own depth alone.
    """

    retriever: Upstream | Callable[[str], Sequence[Document]] | None = Field(default=None, kw_only=False)
    """The upstream (also the first positional argument); exactly one of ``retriever`` and
    ``lanes`` is set. A callable is wrapped as a RunnableLambda."""
    lanes: dict[LaneKind, Upstream] | None = None
    """One upstream per lane, fused by reciprocal rank fusion (see :meth:`from_lanes`)."""
    weights: dict[LaneKind, float] | None = None
    rrf_k: int = DEFAULT_RRF_K
    fetch_k: int | None = None

    _forward: dict[LaneKind | None, Forward] = PrivateAttr(default_factory=dict)
    _own: dict[LaneKind | None, int | None] = PrivateAttr(default_factory=dict)

    if not TYPE_CHECKING:  # type checkers see the fields, ``retriever`` first and positional

        def __init__(self, retriever: Upstream | None = None, /, **data: Any) -> None:
            if retriever is not None:
                if "retriever" in data:
                    raise ConfigError("the upstream is given twice: positionally and as retriever=")
                data["retriever"] = retriever
            super().__init__(**data)

    @model_validator(mode="before")
    @classmethod
    def _coerce_upstreams(cls, data: Any) -> Any:
        return _upstream_fields(data) if isinstance(data, dict) else data

    @model_validator(mode="after")
    def _check_upstreams(self) -> BudgetedRetriever:
        if (self.retriever is None) == (self.lanes is None):
            raise ConfigError(
                "BudgetedRetriever needs exactly one of retriever=... or lanes=... "
                "(use BudgetedRetriever.from_lanes({...}) for several)"
            )
        if self.lanes is not None and not self.lanes:
            raise ConfigError("lanes={} is empty; give at least one lane -> retriever")
        if self.lanes is not None and self._lane is not None:
            raise ConfigError("lane=... and lanes=... conflict: each lane names its own kind")
        if self.lanes is None and self.weights is not None:
            raise ConfigError("weights=... only applies with lanes=... (from_lanes)")
        upstreams = self._upstreams()
        self._forward = {
            lane: (forwarding(up) if isinstance(up, BaseRetriever) else "none")
            for lane, up in upstreams.items()
        }
        self._own = {lane: own_depth(up) for lane, up in upstreams.items()}
        blind = [type(upstreams[lane]).__name__ for lane, f in self._forward.items() if f == "none"]
        if self.fetch_k is not None and blind:
            warnings.warn(
                f"fetch_k={self.fetch_k} cannot be forwarded to {', '.join(blind)}: it takes no k; "
                "it returns its own number of results",
                RecallpackWarning,
                stacklevel=4,
            )
        return self

    @classmethod
    def from_lanes(
        cls,
        lanes: Mapping[LaneKind | str, Upstream],
        *,
        weights: Mapping[LaneKind | str, float] | None = None,
        **kwargs: Any,
    ) -> BudgetedRetriever:
        """One retriever per lane kind (``{"sources": r1, "facts": r2}``), fused, then packed.

        Each lane's retriever is called (concurrently under ``ainvoke``), the ranked lists are
        fused by reciprocal rank fusion (``weights`` scales a lane's votes), and each document
        is tagged with its lane. A document found by two lanes (same text and scope ids) counts
        once, under the lane that ranked it best.
        """
        return cls(lanes=dict(lanes), weights=weights, **kwargs)

    # -- calls ----------------------------------------------------------------------------------

    # The query is positional-only, so invoke("q", query="x") arrives in kwargs and is refused.
    def _get_relevant_documents(  # type: ignore[override]
        self, query: str, /, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        call = _Call(self, kwargs, query)
        outputs = [
            self._upstream(lane, call).invoke(
                query, self._child(run_manager, lane), **self._kwargs(lane, call)
            )
            for lane in self._upstreams()
        ]
        docs, candidates = _ranked(self, outputs)
        result = report(call.noted(call.packer.recall(candidates, query=query)), run_manager.get_child())
        call.sink.append(result)
        return kept_documents(docs, result)

    async def _aget_relevant_documents(  # type: ignore[override]
        self, query: str, /, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        call = _Call(self, kwargs, query)
        outputs = await gather_or_cancel(
            [
                self._upstream(lane, call).ainvoke(
                    query, self._child(run_manager, lane), **self._kwargs(lane, call)
                )
                for lane in self._upstreams()
            ]
        )
        docs, candidates = _ranked(self, outputs)
        packed = call.noted(await call.packer.arecall(candidates, query=query))
        result = await areport(packed, run_manager.get_child())
        call.sink.append(result)
        return kept_documents(docs, result)

    def recall(self, query: str, config: RunnableConfig | None = None, **kwargs: Any) -> RecallResult:
        """The RecallResult (evidence, report, trace) of one call, instead of its Documents."""
        sink: list[RecallResult] = []
        self.invoke(query, config, **kwargs, **{_SINK: sink})
        return sink[0]

    async def arecall(self, query: str, config: RunnableConfig | None = None, **kwargs: Any) -> RecallResult:
        """The RecallResult of one ``ainvoke``."""
        sink: list[RecallResult] = []
        await self.ainvoke(query, config, **kwargs, **{_SINK: sink})
        return sink[0]

    def as_evidence(self, **overrides: Any) -> Runnable[str, str]:
        """A ``Runnable[str, str]``: the query in, the Markdown evidence block out.

        The whole block fits ``max_tokens``. ``overrides`` are per-call settings (as for
        ``invoke``) applied to every call. It drops into a prompt's input map::

            {"context": retriever.as_evidence(), "question": RunnablePassthrough()} | prompt | model
        """
        _Call(self, overrides)  # a bad override fails here, not at the first query

        def evidence(query: str, config: RunnableConfig) -> str:
            return self.recall(query, config, **overrides).to_markdown()

        async def aevidence(query: str, config: RunnableConfig) -> str:
            return (await self.arecall(query, config, **overrides)).to_markdown()

        return RunnableLambda(evidence, afunc=aevidence, name="recallpack_evidence")

    def as_tool(self, name: str = "memory_search", **kwargs: Any) -> BaseTool:  # type: ignore[override]
        """A tool an agent calls to search this retriever's memory (see langchain_memory)."""
        # Imported here: the tool module is optional and builds on this one.
        from recallpack.adapters.langchain_memory import (  # type: ignore[import-not-found,unused-ignore]
            memory_search_tool,
        )

        return memory_search_tool(self, name=name, **kwargs)  # type: ignore[no-any-return,unused-ignore]

    # -- helpers --------------------------------------------------------------------------------

    def _upstreams(self) -> dict[LaneKind | None, Upstream]:
        if self.lanes is not None:
            return {lane: upstream for lane, upstream in self.lanes.items()}
        assert isinstance(self.retriever, Runnable)  # a callable was wrapped by validation
        return {None: self.retriever}

    def _child(self, run_manager: Any, lane: LaneKind | None) -> RunnableConfig:
        return {"callbacks": run_manager.get_child(None if lane is None else f"lane:{lane.value}")}

    def _upstream(self, lane: LaneKind | None, call: _Call) -> Upstream:
        upstream, depth = self._upstreams()[lane], call.depths[lane]
        if depth is not None and self._forward[lane] == "copy":  # a copy: the caller's keeps its k
            assert isinstance(upstream, BaseModel)
            return upstream.model_copy(update={"k": depth})
        return upstream

    def _kwargs(self, lane: LaneKind | None, call: _Call) -> dict[str, Any]:
        depth = call.depths[lane]
        if depth is None or self._forward[lane] != "kwarg":
            return {}
        return search_kwargs_for(self._upstreams()[lane], depth)

    def _source(self, lane: LaneKind | None) -> str:
        where = "upstream" if lane is None else f"lane {lane.value!r}"
        return f"{where} {type(self._upstreams()[lane]).__name__}"

    _get_ls_params = retriever_ls_params  # the upstream's LangSmith parameters, and the budget


def _ranked(
    retriever: BudgetedRetriever, outputs: Sequence[object]
) -> tuple[list[Document], list[Candidate]]:
    """The upstreams' Documents in packing order (fused, for lanes), and their Candidates."""
    lanes = list(retriever._upstreams())
    ranked = [documents_of(out, retriever._source(lane)) for lane, out in zip(lanes, outputs, strict=True)]
    if retriever.lanes is None:
        return ranked[0], retriever._candidates(ranked[0])
    per_lane = {lane: retriever._candidates(d) for lane, d in zip(retriever.lanes, ranked, strict=True)}
    fused = fuse(per_lane, weights=retriever.weights, k=retriever.rrf_k)
    by_lane = dict(zip(retriever.lanes, ranked, strict=True))
    return [by_lane[f.lane][f.index] for f in fused], [f.candidate for f in fused]


class EvidenceRenderer(_LangChainComponent, RunnableSerializable[list[Document], str]):
    """A Runnable from ``list[Document]`` (recallpack's or anyone's) to the evidence block.

    For chains that already have documents. The Documents are packed again, in the order
    given, so the block fits ``max_tokens``; recallpack's own Documents keep their labels (their
    ``provenance`` says which), and Documents already packed to this budget all fit again.
    ``render_evidence`` is the default instance; configure another with
    ``EvidenceRenderer(max_tokens=512, reader=...)``.
    """

    name: str | None = "recallpack_render_evidence"

    def invoke(self, input: list[Document], config: RunnableConfig | None = None, **kwargs: Any) -> str:
        # Per-call settings (from invoke or .bind) are validated, never silently ignored.
        packer = self._per_call(kwargs)
        return self._call_with_config(lambda docs: self._render(docs, packer), input, config)

    async def ainvoke(
        self, input: list[Document], config: RunnableConfig | None = None, **kwargs: Any
    ) -> str:
        # Packing is pure CPU and quick; a thread hop would cost more than it frees.
        packer = self._per_call(kwargs)

        async def arender(docs: list[Document]) -> str:
            return self._render(docs, packer)

        return await self._acall_with_config(arender, input, config)

    def _render(self, docs: list[Document], packer: Packer) -> str:
        docs = documents_of(docs, "render_evidence input")
        # Into this runnable's own run, which _call_with_config made the current one.
        return report(packer.recall(self._candidates(docs)), None).to_markdown()


render_evidence: Runnable[list[Document], str] = EvidenceRenderer()
"""``list[Document]`` -> Markdown evidence block, packed to the default budget."""


class BudgetCompressor(_LangChainComponent, BaseDocumentCompressor):
    """A document compressor that keeps what fits ``max_tokens``, in the order given.

    For ``ContextualCompressionRetriever`` and ``DocumentCompressorPipeline``: put it last, after
    any reranker, since it cuts in the order it receives. Kept Documents are copies with
    recallpack's metadata added, as from :class:`BudgetedRetriever`; the query steers focus cuts.
    """

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        docs = documents_of(listed(documents), "compressor input")
        return kept_documents(docs, report(self.compress(docs, query or None), callbacks))

    async def acompress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        # Not LangChain's thread hop: arecall leaves the loop itself if it may call an embedding.
        docs = documents_of(listed(documents), "compressor input")
        result = await self.packer.arecall(self._candidates(docs), query=query or None)
        return kept_documents(docs, await areport(result.with_fetch(None, "k"), callbacks))

    def compress(self, documents: Sequence[Document], query: str | None = None) -> RecallResult:
        """The RecallResult of compressing ``documents`` (evidence, report, trace). A compressor
        cannot fetch more than it is handed: a budget left unused names the base retriever's ``k``."""
        docs = documents_of(listed(documents), "compressor input")
        return self.packer.recall(self._candidates(docs), query=query).with_fetch(None, "k")
