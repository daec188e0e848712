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

import inspect
import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

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
from pydantic import BaseModel, PrivateAttr, model_validator

from recallpack.adapters._common import PackerComponent, check_query, gather_or_cancel
from recallpack.adapters.langchain_splitter import TokenWindowSplitter
from recallpack.packing.candidate import Candidate, LaneKind, coerce_lane
from recallpack.packing.errors import ConfigError, RecallpackWarning, UpstreamError
from recallpack.packing.fusion import DEFAULT_RRF_K, check_rrf_k, check_weights, fuse
from recallpack.packing.limits import check_max_items
from recallpack.packing.packer import Packer
from recallpack.packing.result import RecallResult
from recallpack.packing.translate import evidence_metadata, score_from

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool

__all__ = [
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


def _documents(output: object, source: str) -> list[Document]:
    """``output`` as a list of Documents, or an UpstreamError naming the position and type."""
    if not isinstance(output, (list, tuple)):
        raise UpstreamError(f"{source} returned a {type(output).__name__}; expected a list of Documents")
    for position, item in enumerate(output):
        if not isinstance(item, Document):
            raise UpstreamError(
                f"{source} returned a {type(item).__name__} at position {position}; expected a "
                "langchain_core.documents.Document (wrap plain texts as Document(page_content=...))"
            )
    return list(output)


def _lane_map(lanes: object) -> dict[Any, Any]:
    if not isinstance(lanes, Mapping):
        raise ConfigError(f"lanes={lanes!r:.60} must be a mapping of lane name to retriever")
    return dict(lanes)


def _listed(documents: object) -> object:
    """A sequence of documents as a list; anything else as is, for _documents to name."""
    if isinstance(documents, Sequence) and not isinstance(documents, str):
        return list(documents)
    return documents


def _kept(docs: Sequence[Document], result: RecallResult) -> list[Document]:
    """Copies of the kept Documents, in evidence order, with recallpack's fields added.

    Copies, because upstream Documents may be shared (a vector store hands out its own objects).
    A cut text becomes the copy's page_content.
    """
    kept = []
    for rank, evidence in zip(result.selected_ranks, result.evidence, strict=True):
        doc = docs[rank]
        content = evidence.text if evidence.truncated else doc.page_content
        metadata = {**doc.metadata, **evidence_metadata(evidence)}
        kept.append(doc.model_copy(update={"page_content": content, "metadata": metadata}))
    return kept


_Forward = Literal["kwarg", "copy", "none"]


def _forwarding(upstream: Upstream) -> _Forward:
    """How ``fetch_k`` reaches ``upstream`` as its ``k``: as a per-call ``k=`` to a retriever
    whose ``_get_relevant_documents`` takes it (or ``**kwargs``, as VectorStoreRetriever does);
    on a shallow copy of one with a ``k`` field (BM25Retriever), so the caller's object is never
    changed; or not at all (a RunnableLambda, a chain), with a warning at construction."""
    if not isinstance(upstream, BaseRetriever):
        return "none"
    params = inspect.signature(type(upstream)._get_relevant_documents).parameters
    if "k" in params:
        return "kwarg"
    if "k" in type(upstream).model_fields:
        return "copy"
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return "kwarg"
    return "none"


class _Call:
    """One call's Packer and fetch_k, after its overrides are validated (before any fetch)."""

    __slots__ = ("packer", "fetch_k", "sink")

    def __init__(self, owner: BudgetedRetriever, kwargs: Mapping[str, Any], query: object = "") -> None:
        check_query(query, kwargs)
        overrides = {k: v for k, v in kwargs.items() if k not in _IGNORED and k != _SINK}
        if "k" in overrides:
            overrides["max_items"] = _k_or_max_items(overrides.pop("k"), overrides.get("max_items", "unset"))
        self.fetch_k = check_max_items(overrides.pop("fetch_k", owner.fetch_k), "fetch_k")
        self.packer: Packer = owner._per_call(overrides)
        self.sink: list[RecallResult] | None = kwargs.get(_SINK)


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

    retriever: Upstream | None = None
    """The upstream; exactly one of ``retriever`` and ``lanes`` is set."""
    lanes: dict[LaneKind, Upstream] | None = None
    """One upstream per lane, fused by reciprocal rank fusion (see :meth:`from_lanes`)."""
    weights: dict[LaneKind, float] | None = None
    rrf_k: int = DEFAULT_RRF_K
    fetch_k: int | None = None

    _forward: dict[LaneKind | None, _Forward] = PrivateAttr(default_factory=dict)

    def __init__(self, **data: Any) -> None:
        # Spelled out so type checkers accept what validation accepts (k=, lane="facts", ...).
        super().__init__(**data)

    @model_validator(mode="before")
    @classmethod
    def _coerce_upstreams(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
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
        self._forward = {lane: _forwarding(up) for lane, up in upstreams.items()}
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
        return self._finish(query, outputs, call)

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
        return self._finish(query, outputs, call)

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
        assert self.retriever is not None
        return {None: self.retriever}

    def _child(self, run_manager: Any, lane: LaneKind | None) -> RunnableConfig:
        return {"callbacks": run_manager.get_child(None if lane is None else f"lane:{lane.value}")}

    def _upstream(self, lane: LaneKind | None, call: _Call) -> Upstream:
        upstream = self._upstreams()[lane]
        if call.fetch_k is not None and self._forward[lane] == "copy":
            assert isinstance(upstream, BaseModel)
            return upstream.model_copy(update={"k": call.fetch_k})
        return upstream

    def _kwargs(self, lane: LaneKind | None, call: _Call) -> dict[str, Any]:
        return {"k": call.fetch_k} if call.fetch_k is not None and self._forward[lane] == "kwarg" else {}

    def _source(self, lane: LaneKind | None) -> str:
        where = "upstream" if lane is None else f"lane {lane.value!r}"
        return f"{where} {type(self._upstreams()[lane]).__name__}"

    def _finish(self, query: str, outputs: Sequence[object], call: _Call) -> list[Document]:
        lanes = list(self._upstreams())
        ranked = [_documents(out, self._source(lane)) for lane, out in zip(lanes, outputs, strict=True)]
        if self.lanes is None:
            docs, candidates = ranked[0], self._candidates(ranked[0])
        else:
            per_lane = {lane: self._candidates(d) for lane, d in zip(self.lanes, ranked, strict=True)}
            fused = fuse(per_lane, weights=self.weights, k=self.rrf_k)
            by_lane = dict(zip(self.lanes, ranked, strict=True))
            docs = [by_lane[f.lane][f.index] for f in fused]
            candidates = [f.candidate for f in fused]
        result = call.packer.recall(candidates, query=query)
        if call.sink is not None:
            call.sink.append(result)
        return _kept(docs, result)


class EvidenceRenderer(_LangChainComponent, RunnableSerializable[list[Document], str]):
    """A Runnable from ``list[Document]`` (recallpack's or anyone's) to the evidence block.

    For chains that already have documents. The Documents are packed again, in the order
    given, so the block fits ``max_tokens``; recallpack's own Documents keep their labels (their
    ``provenance`` says which), and Documents already packed to this budget all fit again.
    ``render_evidence`` is the default instance; configure another with
    ``EvidenceRenderer(max_tokens=512, reader=...)``.
    """

    name: str | None = "recallpack_render_evidence"

    def __init__(self, **data: Any) -> None:
        super().__init__(**data)

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
        docs = _documents(docs, "render_evidence input")
        return packer.recall(self._candidates(docs)).to_markdown()


render_evidence: Runnable[list[Document], str] = EvidenceRenderer()
"""``list[Document]`` -> Markdown evidence block, packed to the default budget."""


class BudgetCompressor(_LangChainComponent, BaseDocumentCompressor):
    """A document compressor that keeps what fits ``max_tokens``, in the order given.

    For ``ContextualCompressionRetriever`` and ``DocumentCompressorPipeline``: put it last, after
    any reranker, since it cuts in the order it receives. Kept Documents are copies with
    recallpack's metadata added, as from :class:`BudgetedRetriever`; the query steers focus cuts.
    """

    def __init__(self, **data: Any) -> None:
        super().__init__(**data)

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        docs = _documents(_listed(documents), "compressor input")
        return _kept(docs, self.packer.recall(self._candidates(docs), query=query or None))

    async def acompress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        # Pure CPU and quick: running it inline beats the default hop to a thread executor.
        return self.compress_documents(documents, query, callbacks)

    def compress(self, documents: Sequence[Document], query: str | None = None) -> RecallResult:
        """The RecallResult of compressing ``documents`` (evidence, report, trace)."""
        docs = _documents(_listed(documents), "compressor input")
        return self.packer.recall(self._candidates(docs), query=query)
