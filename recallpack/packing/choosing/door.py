"""The one door every decision of a policy goes through (:meth:`Door.apply`), and its rules.

Each decision (:mod:`recallpack.packing.decisions`) is checked before anything is recorded: in
rank order and once per candidate (a candidate the gate stops on the way is recorded with the
gate's reason; one it shows that was skipped is an error), gated first (whatever the policy asked,
the gate's reason is what is recorded for a candidate it stops: nothing of a withheld item is
read), priced by the view whatever the policy said it cost, and held to ``max_items`` (a keep past
it ends the walk there), its lanes' budgets (it is dropped, and the lane closed) and the total (it
is dropped). A decision that breaks a rule is a :class:`~recallpack.packing.errors.PolicyError`
naming the rule and the policy, raised, never asserted, so ``python -O`` keeps it.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple, cast, overload

from recallpack.packing.candidate import Candidate, LaneKind, Provenance
from recallpack.packing.choosing.cuts import CutKind, Excerpt
from recallpack.packing.choosing.ledger import Ledger
from recallpack.packing.choosing.records import WITHHELD_REASONS, CutResult
from recallpack.packing.decisions import DECISIONS, Cut, Drop, End, Keep, Merge
from recallpack.packing.errors import PolicyError
from recallpack.packing.results.result import Outcome, Reason
from recallpack.packing.scopes import Scope

__all__ = ["Door", "Priced", "PolicyView", "LEGACY_NAMES", "keep_own"]

#: Reasons a policy may not give: the gate's own (it records them) and a merge's (Merge says it).
_NOT_A_POLICYS = frozenset((*WITHHELD_REASONS, Reason.MERGED))


class Priced(NamedTuple):
    """What candidate ``rank`` costs kept, as :meth:`PolicyView.price` worked it out: ``cost``, its
    item's tokens, with ``header`` more for what its scopes add to the header; ``room``, the room
    left in the budget for its item then, ``lane_room`` in its lanes (None: no bound). Hand it back
    in ``Keep(rank, priced=...)`` and the door keeps it at that price, not worked out again: the door
    trusts a price it made itself, for this walk, with nothing recorded since (by identity); any
    other is priced again."""

    rank: int
    cost: int
    header: int
    room: int | None
    lane_room: int | None
    text: str
    scopes: tuple[Scope, ...]
    names: tuple[str, ...]
    uri: str | None
    cut: CutResult | None
    #: The excerpt it was priced with, as the policy handed it (None: the candidate's whole text).
    excerpt: object = None
    kept_spans: tuple[tuple[int, int], ...] | None = None
    #: ``passages``' keeps: not yet held to the total (its refit and the walk's exact fit hold it).
    provisional: bool = False
    #: The item as the default block renders it (:meth:`.View.item_shown`), made by the door's price.
    shown: str | None = None


class Door:
    """The door of one ledger: the only way a policy's decisions are recorded."""

    __slots__ = ("ledger", "_priced", "_priced_look")

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        #: The last price this door made, and the gate's look it was made under: trusted while
        #: nothing is recorded (every recorder forgets the look) and for that rank alone.
        self._priced: Priced | None = None
        self._priced_look: object = None

    def apply(self, decision: object) -> bool:
        """Apply one decision, checked (see the module's docstring); True when it kept the
        candidate."""
        kind = type(decision)
        if kind not in DECISIONS:
            said = f"{decision!r:.80} is not a decision: yield Keep, Cut, Drop, Merge or End"
            raise self.broken("decision", said)
        ledger = self.ledger
        mine, keep = self._priced, decision  # read as a Keep only when it is one
        if kind is Keep and mine is not None and ledger.tail_reason is None and keep.priced is mine:  # type: ignore[attr-defined]
            looked = ledger._looked  # a keep at the price this door made just now: gated, shown
            cap = ledger.settings.max_items
            if (
                self._priced_look is looked and mine.rank == len(ledger.entries) and mine.excerpt is None
                and keep.rank == mine.rank and keep.excerpt is None  # type: ignore[attr-defined]
                and (cap is None or len(ledger.kept) < cap)
            ):
                return self.hold(mine.rank, looked[1], mine)  # type: ignore[index]
        if ledger.tail_reason is not None:
            if ledger.ended_by_ledger:
                return False  # the item cap ended it: what the policy still asks is not done
            raise self.broken("end", f"{kind.__name__} came after the walk ended: decide nothing after End")
        decided: Any = decision  # one of DECISIONS: its fields are read by kind below
        if kind is End:
            return self._apply_end(decided)
        rank = decided.rank
        if type(rank) is not int or rank != len(ledger.entries) or rank >= len(ledger.candidates):
            # not the next one: checked, and the candidates the gate stops before it recorded
            rank = self.check_rank(rank, kind.__name__)
            self._catch_up(rank)
        c, gate = ledger._gated(rank)
        if gate is not None:  # whatever the policy asked, the gate's reason is recorded
            self._record_gate(rank, c, gate)
            return False
        if kind is Drop:
            reason = _policy_reason(self, decided.reason, rank)
            ledger._drop(rank, c, reason, tokens=_tokens(self, decided.tokens, rank))
            return False
        if kind is Merge:
            return _apply_merge(self, rank, c, decided)
        cap = ledger.settings.max_items
        if cap is not None and len(ledger.kept) >= cap:
            ledger.ended_by_ledger = True
            return ledger._end(rank, c, Reason.OVER_ITEM_CAP)
        if kind is Cut:
            return self._apply_cut(rank, c, decided.room, record=True)
        return self._apply_keep(rank, c, decided.excerpt, decided.priced)

    def price(self, rank: int, excerpt: object = None) -> Priced | None:
        """Candidate ``rank`` priced as kept now (``excerpt``, or its whole text); None when the
        gate does not show it. Remembered as this door's own: a keep that hands it back is not
        priced again."""
        ledger = self.ledger
        looked = ledger._looked
        if looked is None or looked[0] != rank or type(rank) is not int:
            if type(rank) is not int or not 0 <= rank < len(ledger.candidates):
                self.check_rank(rank, "price")  # says what is wrong with it
            # the next to decide is read for this look alone (read in order, it is not read again)
            ledger.gated_now(rank) if rank == len(ledger.entries) else ledger._gated(rank)
            looked = ledger._looked
        _, c, gate = looked  # type: ignore[misc]
        if gate is not None:
            return None
        cut = None if excerpt is None else _excerpt(self, excerpt, rank)
        text = c.text if cut is None else cut.text
        scopes = ledger.scopes_of(c) if c.scope_ids else ()
        view = ledger.view
        header = view.header_delta(ledger, scopes)
        room, lane_room, limit = ledger.limits(c, header)
        names, uri = ledger.names(scopes), ledger.uri(c)
        cost, made = view.item_shown(ledger, c, names, text, uri, limit)
        priced = Priced(rank, cost, header, room, lane_room, text, scopes, names, uri, cut, excerpt,
                        shown=made)
        self._priced, self._priced_look = priced, looked
        return priced

    def hold(self, rank: int, c: Candidate, priced: Priced) -> bool:
        """Keep ``c`` (gated just now, within the item cap) at ``priced``, held to its lanes and the
        total: where every keep, a registered policy's too, is held."""
        ledger = self.ledger
        cost = priced.cost
        if ledger.settings.lane_budgets:
            lane_room = ledger.limits(c, priced.header)[1]
            if lane_room is not None and cost > lane_room:  # its lane is spent: later items in it are dropped
                ledger._close_lanes(c, cost)
                ledger._drop(rank, c, Reason.OVER_LANE_BUDGET, tokens=cost)
                return False
        max_tokens = ledger.settings.max_tokens
        over = max_tokens is not None and cost > max_tokens - ledger.used - priced.header
        if over and not priced.provisional:
            ledger._drop(rank, c, Reason.OVER_BUDGET, tokens=cost)
            return False
        ledger._keep(rank, c, priced.scopes, priced.names, priced.text, cost, priced.header, priced.cut,
                     priced.uri, kept_spans=priced.kept_spans, shown=priced.shown)
        return True

    def finish(self) -> None:
        """After a policy's choice: every candidate is decided, or the walk ended. Candidates the
        gate stops are recorded; one it shows that was never decided breaks the rule of End."""
        if self.ledger.tail_reason is None:
            self._catch_up(len(self.ledger.candidates), "end")

    def broken(self, rule: str, said: str, rank: int | None = None) -> PolicyError:
        policy = self.ledger.settings.policy
        where = "" if rank is None else f" (candidate {rank})"
        return PolicyError(
            f"policy {policy!r} broke the rule of {rule}{where}: {said}", rule=rule, policy=policy, index=rank
        )

    def check_rank(self, rank: object, what: str) -> int:
        if type(rank) is not int or not 0 <= rank < len(self.ledger.candidates):
            last = len(self.ledger.candidates) - 1
            said = f"{what}'s rank={rank!r:.40} is not a candidate's rank (0 to {last})"
            raise self.broken("rank", said)
        return rank

    def check_text(self, text: object, rank: int) -> str:
        if not isinstance(text, str):
            raise self.broken("text", f"text is {type(text).__name__}, not a str", rank)
        return text

    def _catch_up(self, rank: int, rule: str = "rank order") -> None:
        """Record the gate's reason for each undecided candidate before ``rank``; one the gate
        shows was skipped, and one already decided is decided again: both break a rule."""
        decided = len(self.ledger.entries)
        if rank < decided:
            said = "decided twice, or out of rank order: decide each candidate once, in order"
            raise self.broken(rule, said, rank)
        for skipped in range(decided, rank):
            c, gate = self.ledger._gated(skipped)
            if gate is None:
                said = "never decided: decide every candidate the gate shows, in rank order, or End the walk"
                raise self.broken(rule, said, skipped)
            self._record_gate(skipped, c, gate)

    def _record_gate(self, rank: int, c: Candidate, gate: tuple[Reason, Outcome]) -> None:
        if gate[0] is Reason.DUPLICATE:
            self.ledger._drop_twin(rank, c)  # its citation joins its kept twin's
        else:
            self.ledger._drop(rank, c, gate[0], gate[1])

    def _apply_end(self, decision: End) -> bool:
        reason = _policy_reason(self, decision.reason, decision.rank)
        if decision.rank is None:
            return self.ledger._stop(reason)
        rank = self.check_rank(decision.rank, "End")
        tokens = _tokens(self, decision.tokens, rank)
        self._catch_up(rank)
        c, gate = self.ledger._gated(rank)
        if gate is not None:
            self._record_gate(rank, c, gate)
            return self.ledger._stop(reason)
        return self.ledger._end(rank, c, reason, tokens)

    def _apply_cut(self, rank: int, c: Candidate, room: object, record: bool) -> bool:
        if room is not None and (type(room) is not int or room <= 0):
            raise self.broken("cut", f"room={room!r:.40} is not a number of tokens (an int, 1 or more)", rank)
        asked = room
        scopes = self.ledger.scopes_of(c)
        header = self.ledger.view.header_delta(self.ledger, scopes)
        *_, limit = self.ledger.limits(c, header)
        if limit is None and asked is None:  # nothing bounds it: kept whole
            return self._apply_keep(rank, c, None, None)
        bounds = [b for b in (asked, limit) if b is not None]
        target = min(bounds)
        if target > 0 and self.ledger._keep_cut(rank, c, scopes, header, target):
            return True
        if record:  # what it cost whole, when the policy priced it with the view just now
            known = _trusted(self, rank, None, None)
            self.ledger._drop(rank, c, Reason.OVER_BUDGET, tokens=None if known is None else known.cost)
        return False

    def _apply_keep(self, rank: int, c: Candidate, excerpt: object, priced: object) -> bool:
        """Keep ``c`` (gated just now, within the item cap) at the door's own price: the one handed
        back when it is the door's (:meth:`trusted`), else worked out now."""
        mine = _trusted(self, rank, priced, excerpt) or self.price(rank, excerpt)
        return mine is not None and self.hold(rank, c, mine)  # None: never (gated just now, shown)




