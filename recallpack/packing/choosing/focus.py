"""What keeping some units of a text costs, and how kept passages grow around the best ones.

The focus cut (:mod:`recallpack.packing.choosing.cuts`) and the passages policy
(:mod:`recallpack.packing.choosing.passages`) both keep units of a text
(:func:`~recallpack.packing.reading.units.split_units`) and show them in order, with the mark "…"
wherever something was dropped. :class:`Units` estimates what a set of kept units costs rendered
that way (the units, the whitespace that joins neighbours, a mark and a line break for every
elision), counting lazily: only the units a cut considers are counted, or none when a rate of tokens
per character is given. :class:`Focus` grows kept passages around the best units within a budget,
the better-scoring side first, in time linear in what it keeps: each run of kept neighbours is found
whole, with what it costs (:class:`Runs`), not walked again for every seed."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import InitVar, dataclass

from recallpack.packing.reading.text import LINE_BREAKS, is_boundary
from recallpack.packing.reading.units import MARK
from recallpack.packing.tokenizers import Tokenizer

__all__ = ["Focus", "Growth", "Runs", "Units"]


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


class Runs:
    """Kept units as runs of neighbours, each with its first and last unit and the sum of its
    units' costs: a union-find over the kept units, so that finding a unit's run takes about
    constant time however long the run (walking the run from a unit would cost its length)."""

    __slots__ = ("parent", "bounds")

    def __init__(self) -> None:
        self.parent: dict[int, int] = {}
        #: For a run's root: [first unit, last unit, tokens].
        self.bounds: dict[int, list[int]] = {}

    def __len__(self) -> int:
        return len(self.parent)

    def root(self, i: int) -> int:
        parent = self.parent
        up = parent[i]
        while up != i:  # path halving: every unit passed points past its parent from now on
            parent[i] = i = parent[up]
            up = parent[i]
        return i

    def run(self, i: int) -> list[int]:
        """[first unit, last unit, tokens] of the run of kept unit ``i`` (not to be changed)."""
        return self.bounds[self.root(i)]

    def add(self, i: int, tokens: int) -> None:
        """Unit ``i`` is kept: it joins the runs beside it."""
        self.parent[i] = i
        self.bounds[i] = [i, i, tokens]
        if i - 1 in self.parent:
            self._join(self.root(i - 1), i)
        if i + 1 in self.parent:
            self._join(self.root(i), self.root(i + 1))

    def _join(self, a: int, b: int) -> None:
        """The runs rooted at ``a`` and ``b`` (neighbours, ``a`` first) as one; the longer keeps its root."""
        first, _, tokens_a = self.bounds[a]
        _, last, tokens_b = self.bounds[b]
        if self.bounds[a][1] - first < last - self.bounds[b][0]:
            a, b = b, a
        self.parent[b] = a
        del self.bounds[b]
        self.bounds[a] = [first, last, tokens_a + tokens_b]


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
        #: The runs of ``kept``, made again from it when a unit was dropped (or not kept by
        #: :meth:`keep`) since they were last made: then they no longer hold as many units.
        self._runs = Runs()

    def rescale(self, tokens_per_char: float) -> None:
        """Estimate every unit at ``tokens_per_char`` from now on (what an exact count of this
        text taught), the kept ones included."""
        self.tokens_per_char = tokens_per_char
        self._unit_cost.clear()
        self._runs = Runs()  # their tokens were at the old rate
        self.total = self.estimate(sorted(self.kept)) if self.kept else 0

    def keep(self, i: int) -> None:
        """Keep unit ``i`` (the caller has added what it costs to :attr:`total`)."""
        kept = self.kept
        kept.add(i)
        if len(self._runs) == len(kept) - 1:
            self._runs.add(i, self.unit_cost(i))
        elif self._runs:
            self._runs = Runs()  # a unit was dropped since: made again when next asked

    def drop(self, i: int) -> int:
        """Keep unit ``i`` no longer; what that takes off :attr:`total` (its :meth:`added_cost`
        against the units left), in constant time but for finding the last kept unit again,
        which looks back from ``i``: units dropped last first, as a choice gives them back,
        look at each unit of the text at most once between them."""
        kept = self.kept
        kept.discard(i)
        self._runs = Runs()
        if i == self.last:
            last = i - 1
            while last >= 0 and last not in kept:
                last -= 1
            self.last = last
        freed = self.added_cost(i)
        self.total -= freed
        return freed

    def runs(self) -> Runs:
        """The runs of the kept units, made again if units were dropped since they were made."""
        runs = self._runs
        if len(runs) != len(self.kept):
            runs = self._runs = Runs()
            cost = self.unit_cost
            for i in self.kept:
                runs.add(i, cost(i))
        return runs

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
        self.keep(i)
        self.order.append(i)
        self.total += added
        self.last = max(self.last, i)
        return True

    def grow(self, seed: int, scores: Mapping[int, float], goal: float) -> None:
        """Add neighbours of the run around ``seed`` until its units cost ``goal`` or neither
        side fits this text's room (:class:`Growth` says which unit to try next)."""
        growth = Growth(self, seed, scores, goal)
        while (unit := growth.next()) is not None:
            growth.tried(self.try_add(unit))


