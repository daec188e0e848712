"""The ledger's old recording methods, as a policy written before 0.2 calls them: each still works
for one release, warned (:class:`~recallpack.packing.choosing.door.PolicyView` warns), and goes
through :meth:`~recallpack.packing.choosing.door.Door.apply`, so that the caps and the gate hold for it
too. What the old call said of the candidate (its text, scopes, cost, header) is not trusted: the
rank is what is decided, and the ledger reads, prices and gates the candidate itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from recallpack.packing.choosing.cuts import Excerpt
from recallpack.packing.choosing.door import Door
from recallpack.packing.decisions import Cut, Drop, End, Keep, Merge
from recallpack.packing.results.result import Reason

__all__ = ["LEGACY"]


def admit(door: Door, rank: int) -> Any:
    """The candidate if the gate shows it; else None, with the gate's reason recorded."""
    c = door.ledger.shown(door.check_rank(rank, "admit"))
    if c is None:
        door.apply(Drop(rank))  # the gate's reason is what is recorded
    return c


def keep(door: Door, rank: int, c: object, scopes: object, names: object, text: object, cost: object,
         header: object, cut: object, uri: object, replace: bool = False, kept_spans: object = None) -> bool:
    shown = door.ledger.shown(door.check_rank(rank, "keep"))
    whole = shown is not None and cut is None and text == shown.text
    made = None if whole or cut is not None else Excerpt(door.check_text(text, rank), (), "head")
    excerpt = made if cut is None else cut
    return door.apply(Keep(rank, cast(Any, excerpt)))


def drop(door: Door, rank: int, c: object, reason: Reason, outcome: object = None,
         tokens: int | None = None) -> bool:
    door.apply(Drop(rank, reason, tokens))
    return True


def drop_twin(door: Door, rank: int, c: object) -> bool:
    door.apply(Drop(rank, Reason.DUPLICATE))
    return True


def merge(door: Door, rank: int, c: object, into: int, kept_spans: tuple[tuple[int, int], ...]) -> None:
    door.apply(Merge(rank, into, kept_spans))


def end(door: Door, rank: int, c: object, reason: Reason, tokens: int | None = None) -> bool:
    door.apply(End(reason, rank, tokens))
    return False


def stop(door: Door, reason: Reason) -> bool:
    door.apply(End(reason))
    return False


def keep_cut(door: Door, rank: int, c: object, scopes: object, header: object, room: int,
             replace: bool = False) -> bool:
    """Kept cut to ``room``; False, with nothing recorded, when no cut fits (the old contract)."""
    rank = door.check_rank(rank, "keep_cut")
    shown = door.ledger.shown(rank)
    if shown is None or door.ledger.tail_reason is not None:
        return door.apply(Cut(rank, room))
    cap = door.ledger.settings.max_items
    if cap is not None and len(door.ledger.kept) >= cap:
        return door.apply(Cut(rank, room))  # the door ends the walk there
    door._catch_up(rank)
    c, gate = door.ledger._gated(rank)
    if gate is not None:
        door._record_gate(rank, c, gate)
        return False
    return door._apply_cut(rank, c, room, record=False)


def close_lanes(door: Door, c: object, cost: int) -> None:
    """Nothing: the door closes a lane itself when an item it refuses does not fit it."""


def floor_if_empty(door: Door) -> None:
    """Nothing: the walk applies the floor after the policy's choice."""


def note(door: Door, text: object) -> None:
    door.ledger.note(str(text))


#: Each old recording method, by name, as the view hands it out.
LEGACY: dict[str, Callable[..., Any]] = {
    fn.__name__: fn
    for fn in (admit, keep, drop, drop_twin, merge, end, stop, keep_cut, close_lanes, floor_if_empty, note)
}
