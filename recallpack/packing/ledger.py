"""The ledger of one walk: its record (:class:`~recallpack.packing.tally.Tally`), what is left of
each budget, the gate, the one door every decision goes through, and the floor.

A policy (:mod:`recallpack.packing.policies`) decides (:mod:`recallpack.packing.decisions`); the
ledger applies each decision through :meth:`Ledger.apply`, which checks it first: in rank order and
once per candidate, gated before anything of the candidate is read (scopes first, and whatever the
policy asked, the gate's reason is what is recorded for a candidate it stops), priced by the view,
and held to ``max_items``, every lane's budget and the total. A decision that breaks a rule is a
:class:`~recallpack.packing.errors.PolicyError` naming the rule and the policy. When nothing fitted
whole, the floor keeps the top match that passed the gate, cut to the room. The walk
(:mod:`recallpack.packing.walk`) makes the result of it. Nothing here chooses what to keep.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import NamedTuple, cast

from recallpack.packing.analysis import CallReading
from recallpack.packing.candidate import Candidate, Provenance, coerce_candidate, item_scopes
from recallpack.packing.citations import resource_of
from recallpack.packing.cuts import Cut as Excerpt
from recallpack.packing.cuts import CutKind
from recallpack.packing.decisions import DECISIONS, Cut, Drop, End, Keep, Merge
from recallpack.packing.errors import PolicyError
from recallpack.packing.result import Outcome, Reason
from recallpack.packing.scopes import Reader, Scope
from recallpack.packing.tally import (
    STAND_INS,
    WITHHELD_BY,
    WITHHELD_REASONS,
    Counted,
    CutResult,
    Cutter,
    Kept,
    Measure,
    Tally,
    WalkSettings,
)

__all__ = [
    "Ledger", "Tally", "Kept", "WalkSettings", "CutResult", "Cutter", "Counted", "Measure", "Priced",
    "withheld", "WITHHELD_REASONS",
]

#: Reasons a policy may not give: the gate's own (it records them) and a merge's (Merge says it).
_NOT_A_POLICYS = frozenset((*WITHHELD_REASONS, Reason.MERGED))
_Gate = tuple[Reason, Outcome] | None


class Priced(NamedTuple):
    """A keep recallpack's own policies priced with the view already: what the door would work
    out again (``provisional``: it may be over the total for now; the policy's own correction and
    the walk's exact fit take it back, as ``passages`` does)."""

    scopes: tuple[Scope, ...]
    names: tuple[str, ...]
    text: str
    cost: int
    header: int
    cut: CutResult | None
    uri: str | None
    kept_spans: tuple[tuple[int, int], ...] | None = None
    provisional: bool = False


@dataclass(eq=False, repr=False)
class Ledger(Tally):
    """The ledger of one walk: the record (:class:`Tally`), each candidate read and gated (scopes
    first), what an item looks like and what room it has, the door every decision goes through
    (:meth:`apply`), and the floor. ``cutter`` cuts an item to its room (by focus on the query,
    or by head). A policy never holds it: it is handed a read-only
    :class:`~recallpack.packing.decisions.PolicyView`."""

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
        #: The last candidate gated, and the state it was gated in (what was decided and kept): a
        #: policy that looks at a candidate, then decides it, has it gated once.
        self._looked: tuple[int, int, int, Candidate, _Gate] | None = None
        #: Whether the ledger itself ended the walk (the item cap was reached): the walk then stops
        #: asking the policy for decisions, and a late one is ignored, not an error.
        self.ended_by_ledger = False

    def read(self, rank: int) -> Candidate:
        """Candidate ``rank``, validated; for a withheld one, the stand-in of why. Its scopes are
        read first and alone: a withheld item is never validated, looked at again or named."""
        item = self.candidates[rank]
        reason = withheld(item, self.settings.reader)
        return coerce_candidate(item, rank) if reason is None else STAND_INS[reason]

    def _gated(self, rank: int) -> tuple[Candidate, _Gate]:
        """Candidate ``rank`` read (:meth:`read`) and gated (:meth:`gate`) in the present state."""
        looked = self._looked
        entries, kept = len(self.entries), len(self.kept)
        if looked is not None and looked[0] == rank and looked[1] == entries and looked[2] == kept:
            return looked[3], looked[4]
        c = self._reads.get(rank)
        if c is None:
            c = self._reads[rank] = self.read(rank)
        gate = self.gate(c)
        self._looked = (rank, entries, kept, c, gate)
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
        """The resource line of ``c`` (:func:`~recallpack.packing.citations.resource_of`), worked
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

    # -- the door -------------------------------------------------------------------------------

    def apply(self, decision: object, priced: Priced | None = None) -> bool:
        """Apply one decision, checked (see the module's docstring); True when it kept the
        candidate. ``priced``: a keep recallpack's own policies priced with the view already."""
        kind = type(decision)
        if kind not in DECISIONS:
            raise self.broken("decision", f"{decision!r:.80} is not a decision: yield Keep, Cut, Drop, Merge or End")
        if self.tail_reason is not None:
            if self.ended_by_ledger:
                return False  # the item cap ended it: what the policy still asks is not done
            raise self.broken("end", f"{kind.__name__} came after the walk ended: decide nothing after End")
        if kind is End:
            return self._apply_end(decision)  # type: ignore[arg-type]
        rank = self.check_rank(decision.rank, kind.__name__)  # type: ignore[union-attr]
        self._catch_up(rank)
        c, gate = self._gated(rank)
        if gate is not None:  # whatever the policy asked, the gate's reason is recorded
            self._record_gate(rank, c, gate)
            return False
        if kind is Drop:
            reason = self._policy_reason(decision.reason, rank)  # type: ignore[union-attr]
            self._drop(rank, c, reason, tokens=self._tokens(decision.tokens, rank))  # type: ignore[union-attr]
            return False
        if kind is Merge:
            return self._apply_merge(rank, c, decision)  # type: ignore[arg-type]
        cap = self.settings.max_items
        if cap is not None and len(self.kept) >= cap:
            self.ended_by_ledger = True
            return self._end(rank, c, Reason.OVER_ITEM_CAP)
        if kind is Cut:
            return self._apply_cut(rank, c, decision.room, record=True)  # type: ignore[union-attr]
        return self._apply_keep(rank, c, decision.excerpt, priced)  # type: ignore[union-attr]

    def finish(self) -> None:
        """After a policy's choice: every candidate is decided, or the walk ended. Candidates the
        gate stops are recorded; one it shows that was never decided breaks the rule of End."""
        if self.tail_reason is None:
            self._catch_up(len(self.candidates), "end")

    def broken(self, rule: str, said: str, rank: int | None = None) -> PolicyError:
        policy = self.settings.policy
        where = "" if rank is None else f" (candidate {rank})"
        return PolicyError(
            f"policy {policy!r} broke the rule of {rule}{where}: {said}", rule=rule, policy=policy, index=rank
        )

    def check_rank(self, rank: object, what: str) -> int:
        if type(rank) is not int or not 0 <= rank < len(self.candidates):
            said = f"{what}'s rank={rank!r:.40} is not a candidate's rank (0 to {len(self.candidates) - 1})"
            raise self.broken("rank", said)
        return rank

    def check_text(self, text: object, rank: int) -> str:
        if not isinstance(text, str):
            raise self.broken("text", f"text is {type(text).__name__}, not a str", rank)
        return text

    def price(self, rank: int, c: Candidate, text: str) -> int:
        """What ``c`` costs showing ``text``, with what its scopes add to the header."""
        scopes = self.scopes_of(c)
        header = self.view.header_delta(self, scopes)
        return header + self.view.item(self, c, self.names(scopes), text, self.uri(c), None)

    def _catch_up(self, rank: int, rule: str = "rank order") -> None:
        """Record the gate's reason for each undecided candidate before ``rank``; one the gate
        shows was skipped, and one already decided is decided again: both break a rule."""
        decided = len(self.entries)
        if rank < decided:
            raise self.broken(rule, "decided twice, or out of rank order: decide each candidate once, in order", rank)
        for skipped in range(decided, rank):
            c, gate = self._gated(skipped)
            if gate is None:
                said = "never decided: decide every candidate the gate shows, in rank order, or End the walk"
                raise self.broken(rule, said, skipped)
            self._record_gate(skipped, c, gate)

    def _record_gate(self, rank: int, c: Candidate, gate: tuple[Reason, Outcome]) -> None:
        if gate[0] is Reason.DUPLICATE:
            self._drop_twin(rank, c)  # its citation joins its kept twin's
        else:
            self._drop(rank, c, gate[0], gate[1])

    def _policy_reason(self, reason: object, rank: int | None) -> Reason:
        if not isinstance(reason, Reason) or reason in _NOT_A_POLICYS:
            said = f"reason={reason!r:.40} is not a policy's: the gate gives withheld ones, Merge gives merged"
            raise self.broken("reason", said, rank)
        return reason

    def _tokens(self, tokens: object, rank: int | None) -> int | None:
        if tokens is not None and type(tokens) is not int:
            raise self.broken("tokens", f"tokens={tokens!r:.40} is not a count (an int)", rank)
        return tokens

    def _apply_end(self, decision: End) -> bool:
        reason = self._policy_reason(decision.reason, decision.rank)
        if decision.rank is None:
            return self._stop(reason)
        rank = self.check_rank(decision.rank, "End")
        tokens = self._tokens(decision.tokens, rank)
        self._catch_up(rank)
        c, gate = self._gated(rank)
        if gate is not None:
            self._record_gate(rank, c, gate)
            return self._stop(reason)
        return self._end(rank, c, reason, tokens)

    def _apply_merge(self, rank: int, c: Candidate, decision: Merge) -> bool:
        into = decision.into
        if type(into) is not int or not any(k.rank == into for k in self.kept):
            raise self.broken("merge", f"into={into!r:.40} is not the rank of a kept item", rank)
        self._merge(rank, c, into, self._spans(decision.spans, rank))
        return False

    def _spans(self, spans: object, rank: int) -> tuple[tuple[int, int], ...]:
        if isinstance(spans, tuple) and all(
            isinstance(s, tuple) and len(s) == 2 and all(type(x) is int and x >= 0 for x in s) for s in spans
        ):
            return spans
        raise self.broken("spans", f"spans={spans!r:.60} is not a tuple of (start, end) offsets", rank)

    def _apply_cut(self, rank: int, c: Candidate, room: object, record: bool) -> bool:
        if room is not None and (type(room) is not int or room <= 0):
            raise self.broken("cut", f"room={room!r:.40} is not a number of tokens (an int, 1 or more)", rank)
        scopes = self.scopes_of(c)
        header = self.view.header_delta(self, scopes)
        *_, limit = self.limits(c, header)
        if limit is None and room is None:  # nothing bounds it: kept whole
            return self._apply_keep(rank, c, None, None)
        target = room if limit is None else limit if room is None else min(room, limit)
        if target > 0 and self._keep_cut(rank, c, scopes, header, target):
            return True
        if record:
            self._drop(rank, c, Reason.OVER_BUDGET)
        return False

    def _apply_keep(self, rank: int, c: Candidate, excerpt: object, priced: Priced | None) -> bool:
        if priced is None:
            scopes = self.scopes_of(c)
            names, uri = self.names(scopes), self.uri(c)
            cut = None if excerpt is None else self._excerpt(excerpt, rank)
            text = c.text if cut is None else cut.text
            header = self.view.header_delta(self, scopes)
            room, lane_room, limit = self.limits(c, header)
            cost = self.view.item(self, c, names, text, uri, limit)
            spans = None
        else:
            scopes, names, text, cost, header, cut, uri, spans, provisional = priced
            room, lane_room, _ = self.limits(c, header)
            if provisional:
                room = None
        if lane_room is not None and cost > lane_room:  # its lane is spent: later items in it are dropped
            self._close_lanes(c, cost)
            self._drop(rank, c, Reason.OVER_LANE_BUDGET, tokens=cost)
            return False
        if room is not None and cost > room:
            self._drop(rank, c, Reason.OVER_BUDGET, tokens=cost)
            return False
        self._keep(rank, c, scopes, names, text, cost, header, cut, uri, kept_spans=spans)
        return True

    def apply_cut_quietly(self, rank: int, room: object) -> bool:
        """A cut as the old ``keep_cut`` made it: nothing recorded when no cut fits."""
        self._catch_up(rank)
        c, gate = self._gated(rank)
        if gate is not None:
            self._record_gate(rank, c, gate)
            return False
        return self._apply_cut(rank, c, room, record=False)

    def _excerpt(self, excerpt: object, rank: int) -> CutResult:
        text = self.check_text(getattr(excerpt, "text", None), rank)
        kind = getattr(excerpt, "kind", None)
        if not isinstance(kind, str):
            raise self.broken("excerpt", f"the excerpt's kind is {type(kind).__name__}, not a str", rank)
        return Excerpt(text, self._spans(getattr(excerpt, "spans", None), rank), cast(CutKind, kind))

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
