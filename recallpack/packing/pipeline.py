"""One pack from a host's upstreams, written once for every host: depth, lanes, fusion, map-back.

An adapter is a small transport (as httpx's ``Client`` owns its send loop and plugs in a
transport): it asks :func:`~recallpack.packing.sources.depths` how deep to fetch, fetches from
its upstreams, reads each of its items as an :class:`Item` (text, metadata, score, modality),
hands both to :meth:`Pipeline.packed` once (as :class:`Returned`), and copies the kept
evidence back onto its own objects when that returns. Everything in between is here,
host-neutral: one lane per upstream or lanes read from metadata, weights and reciprocal rank
fusion, the Candidates, the packing itself, the report's note of the depth asked, and which of
the host's own objects each kept evidence stands for. The pipeline calls nothing of the
adapter's: plain data in, plain data out. (:meth:`Pipeline.recall` and :meth:`Pipeline.arecall`
call a ``fetch`` and a ``translate`` they are given instead: the short way, for a script.)

>>> from recallpack import Packer
>>> pipeline = Pipeline([Source()], translate=lambda text, position: Item(text, {}))
>>> outcome = pipeline.recall(Packer(max_tokens=64), "where?", lambda depths: [["Paris is in France."]])
>>> [(kept.original, kept.evidence.label) for kept in outcome.kept]
[('Paris is in France.', 'Source excerpt')]
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, NamedTuple, Protocol, TypeVar

from recallpack.packing.candidate import Candidate, LaneKind, Span, coerce_lane
from recallpack.packing.errors import ConfigError
from recallpack.packing.fusion import DEFAULT_RRF_K, check_rrf_k, check_weights, fuse
from recallpack.packing.results.result import Evidence, RecallResult
from recallpack.packing.sources import Source, depths
from recallpack.packing.translate import UnknownLane, candidate_from, check_on_unknown_lane
from recallpack.packing.validation import check_max_items

__all__ = ["Item", "ItemSettings", "Source", "KeptObject", "PipelineOutcome", "Returned", "Pipeline", "Packs",
           "ITEM_SETTINGS"]

T = TypeVar("T")

class Packs(Protocol):
    """What the pipeline asks of the one packing its pack: the bounds a fetch is sized from, and
    the recall itself (a :class:`~recallpack.Packer`; the pipeline knows it by no more than this)."""

    @property
    def max_tokens(self) -> int: ...

    @property
    def max_items(self) -> int | None: ...

    def recall(self, candidates: Sequence[Candidate], *, query: str | None = None) -> RecallResult: ...

    async def arecall(self, candidates: Sequence[Candidate], *, query: str | None = None) -> RecallResult: ...


#: How an upstream item becomes a Candidate: the same three settings in every host.
ITEM_SETTINGS = ("lane", "lane_key", "on_unknown_lane")


class Item(NamedTuple):
    """A host's item as the core reads it: all an adapter translates."""

    text: str
    metadata: Mapping[str, Any]
    #: What the host recorded as the item's score, unchecked: it is checked after the item's
    #: scopes, so nothing of an item that will be withheld is refused or named.
    score: object = None
    #: "text", or what the item holds instead ("image"): the walk drops it with reason no_text.
    modality: str = "text"
    #: The item's own content when ``text`` wraps it in what the host adds for the model.
    content: str | None = None
    #: Where the text sits in its document, when the host knows it better than its metadata says.
    span: Span | None = None
    #: Where ``score`` was read, as an error names it (``metadata['score']``).
    score_field: str = "score"


