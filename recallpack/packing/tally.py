"""The record of one walk (:class:`Tally`): every candidate it reached, kept, dropped, merged or
withheld, and why, and what is left of each budget.

Only the ledger (:mod:`recallpack.packing.ledger`) writes it, through its one door
(:meth:`~recallpack.packing.ledger.Ledger.apply`), which checks each decision first: the recording
methods here are private, and check nothing themselves. Nothing here chooses what to keep.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from recallpack.packing.analysis import CallReading
from recallpack.packing.candidate import Candidate, LaneKind, Provenance, coerce_candidate, item_scopes
from recallpack.packing.citations import resource_of
from recallpack.packing.render import View
from recallpack.packing.result import Evidence, Outcome, Reason, TraceRecord
from recallpack.packing.scopes import PRIVATE, Reader, Scope
from recallpack.packing.tokenizers import Tokenizer
from recallpack.packing.twins import KeptTexts

__all__ = ["Tally", "Kept", "WalkSettings", "CutResult", "Cutter", "Counted", "Measure", "WITHHELD_REASONS"]

_PREVIEW_CHARS = 60
_SIZE_REASONS = (Reason.OVER_BUDGET, Reason.OVER_LANE_BUDGET)
#: Why an item is withheld: the reasons a report counts as withheld, not dropped.
WITHHELD_REASONS = (Reason.NO_READER, Reason.UNREADABLE, Reason.MALFORMED_SCOPE)
#: What stands for a withheld item in a walk, by why it is withheld: nothing of the item itself.
STAND_INS = {reason: Candidate(text=reason.value) for reason in WITHHELD_REASONS}
WITHHELD_BY = {id(stand_in): reason for reason, stand_in in STAND_INS.items()}


class CutResult(Protocol):
    """What a cutter returns: the kept text (elisions marked), the ranges it kept, how."""

    @property
    def text(self) -> str: ...
    @property
    def spans(self) -> tuple[tuple[int, int], ...]: ...
    @property
    def kind(self) -> str: ...


@dataclass(frozen=True)
class WalkSettings:
    """The validated settings one walk runs with (the Packer's, resolved once; a call changes
    only its bounds)."""

    max_tokens: int | None
    max_items: int | None
    #: The name the policy is registered by (:mod:`recallpack.packing.policies`).
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

    @property
    def label(self) -> str:
        return self.candidate.provenance.label

    def evidence(self) -> Evidence:
        if self.made is None:
            twins = self.twins or []
            cited = dict.fromkeys(c for c in (self.uri, *twins) if c is not None)
            self.made = Evidence(
                provenance=self.candidate.provenance,
                label=self.label,
                text=self.text,
                scopes=self.names,
                resource_uri=self.uri,
                token_count=self.cost,
                truncated=self.cut is not None,
                duplicates=len(twins),
                citations=tuple(cited) if twins else (),
            )
        return self.made


@dataclass(eq=False, repr=False)  # a ledger is one call's: compared and hashed by identity
class Tally:
    """What one walk has decided so far: kept items, trace entries, reason tallies, lane use, the
    header's cost. Only these methods change them, and only the ledger's door calls them."""

    candidates: Sequence[Any]
    settings: WalkSettings
    view: View
    tok: Tokenizer
    #: Said in the report (:meth:`note`).
    notes: tuple[str, ...] = field(default=(), init=False)

    def __post_init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """No decision made yet (a policy that chooses again, as ``passages`` does, starts here)."""
        self.header_cost = 0
        self.kept: list[Kept] = []
        self.entries: list[TraceRecord] = []
        self.tail_reason: Reason | None = None
        self.reasons: dict[str, int] = {}
        self.used = 0
        self.lane_used: dict[LaneKind | Provenance, int] = {}
        self.full: set[LaneKind | Provenance] = set()
        self.seen: KeptTexts[Kept] = KeptTexts()
        self.scope_order: dict[str, Scope] = {}
        self.floor_applied = False
        self.dropped_sizes: dict[int, int] = {}  # rank -> characters, for drops by size

    def lane_keys(self, c: Candidate) -> list[LaneKind | Provenance]:
        """The lanes with a budget that ``c`` spends: its lane, its provenance."""
        budgets = self.settings.lane_budgets
        return [k for k in (c.lane, c.provenance) if k in budgets] if budgets else []

    def lane_left(self, key: LaneKind | Provenance) -> int:
        return self.settings.lane_budgets[key] - self.lane_used.get(key, 0)

    def twin(self, c: Candidate) -> Kept | None:
        """The kept item identical to ``c`` (its content and scopes), if any."""
        return self.seen.find(c)

    def _keep(self, rank: int, c: Candidate, scopes: tuple[Scope, ...], names: tuple[str, ...], text: str,
             cost: int, header: int, cut: CutResult | None, uri: str | None, replace: bool = False,
             kept_spans: tuple[tuple[int, int], ...] | None = None) -> None:
        """Keep ``c`` at ``rank``, showing ``text`` for ``cost`` tokens (and ``header`` more for
        the scopes it adds); ``kept_spans`` when they are not the cut's own (pieces of a document)."""
        for scope in scopes:
            if scope.name != PRIVATE:
                self.scope_order.setdefault(scope.name, scope)
        self.header_cost += header
        kept = Kept(rank, c, text, cost, scopes, names, uri, cut)
        self.kept.append(kept)
        self.used += cost + header
        if self.settings.lane_budgets:
            for key in self.lane_keys(c):
                self.lane_used[key] = self.lane_used.get(key, 0) + cost
        if self.settings.dedupe:
            self.seen.add(c, kept)
        entry = self.entry(rank, c, Outcome.SELECTED, None, cost, cut)
        if kept_spans is not None:
            entry = entry._replace(kept_spans=kept_spans)
        if replace:
            self.entries[rank] = entry
        else:
            self.entries.append(entry)

    def _drop(self, rank: int, c: Candidate, reason: Reason, outcome: Outcome = Outcome.DROPPED,
             tokens: int | None = None) -> bool:
        """Record ``c`` as not kept, and why; True (the walk goes on)."""
        if reason in _SIZE_REASONS:
            self.dropped_sizes[rank] = len(c.text)
        self.count_reason(reason, 1)
        self.entries.append(self.entry(rank, c, outcome, reason, tokens, None))
        return True

    def _drop_twin(self, rank: int, c: Candidate) -> bool:
        """Drop ``c`` as identical to a kept item, which then stands for it: its citation joins
        the kept item's, in the evidence and in this entry of the trace."""
        twin = self.twin(c)
        if twin is None:  # no kept twin (any more): an ordinary drop, as a duplicate of what was shown
            return self._drop(rank, c, Reason.DUPLICATE)
        citation = resource_of(c, self.settings)
        # Appended in place: a copy per duplicate made n identical candidates cost O(n^2).
        if twin.twins is None:
            twin.twins = []
        twin.twins.append(citation)
        twin.made = None
        self.count_reason(Reason.DUPLICATE, 1)
        # entry()'s record of a drop, made at once with its twin and citation (a duplicate is
        # dropped once per copy: a million copies are a million of these).
        self.entries.append(
            TraceRecord(
                rank,
                Outcome.DROPPED,
                Reason.DUPLICATE,
                c.lane,
                c.score,
                None,
                None,
                (),
                c.text[:_PREVIEW_CHARS],
                twin.rank,
                citation,
            )
        )
        return True

    def _merge(self, rank: int, c: Candidate, into: int, kept_spans: tuple[tuple[int, int], ...]) -> None:
        """Record ``c`` as shown inside the item kept at rank ``into`` (a piece of its document)."""
        self.count_reason(Reason.MERGED, 1)
        record = self.entry(rank, c, Outcome.DROPPED, Reason.MERGED, None, None)
        self.entries.append(record._replace(cut="passages", kept_spans=kept_spans, merged_into=into))

    def _end(self, rank: int, c: Candidate, reason: Reason, tokens: int | None = None) -> bool:
        """Drop ``c`` and end the walk: everything after it is the tail, for ``reason``; False."""
        self._drop(rank, c, reason, tokens=tokens)
        return self._stop(reason)

    def _stop(self, reason: Reason) -> bool:
        """End the walk after what was just decided: everything after it is the tail, for
        ``reason``; False."""
        self.tail_reason = reason
        return False

    def note(self, text: str) -> None:
        """Say ``text`` in the report's notes (a policy that packed as another, pieces set apart)."""
        self.notes = (*self.notes, text)

    def _close_lanes(self, c: Candidate, cost: int) -> None:
        """``c``'s lanes that cannot hold ``cost`` more are full: later items in them are dropped."""
        self.full.update(k for k in self.lane_keys(c) if self.lane_left(k) < cost)

    def count_reason(self, reason: Reason | None, delta: int) -> None:
        if reason is not None:
            self.reasons[reason.value] = self.reasons.get(reason.value, 0) + delta
            if not self.reasons[reason.value]:
                del self.reasons[reason.value]

    @staticmethod
    def entry(rank: int, c: Candidate, outcome: Outcome, reason: Reason | None, tokens: int | None,
              cut: CutResult | None) -> TraceRecord:
        if outcome is Outcome.WITHHELD:
            # Whoever reads the trace may not read the item: its rank and why, nothing of it.
            return TraceRecord(rank, outcome, reason, None, None, None, None, (), "")
        preview = c.text[:_PREVIEW_CHARS]
        if cut is None:
            return TraceRecord(rank, outcome, reason, c.lane, c.score, tokens, None, (), preview)
        return TraceRecord(rank, outcome, reason, c.lane, c.score, tokens, cut.kind, cut.spans, preview)

    def give_back_last(self) -> None:
        """Drop the last kept item after the block it ends came out over budget."""
        last = self.kept.pop()
        self.entries[last.rank] = self.entries[last.rank]._replace(
            outcome=Outcome.DROPPED, reason=Reason.OVER_BUDGET, cut=None, kept_spans=()
        )
        self.count_reason(Reason.OVER_BUDGET, 1)
        self.used -= last.cost
        self.scope_order = {}
        for kept in self.kept:
            for scope in kept.scopes:
                if scope.name != PRIVATE:
                    self.scope_order.setdefault(scope.name, scope)
        header = self.view.header(self.scope_order.values()) if self.kept else 0
        self.used += header - self.header_cost
        self.header_cost = header

    def evidence(self) -> list[Evidence]:
        if not self.view.renders_items:
            for k in self.kept:
                if k.made is None:
                    k.uri = resource_of(k.candidate, self.settings)
        return [k.evidence() for k in self.kept]

    def shared_scopes(self) -> list[Scope]:
        return list(self.scope_order.values())


