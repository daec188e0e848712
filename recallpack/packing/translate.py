"""How a host's item (its text and metadata) becomes a Candidate, and a kept one gets its fields.

Both adapters call these, so the same texts and metadata become the same candidates (and so the
same bytes) whichever host they came through. Host-neutral: it imports no framework.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from typing import Any, Literal

from recallpack.packing.candidate import (
    Candidate,
    LaneKind,
    Span,
    candidate_of,
    coerce_lane,
    finite_score,
    scope_ids_of,
    sealed,
)
from recallpack.packing.errors import CandidateError, ConfigError, LaneError, RecallpackError
from recallpack.packing.results.result import Evidence
from recallpack.packing.validation import is_int

__all__ = [
    "UnknownLane",
    "EVIDENCE_METADATA_KEYS",
    "SCOPE_KEY",
    "candidate_from",
    "evidence_metadata",
    "check_on_unknown_lane",
    "scope_ids_from",
    "score_from",
    "recorded_score",
    "span_from",
]

UnknownLane = Literal["raise", "default"]

#: Metadata keys recallpack adds to each kept document or node.
EVIDENCE_METADATA_KEYS = (
    "provenance", "evidence_label", "scopes", "resource_uri", "token_count", "duplicates", "citations",
)
#: Metadata keys recallpack reads from upstream items (besides the lane key).
SCOPE_KEY = "scope_ids"
ARTIFACT_KEY = "artifact_id"
ARTIFACT_CONTENT_KEY = "artifact_content_id"
SCORE_KEYS = ("score", "relevance_score")

#: An item that already went through recallpack carries its provenance but no lane; any lane
#: of that provenance renders the same label, so packing it again keeps its label.
_LANE_OF_PROVENANCE = {
    "source": LaneKind.SOURCES,
    "session": LaneKind.WORKING_MEMORY,
    "derived": LaneKind.FACTS,
}


def check_on_unknown_lane(value: object) -> UnknownLane:
    if value not in ("raise", "default"):
        raise ConfigError(f"on_unknown_lane={value!r} must be 'raise' or 'default'")
    return value


def scope_ids_from(metadata: Mapping[str, Any]) -> tuple[tuple[str, ...], str | None]:
    """The scope ids an item's metadata holds, and why they cannot be read if they cannot.

    Absent means unscoped. Present, they must be one non-empty string or a non-empty list of
    non-empty strings: anything else (``0``, ``""``, ``False``, ``[]``, ``None``, ``[1]``, an
    id with a lone surrogate) is reported, so the packer withholds the item instead of showing
    it to every reader.
    """
    if SCOPE_KEY not in metadata:
        return (), None
    value = metadata[SCOPE_KEY]
    scope_ids = scope_ids_of(value)
    if scope_ids is not None:
        return scope_ids, None
    return (), (
        f"metadata[{SCOPE_KEY!r}]={value!r:.60} is not a non-empty list of non-empty scope id strings"
    )


def recorded_score(metadata: Mapping[str, Any]) -> tuple[object, str]:
    """The number an upstream recorded as its score in metadata (``score``, else
    ``relevance_score``), unchecked, and where it was read (``metadata['score']``); ``(None,
    "score")`` when it recorded none. :func:`candidate_from` checks it, after the item's scopes."""
    for key in SCORE_KEYS:
        value = metadata.get(key)
        if isinstance(value, numbers.Number) and not isinstance(value, bool):  # a Decimal too
            return value, f"metadata[{key!r}]"
    return None, "score"


def score_from(metadata: Mapping[str, Any], position: int | None = None) -> float | None:
    """The score an upstream recorded in metadata (:func:`recorded_score`), if it recorded a
    number there. A number that is not a finite float (NaN, an infinity, an int too large for a
    float, a Decimal or a complex) is a CandidateError naming the document, never a silent None."""
    value, field = recorded_score(metadata)
    try:
        return finite_score(value, field=field)
    except ValueError as exc:
        raise CandidateError(f"{_document(metadata, position)}: {exc}") from None


def _offset(value: object) -> int | None:
    return value if is_int(value, 0) else None


def span_from(text: str, metadata: Mapping[str, Any]) -> Span | None:
    """Where ``text`` sits in the document it was split from, from what splitters record:
    recallpack's token windows (``parent_hash``, ``start_char``, ``end_char``, in both hosts),
    else LangChain's ``add_start_index=True`` (``start_index`` with ``source``). None when
    neither is there (a ``start_index`` of -1, LangChain's "not found", is not there either),
    or when the offsets cannot be the text's (an end before the start, more characters than the
    text has): offsets are someone else's hints, never a reason to refuse an item.
    """
    parent = metadata.get("parent_hash")
    start, end = _offset(metadata.get("start_char")), _offset(metadata.get("end_char"))
    if isinstance(parent, str) and parent and start is not None and end is not None:
        if not start <= end <= start + len(text):
            return None
        return Span(parent=f"recallpack:{parent}", start=start, end=end, source="metadata['start_char']")
    source, start = metadata.get("source"), _offset(metadata.get("start_index"))
    if isinstance(source, str) and source and start is not None:
        end = start + len(text)
        return Span(parent=f"source:{source}", start=start, end=end, source="metadata['start_index']")
    return None