@dataclass(frozen=True)
class ItemSettings:
    """How every item of a component becomes a Candidate (see :func:`candidate_from`)."""

    lane: LaneKind | None = None
    lane_key: str = "lane"
    on_unknown_lane: UnknownLane = "raise"

    @classmethod
    def checked(cls, values: Mapping[str, Any]) -> ItemSettings:
        """The three item settings from ``values`` (absent ones at their defaults), checked."""
        lane_key = values.get("lane_key", "lane")
        if not isinstance(lane_key, str) or not lane_key:
            raise ConfigError(f"lane_key={lane_key!r} must be a non-empty str (the metadata key of the lane)")
        lane = values.get("lane")
        return cls(
            lane=None if lane is None else coerce_lane(lane),
            lane_key=lane_key,
            on_unknown_lane=check_on_unknown_lane(values.get("on_unknown_lane", "raise")),
        )

    def candidates(self, items: Sequence[Item], lane: LaneKind | None = None) -> list[Candidate]:
        """One Candidate per item, in order: in ``lane`` when given, else by these settings."""
        lane = lane if lane is not None else self.lane
        lane_key, on_unknown_lane = self.lane_key, self.on_unknown_lane
        return [
            candidate_from(
                item.text, item.metadata, position=position, lane=lane, lane_key=lane_key,
                on_unknown_lane=on_unknown_lane, score=item.score, score_field=item.score_field,
                modality=item.modality, content=item.content, span=item.span,
            )
            for position, item in enumerate(items)
        ]  # fmt: skip


@dataclass(frozen=True)
class KeptObject(Generic[T]):
    """One kept item: the host's own object it came from and its evidence. ``score`` is the
    fused score when lanes were fused (None otherwise: the object keeps its own)."""

    original: T
    evidence: Evidence
    score: float | None = None


@dataclass(frozen=True)
class PipelineOutcome(Generic[T]):
    """What one pack gives its adapter: the result, and the kept items with their originals."""

    result: RecallResult
    kept: list[KeptObject[T]]


#: Per source, in order: the host objects it returned.
Fetched = Sequence[Sequence[T]]


@dataclass(frozen=True)
class Returned(Generic[T]):
    """What the sources returned for one pack, as plain data: per source, its host objects and
    the same read as Items (``items[s][i]`` is ``objects[s][i]``), and the depths they were asked
    for (None: the objects were handed over, not fetched)."""

    objects: Fetched[T]
    items: Sequence[Sequence[Item]]
    depths: Sequence[int | None] | None = None


