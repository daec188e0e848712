"""The ledger of one walk: its record (:class:`Tally`), what is left of each budget, the gate, and
the floor. Only its door (:mod:`recallpack.packing.choosing.door`) records a policy's decisions.

A policy (:mod:`recallpack.packing.choosing.policies`) decides
(:mod:`recallpack.packing.decisions`); the door
(:meth:`~recallpack.packing.choosing.door.Door.apply`) applies each decision, checked first: in rank
order and once per candidate, gated before anything of the candidate is read (scopes first, and
whatever the policy asked, the gate's reason is what is recorded for a candidate it stops), priced
by the view, and held to ``max_items``, every lane's budget and the total. A decision that breaks a
rule is a :class:`~recallpack.packing.errors.PolicyError` naming the rule and the policy. When
nothing fitted whole, the floor keeps the top match that passed the gate, cut to the room. The walk
(:mod:`recallpack.packing.choosing.walk`) makes the result of it. Nothing here chooses what to keep."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from recallpack.packing.block.citations import resource_of
from recallpack.packing.block.render import View
from recallpack.packing.candidate import Candidate, LaneKind, Provenance, coerce_candidate
from recallpack.packing.choosing.records import (
    STAND_INS,
    WITHHELD_BY,
    WITHHELD_REASONS,
    Counted,
    CutResult,
    Cutter,
    Kept,
    Measure,
    WalkSettings,
    withheld,
)
from recallpack.packing.choosing.twins import KeptTexts
from recallpack.packing.reading.analysis import CallReading
from recallpack.packing.results.result import Evidence, Outcome, Reason, TraceRecord
from recallpack.packing.scopes import PRIVATE, Scope
from recallpack.packing.tokenizers import Tokenizer

__all__ = [
    "Ledger", "Tally", "Kept", "WalkSettings", "CutResult", "Cutter", "Counted", "Measure",
    "withheld", "WITHHELD_REASONS",
]

_PREVIEW_CHARS = 60
_SIZE_REASONS = (Reason.OVER_BUDGET, Reason.OVER_LANE_BUDGET)
_Gate = tuple[Reason, Outcome] | None


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
        #: The last candidate gated, and what the gate said: good until anything is recorded
        #: (every recorder forgets it), so a policy that looks at a candidate, then decides it,
        #: has it read and gated once.
        self._looked: tuple[int, Candidate, _Gate] | None = None

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
             kept_spans: tuple[tuple[int, int], ...] | None = None, shown: str | None = None) -> None:
        """Keep ``c`` at ``rank``, showing ``text`` for ``cost`` tokens (and ``header`` more for
        the scopes it adds); ``kept_spans`` when they are not the cut's own (pieces of a document);
        ``shown``, its item rendered as it was priced (:meth:`.View.item_shown`)."""
        self._looked = None
        for scope in scopes:
            if scope.name != PRIVATE:
                self.scope_order.setdefault(scope.name, scope)
        if header:
            self.header_cost += header
        kept = Kept(rank, c, text, cost, scopes, names, uri, cut, None, None, shown)
        self.kept.append(kept)
        self.used += cost + header
        settings = self.settings
        if settings.lane_budgets:
            for key in self.lane_keys(c):
                self.lane_used[key] = self.lane_used.get(key, 0) + cost
        if settings.dedupe:
            self.seen.add(c, kept)
        preview = c.text[:_PREVIEW_CHARS]
        if cut is None:  # entry()'s record of a keep, made at once: the walk's hot path
            spans = () if kept_spans is None else kept_spans
            entry = TraceRecord(rank, Outcome.SELECTED, None, c.lane, c.score, cost, None, spans, preview)
        else:
            entry = TraceRecord(rank, Outcome.SELECTED, None, c.lane, c.score, cost, cut.kind,
                                cut.spans if kept_spans is None else kept_spans, preview)
        if replace:
            self.entries[rank] = entry
        else:
            self.entries.append(entry)

    def _drop(self, rank: int, c: Candidate, reason: Reason, outcome: Outcome = Outcome.DROPPED,
             tokens: int | None = None) -> bool:
        """Record ``c`` as not kept, and why; True (the walk goes on)."""
        self._looked = None
        if reason in _SIZE_REASONS:
            self.dropped_sizes[rank] = len(c.text)
        self.count_reason(reason, 1)
        self.entries.append(self.entry(rank, c, outcome, reason, tokens, None))
        return True

    def _drop_twin(self, rank: int, c: Candidate) -> bool:
        """Drop ``c`` as identical to a kept item, which then stands for it: its citation joins
        the kept item's, in the evidence and in this entry of the trace."""
        self._looked = None
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
        self._looked = None
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
            key, reasons = reason.value, self.reasons  # an enum's value is a property: read once
            count = reasons[key] = reasons.get(key, 0) + delta
            if not count:
                del reasons[key]

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
        self._looked = None
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


