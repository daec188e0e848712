"""Reciprocal rank fusion over Candidates: several ranked lanes in, one merit order out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from recallpack.packing.candidate import Candidate, LaneKind, coerce_lane, finite_score
from recallpack.packing.errors import ConfigError
from recallpack.packing.validation import check_count

__all__ = ["Fused", "fuse", "check_weights", "check_rrf_k", "DEFAULT_RRF_K"]

#: The usual constant of reciprocal rank fusion: it damps the weight of the very top ranks.
DEFAULT_RRF_K = 60


@dataclass(frozen=True)
class Fused:
    """One fused item: the candidate (tagged with its lane and fused score), and where it came
    from (its lane and its position in that lane's list), so an adapter can map it back."""

    candidate: Candidate
    lane: LaneKind
    index: int


def check_weights(
    weights: Mapping[Any, Any] | None, lanes: Sequence[LaneKind]
) -> dict[LaneKind, float]:
    """Weights per lane as finite, positive floats; lanes not among ``lanes`` are refused.

    A negative weight would reverse a lane's order and NaN would poison every score, so both
    fail here rather than quietly reorder the evidence.
    """
    if weights is None:
        return {}
    if not isinstance(weights, Mapping):
        raise ConfigError(f"weights={weights!r} must be a mapping of lane name to a positive number")
    checked: dict[LaneKind, float] = {}
    for name, weight in weights.items():
        lane = coerce_lane(name, field=f"weights key {name!r}")
        if lane not in lanes:
            raise ConfigError(
                f"weights has lane {lane.value!r}, which is not among the lanes given: "
                f"{', '.join(sorted(k.value for k in lanes))}"
            )
        try:
            finite = finite_score(weight, field=f"weights[{name!r}]")
        except ValueError as exc:
            raise ConfigError(f"{exc}; a weight is a finite number above 0") from None
        if finite is None:
            raise ConfigError(f"weights[{name!r}]=None must be a finite number above 0")
        if finite <= 0:
            raise ConfigError(f"weights[{name!r}]={weight!r} must be above 0 (1.0 is neutral)")
        checked[lane] = finite
    return checked


def check_rrf_k(value: object) -> int:
    return check_count(value, "rrf_k", 1, ConfigError, why=f" ({DEFAULT_RRF_K} is usual)")


def fuse(
    ranked: Mapping[LaneKind, Sequence[Candidate]],
    *,
    weights: Mapping[LaneKind, float] | None = None,
    k: int = DEFAULT_RRF_K,
) -> list[Fused]:
    """Fuse ranked lists: each item scores ``sum(weight / (k + rank))`` over the lanes that found it.

    An item found by several lanes (the same content and scope ids, what the packer dedupes on:
    its ``content`` when the host wrapped it, else its text) counts once, under the lane that
    gave it the largest vote; ties keep lane order, then rank.
    Each fused candidate takes that lane and the fused score.

    >>> a, b = Candidate(text="a"), Candidate(text="b")
    >>> [f.candidate.text for f in fuse({LaneKind.SOURCES: [a, b], LaneKind.FACTS: [b]})]
    ['b', 'a']
    """
    weights = weights or {}
    scores: dict[tuple[str, tuple[str, ...]], float] = {}
    best: dict[tuple[str, tuple[str, ...]], tuple[float, int, int, LaneKind, Candidate]] = {}
    for lane_order, (lane, items) in enumerate(ranked.items()):
        weight = weights.get(lane, 1.0)
        for index, item in enumerate(items):
            ident = (item.text if item.content is None else item.content, item.scope_ids)
            vote = weight / (k + index + 1)
            scores[ident] = scores.get(ident, 0.0) + vote
            if ident not in best or vote > best[ident][0]:
                best[ident] = (vote, lane_order, index, lane, item)
    order = sorted(scores, key=lambda ident: (-scores[ident], best[ident][1], best[ident][2]))
    fused = []
    for ident in order:
        _, _, index, lane, item = best[ident]
        tagged = item.model_copy(update={"lane": lane, "score": scores[ident]})
        fused.append(Fused(candidate=tagged, lane=lane, index=index))
    return fused
