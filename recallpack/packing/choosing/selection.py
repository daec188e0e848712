"""Which units of which documents the ``passages`` walk keeps (its step 3), and how the exact
count of the block corrects that choice.

Every unit of every document is scored (:mod:`recallpack.packing.choosing.scoring`), and its cost is
estimated from its length at the tokens per character of one exact count of the likeliest kept
text (:data:`SAMPLE_CHARS`): choosing counts no unit. The best units are kept in that order, each
with a little context around it (:data:`CONTEXT_SHARE` of the budget), until the room is full;
then the kept passages widen; then the rest fills in rank order. The walk then counts the block
exactly and hands the count back (:meth:`Selection.correct`): what is over is given back, the
last added first, and what is still free (more than :data:`FILL_SLACK` of the budget) is filled
again. The choice knows the walk only through a :class:`Chooser`: settings, tokenizer, framing.

When the room is smaller than the top document (a budget under one document: what ``prefix``
keeps then is a focus cut of it), the choice keeps fewer, longer passages, as a focus cut does:
each best unit grows back to its sentence's start and on to half the room before the next is
taken; the room the exact count leaves goes to the head of the unit after the best passage,
cut to fit, before anything fills in rank order.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import InitVar, dataclass

from recallpack.packing.candidate import Candidate, LaneKind, Provenance
from recallpack.packing.choosing.documents import Document
from recallpack.packing.choosing.embedding import EmbedFn
from recallpack.packing.choosing.focus import Focus, Growth
from recallpack.packing.choosing.ledger import WalkSettings
from recallpack.packing.choosing.scoring import UnitBounds, embedded, layout_of, lexical_scores, ranked
from recallpack.packing.choosing.small_room import SMALL_ROOM_GOAL, SmallRoom
from recallpack.packing.reading.analysis import CallReading
from recallpack.packing.tokenizers import Tokenizer

__all__ = [
    "Chooser", "Selection", "choose", "fill_tail",
    "CONTEXT_SHARE", "SAMPLE_CHARS", "FILL_SLACK", "RATE_TOLERANCE",
]

#: The context kept around each best unit before the next one is taken, as a share of the budget.
CONTEXT_SHARE = 0.05
#: Characters of the likeliest kept text counted exactly, to estimate every unit's tokens.
SAMPLE_CHARS = 512
#: The exact count may leave this share of the budget free before the choice is filled again.
FILL_SLACK = 0.05
#: A kept document's estimate is learned again from its exact count when it is off by more than
#: this factor (within it, the exact count's correction of the room is enough).
RATE_TOLERANCE = 1.25
_MISSES = 8  # seeds in a row that do not fit before the search stops: the room is full
_REFILLS = 2  # rounds that fill what the exact count says is still free

LaneKey = LaneKind | Provenance


def _ratio(documents: Sequence[Document], units: Sequence[UnitBounds],
           ranked: Sequence[tuple[int, int]], tokenizer: Tokenizer) -> float:
    """Tokens per character of the text most likely kept (the best units, else the first
    document's start), from one exact count of about SAMPLE_CHARS characters."""
    parts: list[str] = []
    size = 0
    for d, u in ranked:
        starts, ends = units[d]
        parts.append(documents[d].text[starts[u] : ends[u]])
        size += len(parts[-1])
        if size >= SAMPLE_CHARS:
            break
    if size < SAMPLE_CHARS // 4:
        parts.append(documents[0].text[: SAMPLE_CHARS - size])
    sample = " ".join(parts)
    return float(tokenizer.count(sample)) / max(1, len(sample))


@dataclass(frozen=True)
class Chooser:
    """What the choice needs of the walk it serves: its settings (this call's bounds), its
    tokenizer, what an item's framing costs, each document's lanes with a budget, and the
    block's header estimate."""

    settings: WalkSettings
    tok: Tokenizer
    framing_of: Callable[[Candidate], int]
    lane_keys: list[list[LaneKey]]
    header_estimate: int
    reading: CallReading | None = None


@dataclass(eq=False)
class Selection:
    """Which units of which documents are kept, with what they are estimated to cost."""

    by: Chooser
    documents: list[Document]
    units: InitVar[list[UnitBounds]]
    room: int
    ranked: Sequence[tuple[int, int]]  # best first
    #: Per document, each unit's score with its neighbours' (by unit, or a list of them all).
    raised: Sequence[Mapping[int, float] | list[float]]
    #: Where a lone document's sentences start, when the layout read them (else read when needed).
    sentences: InitVar[dict[int, list[int]] | None] = None

    def __post_init__(self, units: list[UnitBounds], sentences: dict[int, list[int]] | None) -> None:
        documents, tok = self.documents, self.by.tok
        ratio = _ratio(documents, units, self.ranked, tok)
        #: The room is smaller than the top document (estimated): what prefix would keep is a cut
        #: of it, and the choice keeps fewer, longer passages
        #: (:mod:`~recallpack.packing.choosing.small_room`).
        self.small = bool(documents) and len(documents[0].text) * ratio > self.room
        self.goal = max(1, int((SMALL_ROOM_GOAL if self.small else CONTEXT_SHARE) * self.room))
        self.under = SmallRoom(tok, sentences)
        # Every unit costed from its length at the tokens per character this call measured:
        # choosing counts no unit, and only what is kept is counted, once, exactly.
        shared: dict[str, int] = {}
        self.cuts = [
            Focus(doc.text, starts, ends, self.room, tok, tokens_per_char=ratio, shared=shared)
            for doc, (starts, ends) in zip(documents, units)
        ]
        self.lane_keys = self.by.lane_keys
        self.framings = [-1] * len(documents)
        self.lane_used: dict[LaneKey, int] = {}
        self.used = self.by.header_estimate
        self.opened = 0
        self.order: list[tuple[int, int]] = []
        self.seeds: list[tuple[int, int]] = []
        self.refills = _REFILLS

    def _framing(self, d: int) -> int:
        cost = self.framings[d]
        if cost < 0:
            cost = self.framings[d] = self.by.framing_of(self.documents[d].candidate)
        return cost

    def try_add(self, d: int, u: int) -> bool:
        cut = self.cuts[d]
        left = self.room - self.used
        if left <= 0 or u in cut.kept or cut.unit_cost(u) > left:
            return False
        added = cut.added_cost(u)
        framing = 0
        opening = not cut.kept
        if opening:  # the document opens: its item's framing comes with it
            if self.by.settings.max_items is not None and self.opened >= self.by.settings.max_items:
                return False
            framing = self._framing(d)
        if added + framing > left:
            return False
        keys = self.lane_keys[d]
        if keys:
            budgets, used = self.by.settings.lane_budgets, self.lane_used
            if any(used.get(key, 0) + added + framing > budgets[key] for key in keys):
                return False
            for key in keys:
                used[key] = used.get(key, 0) + added + framing
        cut.keep(u)
        cut.total += added
        if u > cut.last:
            cut.last = u
        self.used += added + framing
        self.opened += opening
        self.order.append((d, u))
        return True

    def grow(self, d: int, seed: int, goal: float) -> None:
        """Widen the passage around ``seed`` of document ``d`` to ``goal`` tokens, as a focus cut
        does, within this choice's room."""
        if self.small and goal == self.goal:  # back to the sentence's start, as far as it fits
            for before in self.under.before(d, self.cuts[d], seed):
                if not self.try_add(d, before):
                    break
        growth = Growth(self.cuts[d], seed, self.raised[d], goal)
        while (unit := growth.next()) is not None:
            growth.tried(self.try_add(d, unit))

    def select(self) -> None:
        """Best units first, each with its context; then the passages widen; then the rest fills
        in rank order (under one document, only once :func:`fill_tail` was tried). Run again
        after the room grew, it goes on where it stopped."""
        misses = 0
        for d, u in self.ranked:
            if u in self.cuts[d].kept:
                continue
            if self.used >= self.room:
                return
            if not self.try_add(d, u):
                misses += 1
                if misses >= _MISSES:
                    break
                continue
            misses = 0
            self.seeds.append((d, u))
            self.grow(d, u, self.goal)
        for d, u in self.seeds:
            if self.used >= self.room:
                return
            self.grow(d, u, math.inf)
        if self.small and not self.under.tried:
            return  # under one document, what is left goes to the best passage's next words first
        misses = 0
        for d, cut in enumerate(self.cuts):
            for u in range(len(cut.starts)):
                if self.used >= self.room or misses >= _MISSES:
                    return
                if u not in cut.kept:
                    misses = 0 if self.try_add(d, u) else misses + 1

    def give_back(self, excess: int, lane: LaneKey | None = None) -> bool:
        """Drop the last added units (of documents in ``lane``, when given), worth at least
        ``excess`` tokens; False when there is none to drop."""
        order = self.order
        picked = [i for i, (d, _) in enumerate(order) if lane is None or lane in self.lane_keys[d]]
        if not picked:
            return False
        given: set[int] = set()
        while picked and excess > 0:
            at = picked.pop()
            given.add(at)
            d, u = order[at]
            cut = self.cuts[d]
            # What the unit took off the estimate, found in constant time, not by estimating
            # the document again for every unit given back.
            freed = cut.drop(u)
            if not cut.kept:
                freed += self._framing(d)
                self.opened -= 1
            self.used -= freed
            for key in self.lane_keys[d]:
                self.lane_used[key] -= freed
            excess -= max(1, freed)
        # At once: popping each from the middle of the order would move the rest every time.
        self.order = [step for i, step in enumerate(order) if i not in given]
        return True

    def calibrate(self, exact: Mapping[int, int]) -> None:
        """Learn each kept document's own tokens per character from its exact count (``exact``:
        each kept item's, by its rank, from the last count the walk made), and estimate what is
        kept again. The rate learned from the best
        units can be far off for another document (an English match among Chinese ones, a text
        of one-letter sentences): what is then given back or added is chosen at the right rate.
        An estimate within RATE_TOLERANCE of its count is left as it is."""
        self.used = self.by.header_estimate
        self.lane_used = {}
        for d, cut in enumerate(self.cuts):
            if not cut.kept:
                continue
            framing = self._framing(d)
            cost = exact.get(self.documents[d].lead.rank)
            off = (cost - framing) / cut.total if cost is not None and cut.total > 0 else 1.0
            if cut.tokens_per_char and off > 0 and not 1 / RATE_TOLERANCE <= off <= RATE_TOLERANCE:
                cut.rescale(cut.tokens_per_char * off)
            self.used += cut.total + framing
            for key in self.lane_keys[d]:
                self.lane_used[key] = self.lane_used.get(key, 0) + cut.total + framing

    def correct(self, used: int, max_tokens: int, exact: Mapping[int, int],
                lane_used: Mapping[LaneKey, int]) -> bool:
        """Change the choice after the exact count ``used`` of what it made (``exact``: each kept
        item's count by its rank; ``lane_used``: each lane's): give back what put a lane or the
        budget over, or fill what is still free (at most _REFILLS times). False when there is
        nothing to change."""
        over = [
            (key, lane_used.get(key, 0) - budget)
            for key, budget in self.by.settings.lane_budgets.items()
            if lane_used.get(key, 0) > budget
        ]
        if over:  # the exact counts put a lane over its own budget
            self.calibrate(exact)
            return self.give_back(over[0][1], over[0][0])
        if used > max_tokens:
            self.calibrate(exact)
            return self.give_back(used - max_tokens)
        if self.refills <= 0 or max_tokens - used <= max(4, FILL_SLACK * max_tokens):
            return False
        self.calibrate(exact)
        self.refills -= 1
        before = len(self.order)
        # Estimates miss what joins and framing really cost: aim the estimate so that the
        # exact count lands on the budget.
        self.room = max_tokens - (used - self.used)
        self.select()
        return len(self.order) > before

    def kept_spans(self, d: int) -> list[tuple[int, int]] | None:
        """The document's kept ranges, or None when all of it is kept."""
        cut = self.cuts[d]
        if len(cut.kept) == len(cut.starts):
            return None
        spans = cut.spans(sorted(cut.kept))
        return self.under.spans(d, spans) if self.small else spans


def choose(documents: list[Document], query: str, embed: EmbedFn | None, by: Chooser) -> Selection:
    """Score every unit of ``documents`` against ``query`` (lexically, or by ``embed``) and
    choose the best, within an estimate of the call's ``max_tokens``."""
    max_tokens = by.settings.max_tokens
    assert max_tokens is not None, "a choice is made only within a budget"
    texts = [doc.text for doc in documents]
    layout = layout_of(texts, max_tokens)
    units = layout.units
    if embed is None:
        reading = by.reading or CallReading(by.settings.language, query)
        scores = lexical_scores(layout, query, reading.of(layout.text))
    else:
        scores = embedded(texts, units, query, embed)
    best_first, raised = ranked(scores, units)
    # Aimed a little under the budget: an estimate off by a percent or two then lands within
    # FILL_SLACK of it, and the exact count needs no second round to give back or fill.
    aim = max_tokens - int(max_tokens * FILL_SLACK / 2)
    sentences = None if layout.sentences is None else {0: layout.sentences}
    selection = Selection(by, documents, units, aim, best_first, raised, sentences)
    selection.select()
    return selection


def fill_tail(selection: Selection, free: int) -> bool:
    """Under one document, once: the head of the unit after the best passage of ``selection``,
    cut to ``free`` tokens (what the exact count left), as a focus cut keeps the head of a
    sentence it cannot hold whole; without one, the rest fills in rank order. False when nothing
    changed."""
    under = selection.under
    if not selection.small or under.tried:
        return False
    under.tried = True
    if free >= 2 and under.head_after(selection.seeds, selection.cuts, free):
        return True
    before = len(selection.order)
    selection.select()
    return len(selection.order) > before
