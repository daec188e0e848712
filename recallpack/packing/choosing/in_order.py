"""The in-order policies: ``prefix``, ``skip`` and ``truncate``.

Each walks the candidates in the order given, keeping every one that fits whole; they differ
only in what an item that does not fit the budget does. ``prefix`` ends the walk there (the
strict prefix), ``skip`` passes over it and goes on while room is left, ``truncate`` cuts it to
the room and ends the walk. An item that only its own lane cannot hold is dropped and the walk
goes on, whatever the policy. The walk never reorders, and it counts tokens only for the
candidates it reaches, so its work follows what it keeps, not what it was handed.
"""

from __future__ import annotations

from typing import NamedTuple

from recallpack.packing.candidate import Candidate
from recallpack.packing.choosing.door import Door, PolicyView
from recallpack.packing.choosing.embedding import EmbedFn
from recallpack.packing.decisions import Drop, End
from recallpack.packing.results.result import Reason
from recallpack.packing.scopes import Scope

__all__ = ["Prefix", "Skip", "Truncate", "Over"]


class Over(NamedTuple):
    """An item that costs more than the room left: where it ranked, what it is, its scopes and
    what they add to the header, the room left in the budget and in its lanes, its cost."""

    rank: int
    c: Candidate
    scopes: tuple[Scope, ...]
    header: int
    room: int
    lane_room: int | None
    cost: int


class Prefix:
    """Keep candidates in order while each fits whole; the first that does not ends the walk."""

    summary = "an item that does not fit ends the walk (the strict prefix)"
    needs_query = False

    def choose(self, view: PolicyView, query: str | None, embed: EmbedFn | None) -> None:
        # recallpack's own: it applies each decision through the ledger's door as it makes it.
        door = view._door
        ledger = door.ledger
        for rank in range(len(ledger.candidates)):
            c, gate = ledger.gated_now(rank)
            if gate is not None:
                door.apply(Drop(rank))  # the gate's reason is what is recorded
            elif not self.step(door, rank, c):
                break
        ledger.floor_if_empty()

    def step(self, door: Door, rank: int, c: Candidate) -> bool:
        """Decide candidate ``rank`` (admitted: it can be shown); False ends the walk (everything
        after it is the tail)."""
        ledger = door.ledger
        max_items = ledger.settings.max_items
        if max_items is not None and len(ledger.kept) >= max_items:
            return door.apply(End(Reason.OVER_ITEM_CAP, rank))
        scopes = ledger.scopes_of(c)
        header = ledger.view.header_delta(ledger, scopes)
        room, lane_room, limit = ledger.limits(c, header)
        uri, names = ledger.uri(c), ledger.names(scopes)
        cost = ledger.view.item(ledger, c, names, c.text, uri, limit)
        if room is None or cost <= room:  # kept, or refused by its lane alone (the other lanes go on)
            door.keep_priced(rank, scopes, names, c.text, cost, header, None, uri)
            return True
        return self.over_budget(door, Over(rank, c, scopes, header, room, lane_room, cost))

    def over_budget(self, door: Door, over: Over) -> bool:
        """What becomes of an item that costs more than the room left: here, the walk ends."""
        return door.apply(End(Reason.OVER_BUDGET, over.rank, over.cost))


class Skip(Prefix):
    """An item that does not fit is passed over; the walk goes on while room is left."""

    summary = "an item that does not fit is passed over, and the walk goes on"

    def over_budget(self, door: Door, over: Over) -> bool:
        if over.room > 0:
            door.apply(Drop(over.rank, Reason.OVER_BUDGET, over.cost))
            return True
        return door.apply(End(Reason.OVER_BUDGET, over.rank, over.cost))  # nothing more can fit


class Truncate(Prefix):
    """An item that does not fit is cut to the room left (by focus on the query, or by head),
    and the walk ends."""

    summary = "an item that does not fit is cut to the room left, and the walk ends"

    def over_budget(self, door: Door, over: Over) -> bool:
        room, lane_room = over.room, over.lane_room
        # A cut is made to the global room only; an item its own lane cannot hold is not cut.
        cuttable = room > 0 and (lane_room is None or lane_room >= room)
        if cuttable and door.apply_cut_quietly(over.rank, room):
            return door.apply(End(Reason.OVER_BUDGET))
        return door.apply(End(Reason.OVER_BUDGET, over.rank, over.cost))
