"""What a walk's ledger is made of: its settings, a kept item, what a cut returns, what stands for
a withheld item, and :func:`withheld`, the scope check read before anything else of an item."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from recallpack.packing.candidate import Candidate, LaneKind, Provenance, item_scopes
from recallpack.packing.decisions import CutResult
from recallpack.packing.results.result import Evidence, Reason
from recallpack.packing.scopes import Reader, Scope

__all__ = [
    "Kept", "WalkSettings", "CutResult", "Cutter", "Counted", "Measure", "WITHHELD_REASONS", "STAND_INS",
    "WITHHELD_BY", "withheld",
]

#: Why an item is withheld: the reasons a report counts as withheld, not dropped.
WITHHELD_REASONS = (Reason.NO_READER, Reason.UNREADABLE, Reason.MALFORMED_SCOPE)
#: What stands for a withheld item in a walk, by why it is withheld: nothing of the item itself.
STAND_INS = {reason: Candidate(text=reason.value) for reason in WITHHELD_REASONS}
WITHHELD_BY = {id(stand_in): reason for reason, stand_in in STAND_INS.items()}


@dataclass(frozen=True)
class WalkSettings:
    """The validated settings one walk runs with (the Packer's, resolved once; a call changes
    only its bounds)."""

    max_tokens: int | None
    max_items: int | None
    #: The name the policy is registered by (:mod:`recallpack.packing.choosing.policies`).
    policy: str
    floor: bool
    reader: Reader | None
    lane_budgets: Mapping[LaneKind | Provenance, int]
    dedupe: bool
    resource_uri_template: str
    citation_keys: tuple[str, ...]
    language: str | None


class Cutter(Protocol):
    """``cutter(text, max_tokens=..., measure=...)``: the best cut of ``text`` such that
    ``measure(cut.text) <= max_tokens`` (``measure`` prices a text as its item renders it), or None."""

    def __call__(self, text: str, *, max_tokens: int, measure: Measure) -> CutResult | None: ...


#: The exact count of what the model is shown, and the block counted (None: none was rendered).
Counted = tuple[int, "str | None"]


class Measure(Protocol):
    def __call__(self, text: str) -> int: ...


@dataclass(slots=True)
class Kept:
    """One kept item: where it ranked, the candidate, the text kept (cut or whole), what it
    cost, its scopes and their names, its resource line, and the cut that made it fit (None
    when it fitted whole). Its Evidence is made only when a result asks for it: :func:`pack`
    never does."""

    rank: int
    candidate: Candidate
    text: str
    cost: int
    scopes: tuple[Scope, ...]
    names: tuple[str, ...]
    uri: str | None
    cut: CutResult | None
    made: Evidence | None = None
    #: The citations of identical items dropped in its favour (None: one had none).
    twins: list[str | None] | None = None
    #: Its item as the default block renders it, newline included, as it was priced (None: it
    #: was priced otherwise, as a cut is): the block joins these rather than render them again.
    shown: str | None = None

    @property
    def label(self) -> str:
        return self.candidate.provenance.label

    def evidence(self) -> Evidence:
        if self.made is None:
            twins = self.twins or []
            # Its own citation first, then its twins', each once (only an item with twins lists them).
            cited = tuple(dict.fromkeys(c for c in (self.uri, *twins) if c is not None)) if twins else ()
            provenance = self.candidate.provenance  # a property of a property: read once
            self.made = Evidence(
                provenance=provenance,
                label=provenance.label,
                text=self.text,
                scopes=self.names,
                resource_uri=self.uri,
                token_count=self.cost,
                truncated=self.cut is not None,
                duplicates=len(twins),
                citations=cited,
            )
        return self.made


def withheld(item: object, reader: Reader | None) -> Reason | None:
    """Why ``item`` (a Candidate, or a mapping of its fields) is withheld from ``reader``, read
    from its scope fields alone; None when the reader may read it. Fail closed: malformed scope
    fields withhold it, and so do any scopes when there is no reader."""
    scope_ids = item_scopes(item)
    if scope_ids is None:
        return Reason.MALFORMED_SCOPE
    if not scope_ids:
        return None
    if reader is None:
        return Reason.NO_READER
    return None if reader.can_read(scope_ids) else Reason.UNREADABLE
