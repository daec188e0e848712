"""What keeping some units of a text costs, and how kept passages grow around the best ones.

The focus cut (:mod:`recallpack.packing.cuts`) and the passages policy
(:mod:`recallpack.packing.passages`) both keep units of a text (:func:`~recallpack.packing.units.split_units`)
and show them in order, with the mark "…" wherever something was dropped. :class:`Units` estimates
what a set of kept units costs rendered that way (the units, the whitespace that joins neighbours,
a mark and a line break for every elision), counting lazily: only the units a cut considers are
counted, or none when a rate of tokens per character is given. :class:`Focus` grows kept passages
around the best units within a budget, the better-scoring side first.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import InitVar, dataclass

from recallpack.packing.text import LINE_BREAKS, is_boundary
from recallpack.packing.tokenizers import Tokenizer
from recallpack.packing.units import MARK

__all__ = ["Focus", "Units"]


@dataclass(eq=False)  # compared by identity: a text's cut in progress
class Units:
    """A text's units and what keeping some of them is estimated to cost, counted lazily: only
    the units a cut considers are ever counted."""

    text: str
    starts: list[int]
    ends: list[int]
    max_tokens: int
    tok: Tokenizer
    #: When given, a unit's cost is estimated from its length at this rate: no unit is counted.
    tokens_per_char: float | None = None
    #: The counts of the mark and of the whitespace between units, which several texts cut at
    #: once (the passages policy's documents) may share: each is then counted once.
    shared: InitVar[dict[str, int] | None] = None

    def __post_init__(self, shared: dict[str, int] | None) -> None:
        self._unit_cost: dict[int, int] = {}
        self._space_cost: dict[str, int] = {} if shared is None else shared
        self.mark_cost = self._space_cost.get(MARK, -1)
        if self.mark_cost < 0:
            self.mark_cost = self._space_cost[MARK] = self.tok.count(MARK)
        self._lead: dict[int, int] = {}

    def unit_cost(self, i: int) -> int:
        cost = self._unit_cost.get(i)
        if cost is None:
            if self.tokens_per_char is not None:
                cost = max(1, math.ceil((self.ends[i] - self.starts[i]) * self.tokens_per_char))
            else:
                cost = self.tok.count_upto(self.text[self.starts[i] : self.ends[i]], self.max_tokens)
            self._unit_cost[i] = cost
        return cost

    def space_cost(self, a: int, b: int) -> int:
        space = self.text[a:b]
        if space in ("", " "):
            return 0  # a single space joins the next word's token
        cost = self._space_cost.get(space)
        if cost is None:
            cost = self._space_cost[space] = self.tok.count(space)
        return cost

    def lead(self, i: int) -> int:
        """Where a kept run starting at unit ``i`` begins: back over its indentation and the line
        break before it, so a line after an elision stays a line of its own."""
        lead = self._lead.get(i)
        if lead is None:
            floor = self.ends[i - 1] if i > 0 else 0
            lead = self.starts[i]
            while lead > floor and self.text[lead - 1] in " \t":
                lead -= 1
            if lead > floor and self.text[lead - 1] in LINE_BREAKS:
                lead -= 1
                if lead > floor and self.text[lead - 1 : lead + 1] == "\r\n":
                    lead -= 1
            if not is_boundary(self.text, lead):
                lead = self.starts[i]
            self._lead[i] = lead
        return lead

    def estimate(self, kept: Sequence[int]) -> int:
        """The estimated tokens of the cut keeping ``kept`` (sorted): units, the whitespace that
        joins neighbours, and for every elision its mark and the line break kept after it."""
        total = 0
        marks = 0
        previous = -2
        for i in kept:
            total += self.unit_cost(i)
            if i == previous + 1:
                total += self.space_cost(self.ends[previous], self.starts[i])
            elif i > 0:
                marks += 1
                total += self.space_cost(self.lead(i), self.starts[i])
            previous = i
        if kept and kept[-1] < len(self.starts) - 1:
            marks += 1
        return total + marks * self.mark_cost

    def spans(self, kept: Sequence[int]) -> list[tuple[int, int]]:
        spans: list[tuple[int, int]] = []
        previous = -2
        for i in kept:
            if i == previous + 1:
                spans[-1] = (spans[-1][0], self.ends[i])
            else:
                start = self.lead(i) if i > 0 else self.starts[i]
                spans.append((start, self.ends[i]))
            previous = i
        return spans


class Focus(Units):
    """Grows kept passages around the best units, estimating what they cost as it goes (the
    focus cut checks the estimate with the one real count; the passages policy grows several
    texts' passages at once)."""

    def __post_init__(self, shared: dict[str, int] | None) -> None:
        super().__post_init__(shared)
        #: What a real count adds to the estimate (a cut checked by one sets it: its framing at
        #: first, then what counts tell).
        self.correction = 0
        self.kept: set[int] = set()
        self.order: list[int] = []
        self.total = 0  # estimate() of the kept units, kept up to date as units are added
        self.last = -1  # the last kept unit
        self.last_unit = len(self.starts) - 1

    def rescale(self, tokens_per_char: float) -> None:
        """Estimate every unit at ``tokens_per_char`` from now on (what an exact count of this
        text taught), the kept ones included."""
        self.tokens_per_char = tokens_per_char
        self._unit_cost.clear()
        self.total = self.estimate(sorted(self.kept)) if self.kept else 0

    def added_cost(self, i: int) -> int:
        """What keeping unit ``i`` adds to :meth:`estimate` of the kept units, in O(1)."""
        last_unit = self.last_unit
        cost = self.unit_cost(i)
        if i - 1 in self.kept:
            cost += self.space_cost(self.ends[i - 1], self.starts[i])
        elif i > 0:
            cost += self.mark_cost + self.space_cost(self.lead(i), self.starts[i])
        if i + 1 in self.kept:  # the elision before the next run closes
            cost += self.space_cost(self.ends[i], self.starts[i + 1])
            cost -= self.mark_cost + self.space_cost(self.lead(i + 1), self.starts[i + 1])
        if i > self.last:  # the elision at the end moves, or closes
            cost += (self.mark_cost if i < last_unit else 0) - (
                self.mark_cost if 0 <= self.last < last_unit else 0
            )
        return cost

    def try_add(self, i: int) -> bool:
        if i in self.kept or self.unit_cost(i) > self.max_tokens:
            return False
        added = self.added_cost(i)
        if self.total + added + self.correction > self.max_tokens:
            return False
        self.kept.add(i)
        self.order.append(i)
        self.total += added
        self.last = max(self.last, i)
        return True

    def grow(
        self, seed: int, scores: Mapping[int, float], goal: float, add: Callable[[int], bool] | None = None
    ) -> None:
        """Add neighbours of the run around ``seed`` until its units cost ``goal`` or neither
        side fits: the better-scoring side first, on a tie the side nearer the seed, then the
        earlier. ``add`` keeps a unit if it fits (default :meth:`try_add`: this text's room)."""
        add = add or self.try_add
        kept, cost, last_unit = self.kept, self.unit_cost, self.last_unit
        lo = hi = seed
        tokens = cost(seed)
        left = right = True  # not yet blocked on that side
        while True:
            while lo - 1 in kept:
                lo -= 1
                tokens += cost(lo)
            while hi + 1 in kept:
                hi += 1
                tokens += cost(hi)
            if tokens >= goal:
                return
            can_left, can_right = left and lo > 0, right and hi < last_unit
            if can_left and can_right:
                before, after = scores.get(lo - 1, 0.0), scores.get(hi + 1, 0.0)
                go_left = before > after or (before == after and seed - lo <= hi - seed)
            elif can_left or can_right:
                go_left = can_left
            else:
                return
            if go_left:
                left = add(lo - 1)
            else:
                right = add(hi + 1)