def _apply_merge(door: Door, rank: int, c: Candidate, decision: Merge) -> bool:
    into = decision.into
    if type(into) is not int or not any(k.rank == into for k in door.ledger.kept):
        raise door.broken("merge", f"into={into!r:.40} is not the rank of a kept item", rank)
    door.ledger._merge(rank, c, into, _spans(door, decision.spans, rank))
    return False


def keep_own(door: Door, rank: int, priced: Priced) -> bool:
    """``passages``' keep, priced by its own item view: in rank order, gated, held to the item
    cap and its lanes as any keep, and to the total unless ``provisional`` (a choice it corrects
    with the exact count afterwards, as the walk's fit does)."""
    ledger = door.ledger
    if ledger.tail_reason is not None:
        return door.apply(Keep(rank))  # said, or ignored, as apply does
    if rank != len(ledger.entries):
        door._catch_up(door.check_rank(rank, "Keep"))
    c, gate = ledger._gated(rank)
    if gate is not None:
        door._record_gate(rank, c, gate)
        return False
    cap = ledger.settings.max_items
    if cap is not None and len(ledger.kept) >= cap:
        ledger.ended_by_ledger = True
        return ledger._end(rank, c, Reason.OVER_ITEM_CAP)
    return door.hold(rank, c, priced)


