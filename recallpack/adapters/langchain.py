"""LangChain adapter: a budgeted drop-in retriever, evidence for LCEL prompts, a compressor.

Everything here turns LangChain ``Document``s into recallpack ``Candidate``s (through
:func:`recallpack.adapters._common.candidate_from`, so the LlamaIndex adapter makes the same
candidates from the same items), hands them to :func:`recallpack.recall`, and maps the kept
evidence back onto copies of the Documents. Needs the ``langchain`` extra (langchain-core 1.x);
``import recallpack`` never imports this module.

>>> from langchain_core.documents import Document
>>> from langchain_core.runnables import RunnableLambda
>>> upstream = RunnableLambda(lambda q: [Document(page_content="Paris is in France.")])
>>> docs = BudgetedRetriever(retriever=upstream, max_tokens=64).invoke("where is Paris?")
>>> docs[0].metadata["evidence_label"]
'Source excerpt'
"""

from __future__ import annotations

import asyncio
import inspect
import warnings
from collections.abc import Awaitable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
    Callbacks,
)
from langchain_core.documents import BaseDocumentCompressor, Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from langchain_core.runnables.base import RunnableSerializable
from pydantic import BaseModel, ConfigDict, PrivateAttr, ValidationError, model_validator

from recallpack.adapters._common import (
    UnknownLane,
    candidate_from,
    check_on_unknown_lane,
    evidence_metadata,
    fixed_lane,
    reciprocal_rank_fusion,
)
from recallpack.packing.budget import (
    DEFAULT_MAX_TOKENS,
    MAX_TOKENS_CEILING,
    Policy,
    check_max_items,
    check_max_tokens,
    check_policy,
    recall,
)
from recallpack.packing.candidate import Candidate, LaneKind, coerce_lane
from recallpack.packing.errors import (
    ConfigError,
    RecallpackError,
    RecallpackWarning,
    UpstreamError,
)
from recallpack.packing.result import DEFAULT_RESOURCE_URI_TEMPLATE, Reader, RecallResult
from recallpack.packing.tokenizer import Tokenizer, get_tokenizer

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool

__all__ = [
    "BudgetedRetriever",
    "BudgetCompressor",
    "EvidenceRenderer",
    "render_evidence",
]

T = TypeVar("T")
Upstream = Runnable[str, list[Document]]

#: The keyword arguments ``invoke`` takes per call. ``verbose`` is LangChain's own retriever
#: kwarg (BaseRetriever.invoke reads it and passes it on), so it is tolerated and ignored.
_OVERRIDES = ("max_tokens", "k", "max_items", "fetch_k", "reader")
_IGNORED = ("verbose",)
#: A private kwarg through which recall()/arecall() get the RecallResult of their own call.
#: A kwarg, not a context variable: a nested BudgetedRetriever upstream must not see it.
_SINK = "_recallpack_result"

# -- shared settings --------------------------------------------------------------------------


