"""Candidates: what an adapter hands the core, one per retrieved item, in rank order."""

from __future__ import annotations

import decimal
import math
import numbers
import re
from collections.abc import Mapping, Sequence
from enum import Enum
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import (
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    ValidationInfo,
    field_validator,
    model_serializer,
    model_validator,
)

from recallpack.packing.errors import CandidateError, LaneError, RecallpackError
from recallpack.packing.validation import CheckedModel

__all__ = [
    "ValueEnum",
    "LaneKind",
    "Provenance",
    "Candidate",
    "Span",
    "coerce_lane",
    "coerce_candidate",
    "clean_text",
    "finite_score",
    "scope_ids_of",
    "item_scopes",
    "sealed",
    "candidate_of",
]

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def clean_text(value: str) -> str:
    """``value`` with lone surrogates (what ``json.loads('"\\ud800"')`` gives) replaced by U+FFFD.

    They cannot be encoded as UTF-8, so they would crash every counter, digest and writer
    downstream; the replacement is what the model is shown and what is counted. A scan, and a
    copy only when one is found.
    """
    if value.isascii() or _LONE_SURROGATE.search(value) is None:
        return value
    return _LONE_SURROGATE.sub("\ufffd", value)


class ValueEnum(str, Enum):
    """A str enum that prints as its value (``f"{Reason.EMPTY}"`` is ``"empty"``) on every Python."""

    def __str__(self) -> str:
        return str(self.value)


class LaneKind(ValueEnum):
    """Where a candidate was found. Six internal kinds; only their provenance is ever rendered."""

    SOURCES = "sources"
    WORKING_MEMORY = "working_memory"
    FACTS = "facts"
    PROFILE = "profile"
    COMMUNITIES = "communities"
    OVERVIEW = "overview"

    @property
    def provenance(self) -> Provenance:
        return _PROVENANCE_OF[self]


class Provenance(ValueEnum):
    """The public class of a lane: what a reader of the evidence block is told."""

    SOURCE = "source"
    SESSION = "session"
    DERIVED = "derived"

    @property
    def label(self) -> str:
        return _LABELS[self]


_PROVENANCE_OF = {
    LaneKind.SOURCES: Provenance.SOURCE,
    LaneKind.WORKING_MEMORY: Provenance.SESSION,
    LaneKind.FACTS: Provenance.DERIVED,
    LaneKind.PROFILE: Provenance.DERIVED,
    LaneKind.COMMUNITIES: Provenance.DERIVED,
    LaneKind.OVERVIEW: Provenance.DERIVED,
}
_LABELS = {
    Provenance.SOURCE: "Source excerpt",
    Provenance.SESSION: "Recent session memory",
    Provenance.DERIVED: "Derived memory",
}
_LANE_NAMES = ", ".join(kind.value for kind in LaneKind)
#: A provenance's name as a lane: the lane kind it is first made of (the seeds name their lanes
#: "derived" and "session"; ``from_lanes({"derived": facts, "session": episodes})``).
_LANE_OF_PROVENANCE = {
    Provenance.SOURCE.value: LaneKind.SOURCES,
    Provenance.SESSION.value: LaneKind.WORKING_MEMORY,
    Provenance.DERIVED.value: LaneKind.FACTS,
}


def coerce_lane(value: object, *, field: str = "lane") -> LaneKind:
    """Return the LaneKind for ``value`` (a LaneKind or its name, or a provenance's name:
    ``"source"``, ``"session"``, ``"derived"`` are ``sources``, ``working_memory``, ``facts``),
    or raise LaneError."""
    if isinstance(value, LaneKind):
        return value
    if isinstance(value, str):
        name = value.strip().lower()
        try:
            return LaneKind(name)
        except ValueError:
            if name in _LANE_OF_PROVENANCE:
                return _LANE_OF_PROVENANCE[name]
    raise LaneError(
        f"{field}={value!r} is not a lane kind; use one of: {_LANE_NAMES} (or a provenance: "
        "source, session, derived)"
    )