class Pipeline(Generic[T]):
    """Between an adapter's fetch and its map-back, for one component: built once, checked then.

    ``sources`` are its upstreams, in order: one with no lane (items take their lane from their
    metadata, or ``items.lane``), or one per lane, whose results are fused by reciprocal rank
    fusion (``weights`` scale a lane's votes; ``rrf_k`` damps the top ranks). ``translate(obj,
    position)`` reads one host object as an :class:`Item`, for :meth:`recall` and :meth:`arecall`
    (an adapter reads its own and calls :meth:`packed`). ``knob`` is the host setting that asks
    for more candidates, named in a report whose budget was left unused (None: none is named).
    """

    def __init__(
        self,
        sources: Sequence[Source],
        *,
        translate: Callable[[T, int], Item] | None = None,
        items: ItemSettings = ItemSettings(),  # noqa: B008  # frozen: one shared default is safe
        weights: Mapping[Any, Any] | None = None,
        rrf_k: object = DEFAULT_RRF_K,
        fetch_k: object = None,
        knob: str | None = "fetch_k",
    ) -> None:
        lanes = [s.lane for s in sources]
        self.fused = any(lane is not None for lane in lanes)
        if self.fused and (None in lanes or len(set(lanes)) != len(lanes)):
            raise ConfigError("each lane names one upstream; a lane is given twice or without its kind")
        if self.fused and items.lane is not None:
            raise ConfigError("lane=... and lanes=... conflict: each lane names its own kind")
        if not self.fused and weights:
            raise ConfigError("weights=... only applies with lanes=... (from_lanes)")
        self.sources = tuple(sources)
        self.translate = translate
        self.items = items
        self.weights = check_weights(weights, [s.lane for s in sources if s.lane is not None])
        self.rrf_k = check_rrf_k(rrf_k)
        self.fetch_k = check_max_items(fetch_k, "fetch_k")
        self.knob = knob

    # -- the steps, in order ----------------------------------------------------------------------

    def depths(self, packs: Packs, fetch_k: object = None) -> list[int | None]:
        """How many results to ask each source for (:func:`~recallpack.packing.sources.depths`):
        ``fetch_k`` (this call's, else the component's) when given, else enough for the budget."""
        fetch_k = self.fetch_k if fetch_k is None else check_max_items(fetch_k, "fetch_k")
        return depths(self.sources, packs.max_tokens, packs.max_items, fetch_k)

    def rank(self, fetched: Fetched[T], items: Sequence[Sequence[Item]]) -> tuple[list[T], list[Candidate]]:
        """The host objects in packing order (fused, for lanes) and their Candidates, from the
        objects each source returned and those objects read as Items (``items[s][i]`` is
        ``fetched[s][i]``)."""
        if len(fetched) != len(self.sources) or len(items) != len(self.sources):
            raise ConfigError(f"fetched {len(fetched)} result lists for {len(self.sources)} sources")
        if not self.fused:
            return list(fetched[0]), self.items.candidates(items[0])
        index = {source.lane: n for n, source in enumerate(self.sources)}
        ranked = {
            source.lane: self.items.candidates(read, source.lane)
            for source, read in zip(self.sources, items, strict=True)
            if source.lane is not None
        }
        merged = fuse(ranked, weights=self.weights, k=self.rrf_k)
        return [fetched[index[f.lane]][f.index] for f in merged], [f.candidate for f in merged]

    def noted(self, result: RecallResult, depths: Sequence[int | None] | None) -> RecallResult:
        """``result``, its report saying how deep the sources were asked to search (``depths``;
        None: the items were handed over, not fetched), so a budget left unused names the knob."""
        if self.knob is None:
            return result
        if depths is None:
            return result.with_fetch(None, self.knob)
        if all(depth is None for depth in depths):
            return result
        total = None if None in depths else sum(d for d in depths if d is not None)
        return result.with_fetch(total, self.knob)

    def outcome(
        self, result: RecallResult, ordered: Sequence[T], candidates: Sequence[Candidate]
    ) -> PipelineOutcome[T]:
        """The kept items paired with the host objects they came from, in evidence order."""
        kept = [
            KeptObject(ordered[rank], evidence, candidates[rank].score if self.fused else None)
            for rank, evidence in zip(result.selected_ranks, result.evidence, strict=True)
        ]
        return PipelineOutcome(result, kept)

    # -- one pack, end to end: plain data in, plain data out ----------------------------------------

    def packed(self, packs: Packs, query: str | None, returned: Returned[T]) -> PipelineOutcome[T]:
        """Rank what the sources returned, pack, note the depths they were asked for, and pair
        each kept evidence with its object: an adapter's one call into the pipeline per pack."""
        ordered, candidates = self.rank(returned.objects, returned.items)
        result = self.noted(packs.recall(candidates, query=query), returned.depths)
        return self.outcome(result, ordered, candidates)

    async def apacked(self, packs: Packs, query: str | None, returned: Returned[T]) -> PipelineOutcome[T]:
        """:meth:`packed`, packed by ``packs.arecall`` (an ``embed`` model never runs on the event loop)."""
        ordered, candidates = self.rank(returned.objects, returned.items)
        result = self.noted(await packs.arecall(candidates, query=query), returned.depths)
        return self.outcome(result, ordered, candidates)

    # -- the same, with the fetch and the translation handed in as callables ------------------------

    def read(self, fetched: Fetched[T]) -> list[list[Item]]:
        """``fetched`` read as Items by this pipeline's ``translate``."""
        translate = self.translate
        if translate is None:
            raise ConfigError("this Pipeline was built without translate=...: pass the Items to packed()")
        return [[translate(obj, i) for i, obj in enumerate(objs)] for objs in fetched]

    def recall(
        self,
        packs: Packs,
        query: str | None,
        fetch: Callable[[list[int | None]], Fetched[T]],
        *,
        fetch_k: object = None,
    ) -> PipelineOutcome[T]:
        """Fetch (``fetch(depths)``: per source, the host objects it returned), read, then :meth:`packed`."""
        asked = self.depths(packs, fetch_k)
        fetched = fetch(asked)
        return self.packed(packs, query, Returned(fetched, self.read(fetched), asked))

    async def arecall(
        self,
        packs: Packs,
        query: str | None,
        fetch: Callable[[list[int | None]], Awaitable[Fetched[T]]],
        *,
        fetch_k: object = None,
    ) -> PipelineOutcome[T]:
        """:meth:`recall` with an async fetch, packed by ``packs.arecall``."""
        asked = self.depths(packs, fetch_k)
        fetched = await fetch(asked)
        return await self.apacked(packs, query, Returned(fetched, self.read(fetched), asked))