class Growth:
    """The run around a seed growing toward a goal, one unit at a time: :meth:`next` names the
    neighbour to try, the better-scoring side first, on a tie the side nearer the seed, then the
    earlier; the caller keeps it if it fits its own room and says so with :meth:`tried`. A choice
    over several texts (the passages policy) grows each within its shared room this way, and
    no call climbs back into it."""

    __slots__ = ("focus", "seed", "scores", "listed", "goal", "runs", "left", "right", "went_left")

    def __init__(self, focus: Focus, seed: int, scores: Mapping[int, float] | list[float],
                 goal: float) -> None:
        self.focus, self.seed, self.goal = focus, seed, goal
        # By unit (0.0 for one not there), or a list of every unit's (an exact type check: a
        # growth is made for every seed).
        self.listed: list[float] | None = None
        self.scores: Mapping[int, float] = {}
        if isinstance(scores, list):
            self.listed = scores
        else:
            self.scores = scores
        self.runs = focus.runs()
        self.left = self.right = True  # not yet blocked on that side
        self.went_left = False

    def next(self) -> int | None:
        """The unit to try next, or None: the run costs ``goal``, or neither side can grow."""
        focus, seed, runs = self.focus, self.seed, self.runs
        kept = focus.kept
        # The seed's run: the kept units around it, and what they cost with it (a seed given
        # back since, bridging the runs on either side, is counted with them).
        if seed in kept:
            lo, hi, tokens = runs.run(seed)
        else:
            lo = hi = seed
            tokens = focus.unit_cost(seed)
            if seed - 1 in kept:
                lo, _, left_tokens = runs.run(seed - 1)
                tokens += left_tokens
            if seed + 1 in kept:
                _, hi, right_tokens = runs.run(seed + 1)
                tokens += right_tokens
        if tokens >= self.goal:
            return None
        can_left, can_right = self.left and lo > 0, self.right and hi < focus.last_unit
        if can_left and can_right:
            if self.listed is not None:
                before, after = self.listed[lo - 1], self.listed[hi + 1]
            else:
                before, after = self.scores.get(lo - 1, 0.0), self.scores.get(hi + 1, 0.0)
            go_left = before > after or (before == after and seed - lo <= hi - seed)
        elif can_left or can_right:
            go_left = can_left
        else:
            return None
        self.went_left = go_left
        return lo - 1 if go_left else hi + 1

    def tried(self, kept: bool) -> None:
        """Whether the unit :meth:`next` named was kept (if not, that side is blocked)."""
        if self.went_left:
            self.left = kept
        else:
            self.right = kept
