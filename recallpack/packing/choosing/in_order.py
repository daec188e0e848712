"""The in-order policies: ``prefix``, ``skip`` and ``truncate``.

Each walks the candidates in the order given, keeping every one that fits whole; they differ
only in what an item that does not fit the budget does. ``prefix`` ends the walk there (the
strict prefix), ``skip`` passes over it and goes on while room is left, ``truncate`` cuts it to
the room and ends the walk. An item that only its own lane cannot hold is dropped and the walk
goes on, whatever the policy. The walk never reorders, and it counts tokens only for the
candidates it reaches, so its work follows what it keeps, not what it was handed.
"""

from __future__ import annotations

from collections.abc import Iterator

from recallpack.packing.choosing.door import PolicyView, Priced
from recallpack.packing.choosing.embedding import EmbedFn
from recallpack.packing.decisions import Cut, Decision, Drop, End, Keep
from recallpack.packing.results.result import Reason

__all__ = ["Prefix", "Skip", "Truncate"]


class Prefix:
    """Keep candidates in order while each fits whole; the first that does not ends the walk."""

    summary = "an item that does not fit ends the walk (the strict prefix)"
    needs_query = False

    def choose(self, view: PolicyView, query: str | None, embed: EmbedFn | None) -> Iterator[Decision]:
        """Yield a decision for each candidate in rank order, as any policy does: priced with the
        view, and kept at that price (the door trusts its own price), until one does not fit."""
        price = view.price
        capped = view.items_left is not None  # without max_items, no keep can reach a cap
        for rank in range(len(view)):
            priced = price(rank)
            if priced is None:
                yield Drop(rank)  # the gate stops it: the gate's reason is what is recorded
                continue
            if capped and view.items_left <= 0:  # type: ignore[operator]
                yield End(Reason.OVER_ITEM_CAP, rank)
            room = priced.room
            if room is None or priced.cost <= room:  # kept, or refused by its lane alone (the walk goes on)
                yield Keep(rank, None, priced)
            else:
                yield from self.over_budget(priced)  # after an End the walk closes this generator

    def over_budget(self, priced: Priced) -> Iterator[Decision]:
        """What becomes of an item that costs more than the room left: here, the walk ends."""
        yield End(Reason.OVER_BUDGET, priced.rank, priced.cost)


class Skip(Prefix):
    """An item that does not fit is passed over; the walk goes on while room is left."""

    summary = "an item that does not fit is passed over, and the walk goes on"

    def over_budget(self, priced: Priced) -> Iterator[Decision]:
        if priced.room is not None and priced.room > 0:
            yield Drop(priced.rank, Reason.OVER_BUDGET, priced.cost)
        else:
            yield End(Reason.OVER_BUDGET, priced.rank, priced.cost)  # nothing more can fit


class Truncate(Prefix):
    """An item that does not fit is cut to the room left (by focus on the query, or by head),
    and the walk ends."""

    summary = "an item that does not fit is cut to the room left, and the walk ends"

    def over_budget(self, priced: Priced) -> Iterator[Decision]:
        room, lane_room = priced.room, priced.lane_room
        # A cut is made to the global room only; an item its own lane cannot hold is not cut.
        if room is not None and room > 0 and (lane_room is None or lane_room >= room):
            yield Cut(priced.rank, room)  # no cut fits: dropped with what it costs whole
            yield End(Reason.OVER_BUDGET)
        else:
            yield End(Reason.OVER_BUDGET, priced.rank, priced.cost)