def _trusted(door: Door, rank: int, priced: object, excerpt: object) -> Priced | None:
    """``priced`` if it is this door's own last price, of ``rank`` showing ``excerpt``, made
    with nothing recorded since; else None (a price made elsewhere, or stale, is worked out
    again, never trusted)."""
    mine = door._priced
    if (
        mine is not None
        and (priced is None or priced is mine)
        and mine.rank == rank
        and mine.excerpt is excerpt
        and door._priced_look is door.ledger._looked
    ):
        return mine
    return None


def _policy_reason(door: Door, reason: object, rank: int | None) -> Reason:
    if not isinstance(reason, Reason) or reason in _NOT_A_POLICYS:
        said = f"reason={reason!r:.40} is not a policy's (the gate gives withheld ones, Merge merged)"
        raise door.broken("reason", said, rank)
    return reason


def _tokens(door: Door, tokens: object, rank: int | None) -> int | None:
    if tokens is not None and type(tokens) is not int:
        raise door.broken("tokens", f"tokens={tokens!r:.40} is not a count (an int)", rank)
    return tokens


def _spans(door: Door, spans: object, rank: int) -> tuple[tuple[int, int], ...]:
    if isinstance(spans, tuple) and all(
        isinstance(s, tuple) and len(s) == 2 and all(type(x) is int and x >= 0 for x in s) for s in spans
    ):
        return spans
    raise door.broken("spans", f"spans={spans!r:.60} is not a tuple of (start, end) offsets", rank)