#: Metadata keys that name a document in an error message, in order.
_NAME_KEYS = ("source", "file_path", "file_name", "url", "id", "doc_id")


def _document(metadata: Mapping[str, Any], position: int | None) -> str:
    """How an error names an upstream item: its position and what its loader called it."""
    where = "an upstream item" if position is None else f"item {position}"
    for key in _NAME_KEYS:
        value = metadata.get(key)
        if isinstance(value, str) and value:
            return f"{where} ({key}={value!r:.80})"
    return where


def _lane(
    metadata: Mapping[str, Any],
    lane: LaneKind | str | None,
    lane_key: str,
    on_unknown_lane: UnknownLane,
    position: int,
) -> LaneKind:
    if lane is not None:
        return coerce_lane(lane)
    named = metadata.get(lane_key)
    if named is None:
        return _LANE_OF_PROVENANCE.get(str(metadata.get("provenance")), LaneKind.SOURCES)
    try:
        return coerce_lane(named, field=f"metadata[{lane_key!r}] of item {position}")
    except LaneError:
        if on_unknown_lane == "raise":
            raise
        return LaneKind.SOURCES


def candidate_from(
    text: str,
    metadata: Mapping[str, Any],
    *,
    position: int,
    lane: LaneKind | str | None = None,
    lane_key: str = "lane",
    on_unknown_lane: UnknownLane = "raise",
    score: object = None,
    score_field: str = "score",
    modality: str = "text",
    content: str | None = None,
    span: Span | None = None,
) -> Candidate:
    """A Candidate from an upstream item's text and metadata.

    The lane is ``lane`` when given, else ``metadata[lane_key]``, else the lane of a recallpack
    provenance the item already carries, else ``sources``. Scope ids come from
    ``metadata["scope_ids"]``, artifact ids from ``artifact_id`` and ``artifact_content_id``; a
    citation is read from the metadata by the packer (its ``citation_keys``); where the text sits
    in its document is ``span`` when the host knows it, else :func:`span_from` the metadata.
    ``score`` is what the host recorded (read from ``score_field``), checked here.

    Scopes are read first. An item that carries scopes (or malformed scope metadata) and is not
    well formed otherwise is not refused here, where the reader is not known: it becomes a
    stand-in (:func:`~recallpack.packing.candidate.sealed`) that the packer withholds, unless its
    reader may read it; then this same error is raised. An unscoped item is everyone's: its
    error is raised now.
    """
    scope_ids, scope_error = scope_ids_from(metadata)
    # Absent is unscoped; empty is refused.
    scoped: dict[str, Any] = {"scope_ids": scope_ids} if scope_ids else {}
    try:
        # Each value made here is already as a Candidate holds it: candidate_of builds the
        # Candidate without validating them again (what is not goes through validation).
        return candidate_of({
            "text": text,
            "lane": _lane(metadata, lane, lane_key, on_unknown_lane, position),
            **scoped,
            "scope_error": scope_error,
            "artifact_id": _optional_str(metadata.get(ARTIFACT_KEY)),
            "artifact_content_id": _optional_str(metadata.get(ARTIFACT_CONTENT_KEY)),
            "score": finite_score(score, field=score_field),
            "metadata": metadata,
            "modality": modality,
            "content": content,
            "span": span if span is not None else span_from(text, metadata),
        })
    except LaneError as exc:
        error: RecallpackError = exc
    except (CandidateError, ValueError) as exc:  # finite_score says what is wrong in a ValueError
        error = CandidateError(f"{_document(metadata, position)}: {exc}")
        error.__cause__ = exc
    if scope_ids or scope_error is not None:
        return sealed(text, scope_ids, scope_error, error)
    raise error


def _optional_str(value: object) -> str | None:
    return None if value is None else str(value)


def evidence_metadata(evidence: Evidence) -> dict[str, Any]:
    """The public fields recallpack adds to a kept item's metadata; ``duplicates`` and
    ``citations`` only when it stands for identical items dropped in its favour."""
    fields: dict[str, Any] = {
        "provenance": evidence.provenance.value,
        "evidence_label": evidence.label,
        "scopes": list(evidence.scopes),
        "resource_uri": evidence.resource_uri,
        "token_count": evidence.token_count,
    }
    if evidence.duplicates:
        fields["duplicates"] = evidence.duplicates
        fields["citations"] = list(evidence.citations)
    return fields

