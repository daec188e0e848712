"""What both adapters share, so the same texts and metadata become the same candidates (and
so the same bytes) whichever host they came through. Imports no host framework."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, Literal, TypeVar

from recallpack.packing.candidate import Candidate, LaneKind, coerce_lane
from recallpack.packing.errors import CandidateError, ConfigError, LaneError
from recallpack.packing.result import Evidence

__all__ = [
    "UnknownLane",
    "EVIDENCE_METADATA_KEYS",
    "candidate_from",
    "evidence_metadata",
    "reciprocal_rank_fusion",
    "check_on_unknown_lane",
    "fixed_lane",
]

T = TypeVar("T")
UnknownLane = Literal["raise", "default"]

#: Metadata keys recallpack adds to each kept document or node.
EVIDENCE_METADATA_KEYS = ("provenance", "evidence_label", "scopes", "resource_uri", "token_count")
#: Metadata keys recallpack reads from upstream items (besides the lane key).
SCOPE_KEY = "scope_ids"
ARTIFACT_KEY = "artifact_id"
ARTIFACT_CONTENT_KEY = "artifact_content_id"


def check_on_unknown_lane(value: object) -> UnknownLane:
    if value not in ("raise", "default"):
        raise ConfigError(f"on_unknown_lane={value!r} must be 'raise' or 'default'")
    return value


#: An item that already went through recallpack carries its provenance but no lane; any lane
#: of that provenance renders the same label, so packing it again keeps its label.
_LANE_OF_PROVENANCE = {
    "source": LaneKind.SOURCES,
    "session": LaneKind.WORKING_MEMORY,
    "derived": LaneKind.FACTS,
}


def fixed_lane(metadata: Mapping[str, Any], lane: LaneKind | None, lane_key: str) -> LaneKind | None:
    """The lane to force for an item: ``lane`` when set, else the lane of a recallpack
    provenance the item already carries, else None (``candidate_from`` reads ``lane_key``)."""
    if lane is not None:
        return lane
    if metadata.get(lane_key) is None:
        return _LANE_OF_PROVENANCE.get(str(metadata.get("provenance")))
    return None


def candidate_from(
    text: str,
    metadata: Mapping[str, Any],
    *,
    position: int,
    lane: LaneKind | str | None = None,
    lane_key: str = "lane",
    on_unknown_lane: UnknownLane = "raise",
    default_lane: LaneKind = LaneKind.SOURCES,
    score: float | None = None,
    modality: str = "text",
) -> Candidate:
    """A Candidate from an upstream item's text and metadata.

    The lane is ``lane`` when given, else ``metadata[lane_key]``, else ``default_lane``. Scope ids
    come from ``metadata["scope_ids"]`` (a str or a list), artifact ids from ``artifact_id`` and
    ``artifact_content_id``.
    """
    if lane is not None:
        kind = coerce_lane(lane)
    elif lane_key in metadata and metadata[lane_key] is not None:
        try:
            kind = coerce_lane(metadata[lane_key], field=f"metadata[{lane_key!r}] of item {position}")
        except LaneError:
            if on_unknown_lane == "raise":
                raise
            kind = default_lane
    else:
        kind = default_lane
    scope_ids = metadata.get(SCOPE_KEY) or ()
    if isinstance(scope_ids, str):
        scope_ids = (scope_ids,)
    try:
        return Candidate(
            text=text,
            lane=kind,
            scope_ids=tuple(str(s) for s in scope_ids),
            artifact_id=_optional_str(metadata.get(ARTIFACT_KEY)),
            artifact_content_id=_optional_str(metadata.get(ARTIFACT_CONTENT_KEY)),
            score=score,
            metadata=dict(metadata),
            modality=modality,
        )
    except CandidateError as exc:
        raise CandidateError(f"item {position}: {exc}") from exc


def _optional_str(value: object) -> str | None:
    return None if value is None else str(value)


def evidence_metadata(evidence: Evidence) -> dict[str, Any]:
    """The public fields recallpack adds to a kept item's metadata."""
    return {
        "provenance": evidence.provenance.value,
        "evidence_label": evidence.label,
        "scopes": list(evidence.scopes),
        "resource_uri": evidence.resource_uri,
        "token_count": evidence.token_count,
    }


def reciprocal_rank_fusion(
    ranked: Mapping[str, Sequence[T]],
    key: Callable[[T], Hashable],
    *,
    weights: Mapping[str, float] | None = None,
    k: int = 60,
) -> list[tuple[str, T, float]]:
    """Fuse ranked lists by reciprocal rank fusion: ``sum(weight / (k + rank))`` per item.

    Returns ``(lane, item, fused_score)`` best first. An item found by several lanes (equal
    ``key``) counts once, under the lane that ranked it best; ties keep lane order, then rank.
    """
    weights = dict(weights or {})
    unknown = set(weights) - set(ranked)
    if unknown:
        raise ConfigError(
            f"weights has lanes {sorted(unknown)} that are not in the lanes given: {sorted(ranked)}"
        )
    scores: dict[Hashable, float] = {}
    first: dict[Hashable, tuple[int, int, str, T]] = {}
    best: dict[Hashable, float] = {}
    for lane_order, (lane, items) in enumerate(ranked.items()):
        weight = weights.get(lane, 1.0)
        for rank, item in enumerate(items, start=1):
            ident = key(item)
            contribution = weight / (k + rank)
            scores[ident] = scores.get(ident, 0.0) + contribution
            if ident not in first or contribution > best[ident]:
                first[ident] = (lane_order, rank, lane, item)
                best[ident] = contribution
    order = sorted(scores, key=lambda ident: (-scores[ident], first[ident][0], first[ident][1]))
    return [(first[ident][2], first[ident][3], scores[ident]) for ident in order]