@dataclass(eq=False, repr=False)
class Ledger(Tally):
    """The ledger of one walk: the record (:class:`Tally`), each candidate read and gated (scopes
    first), what an item looks like and what room it has, and the floor. Every decision reaches it
    through its door (:meth:`.Door.apply`, in door.py: the ledger is what the door records in).
    ``cutter`` cuts an item to its room (by focus on the query, or by head). A policy never holds
    it: it is handed a read-only :class:`~recallpack.packing.choosing.door.PolicyView`."""

    cutter: Cutter | None = None
    #: How the call reads its query and texts, chosen once (:class:`.CallReading`).
    reading: CallReading | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        self.resources: dict[int, tuple[Candidate, str | None]] = {}
        self.looks: dict[int, tuple[tuple[Scope, ...], tuple[str, ...], str | None]] = {}
        self.frames: dict[tuple[Provenance, tuple[str, ...], str | None], int] = {}
        #: Each candidate read, by rank: read once a call, whoever asks (a choice made again too).
        self._reads: dict[int, Candidate] = {}

    def reset(self) -> None:
        super().reset()
        #: Whether the ledger itself ended the walk (the item cap was reached): the walk then stops
        #: asking the policy for decisions, and a late one is ignored, not an error.
        self.ended_by_ledger = False

    def read(self, rank: int) -> Candidate:
        """Candidate ``rank``, validated; for a withheld one, the stand-in of why. Its scopes are
        read first and alone: a withheld item is never validated, looked at again or named."""
        item = self.candidates[rank]
        if type(item) is Candidate and item.scope_ids == () and item.scope_error is None:
            # Most items: a Candidate in no scope, readable by anyone; validated unless it was
            # made without validation (what coerce_candidate checks then, checked here).
            held = item.__pydantic_private__
            if (not held or held.get("_deferred") is None) and type(item.text) is str:
                return item
        reason = withheld(item, self.settings.reader)
        return coerce_candidate(item, rank) if reason is None else STAND_INS[reason]

    def _gated(self, rank: int) -> tuple[Candidate, _Gate]:
        """Candidate ``rank`` read (:meth:`read`, once a call) and gated (:meth:`gate`) now."""
        looked = self._looked
        if looked is not None and looked[0] == rank:
            return looked[1], looked[2]
        c = self._reads.get(rank)
        if c is None:
            c = self._reads[rank] = self.read(rank)
        gate = self.gate(c)
        self._looked = (rank, c, gate)
        return c, gate

    def gated_now(self, rank: int) -> tuple[Candidate, _Gate]:
        """Candidate ``rank`` read and gated, its read not kept: a walk in rank order (the
        in-order policies) reads each candidate once anyway."""
        c = self.read(rank)
        gate = self.gate(c)
        self._looked = (rank, c, gate)
        return c, gate

    def shown(self, rank: int) -> Candidate | None:
        """Candidate ``rank`` if the gate shows it now, else None; nothing is recorded."""
        c, gate = self._gated(rank)
        return c if gate is None else None

    def gate(self, c: Candidate) -> tuple[Reason, Outcome] | None:
        """Why ``c`` (as :meth:`read` gives it) cannot be shown at all, whatever the room; None
        when it can."""
        reason = WITHHELD_BY.get(id(c))
        if reason is not None:  # first: nothing else of a withheld item is looked at
            return reason, Outcome.WITHHELD
        if c.modality != "text":
            return Reason.NO_TEXT, Outcome.DROPPED
        if not c.text or c.text.isspace():  # isspace() scans without copying the text
            return Reason.EMPTY, Outcome.DROPPED
        if self.settings.dedupe and self.seen and self.twin(c) is not None:
            return Reason.DUPLICATE, Outcome.DROPPED
        if self.full and any(key in self.full for key in self.lane_keys(c)):
            return Reason.OVER_LANE_BUDGET, Outcome.DROPPED
        return None

    def limits(self, c: Candidate, header: int) -> tuple[int | None, int | None, int | None]:
        """The room left, the room left in ``c``'s lanes, and the tighter of the two (None: no
        bound): what ``c`` is priced within, with ``header`` more for its scopes."""
        s = self.settings
        room = None if s.max_tokens is None else s.max_tokens - self.used - header
        if not s.lane_budgets:
            return room, None, room
        lefts = [self.lane_left(k) for k in self.lane_keys(c)]
        lane_room = min(lefts) if lefts else None
        if lane_room is None:
            return room, None, room
        return room, lane_room, lane_room if room is None else min(room, lane_room)

    def scopes_of(self, c: Candidate) -> tuple[Scope, ...]:
        if not c.scope_ids:  # most items: nothing to resolve
            return ()
        if self.settings.reader is not None:
            return self.settings.reader.resolve(c.scope_ids)
        return tuple(Scope(name=s) for s in c.scope_ids)

    @staticmethod
    def names(scopes: tuple[Scope, ...]) -> tuple[str, ...]:
        return tuple(s.name for s in scopes) if scopes else ()

    def resource(self, c: Candidate) -> str | None:
        """The resource line of ``c`` (:func:`~recallpack.packing.block.citations.resource_of`), worked
        out once per walk: the passages policy also tells pieces of documents apart by it."""
        found = self.resources.get(id(c))
        if found is None:  # held with its candidate, so that no other one can take its id
            found = self.resources[id(c)] = (c, resource_of(c, self.settings))
        return found[1]

    def uri(self, c: Candidate) -> str | None:
        # Made where it is priced; when items are not rendered, evidence() makes it for the kept.
        return self.resource(c) if self.view.renders_items else None

    def look(self, c: Candidate) -> tuple[tuple[Scope, ...], tuple[str, ...], str | None]:
        """An item's scopes, their names and its resource line: worked out once per call."""
        key = id(c)
        found = self.looks.get(key)
        if found is None:
            scopes = self.scopes_of(c)
            found = self.looks[key] = (scopes, self.names(scopes), self.uri(c))
        return found

    def framing(self, c: Candidate) -> int:
        """What an item adds to the block around its text (label, resource line, joins)."""
        _, names, uri = self.look(c)
        key = (c.provenance, names, uri)  # what the framing is made of: items often share it
        cost = self.frames.get(key)
        if cost is None:
            cost = self.frames[key] = self.view.item(self, c, names, "", uri, None)
        return cost

    def floor_if_empty(self) -> None:
        """Nothing kept, with the floor on: keep the top readable match, cut to its room; a
        later one only if an earlier cannot be cut at all (its lane has no room), so merit
        order still decides."""
        if not self.kept and self.settings.floor:
            for rank in list(self.dropped_sizes):
                if self._floor(rank):
                    break

    def _floor(self, rank: int) -> bool:
        """Nothing fitted whole: keep the match at ``rank``, cut to the room it has. It is read
        and gated again (scopes first): whatever a policy recorded of it, a withheld item is
        never kept, looked at or validated here."""
        c = self.read(rank)
        if self.gate(c) is not None:
            return False
        scopes = self.scopes_of(c)
        header = self.view.header_delta(self, scopes)
        *_, limit = self.limits(c, header)
        if limit is None or limit <= 0:
            return False
        old = self.entries[rank]
        self.count_reason(old.reason, -1)
        if self._keep_cut(rank, c, scopes, header, limit, replace=True):
            self.floor_applied = True
            del self.dropped_sizes[rank]
            return True
        self.count_reason(old.reason, 1)
        return False

    def _keep_cut(self, rank: int, c: Candidate, scopes: tuple[Scope, ...], header: int, room: int,
                  replace: bool = False) -> bool:
        """Keep ``c`` cut to ``room`` tokens as its item renders; False when no cut fits."""
        names, uri = self.names(scopes), self.uri(c)
        # What the cut text costs rendered in its item: the view's own price, handed down.
        measure = functools.partial(self.view.item, self, c, names, uri=uri, limit=room)
        if self.cutter is None:  # a ledger made without one cuts nothing
            return False
        cut = self.cutter(c.text, max_tokens=room, measure=measure)
        if cut is None:
            return False
        cost = measure(cut.text)
        if cost > room:  # a cutter's promise, checked: the budget never rests on it alone
            return False
        self._keep(rank, c, scopes, names, cut.text, cost, header, cut, uri, replace=replace)
        return True

    def recut_last(self, excess: int) -> bool:
        """Cut the last kept item (already a cut) ``excess`` tokens shorter; False if it cannot be."""
        last = self.kept[-1]
        if last.cut is None:
            return False
        self.give_back_last()
        self.count_reason(Reason.OVER_BUDGET, -1)
        c = last.candidate
        scopes = self.scopes_of(c)
        header = self.view.header_delta(self, scopes)
        room = last.cost - excess
        if room > 0 and self._keep_cut(last.rank, c, scopes, header, room, replace=True):
            self.kept[-1].twins = last.twins  # it still stands for the same duplicates
            return True
        self.count_reason(Reason.OVER_BUDGET, 1)
        return False
