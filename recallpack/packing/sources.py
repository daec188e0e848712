"""The upstreams of a pack as the core sees them, and how deep one call asks each of them.

An adapter asks this before it fetches, and hands what it fetched to the pipeline after
(:mod:`recallpack.packing.pipeline`): a value computed from plain settings, so one pack enters
the pipeline once and the pipeline never calls back into the adapter for its fetch.

>>> depths([Source(own_depth=4, forwards=True), Source(forwards=False)], max_tokens=2000)
[40, None]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from recallpack.packing.candidate import LaneKind
from recallpack.packing.limits import fetch_depth

__all__ = ["Source", "depths"]


@dataclass(frozen=True)
class Source:
    """One upstream as the pipeline sees it: the lane it answers for (None: each item's lane is
    read from its metadata), how many results it returns by its own settings when it says, whether
    the adapter can ask it for another number, and the most it can return (a small corpus)."""

    lane: LaneKind | None = None
    own_depth: int | None = None
    forwards: bool = False
    most: int | None = None


def depths(
    sources: Sequence[Source], max_tokens: int, max_items: int | None = None, fetch_k: int | None = None
) -> list[int | None]:
    """How many results to ask each source for: ``fetch_k`` when given; else, for a source that
    says its own depth, enough to fill ``max_tokens`` (:func:`~recallpack.packing.limits.fetch_depth`);
    else None (its own). Never more than a source holds; None for a source that cannot be asked."""
    asked: list[int | None] = []
    for source in sources:
        depth = None
        if source.forwards:
            if fetch_k is not None:
                depth = fetch_k
            elif source.own_depth is not None:
                depth = fetch_depth(max_tokens, max_items, source.own_depth)
        if depth is not None and source.most is not None:
            depth = min(depth, source.most)
        asked.append(depth)
    return asked