class Span(CheckedModel):
    """Where a candidate's text sits in the document it was split from.

    The candidate's text *ends with* ``parent``'s characters ``start`` to ``end``; whatever comes
    before them is a header of the candidate's own (LlamaIndex shows a node's metadata that way).
    Two candidates with spans of one ``parent`` that overlap or touch are pieces of one document:
    the ``passages`` policy pays for their shared text once and shows them as one item.
    ``source`` names where the offsets were read, so an error can say which field is wrong.

    >>> Span(parent="source:guide.md", start=120, end=480).end
    480
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    parent: str = Field(min_length=1)
    start: int = Field(ge=0, strict=True)
    end: int = Field(ge=0, strict=True)
    source: str = "span"

    _error = CandidateError

    @model_validator(mode="after")
    def _ordered(self) -> Span:
        if self.end < self.start:
            raise CandidateError(
                f"{self.source}: end={self.end} is before start={self.start}; a span's end must "
                "be at or after its start"
            )
        return self


def finite_score(value: object, field: str = "score") -> float | None:
    """``value`` as a finite float, or None; anything else is a ValueError saying why.

    A number, not its text: "0.5" and True are refused, as are NaN, the infinities and an int
    too large for a float (``10**400``), so no score sorts or fuses as nonsense downstream.
    NumPy's scalars and Decimals (what a database driver returns) are numbers, taken as floats."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (numbers.Real, decimal.Decimal)):
        kind = type(value).__name__
        raise ValueError(f"{field} must be a number (an int or a float) or None, got {kind} {value!r:.40}")
    try:
        score = float(value)
    except OverflowError:
        raise ValueError(f"{field}={value!r:.40} does not fit a float; a score is a finite number") from None
    if not math.isfinite(score):
        raise ValueError(f"{field}={value!r} must be a finite number or None")
    return score