class _PackSettings(BaseModel):
    """The packing settings every public class here shares, validated once at construction.

    Errors come out as recallpack's own (BudgetError, PolicyError, LaneError, ...), not as
    pydantic's ValidationError, so one ``except RecallpackError`` covers construction and calls.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    max_tokens: int = DEFAULT_MAX_TOKENS
    """The token budget for the rendered evidence block (header and labels included)."""
    max_items: int | None = None
    """At most this many items, whatever the budget leaves room for (``k`` is its alias)."""
    policy: Policy = "prefix"
    """What an item that does not fit does: ``prefix`` ends the walk, ``skip`` passes over it,
    ``truncate`` cuts it to the room left and ends the walk."""
    tokenizer: Any = None
    """An encoding or model name, ``"chars"``, a recallpack Tokenizer or a ``str -> int``."""
    reader: Reader | None = None
    """Who reads the evidence; items in scopes the reader does not hold are withheld."""
    dedupe: bool = True
    lane: LaneKind | None = None
    """A fixed lane for every item. Else ``metadata[lane_key]``; else, for documents recallpack
    already packed, a lane of their ``provenance``; else ``sources``."""
    lane_key: str = "lane"
    on_unknown_lane: UnknownLane = "raise"
    """A metadata lane that is not a lane kind: ``raise`` a LaneError, or use the default lane."""
    lane_budgets: dict[Any, Any] | None = None
    """Tokens per provenance (``{"source": 1500, "derived": 400}``); the core validates them."""
    template: str | Path | None = None
    resource_uri_template: str = DEFAULT_RESOURCE_URI_TEMPLATE
    max_tokens_ceiling: int = MAX_TOKENS_CEILING

    _tok: Tokenizer = PrivateAttr()

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise _recallpack_error(type(self).__name__, exc) from exc

    @model_validator(mode="before")
    @classmethod
    def _k_is_max_items(cls, data: Any) -> Any:
        # LangChain's retrievers call the number of results ``k``; recallpack calls it max_items.
        if isinstance(data, dict) and "k" in data:
            data = dict(data)
            k = check_max_items(data.pop("k"), "k")
            if "max_items" in data and data["max_items"] != k:
                raise ConfigError(
                    f"k={k!r} and max_items={data['max_items']!r} disagree; "
                    "pass one of them (k is max_items under LangChain's name)"
                )
            data["max_items"] = k
        if isinstance(data, dict):
            # Checked before pydantic's own type checks, so a bad value raises the core's error.
            if data.get("lane") is not None:
                data = {**data, "lane": coerce_lane(data["lane"])}
            if "max_tokens" in data:
                ceiling = data.get("max_tokens_ceiling", MAX_TOKENS_CEILING)
                check_max_tokens(data["max_tokens"], ceiling)
            if "max_items" in data:
                check_max_items(data["max_items"])
            if "policy" in data:
                check_policy(data["policy"])
            if "on_unknown_lane" in data:
                check_on_unknown_lane(data["on_unknown_lane"])
        return data

    @model_validator(mode="after")
    def _check(self) -> _PackSettings:
        self._tok = get_tokenizer(self.tokenizer)
        # A dry run on no candidates: the core's own checks of every setting (budget against
        # ceiling, lane budgets, template, reader) fail here, at construction, not mid-call.
        self._recall([])
        return self

    def _recall(
        self,
        candidates: Sequence[Candidate],
        *,
        max_tokens: int | None = None,
        max_items: int | None | Literal["unset"] = "unset",
        reader: Reader | None | Literal["unset"] = "unset",
    ) -> RecallResult:
        return recall(
            candidates,
            max_tokens=self.max_tokens if max_tokens is None else max_tokens,
            max_items=self.max_items if max_items == "unset" else max_items,
            policy=self.policy,
            tokenizer=self._tok,
            reader=self.reader if reader == "unset" else reader,
            lane_budgets=self.lane_budgets,
            dedupe=self.dedupe,
            template=self.template,
            resource_uri_template=self.resource_uri_template,
            max_tokens_ceiling=self.max_tokens_ceiling,
        )

    def _candidates(self, docs: Sequence[Document]) -> list[Candidate]:
        return [
            candidate_from(
                doc.page_content,
                doc.metadata,
                position=i,
                lane=self._lane_of(doc),
                lane_key=self.lane_key,
                on_unknown_lane=self.on_unknown_lane,
                score=_score(doc.metadata),
            )
            for i, doc in enumerate(docs)
        ]

    def _lane_of(self, doc: Document) -> LaneKind | None:
        return fixed_lane(doc.metadata, self.lane, self.lane_key)


def _recallpack_error(owner: str, exc: ValidationError) -> RecallpackError:
    """The recallpack error a validator raised, else a ConfigError that says which field."""
    for error in exc.errors():
        cause = error.get("ctx", {}).get("error")
        if isinstance(cause, RecallpackError):
            return cause
    parts = [f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}" for e in exc.errors()]
    return ConfigError(f"{owner}: " + "; ".join(parts))


def _score(metadata: Mapping[str, Any]) -> float | None:
    for key in ("score", "relevance_score"):
        value = metadata.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    return None


def _documents(output: object, source: str) -> list[Document]:
    """``output`` as a list of Documents, or an UpstreamError naming the position and type."""
    if not isinstance(output, (list, tuple)):
        raise UpstreamError(
            f"{source} returned a {type(output).__name__}; expected a list of "
            "langchain_core.documents.Document"
        )
    for position, item in enumerate(output):
        if not isinstance(item, Document):
            raise UpstreamError(
                f"{source} returned a {type(item).__name__} at position {position}; expected "
                "a langchain_core.documents.Document "
                "(wrap plain texts as Document(page_content=...))"
            )
    return list(output)


def _kept(docs: Sequence[Document], result: RecallResult) -> list[Document]:
    """Copies of the kept Documents, in evidence order, with recallpack's fields added.

    Copies, because upstream Documents may be shared (a vector store hands out its own objects).
    A text cut by the ``truncate`` policy becomes the copy's page_content.
    """
    kept = []
    for rank, evidence in zip(result.selected_ranks, result.evidence, strict=True):
        doc = docs[rank]
        content = evidence.text if evidence.truncated else doc.page_content
        metadata = {**doc.metadata, **evidence_metadata(evidence)}
        kept.append(doc.model_copy(update={"page_content": content, "metadata": metadata}))
    return kept


# -- forwarding fetch_k -------------------------------------------------------------------------

_Forward = Literal["kwarg", "copy", "none"]


def _forwarding(upstream: Upstream) -> _Forward:
    """How ``fetch_k`` reaches ``upstream`` as its ``k``.

    * ``kwarg``: a BaseRetriever whose ``_get_relevant_documents`` names ``k`` or takes
      ``**kwargs`` (VectorStoreRetriever merges them into its search kwargs), gets ``k=`` per call;
    * ``copy``: a retriever with a ``k`` field (BM25Retriever, TFIDFRetriever) is called as a
      shallow ``model_copy(update={"k": fetch_k})``, so the caller's object is never changed;
    * ``none``: anything else (a RunnableLambda, a chain) cannot be told; fetch_k is ignored
      with a warning at construction.
    """
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
    """One call's settings after its overrides are validated (before any upstream is called)."""

    __slots__ = ("max_tokens", "max_items", "fetch_k", "reader", "sink")

    def __init__(self, owner: BudgetedRetriever, kwargs: Mapping[str, Any]) -> None:
        unknown = sorted(set(kwargs) - set(_OVERRIDES) - set(_IGNORED) - {_SINK})
        if unknown:
            raise ConfigError(
                f"{type(owner).__name__} got unknown keyword argument(s) {unknown}; per call it "
                f"takes {', '.join(_OVERRIDES)}"
            )
        if "k" in kwargs and "max_items" in kwargs and kwargs["k"] != kwargs["max_items"]:
            raise ConfigError(f"k={kwargs['k']!r} and max_items={kwargs['max_items']!r} disagree; pass one")
        self.max_tokens = check_max_tokens(
            kwargs.get("max_tokens", owner.max_tokens), owner.max_tokens_ceiling
        )
        field = "k" if "k" in kwargs else "max_items"
        self.max_items = check_max_items(kwargs.get(field, owner.max_items), field)
        self.fetch_k = check_max_items(kwargs.get("fetch_k", owner.fetch_k), "fetch_k")
        self.reader = kwargs.get("reader", owner.reader)
        if self.reader is not None and not isinstance(self.reader, Reader):
            raise ConfigError(f"reader={self.reader!r} must be a recallpack.Reader or None")
        self.sink: list[RecallResult] | None = kwargs.get(_SINK)


