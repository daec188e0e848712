"""LangChain's :class:`BudgetedRetriever`: one or several upstream retrievers, budgeted.

Imported through :mod:`recallpack.adapters.langchain`, which needs the ``langchain`` extra. The
pipeline between the fetch and the kept Documents is the core's
(:class:`~recallpack.packing.pipeline.Pipeline`); here is what LangChain decides: how its
retrievers are asked for a depth, its runs and its Documents.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, overload

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from pydantic import BaseModel, Field, PrivateAttr, model_validator

from recallpack.adapters.langchain.documents import apack_documents, pack_documents
from recallpack.adapters.langchain.events import (
    areport,
    aretriever_run,
    report,
    retriever_ls_params,
    retriever_run,
)
from recallpack.adapters.langchain.settings import LanesSettings, LangChainComponent, RetrieverKeywords
from recallpack.adapters.shared.components import (
    check_query,
    gather_or_cancel,
    k_or_max_items,
    keywords_of,
    only_keywords_of,
    positional_retriever,
)
from recallpack.adapters.shared.depth import Forward, forwarding, own_depth, search_kwargs_for
from recallpack.packing.candidate import LaneKind, coerce_lane
from recallpack.packing.errors import ConfigError, RecallpackWarning
from recallpack.packing.fusion import DEFAULT_RRF_K, check_rrf_k, check_weights
from recallpack.packing.packer import Packer
from recallpack.packing.pipeline import Pipeline
from recallpack.packing.results.result import RecallResult
from recallpack.packing.sources import Source, depths
from recallpack.packing.validation import check_max_items

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool

__all__ = ["BudgetedRetriever", "Upstream"]

Upstream = Runnable[str, list[Document]]
#: LangChain's own retriever kwarg (BaseRetriever.invoke reads it and passes it on).
_IGNORED = ("verbose",)
#: The fields a BudgetedRetriever is built around, never a call's to change.
_BUILT = frozenset({"retriever", "lanes", "weights", "rrf_k"})


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


class BudgetedRetriever(LangChainComponent, BaseRetriever):
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

    _asked: list[_Asked] = PrivateAttr(default_factory=list)
    _pipeline: Pipeline[Document] = PrivateAttr()

    if TYPE_CHECKING:  # the upstream positionally or as retriever=, then the fields (so pydantic's
        # mypy plugin, which writes an __init__ of keywords only where none is seen, writes none)
        @overload
        @keywords_of(LanesSettings)
        def __init__(
            self, retriever: Upstream | Callable[[str], Sequence[Document]], /, **data: Any
        ) -> None: ...
        @overload
        @only_keywords_of(RetrieverKeywords)
        def __init__(self, **data: Any) -> None: ...
        def __init__(self, *args: Any, **data: Any) -> None: ...
    else:

        def __init__(self, retriever: Upstream | None = None, /, **data: Any) -> None:
            super().__init__(**positional_retriever(retriever, data, "upstream"))

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
        upstreams = self._upstreams()
        self._asked = [
            _Asked(lane, up, forwarding(up) if isinstance(up, BaseRetriever) else "none")
            for lane, up in upstreams.items()
        ]
        sources = [Source(a.lane, own_depth(a.upstream), a.forward != "none") for a in self._asked]
        self._pipeline = Pipeline(
            sources, items=self._items, weights=self.weights,
            rrf_k=self.rrf_k, fetch_k=self.fetch_k,
        )  # fmt: skip
        blind = [type(a.upstream).__name__ for a in self._asked if a.forward == "none"]
        if self.fetch_k is not None and blind:
            warnings.warn(
                f"fetch_k={self.fetch_k} cannot be forwarded to {', '.join(blind)}: it takes no k; "
                "it returns its own number of results",
                RecallpackWarning,
                stacklevel=4,
            )
        return self

    @classmethod
    @keywords_of(LanesSettings)
    def from_lanes(cls, lanes: Mapping[LaneKind | str, Upstream], **kwargs: Any) -> BudgetedRetriever:
        """One retriever per lane kind (``{"sources": r1, "facts": r2}``), fused, then packed.

        Each lane's retriever is called (concurrently under ``ainvoke``), the ranked lists are
        fused by reciprocal rank fusion (``weights`` scales a lane's votes), and each document
        is tagged with its lane. A document found by two lanes (same content and scope ids)
        counts once, under the lane that ranked it best.
        """
        return cls(lanes=dict(lanes), **kwargs)

    # -- calls ----------------------------------------------------------------------------------

    # The query is positional-only, so invoke("q", query="x") arrives in kwargs and is refused.
    def _get_relevant_documents(  # type: ignore[override]
        self, query: str, /, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        return self._recall(query, run_manager, kwargs)[0]

    async def _aget_relevant_documents(  # type: ignore[override]
        self, query: str, /, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        return (await self._arecall(query, run_manager, kwargs))[0]

    def recall(self, query: str, config: RunnableConfig | None = None, **kwargs: Any) -> RecallResult:
        """The RecallResult (evidence, report, trace) of one call, instead of its Documents: the
        same packing, traced as the same retriever run as ``invoke``'s."""
        with retriever_run(self, query, config, kwargs) as run:
            kept, result = self._recall(query, run, kwargs)
        run.on_retriever_end(kept)
        return result

    async def arecall(self, query: str, config: RunnableConfig | None = None, **kwargs: Any) -> RecallResult:
        """The RecallResult of one ``ainvoke``."""
        async with aretriever_run(self, query, config, kwargs) as run:
            kept, result = await self._arecall(query, run, kwargs)
        await run.on_retriever_end(kept)
        return result

    def as_evidence(self, **overrides: Any) -> Runnable[str, str]:
        """A ``Runnable[str, str]``: the query in, the Markdown evidence block out.

        The whole block fits ``max_tokens``. ``overrides`` are per-call settings (as for
        ``invoke``) applied to every call. It drops into a prompt's input map::

            {"context": retriever.as_evidence(), "question": RunnablePassthrough()} | prompt | model
        """
        self._call("", dict(overrides))  # a bad override fails here, not at the first query

        def evidence(query: str, config: RunnableConfig) -> str:
            return self.recall(query, config, **overrides).to_markdown()

        async def aevidence(query: str, config: RunnableConfig) -> str:
            return (await self.arecall(query, config, **overrides)).to_markdown()

        return RunnableLambda(evidence, afunc=aevidence, name="recallpack_evidence")

    def as_tool(self, name: str = "memory_search", **kwargs: Any) -> BaseTool:  # type: ignore[override]
        """A tool an agent calls to search this retriever's memory (see langchain_memory)."""
        # Imported here: the tool module is optional and builds on this one.
        from recallpack.adapters.langchain.memory import (  # type: ignore[import-not-found,unused-ignore]
            memory_search_tool,
        )

        return memory_search_tool(self, name=name, **kwargs)  # type: ignore[no-any-return,unused-ignore]

    # -- helpers --------------------------------------------------------------------------------

    def _upstreams(self) -> dict[LaneKind | None, Upstream]:
        if self.lanes is not None:
            return {lane: upstream for lane, upstream in self.lanes.items()}
        assert isinstance(self.retriever, Runnable)  # a callable was wrapped by validation
        return {None: self.retriever}

    def _call(self, query: object, kwargs: Mapping[str, Any]) -> tuple[Packer, list[int | None]]:
        """One call's Packer and how deep each upstream is asked to search, its overrides
        validated before any fetch."""
        check_query(query, kwargs, owner=type(self).__name__, built=_BUILT)
        overrides = {k: v for k, v in kwargs.items() if k not in _IGNORED}
        if "k" in overrides:
            overrides["max_items"] = k_or_max_items(overrides.pop("k"), overrides.get("max_items", "unset"))
        fetch_k = check_max_items(overrides.pop("fetch_k", self.fetch_k), "fetch_k")
        packer = self._per_call(overrides)
        return packer, depths(self._pipeline.sources, packer.max_tokens, packer.max_items, fetch_k)

    # Fetched here, then packed and mapped back in one call into documents.py: the
    # pipeline is handed what the upstreams returned and never calls back into the adapter.

    def _recall(
        self, query: str, run: CallbackManagerForRetrieverRun, kwargs: Mapping[str, Any]
    ) -> tuple[list[Document], RecallResult]:
        packer, asked = self._call(query, kwargs)
        calls = [(a, *a.call(run, depth)) for a, depth in zip(self._asked, asked, strict=True)]
        outputs = [(up.invoke(query, **kw), a.name) for a, up, kw in calls]
        kept, result = pack_documents(self._pipeline, packer, query, outputs, asked)
        report(result, run.get_child())
        return kept, result

    async def _arecall(
        self, query: str, run: AsyncCallbackManagerForRetrieverRun, kwargs: Mapping[str, Any]
    ) -> tuple[list[Document], RecallResult]:
        packer, asked = self._call(query, kwargs)
        calls = [a.call(run, depth) for a, depth in zip(self._asked, asked, strict=True)]
        returned = await gather_or_cancel([up.ainvoke(query, **kw) for up, kw in calls])
        outputs = [(out, a.name) for a, out in zip(self._asked, returned, strict=True)]
        kept, result = await apack_documents(self._pipeline, packer, query, outputs, asked)
        await areport(result, run.get_child())
        return kept, result

    _get_ls_params = retriever_ls_params  # the upstream's LangSmith parameters, and the budget


@dataclass(frozen=True)
class _Asked:
    """One upstream of a BudgetedRetriever, its lane, and how a depth reaches it."""

    lane: LaneKind | None
    upstream: Upstream
    forward: Forward

    @property
    def name(self) -> str:
        """How an error names it."""
        where = "upstream" if self.lane is None else f"lane {self.lane.value!r}"
        return f"{where} {type(self.upstream).__name__}"

    def call(self, run: Any, depth: int | None) -> tuple[Upstream, dict[str, Any]]:
        """What to invoke to ask for ``depth`` results, and its keywords: the config (its run
        nests under ``run``, per lane) and, for a retriever taking ``k`` per call, the depth."""
        tag = None if self.lane is None else f"lane:{self.lane.value}"
        config: RunnableConfig = {"callbacks": run.get_child(tag)}
        if depth is not None and self.forward == "copy":  # a copy: the caller's keeps its k
            assert isinstance(self.upstream, BaseModel)
            return self.upstream.model_copy(update={"k": depth}), {"config": config}
        if depth is not None and self.forward == "kwarg":
            return self.upstream, {"config": config, **search_kwargs_for(self.upstream, depth)}
        return self.upstream, {"config": config}