class Candidate(CheckedModel):
    """One retrieved item, in the order the caller should see it.

    >>> Candidate(text="Alice works at Initech.", lane="facts").lane.provenance.label
    'Derived memory'
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    text: str
    lane: Annotated[LaneKind, BeforeValidator(coerce_lane)] = LaneKind.SOURCES
    scope_ids: tuple[str, ...] = ()
    artifact_id: str | None = None
    artifact_content_id: str | None = None
    score: Annotated[float | None, BeforeValidator(finite_score)] = None
    #: Where the item can be found again (a path, a URL, a page), shown on its resource line
    #: when it has no artifact ids. Adapters fill it from what the host's loaders record.
    citation: str | None = None
    metadata: Mapping[str, Any] = Field(default_factory=dict)
    #: "text" for anything that can be rendered; adapters set another modality (an image node,
    #: say) so the walk can drop it with reason ``no_text`` instead of calling it empty.
    modality: str = "text"
    #: Set by adapters when the item's scope metadata is present but unreadable: the walk then
    #: withholds it (reason ``malformed_scope``) rather than show it to everyone.
    scope_error: str | None = None
    #: The item's own content when ``text`` wraps it in what the host adds for the model (a
    #: LlamaIndex node's metadata lines): duplicates are found by it. None: ``text`` itself.
    content: str | None = None
    #: Where the text sits in the document it was split from, when the splitter recorded it
    #: (adapters fill it from what the hosts record): lets ``passages`` merge overlapping pieces.
    span: Span | None = None

    if TYPE_CHECKING:
        # What validation accepts, for type checkers: a lane by name, scope ids as any sequence
        # (the fields hold the LaneKind and a tuple). tests/test_typing.py checks it names every
        # field, with the same defaults.
        def __init__(
            self,
            *,
            text: str,
            lane: LaneKind | str = LaneKind.SOURCES,
            scope_ids: Sequence[str] | str = (),
            artifact_id: str | None = None,
            artifact_content_id: str | None = None,
            score: float | None = None,
            citation: str | None = None,
            metadata: Mapping[str, Any] = ...,
            modality: str = "text",
            scope_error: str | None = None,
            content: str | None = None,
            span: Span | None = None,
        ) -> None: ...

    _error = CandidateError
    #: What was wrong with the item a scoped candidate stands in for (see :func:`sealed`): raised
    #: when it is validated, which happens only when its reader may read it.
    _deferred: RecallpackError | None = PrivateAttr(default=None)

    @field_validator("text", mode="before")
    @classmethod
    def _text_is_str(cls, value: object) -> object:
        if not isinstance(value, str):
            raise ValueError(f"text must be a str, got {type(value).__name__} {value!r:.60}")
        return clean_text(value)

    @field_validator(
        "artifact_id", "artifact_content_id", "citation", "content", "scope_error", mode="before"
    )
    @classmethod
    def _optional_text(cls, value: object, info: ValidationInfo) -> object:
        if value is None:
            return None
        if not isinstance(value, str):  # pydantic would decode bytes, and call it a str
            kind = type(value).__name__
            raise ValueError(f"{info.field_name} must be a str or None, got {kind} {value!r:.40}")
        return clean_text(value)

    @field_validator("modality", mode="before")
    @classmethod
    def _modality_is_str(cls, value: object) -> object:
        if not isinstance(value, str):
            raise ValueError(f"modality must be a str such as 'text', got {type(value).__name__}")
        return value

    @field_validator("scope_ids", mode="before")
    @classmethod
    def _scope_ids_tuple(cls, value: object) -> object:
        if isinstance(value, str):
            value = (value,)
        if not isinstance(value, (list, tuple)):
            raise ValueError(
                f"scope_ids must be a list of scope id strings, got {type(value).__name__}"
            )
        if not value:
            # One meaning everywhere: scope metadata that is present but empty is malformed (the
            # adapters withhold such an item). Unscoped is leaving scope_ids out.
            raise ValueError(
                f"scope_ids={value!r} is empty; leave scope_ids out for an unscoped item, or give "
                "the scope ids it belongs to (an empty list is never read as 'everyone')"
            )
        for scope_id in value:
            if not isinstance(scope_id, str) or not scope_id.strip():
                raise ValueError(
                    f"scope_ids holds {scope_id!r}; every scope id must be a non-empty str"
                )
            # Refused, not repaired: replacing a lone surrogate would make distinct ids equal
            # ("\ud800" and "\udc00" both "\ufffd"), and a reader holding one could read the other.
            if clean_text(scope_id) is not scope_id:
                raise ValueError(f"scope_ids holds {scope_id!r}, which has a lone surrogate")
        return tuple(value)

    @model_validator(mode="after")
    def _span_fits(self) -> Candidate:
        if self.span is not None and self.span.end - self.span.start > len(self.text):
            raise CandidateError(
                f"{self.span.source} says the text holds {self.span.end - self.span.start} "
                f"characters of its document ({self.span.start} to {self.span.end}), but it has "
                f"only {len(self.text)}; fix the offsets, or leave them out"
            )
        return self

    @property
    def provenance(self) -> Provenance:
        return self.lane.provenance

    @model_serializer(mode="wrap")
    def _without_empty_scopes(self, handler: SerializerFunctionWrapHandler) -> Any:
        # An unscoped candidate dumps without scope_ids, so its dump builds it again (an empty
        # scope_ids given is refused).
        dumped = handler(self)
        if isinstance(dumped, dict) and not dumped.get("scope_ids"):
            dumped.pop("scope_ids", None)
        return dumped


def scope_ids_of(value: object) -> tuple[str, ...] | None:
    """Scope ids as given (one id, or a list or tuple of them), when they are well formed: a
    non-empty sequence of non-empty strings. None when they are not (``0``, ``""``, ``[]``,
    ``None``, ``[1]``, an id with a lone surrogate: repaired, two distinct ids would become one).

    >>> scope_ids_of("org-1"), scope_ids_of(["me", "org-1"]), scope_ids_of([])
    (('org-1',), ('me', 'org-1'), None)
    """
    if isinstance(value, str):
        value = (value,)
    if isinstance(value, (list, tuple)) and value and all(
        isinstance(s, str) and s.strip() and clean_text(s) is s for s in value
    ):
        return tuple(value)
    return None


def item_scopes(item: object) -> tuple[str, ...] | None:
    """The scope ids of a candidate, or of a mapping of its fields, read from its scope fields
    alone: nothing else of it is looked at (a withheld item never is). ``()`` when it is unscoped
    (or is neither: validation names it); None when its scope fields are malformed, which
    withholds it (``scope_error`` set, or ``scope_ids`` present but not well formed)."""
    if isinstance(item, Candidate):
        if item.scope_error is not None:
            return None
        held = item.scope_ids  # model_copy and model_construct skip validation: checked here
        return held if isinstance(held, tuple) and (not held or scope_ids_of(held) is not None) else None
    if isinstance(item, Mapping):
        if item.get("scope_error") is not None:
            return None
        return scope_ids_of(item["scope_ids"]) if "scope_ids" in item else ()
    return ()


_FIELDS = frozenset(Candidate.model_fields)
#: The fields validation passes through as they are when each holds exactly a str or None.
_OPTIONAL_TEXTS = ("artifact_id", "artifact_content_id", "citation", "content", "scope_error")
_set = object.__setattr__


def candidate_of(fields: Mapping[str, Any]) -> Candidate:
    """``Candidate(**fields)``, without validating again what is already as validation keeps it.

    An adapter makes each field's value itself (a LaneKind, a finite float score, checked scope
    ids, the host's metadata dict), and validating them a second time is most of what turning
    fifty retrieved items into Candidates costs. When every value is of exactly the type
    validation would keep unchanged, the Candidate is built from them directly (texts cleaned
    and metadata copied as validation does): equal to the validated one, with the same fields
    set. Any other value, a wrong one included, goes through ``Candidate(**fields)``, so its
    error is validation's own.
    """
    kept = _kept_as_is(fields)
    if kept is None:
        return Candidate(**fields)
    candidate = Candidate.__new__(Candidate)
    _set(candidate, "__dict__", kept)
    _set(candidate, "__pydantic_fields_set__", set(fields))
    _set(candidate, "__pydantic_extra__", None)
    _set(candidate, "__pydantic_private__", {"_deferred": None})
    return candidate


def _kept_as_is(fields: Mapping[str, Any]) -> dict[str, Any] | None:
    """The values validation would hold for ``fields``, in field order, when it would only
    clean texts and copy the metadata; None when it would do more (or refuse one)."""
    if not fields.keys() <= _FIELDS:
        return None
    text, lane = fields.get("text"), fields.get("lane", LaneKind.SOURCES)
    if type(text) is not str or type(lane) is not LaneKind:
        return None
    scope_ids = fields.get("scope_ids", ())
    # Given, they must be a well-formed tuple (given empty, validation refuses them).
    if "scope_ids" in fields and (
        type(scope_ids) is not tuple or scope_ids_of(scope_ids) is None
        or any(type(scope_id) is not str for scope_id in scope_ids)
    ):
        return None
    texts: dict[str, str | None] = {}
    for name in _OPTIONAL_TEXTS:
        value = fields.get(name)
        if value is not None and type(value) is not str:
            return None
        texts[name] = None if value is None else clean_text(value)
    score = fields.get("score")
    if score is not None and (type(score) is not float or not math.isfinite(score)):
        return None
    metadata = fields.get("metadata", {})
    if type(metadata) is not dict or any(type(key) is not str for key in metadata):
        return None
    modality, span, text = fields.get("modality", "text"), fields.get("span"), clean_text(text)
    if type(modality) is not str:
        return None
    if span is not None and (type(span) is not Span or span.end - span.start > len(text)):
        return None  # not a Span, or one that does not fit the text: validation says which
    return {
        "text": text, "lane": lane, "scope_ids": scope_ids,
        "artifact_id": texts["artifact_id"], "artifact_content_id": texts["artifact_content_id"],
        "score": score, "citation": texts["citation"], "metadata": dict(metadata), "modality": modality,
        "scope_error": texts["scope_error"], "content": texts["content"], "span": span,
    }  # fmt: skip


def sealed(text: object, scope_ids: tuple[str, ...], scope_error: str | None,
           error: RecallpackError) -> Candidate:
    """A stand-in for a scoped item that is not well formed: its scopes (and its text, for the
    fusion of lanes), nothing else. The walk gates it by its scopes first; only when the reader
    may read it is it validated, and ``error`` (the item's own, naming it) raised."""
    scoped: dict[str, Any] = {"scope_ids": scope_ids} if scope_ids else {}
    stand_in = Candidate(text=text if isinstance(text, str) else "", **scoped, scope_error=scope_error)
    stand_in._deferred = error
    return stand_in


def coerce_candidate(item: object, position: int) -> Candidate:
    """Accept a Candidate or a mapping of its fields; name ``position`` when it is neither.
    Called only for an item its reader may read (:func:`item_scopes` gates it first)."""
    if isinstance(item, Candidate):
        # Read from pydantic's own store of private attributes: ``item._deferred`` goes through
        # BaseModel.__getattr__, a tenth of a walk's own time per candidate it reads.
        deferred = (item.__pydantic_private__ or {}).get("_deferred")
        if deferred is not None:
            raise deferred
        if not isinstance(item.text, str):  # model_construct() skips validation
            raise CandidateError(
                f"candidates[{position}].text must be a str, got {type(item.text).__name__}",
                field="text",
                index=position,
            )
        return item
    if isinstance(item, Mapping):
        try:
            return Candidate(**item)
        except (CandidateError, LaneError) as exc:
            raise type(exc)(f"candidates[{position}]: {exc}", field=exc.field, index=position) from exc
    raise CandidateError(
        f"candidates[{position}] must be a Candidate or a mapping of its fields, "
        f"got {type(item).__name__}",
        index=position,
    )
