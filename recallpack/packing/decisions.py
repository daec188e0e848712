"""What a policy decides, as values, and what it sees of the walk while it decides.

A policy's ``choose(view, query, embed)`` yields (or returns a list of) decisions, one per candidate
it reaches, in rank order: :class:`Keep` it (whole, or an excerpt the policy made), :class:`Cut`
it to the room (the ledger's cutter makes the cut), :class:`Drop` it with a reason,
:class:`Merge` it into a kept item (a piece of the same document), or :class:`End` the walk
(everything after is the tail). The walk applies each through one door,
:meth:`~recallpack.packing.ledger.Ledger.apply`, which gates it (scopes first), prices it, and holds
``max_items``, every lane's budget and the total whatever the policy asked; a decision that
breaks a rule (out of rank order, twice, not a decision) is a
:class:`~recallpack.packing.errors.PolicyError` naming the rule and the policy.

The policy sees the walk through a :class:`PolicyView`: the candidates as the gate shows them
(None for one it withholds or drops: nothing of a withheld item), what is left of each budget,
and the price of an item as the model is shown it. It records nothing.
"""

from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from recallpack.packing.candidate import Candidate, LaneKind, Provenance
from recallpack.packing.result import Reason

if TYPE_CHECKING:
    from recallpack.packing.ledger import CutResult, Ledger

__all__ = ["Keep", "Drop", "Cut", "Merge", "End", "Decision", "PolicyView", "LEGACY_NAMES"]


@dataclass(frozen=True, slots=True)
class Keep:
    """Keep candidate ``rank``: all of its text, or ``excerpt`` (a cut the policy made: its text,
    the spans of the candidate's text it keeps, and its kind, as
    :class:`~recallpack.packing.cuts.Cut` holds them)."""

    rank: int
    excerpt: CutResult | None = None


@dataclass(frozen=True, slots=True)
class Cut:
    """Keep candidate ``rank`` cut by the call's cutter (focus on the query, or head) to ``room``
    tokens, or to the room it has when None. When no cut fits, it is dropped ``over_budget``."""

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


class PolicyView:
    """What a policy sees of one walk while it decides: read only, and current after each decision
    applied (a policy that yields sees the effect of what it yielded)."""

    __slots__ = ("_ledger",)

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger

    def __len__(self) -> int:
        """How many candidates the call was handed."""
        return len(self._ledger.candidates)

    def candidate(self, rank: int) -> Candidate | None:
        """Candidate ``rank`` as the gate shows it, or None when it cannot be shown (withheld by
        its scopes, empty, not text, a duplicate of a kept item, in a full lane): then nothing of
        it is given, and whatever is decided of it the gate's reason is what is recorded."""
        return self._ledger.shown(self._ledger.door.check_rank(rank, "candidate"))

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
        c = ledger.shown(ledger.door.check_rank(rank, "room"))
        if c is None:
            return None
        scopes = ledger.scopes_of(c)
        return ledger.limits(c, ledger.view.header_delta(ledger, scopes))[2]

    def measure(self, rank: int, text: str | None = None) -> int | None:
        """What candidate ``rank`` costs kept (showing ``text``, or all of it), its scopes' header
        included, as the model is shown it; None when it cannot be shown."""
        ledger = self._ledger
        c = ledger.shown(ledger.door.check_rank(rank, "measure"))
        if c is None:
            return None
        return ledger.door.price(rank, c, c.text if text is None else ledger.door.check_text(text, rank))

    def __getattr__(self, name: str) -> Any:
        # A policy written for the ledger itself: its names keep working one release, warned.
        if name in LEGACY_NAMES:
            warnings.warn(
                f"a policy's choose() is handed a PolicyView: ledger.{name} is deprecated and goes in "
                "0.3; yield decisions (recallpack.packing.decisions) and read the view instead",
                DeprecationWarning,
                stacklevel=2,
            )
            from recallpack.packing.legacy_ledger import LEGACY  # the old recording methods, routed

            ledger = object.__getattribute__(self, "_ledger")
            legacy = LEGACY.get(name)
            return getattr(ledger, name) if legacy is None else functools.partial(legacy, ledger)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