def _excerpt(door: Door, excerpt: object, rank: int) -> CutResult:
    text = door.check_text(getattr(excerpt, "text", None), rank)
    kind = getattr(excerpt, "kind", None)
    if not isinstance(kind, str):
        raise door.broken("excerpt", f"the excerpt's kind is {type(kind).__name__}, not a str", rank)
    return Excerpt(text, _spans(door, getattr(excerpt, "spans", None), rank), cast(CutKind, kind))


#: What a policy written for the ledger itself (before 0.2) reads and calls; each still works for
#: one release through the view, with a DeprecationWarning, and what records goes through apply.
LEGACY_NAMES = frozenset(
    (
        "candidates", "settings", "view", "tok", "used", "kept", "entries", "lane_used", "full",
        "header_cost", "scope_order", "reasons", "tail_reason", "admit", "read", "gate", "limits",
        "look", "scopes_of", "names", "uri", "resource", "framing", "lane_keys", "lane_left", "twin",
        "keep", "drop", "drop_twin", "merge", "end", "stop", "keep_cut", "close_lanes", "note",
        "floor_if_empty", "evidence", "shared_scopes",
    )
)


_COPIES: dict[type, Callable[[Any], Any]] = {list: tuple, dict: dict, set: frozenset}


class _ReadCandidates(Sequence[Candidate]):
    """The candidates as an old policy reads them: each through :meth:`Ledger.read`, so a withheld
    one is the stand-in of why (nothing of it), never the item itself."""

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger

    def __len__(self) -> int:
        return len(self._ledger.candidates)

    @overload
    def __getitem__(self, index: int) -> Candidate: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Candidate]: ...
    def __getitem__(self, index: int | slice) -> Candidate | Sequence[Candidate]:
        if isinstance(index, slice):
            return [self._ledger.read(i) for i in range(len(self))[index]]
        return self._ledger.read(range(len(self))[index])