# -- the retriever ------------------------------------------------------------------------------


class BudgetedRetriever(_PackSettings, BaseRetriever):
    """A retriever that returns what fits ``max_tokens`` of the upstream's results, in rank order.

    Wraps any retriever or ``Runnable[str, list[Document]]`` (``retriever=``), or several, one
    per lane (:meth:`from_lanes`). Kept Documents are copies of the upstream's, with
    ``provenance``, ``evidence_label``, ``scopes``, ``resource_uri`` and ``token_count`` added to
    their metadata. Per call, ``invoke`` takes ``max_tokens``, ``k`` (or ``max_items``),
    ``fetch_k`` and ``reader``, validated before the upstream is called.

    ``fetch_k`` is the search depth (seed 002): how many candidates the upstream is asked for,
    separate from how many come back. ``None`` leaves the upstream's own depth alone; see
    :func:`_forwarding` for how it reaches each kind of upstream.
    """

    retriever: Upstream | None = None
    """The upstream; exactly one of ``retriever`` and ``lanes`` is set."""
    lanes: dict[LaneKind, Upstream] | None = None
    """One upstream per lane, fused by reciprocal rank fusion (see :meth:`from_lanes`)."""
    weights: dict[LaneKind, float] | None = None
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
        if data.get("retriever") is not None and not isinstance(data["retriever"], Runnable):
            if not callable(data["retriever"]):
                raise ConfigError(
                    f"retriever={data['retriever']!r} must be a retriever, a Runnable "
                    "str -> list[Document], or a callable doing the same"
                )
            data["retriever"] = RunnableLambda(data["retriever"])
        if data.get("lanes") is not None:
            data["lanes"] = {
                coerce_lane(name, field=f"lanes key {name!r}"): upstream
                for name, upstream in dict(data["lanes"]).items()
            }
        if data.get("weights") is not None:
            data["weights"] = {
                coerce_lane(name, field=f"weights key {name!r}"): weight
                for name, weight in dict(data["weights"]).items()
            }
        return data

    @model_validator(mode="after")
    def _check_upstreams(self) -> BudgetedRetriever:
        if (self.retriever is None) == (self.lanes is None):
            raise ConfigError(
                "BudgetedRetriever needs exactly one of retriever=... or lanes=... "
                "(use BudgetedRetriever.from_lanes({...}) for several)"
            )
        if self.lanes is not None:
            if not self.lanes:
                raise ConfigError("lanes={} is empty; give at least one lane -> retriever")
            if self.lane is not None:
                raise ConfigError("lane=... and lanes=... conflict: each lane names its own kind")
            extra = set(self.weights or {}) - set(self.lanes)
            if extra:
                raise ConfigError(
                    f"weights has lanes {sorted(k.value for k in extra)} that are not in lanes: "
                    f"{sorted(k.value for k in self.lanes)}"
                )
        elif self.weights is not None:
            raise ConfigError("weights=... only applies with lanes=... (from_lanes)")
        upstreams: dict[LaneKind | None, Upstream] = {}
        if self.lanes is not None:
            for lane, upstream in self.lanes.items():
                upstreams[lane] = upstream
        elif self.retriever is not None:
            upstreams[None] = self.retriever
        self._forward = {lane: _forwarding(up) for lane, up in upstreams.items()}
        if self.fetch_k is not None:
            blind = [type(upstreams[lane]).__name__ for lane, f in self._forward.items() if f == "none"]
            if blind:
                warnings.warn(
                    f"fetch_k={self.fetch_k} cannot be forwarded to {', '.join(blind)}: it takes "
                    "no k; it returns its own number of results",
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
        return cls(
            lanes={coerce_lane(name, field=f"lanes key {name!r}"): r for name, r in lanes.items()},
            weights=None
            if weights is None
            else {coerce_lane(name, field=f"weights key {name!r}"): w for name, w in weights.items()},
            **kwargs,
        )

    # -- calls ----------------------------------------------------------------------------------

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        call = _Call(self, kwargs)
        if self.retriever is not None:
            output = self._upstream(None, call).invoke(
                query, {"callbacks": run_manager.get_child()}, **self._kwargs(None, call)
            )
            return self._finish([_documents(output, self._source(None))], call)
        assert self.lanes is not None
        outputs = [
            self._upstream(lane, call).invoke(
                query,
                {"callbacks": run_manager.get_child(f"lane:{lane.value}")},
                **self._kwargs(lane, call),
            )
            for lane in self.lanes
        ]
        return self._finish(
            [_documents(out, self._source(lane)) for lane, out in zip(self.lanes, outputs, strict=True)],
            call,
        )

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        call = _Call(self, kwargs)
        if self.retriever is not None:
            output = await self._upstream(None, call).ainvoke(
                query, {"callbacks": run_manager.get_child()}, **self._kwargs(None, call)
            )
            return self._finish([_documents(output, self._source(None))], call)
        assert self.lanes is not None
        outputs = await _gather_or_cancel(
            [
                self._upstream(lane, call).ainvoke(
                    query,
                    {"callbacks": run_manager.get_child(f"lane:{lane.value}")},
                    **self._kwargs(lane, call),
                )
                for lane in self.lanes
            ]
        )
        return self._finish(
            [_documents(out, self._source(lane)) for lane, out in zip(self.lanes, outputs, strict=True)],
            call,
        )

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

    def _upstream_of(self, lane: LaneKind | None) -> Upstream:
        upstream = self.retriever if lane is None or self.lanes is None else self.lanes[lane]
        assert upstream is not None
        return upstream

    def _upstream(self, lane: LaneKind | None, call: _Call) -> Upstream:
        upstream = self._upstream_of(lane)
        if call.fetch_k is not None and self._forward[lane] == "copy":
            assert isinstance(upstream, BaseModel)
            return upstream.model_copy(update={"k": call.fetch_k})
        return upstream

    def _kwargs(self, lane: LaneKind | None, call: _Call) -> dict[str, Any]:
        if call.fetch_k is not None and self._forward[lane] == "kwarg":
            return {"k": call.fetch_k}
        return {}

    def _source(self, lane: LaneKind | None) -> str:
        upstream = self._upstream_of(lane)
        where = "upstream" if lane is None else f"lane {lane.value!r}"
        return f"{where} {type(upstream).__name__}"

    def _finish(self, ranked: list[list[Document]], call: _Call) -> list[Document]:
        if self.lanes is None:
            docs = ranked[0]
            candidates = self._candidates(docs)
        else:
            docs, candidates = self._fuse(ranked)
        result = self._recall(
            candidates, max_tokens=call.max_tokens, max_items=call.max_items, reader=call.reader
        )
        if call.sink is not None:
            call.sink.append(result)
        return _kept(docs, result)

    def _fuse(self, ranked: list[list[Document]]) -> tuple[list[Document], list[Candidate]]:
        assert self.lanes is not None
        fused = reciprocal_rank_fusion(
            {lane.value: docs for lane, docs in zip(self.lanes, ranked, strict=True)},
            key=_identity,
            weights={lane.value: w for lane, w in (self.weights or {}).items()},
        )
        docs = [doc for _, doc, _ in fused]
        candidates = [
            candidate_from(
                doc.page_content,
                doc.metadata,
                position=i,
                lane=lane,
                lane_key=self.lane_key,
                on_unknown_lane=self.on_unknown_lane,
                score=score,
            )
            for i, (lane, doc, score) in enumerate(fused)
        ]
        return docs, candidates


def _identity(doc: Document) -> tuple[str, tuple[str, ...]]:
    """What makes two lanes' documents the same one: the text and scopes the core dedupes on."""
    scopes = doc.metadata.get("scope_ids") or ()
    if isinstance(scopes, str):
        scopes = (scopes,)
    return doc.page_content, tuple(str(s) for s in scopes)


async def _gather_or_cancel(awaitables: Sequence[Awaitable[T]]) -> list[T]:
    """Await all concurrently; if one fails (or we are cancelled), cancel and await the rest,
    so no lane keeps running after the call has ended."""
    tasks = [asyncio.ensure_future(a) for a in awaitables]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


# -- documents in, evidence out -----------------------------------------------------------------


class EvidenceRenderer(_PackSettings, RunnableSerializable[list[Document], str]):
    """A Runnable from ``list[Document]`` (recallpack's or anyone's) to the evidence block.

    For chains that already have documents. The Documents are packed again, in the order
    given, so the block fits ``max_tokens``; recallpack's own Documents keep their labels (their
    ``provenance`` says which), and Documents already packed to this budget all fit again.
    ``render_evidence`` is the default instance; configure another with
    ``EvidenceRenderer(max_tokens=512, reader=...)``.
    """

    name: str | None = "recallpack_render_evidence"

    def __init__(self, **data: Any) -> None:
        # Spelled out so type checkers accept what validation accepts (k=, lane="facts", ...).
        super().__init__(**data)

    def invoke(self, input: list[Document], config: RunnableConfig | None = None, **kwargs: Any) -> str:
        return self._call_with_config(self._render, input, config)

    async def ainvoke(
        self, input: list[Document], config: RunnableConfig | None = None, **kwargs: Any
    ) -> str:
        # Packing is pure CPU and quick; a thread hop would cost more than it frees.
        return await self._acall_with_config(self._arender, input, config)

    def _render(self, docs: list[Document]) -> str:
        docs = _documents(docs, "render_evidence input")
        return self._recall(self._candidates(docs)).to_markdown()

    async def _arender(self, docs: list[Document]) -> str:
        return self._render(docs)


render_evidence: Runnable[list[Document], str] = EvidenceRenderer()
"""``list[Document]`` -> Markdown evidence block, packed to the default budget."""


class BudgetCompressor(_PackSettings, BaseDocumentCompressor):
    """A document compressor that keeps what fits ``max_tokens``, in the order given.

    For ``ContextualCompressionRetriever`` and ``DocumentCompressorPipeline``: put it last, after
    any reranker, since it cuts in the order it receives. Kept Documents are copies with
    recallpack's metadata added, as from :class:`BudgetedRetriever`.
    """

    def __init__(self, **data: Any) -> None:
        # Spelled out so type checkers accept what validation accepts (k=, lane="facts", ...).
        super().__init__(**data)

    def compress_documents(
        self,
        documents: Sequence[Document],
        query: str,
        callbacks: Callbacks | None = None,
    ) -> Sequence[Document]:
        docs = _documents(list(documents), "compressor input")
        return _kept(docs, self._recall(self._candidates(docs)))

    async def acompress_documents(
        self,
        documents: Sequence[Document],
        query: str,
        callbacks: Callbacks | None = None,
    ) -> Sequence[Document]:
        # Pure CPU and quick: running it inline beats the default hop to a thread executor.
        return self.compress_documents(documents, query, callbacks)

    def compress(self, documents: Sequence[Document]) -> RecallResult:
        """The RecallResult of compressing ``documents`` (evidence, report, trace)."""
        return self._recall(self._candidates(_documents(list(documents), "compressor input")))
