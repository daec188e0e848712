"""What a policy decides, as values, and what it sees of the walk while it decides.

A policy's ``choose(view, query, embed)`` yields (or returns a list of) decisions, one per candidate
it reaches, in rank order: :class:`Keep` it (whole, or an excerpt the policy made), :class:`Cut`
it to the room (the ledger's cutter makes the cut), :class:`Drop` it with a reason,
:class:`Merge` it into a kept item (a piece of the same document), or :class:`End` the walk
(everything after is the tail). The walk applies each through one door,
:meth:`~recallpack.packing.choosing.ledger.Ledger.apply`, which gates it (scopes first), prices it, and holds
``max_items``, every lane's budget and the total whatever the policy asked; a decision that
breaks a rule (out of rank order, twice, not a decision) is a
:class:`~recallpack.packing.errors.PolicyError` naming the rule and the policy.

The policy sees the walk through a :class:`~recallpack.packing.choosing.door.PolicyView`: the candidates
as the gate shows them (None for one it withholds or drops: nothing of a withheld item), what is
left of each budget, and the price of an item as the model is shown it. It records nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from recallpack.packing.results.result import Reason

__all__ = ["Keep", "Drop", "Cut", "Merge", "End", "Decision", "DECISIONS", "CutResult"]


class CutResult(Protocol):
    """What a cutter returns, and what a policy's own excerpt is: the kept text (elisions
    marked), the ranges of the candidate's text it kept, how it was cut."""

    @property
    def text(self) -> str: ...
    @property
    def spans(self) -> tuple[tuple[int, int], ...]: ...
    @property
    def kind(self) -> str: ...


@dataclass(frozen=True, slots=True)
class Keep:
    """Keep candidate ``rank``: all of its text, or ``excerpt`` (a cut the policy made: its text,
    the spans of the candidate's text it keeps, and its kind, as
    :class:`~recallpack.packing.choosing.cuts.Cut` holds them)."""

    rank: int
    excerpt: CutResult | None = None
    #: What :meth:`PolicyView.price <recallpack.packing.choosing.door.PolicyView.price>` said it
    #: costs: kept at that price when the door made it (for this rank and excerpt, nothing decided
    #: since), else priced again; never trusted otherwise.
    priced: object = None


@dataclass(frozen=True, slots=True)
class Cut:
    """Keep candidate ``rank`` cut by the call's cutter (focus on the query, or head) to ``room``
    tokens, or to the room it has when None. When no cut fits, it is dropped ``over_budget`` (with
    what it costs whole, when the view priced it just now)."""

    rank: int
    room: int | None = None


@dataclass(frozen=True, slots=True)
class Drop:
    """Do not keep candidate ``rank``, for ``reason``; ``tokens``: what it cost, when priced."""

    rank: int
    reason: Reason = Reason.OVER_BUDGET
    tokens: int | None = None


@dataclass(frozen=True, slots=True)
class Merge:
    """Candidate ``rank`` is shown inside the kept item at rank ``into`` (a piece of its document),
    at ``spans`` of that item's text."""

    rank: int
    into: int
    spans: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True, slots=True)
class End:
    """End the walk for ``reason``: with a ``rank``, that candidate is dropped for it first;
    everything after is the tail."""

    reason: Reason = Reason.OVER_BUDGET
    rank: int | None = None
    tokens: int | None = None


Decision = Keep | Cut | Drop | Merge | End
DECISIONS = (Keep, Cut, Drop, Merge, End)