class PolicyView:
    """What a policy sees of one walk while it decides: read only, and current after each decision
    applied (a policy that yields sees the effect of what it yielded)."""

    __slots__ = ("_door", "_ledger", "_legacy")

    def __init__(self, door: Door, legacy: Mapping[str, Callable[..., Any]]) -> None:
        self._door = door
        self._ledger = door.ledger
        #: A policy written for the ledger itself: its old methods, by name (legacy_ledger.py).
        self._legacy = legacy

    def __len__(self) -> int:
        """How many candidates the call was handed."""
        return len(self._ledger.candidates)

    def candidate(self, rank: int) -> Candidate | None:
        """Candidate ``rank`` as the gate shows it, or None when it cannot be shown (withheld by
        its scopes, empty, not text, a duplicate of a kept item, in a full lane): then nothing of
        it is given, and whatever is decided of it the gate's reason is what is recorded."""
        return self._ledger.shown(self._door.check_rank(rank, "candidate"))

    @property
    def decided(self) -> int:
        """How many candidates are decided: the next decision is for this rank or a later one."""
        return len(self._ledger.entries)

    @property
    def kept(self) -> tuple[int, ...]:
        """The ranks kept so far, in order."""
        return tuple(k.rank for k in self._ledger.kept)

    @property
    def items_left(self) -> int | None:
        """How many more items may be kept (None: no ``max_items``)."""
        cap = self._ledger.settings.max_items
        return None if cap is None else cap - len(self._ledger.kept)

    @property
    def tokens_left(self) -> int | None:
        """What is left of the total budget (None: no budget)."""
        max_tokens = self._ledger.settings.max_tokens
        return None if max_tokens is None else max_tokens - self._ledger.used

    @property
    def lane_budgets(self) -> dict[LaneKind | Provenance, int]:
        """What is left of each lane's budget (lanes and provenances with one)."""
        ledger = self._ledger
        return {key: ledger.lane_left(key) for key in ledger.settings.lane_budgets}

    def room(self, rank: int) -> int | None:
        """The tokens candidate ``rank`` may take (its scopes' header included): the tighter of the
        total and its lanes; None when nothing bounds it, or it cannot be shown."""
        ledger = self._ledger
        c = ledger.shown(self._door.check_rank(rank, "room"))
        if c is None:
            return None
        scopes = ledger.scopes_of(c)
        return ledger.limits(c, ledger.view.header_delta(ledger, scopes))[2]

    def measure(self, rank: int, text: str | None = None) -> int | None:
        """What candidate ``rank`` costs kept (showing ``text``, or all of it), its scopes' header
        included, as the model is shown it; None when it cannot be shown."""
        ledger = self._ledger
        c = ledger.shown(self._door.check_rank(rank, "measure"))
        if c is None:
            return None
        text = c.text if text is None else self._door.check_text(text, rank)
        scopes = ledger.scopes_of(c)
        header = ledger.view.header_delta(ledger, scopes)
        return header + ledger.view.item(ledger, c, ledger.names(scopes), text, ledger.uri(c), None)

    def price(self, rank: int, excerpt: object = None) -> Priced | None:
        """What candidate ``rank`` costs kept now, showing ``excerpt`` (a cut of your own: text,
        spans, kind) or all of it, and the room it has (:class:`Priced`); None when it cannot be
        shown. ``Keep(rank, priced=...)`` keeps it at that price, not worked out again, while
        nothing else is decided in between (a price the door did not make is worked out again)."""
        return self._door.price(rank, excerpt)  # checks the rank

    def __getattr__(self, name: str) -> Any:
        # A policy written for the ledger itself: its names keep working one release, warned.
        if name in LEGACY_NAMES:
            warnings.warn(
                f"a policy's choose() is handed a PolicyView: ledger.{name} is deprecated and goes in "
                "0.3; yield decisions (recallpack.packing.decisions) and read the view instead",
                DeprecationWarning,
                stacklevel=2,
            )
            old = object.__getattribute__(self, "_legacy").get(name)
            door = object.__getattribute__(self, "_door")
            if old is not None:
                return functools.partial(old, door)
            if name == "candidates":  # read through the gate's reading: a withheld one is its stand-in
                return _ReadCandidates(door.ledger)
            value = getattr(door.ledger, name)
            # The record's containers as copies: what an old policy changes in them records nothing.
            copy = _COPIES.get(type(value))
            return value if copy is None else copy(value)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
