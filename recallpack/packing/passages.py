"""The ``passages`` policy: the budget goes to the passages that best answer the query, across
the candidates, instead of to the first candidates whole.

A prefix walk spends the budget on the first documents in rank order; when the answer is in the
third of ten 1,000-token chunks, it is gone. Here every candidate may be cut to its passages:

1. Every candidate the walk reaches is gated as in any walk (text, scopes, reader, duplicates).
   Pieces of one document that overlap or touch (recorded offsets, or failing those an exact
   overlap of their texts) become one document, so their shared text is paid for once
   (:mod:`recallpack.packing.documents`).
2. Each document's text is split into sentences and lines, and every unit is scored against the
   query, raw text, nothing tokenized (:mod:`recallpack.packing.scoring`: BM25 or ``embed``,
   raised by its neighbours, divided by its document's rank prior).
3. The best units are kept in that order, each with a little context around it (5% of the
   budget), until the room is full; then the kept passages widen, then the rest fills in rank
   order. Only units considered are counted, and the block is then counted exactly: what is
   over is given back (the last added first), what is still free is filled again.
4. Documents stay in rank order, passages in text order, every elision is marked "…", and each
   kept document keeps its label, scopes and citation. A document none of whose passages made
   the cut is dropped ``over_budget``; a piece shown in a better-ranked piece's item is
   ``merged`` (its trace entry says into which).

When everything reached fits whole (it is tried when it has at most five characters a budget
token, as prose does), nothing is cut: the result is the prefix walk's. Without a query there
is nothing to score, and the Packer packs as ``prefix`` and says so.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import InitVar, dataclass
from operator import itemgetter, neg
from typing import Any

from recallpack.packing.candidate import Candidate, LaneKind, Provenance, coerce_candidate
from recallpack.packing.cuts import Cut
from recallpack.packing.documents import Document, documents_of
from recallpack.packing.focus import Focus
from recallpack.packing.render import MarkdownBlock, View
from recallpack.packing.result import Outcome, Reason
from recallpack.packing.scopes import Scope
from recallpack.packing.scoring import (
    NEIGHBOR_SHARE,
    RANK_PRIOR,
    UNIT_CHARS,
    UnitBounds,
    combined,
    embedded,
    layout_of,
    lexical,
)
from recallpack.packing.tally import WalkSettings
from recallpack.packing.tokenizers.pieces import PieceCounts
from recallpack.packing.units import MARK, MAX_QUERY_TERMS, join_spans, query_terms
from recallpack.packing.walk import Plan, Walk

__all__ = [
    "PassagesWalk", "RANK_PRIOR", "CONTEXT_SHARE", "NEIGHBOR_SHARE", "UNIT_CHARS", "MAX_QUERY_TERMS",
    "query_terms",
]

#: The context kept around each best unit before the next one is taken, as a share of the budget.
CONTEXT_SHARE = 0.05
#: How far the walk reads: at most this many documents, and this many characters per budget token.
REACH_DOCUMENTS = 64
REACH_CHARS_PER_TOKEN = 256
#: Everything reached is first tried whole when it has at most this many characters per budget
#: token. Prose counts four to five characters a token (cl100k, o200k): a try past five nearly
#: always fails, having counted the room for nothing (of 503 tries over SQuAD paragraphs at
#: 1024, the 4 that fitted had at most 4.86).
WHOLE_CHARS_PER_TOKEN = 5
#: Characters of the likeliest kept text counted exactly, to estimate every unit's tokens.
SAMPLE_CHARS = 512
#: The exact count may leave this share of the budget free before the choice is filled again.
FILL_SLACK = 0.05
#: A kept document's estimate is learned again from its exact count when it is off by more than
#: this factor (within it, the exact count's correction of the room is enough).
RATE_TOLERANCE = 1.25
_MISSES = 8  # seeds in a row that do not fit before the search stops: the room is full
_REFILLS = 2  # rounds that fill what the exact count says is still free


# --- choosing units ---------------------------------------------------------------------------


def _ratio(documents: Sequence[Document], units: Sequence[UnitBounds],
           ranked: Sequence[tuple[int, int]], tokenizer: Any) -> float:
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


@dataclass(eq=False)
class _Selection:
    """Which units of which documents are kept, with what they are estimated to cost."""

    walk: PassagesWalk
    documents: list[Document]
    units: InitVar[list[UnitBounds]]
    room: int
    ranked: list[tuple[int, int]]  # best first
    raised: list[dict[int, float]]  # per document, each unit's score with its neighbours'

    def __post_init__(self, units: list[UnitBounds]) -> None:
        self.goal = max(1, int(CONTEXT_SHARE * self.room))
        walk, documents, tok = self.walk, self.documents, self.walk.tok
        ratio = _ratio(documents, units, self.ranked, tok)
        # Every unit costed from its length at the tokens per character this call measured:
        # choosing counts no unit, and only what is kept is counted, once, exactly.
        shared: dict[str, int] = {}
        self.cuts = [
            Focus(doc.text, starts, ends, self.room, tok, tokens_per_char=ratio, shared=shared)
            for doc, (starts, ends) in zip(documents, units)
        ]
        self.lane_keys = [walk._lane_keys(doc.candidate) for doc in documents]
        self.framings = [-1] * len(documents)
        self.lane_used: dict[LaneKind | Provenance, int] = {}
        self.used = walk.header_estimate
        self.opened = 0
        self.order: list[tuple[int, int]] = []
        self.seeds: list[tuple[int, int]] = []
        self.refills = _REFILLS

    def _framing(self, d: int) -> int:
        cost = self.framings[d]
        if cost < 0:
            cost = self.framings[d] = self.walk.framing(self.documents[d].candidate)
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
            if self.walk.s.max_items is not None and self.opened >= self.walk.s.max_items:
                return False
            framing = self._framing(d)
        if added + framing > left:
            return False
        keys = self.lane_keys[d]
        if keys:
            budgets, used = self.walk.s.lane_budgets, self.lane_used
            if any(used.get(key, 0) + added + framing > budgets[key] for key in keys):
                return False
            for key in keys:
                used[key] = used.get(key, 0) + added + framing
        cut.kept.add(u)
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
        self.cuts[d].grow(seed, self.raised[d], goal, add=functools.partial(self.try_add, d))

    def select(self) -> None:
        """Best units first, each with its context; then the passages widen; then the rest fills
        in rank order. Run again after the room grew, it goes on where it stopped."""
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
        misses = 0
        for d, cut in enumerate(self.cuts):
            for u in range(len(cut.starts)):
                if self.used >= self.room or misses >= _MISSES:
                    return
                if u not in cut.kept:
                    misses = 0 if self.try_add(d, u) else misses + 1

    def give_back(self, excess: int, lane: LaneKind | Provenance | None = None) -> bool:
        """Drop the last added units (of documents in ``lane``, when given), worth at least
        ``excess`` tokens; False when there is none to drop."""
        picked = [i for i, (d, _) in enumerate(self.order) if lane is None or lane in self.lane_keys[d]]
        if not picked:
            return False
        while picked and excess > 0:
            d, u = self.order.pop(picked.pop())
            cut = self.cuts[d]
            before = cut.total + (self._framing(d) if cut.kept else 0)
            cut.kept.discard(u)
            kept = sorted(cut.kept)
            cut.total = cut.estimate(kept) if kept else 0
            cut.last = kept[-1] if kept else -1
            after = cut.total + (self._framing(d) if kept else 0)
            self.opened -= not kept
            self.used -= before - after
            for key in self.lane_keys[d]:
                self.lane_used[key] -= before - after
            excess -= max(1, before - after)
        return True

    def calibrate(self) -> None:
        """Learn each kept document's own tokens per character from its exact count (the last
        one the walk made), and estimate what is kept again. The rate learned from the best
        units can be far off for another document (an English match among Chinese ones, a text
        of one-letter sentences): what is then given back or added is chosen at the right rate.
        An estimate within RATE_TOLERANCE of its count is left as it is."""
        exact = {k.rank: k.cost for k in self.walk.kept}
        self.used = self.walk.header_estimate
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

    def correct(self, used: int, max_tokens: int) -> bool:
        """Change the choice after the exact count ``used`` of what it made: give back what put a
        lane or the budget over, or fill what is still free (at most _REFILLS times). False when
        there is nothing to change."""
        walk = self.walk
        over = [
            (key, walk.lane_used.get(key, 0) - budget)
            for key, budget in walk.s.lane_budgets.items()
            if walk.lane_used.get(key, 0) > budget
        ]
        if over:  # the exact counts put a lane over its own budget
            self.calibrate()
            return self.give_back(over[0][1], over[0][0])
        if used > max_tokens:
            self.calibrate()
            return self.give_back(used - max_tokens)
        if self.refills <= 0 or max_tokens - used <= max(4, FILL_SLACK * max_tokens):
            return False
        self.calibrate()
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
        return cut.spans(sorted(cut.kept))


def _choose(walk: PassagesWalk, max_tokens: int) -> _Selection:
    """Score every unit of the walk's documents against its query and choose the best, within an
    estimate of ``max_tokens``."""
    documents = walk.documents
    texts = [doc.text for doc in documents]
    layout = layout_of(texts, max_tokens)
    units = layout.units
    if walk.embed is None:
        scores = lexical(layout, walk.query)
    else:
        scores = embedded(texts, units, walk.query, walk.embed)
    best, raised = combined(scores, units)
    # Best first, ties by place: the pairs sort as they are, with no key function to call.
    ranked = list(map(itemgetter(1), sorted(zip(map(neg, best.values()), best.keys()))))
    # Aimed a little under the budget: an estimate off by a percent or two then lands within
    # FILL_SLACK of it, and the exact count needs no second round to give back or fill.
    aim = max_tokens - int(max_tokens * FILL_SLACK / 2)
    selection = _Selection(walk, documents, units, aim, ranked, raised)
    selection.select()
    return selection


# --- the walk ---------------------------------------------------------------------------------


class PassagesWalk(Walk):
    """The walk of the ``passages`` policy: :meth:`run` chooses, :meth:`refit` corrects it with
    the exact count of the block, the Packer's measure."""

    def __init__(self, plan: Plan, candidates: Sequence[Any], settings: WalkSettings,
                 query: str | None) -> None:
        super().__init__(plan, candidates, settings, query)
        assert query, "the passages walk is built only for a call with a query"
        self.query: str = query
        self.gates: dict[int, tuple[Reason, Outcome]] = {}
        self.coerced: list[Candidate] = []
        self.documents: list[Document] = []
        self.selection: _Selection | None = None
        self.header_estimate = 0
        self.item_costs: dict[tuple[int, str], int] = {}  # what a document's kept text costs
        self.looks: dict[int, tuple[tuple[Scope, ...], tuple[str, ...], str | None]] = {}
        self.frames: dict[tuple[Provenance, tuple[str, ...], str | None], int] = {}

    @functools.cached_property
    def item_view(self) -> View:
        """What a chosen item is priced by: piece by piece when the default block's counts add
        up, so that a refit encodes only what changed in a document, not all of it again (made
        only when a choice is priced: a call whose documents all fit whole never needs it)."""
        view = self.view
        if isinstance(view, MarkdownBlock) and view.template is None and self.tok.splits_at_line_starts:
            return MarkdownBlock(PieceCounts(self.tok), None)
        return view

    # -- what the cost model says ---------------------------------------------------------------

    def look(self, c: Candidate) -> tuple[tuple[Scope, ...], tuple[str, ...], str | None]:
        """A document's scopes, their names and its resource line: worked out once per call."""
        key = id(c)
        found = self.looks.get(key)
        if found is None:
            scopes = self._scopes(c)
            found = self.looks[key] = (scopes, self._names(scopes), self._uri(c))
        return found

    def framing(self, c: Candidate) -> int:
        """What an item adds to the block around its text (label, resource line, joins)."""
        _, names, uri = self.look(c)
        key = (c.provenance, names, uri)  # what the framing is made of: documents often share it
        cost = self.frames.get(key)
        if cost is None:
            cost = self.frames[key] = self.view.item(self, c, names, "", uri, None)
        return cost

    # -- the run --------------------------------------------------------------------------------

    def run(self) -> None:
        shown = self._reach()
        if not shown:
            self._materialize(whole=True)
            return
        self.documents = documents_of(shown, self.resource, self.extents)
        if self.s.max_tokens is None:
            self._materialize(whole=True)
            return
        # More characters than the room could hold are not tried whole (the choice below keeps
        # everything anyway when it fits).
        chars = sum(len(doc.text) for doc in self.documents)
        if chars <= WHOLE_CHARS_PER_TOKEN * self.s.max_tokens and self._fits_whole():
            return
        self._reset()
        self.header_estimate = self.view.header_delta(self, ())
        self.selection = _choose(self, self.s.max_tokens)
        self._materialize()
        self._floor_if_empty()

    def _reach(self) -> list[tuple[int, Candidate]]:
        """Gate candidates in rank order, as far as the walk reads; the ones that can be shown."""
        limit = None if self.s.max_tokens is None else self.s.max_tokens * REACH_CHARS_PER_TOKEN
        shown: list[tuple[int, Candidate]] = []
        firsts: dict[tuple[int, tuple[str, ...]], list[tuple[str, int]]] = {}
        chars = 0
        self.extents: dict[int, int] = {}
        for rank in range(len(self.candidates)):
            if len(shown) >= REACH_DOCUMENTS or (limit is not None and chars >= limit):
                break
            c = coerce_candidate(self.candidates[rank], rank)
            self.coerced.append(c)
            gate = self._gate(c)
            if gate is None and self.s.dedupe:  # nothing is kept yet: duplicates of what was shown
                compared = self._compared(c)
                same = firsts.setdefault(self._dedupe_key(c, compared), [])
                if any(text == compared for text, _ in same):
                    gate = (Reason.DUPLICATE, Outcome.DROPPED)
                same.append((compared, rank))
            if gate is not None:
                self.gates[rank] = gate
                continue
            shown.append((rank, c))
            if limit is not None and chars + len(c.text) > limit:
                self.extents[rank] = limit - chars  # a text longer than what is left is read in part
            chars += len(c.text)
        return shown

    def _fits_whole(self) -> bool:
        """Keep every document whole if that fits: then nothing is cut. False as soon as one does
        not fit, having counted no more than the room."""
        return self._materialize(whole=True)

    def _materialize(self, whole: bool = False) -> bool:
        """Record the outcome of every candidate reached, keeping the chosen passages (or, with
        ``whole``, every document whole while the room lasts)."""
        self._reset()
        lead_of: dict[int, int] = {}
        for d, doc in enumerate(self.documents):
            for piece in doc.pieces:
                lead_of[piece.rank] = d
        kept_spans: dict[int, list[tuple[int, int]] | None] = {}
        for rank in range(len(self.coerced)):
            c = self.coerced[rank]
            gate = self.gates.get(rank)
            if gate is not None:
                if gate[0] is Reason.DUPLICATE and self._twin(c) is not None:
                    self._drop_twin(rank, c)  # the kept twin stands for it, citation and all
                else:
                    self._drop(rank, c, gate[0], gate[1])
                continue
            d = lead_of[rank]
            doc = self.documents[d]
            if doc.lead.rank != rank:
                if d in kept_spans:
                    self._merged(rank, c, doc, kept_spans[d] or [(0, len(doc.text))])
                else:
                    self._drop(rank, c, Reason.OVER_BUDGET)
                continue
            spans: list[tuple[int, int]] | None = None
            if whole:
                if not self._keep_document(rank, doc, None, fit=True):
                    return False
            else:
                assert self.selection is not None
                if not self.selection.cuts[d].kept:
                    self._drop(rank, c, Reason.OVER_BUDGET)
                    continue
                spans = self.selection.kept_spans(d)
                self._keep_document(rank, doc, spans)
            kept_spans[d] = spans
        if len(self.coerced) < len(self.candidates):
            self.tail_reason = Reason.OVER_BUDGET
        return True

    def _keep_document(self, rank: int, doc: Document, spans: list[tuple[int, int]] | None,
                       fit: bool = False) -> bool:
        """Keep ``doc`` (its ``spans``, or all of it); with ``fit``, only if it fits the room left."""
        c = doc.candidate
        scopes, names, uri = self.look(c)
        header = self.view.header_delta(self, scopes)
        if doc.clipped and fit:
            return False  # read in part: never whole
        text = doc.text if spans is None else join_spans(doc.text, spans)
        if doc.clipped and not text.endswith(MARK):
            text += MARK  # the rest of it was never read
        merged = len(doc.pieces) > 1 or doc.clipped
        if fit:  # whole, within every cap, or not at all
            if self.s.max_items is not None and len(self.kept) >= self.s.max_items:
                return False
            *_, limit = self._limits(c, header)
            cost = self.view.item(self, c, names, text, uri, limit)
            if limit is not None and cost > limit:
                return False
            self.item_costs[doc.lead.rank, text] = cost  # exact: a choice that keeps it whole reuses it
        else:  # a refit changes a document or two: the others are not counted again
            key = (doc.lead.rank, text)
            cost = self.item_costs.get(key, -1)
            if cost < 0:
                cost = self.item_costs[key] = self.item_view.item(self, c, names, text, uri, None)
        whole = [(0, len(doc.text))]
        cut = None if spans is None and not merged else Cut(text, tuple(spans or whole), "passages")
        self._keep(rank, c, scopes, names, text, cost, header, cut, uri)
        if cut is not None:
            self.entries[-1] = self.entries[-1]._replace(kept_spans=doc.piece_spans(rank, spans or whole))
        return True

    def _merged(self, rank: int, c: Candidate, doc: Document, spans: list[tuple[int, int]]) -> None:
        self._count_reason(Reason.MERGED, 1)
        record = self._entry(rank, c, Outcome.DROPPED, Reason.MERGED, None, None)
        self.entries.append(record._replace(
            cut="passages", kept_spans=doc.piece_spans(rank, spans), merged_into=doc.lead.rank
        ))

    def refit(self, used: int, max_tokens: int | None) -> bool:
        """Correct the choice with ``used``, the block's exact count: give back what is over,
        fill what the count says is still free. True when it changed something (count again)."""
        if self.selection is None or max_tokens is None or not self.selection.correct(used, max_tokens):
            return False
        self._materialize()
        return True
