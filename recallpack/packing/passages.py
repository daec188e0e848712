"""The ``passages`` policy: the budget goes to the passages that best answer the query, across
the candidates, instead of to the first candidates whole.

A prefix walk spends the budget on the first documents in rank order; when the answer is in the
third of ten 1,000-token chunks, it is gone. Here every candidate may be cut to its passages:

1. Every candidate the walk reaches is gated as in any walk (text, scopes, reader, duplicates).
   Pieces of one document that overlap or touch (recorded offsets, or failing those an exact
   overlap of their texts) become one document, so their shared text is paid for once.
2. Each document's text is split into sentences and lines, and every unit is scored against the
   query: BM25 over all the units of all the documents (raw text: nothing is tokenized to
   score), or ``embed`` when given. A unit's score is raised by a share of its neighbours'
   (an answer is often the sentence next to the one that names the question's words), scaled to
   the best one, then divided by ``1 + 0.3 * position`` of its document among those shown: the
   retriever's order is a prior, so a passage of the fifth document must match about twice as
   well as one of the first to come before it. ``docs/how-the-walk-decides.md`` says why.
3. The best units are kept in that order, each with a little context around it (5% of the
   budget), until the room is full; then the kept passages widen, then the rest fills in rank
   order. Only units considered are counted, and the block is then counted exactly: what is
   over is given back (the last added first), what is still free is filled again.
4. Documents stay in rank order, passages in text order, every elision is marked "…", and each
   kept document keeps its label, scopes and citation. A document none of whose passages made
   the cut is dropped ``over_budget``; a piece shown in a better-ranked piece's item is
   ``merged`` (its trace entry says into which).

When everything reached fits whole, nothing is cut: the result is the prefix walk's. Without a
query there is nothing to score, and the Packer packs as ``prefix`` and says so.
"""

from __future__ import annotations

import functools
import itertools
import math
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from recallpack.packing.candidate import Candidate, LaneKind, Provenance, Span, coerce_candidate
from recallpack.packing.cuts import Cut
from recallpack.packing.embedding import EmbedFn, similarities
from recallpack.packing.errors import CandidateError
from recallpack.packing.result import Outcome, Reason
from recallpack.packing.scopes import Scope
from recallpack.packing.tally import WalkSettings, resource_of
from recallpack.packing.units import (
    MARK,
    MAX_QUERY_TERMS,
    Focus,
    fold,
    join_spans,
    query_terms,
    split_units,
    word_hits,
)
from recallpack.packing.walk import Plan, Walk

__all__ = ["PassagesWalk", "RANK_PRIOR", "CONTEXT_SHARE", "NEIGHBOR_SHARE", "MAX_QUERY_TERMS"]

#: A passage of the document at position ``p`` (0 is the first shown) scores ``1 / (1 + RANK_PRIOR * p)``
#: of what it would in the first: the retriever's rank is a prior.
RANK_PRIOR = 0.3
#: The context kept around each best unit before the next one is taken, as a share of the budget.
CONTEXT_SHARE = 0.05
#: A unit's score is raised by this share of each neighbour's.
NEIGHBOR_SHARE = 0.3
#: How far the walk reads: at most this many documents, and this many characters per budget token.
REACH_DOCUMENTS = 64
REACH_CHARS_PER_TOKEN = 256
#: Everything reached is first tried whole when it has at most this many characters per budget token.
WHOLE_CHARS_PER_TOKEN = 6
#: Characters of the likeliest kept text counted exactly, to estimate every unit's tokens.
SAMPLE_CHARS = 512
#: The exact count may leave this share of the budget free before the choice is filled again.
FILL_SLACK = 0.05
#: Units are sentences and lines, split at a space past this many characters.
UNIT_CHARS = 600
#: The exact-overlap fallback recognises a piece by its first characters, among the first
#: candidates that recorded no offsets.
OVERLAP_PROBE = 64
OVERLAP_CANDIDATES = 16
_TERM_SEARCHES = 16  # query words searched for one by one; more read the text's words once
_MISSES = 8  # seeds in a row that do not fit before the search stops: the room is full
_REFILLS = 2  # rounds that fill what the exact count says is still free
_K1 = 1.2
_B = 0.75


@dataclass(slots=True)
class _Piece:
    """A candidate as a piece of its document: ``head`` is where the span's characters begin in its
    text (what comes before is its own header), ``start``/``end`` where they sit in the parent."""

    rank: int
    candidate: Candidate
    head: int
    start: int
    end: int

    @property
    def header(self) -> str:
        return self.candidate.text[: self.head]


class _Document:
    """One item to be: a candidate, or pieces of one parent that overlap or touch, as one text.

    ``text`` is the best-ranked piece's header and the pieces' union; ``regions`` says, per
    piece, which ranges of it are which ranges of the piece's own text."""

    def __init__(self, pieces: list[_Piece], extent: int | None = None) -> None:
        lead = min(pieces, key=lambda p: p.rank)
        self.lead = lead
        self.pieces = sorted(pieces, key=lambda p: p.rank)
        #: rank -> [(start in text, end in text, start in the piece's own text)]
        self.regions: dict[int, list[tuple[int, int, int]]] = {}
        #: Only the first ``extent`` characters of a text past the walk's reach are read: the rest
        #: is never chosen, and an item cut there ends with the mark.
        self.clipped = extent is not None and extent < len(lead.candidate.text)
        if len(pieces) == 1:
            self.text = lead.candidate.text[:extent] if self.clipped else lead.candidate.text
            self.regions[lead.rank] = [(0, len(self.text), 0)]
            return
        ordered = sorted(pieces, key=lambda p: (p.start, p.rank))
        base = ordered[0].start
        header = lead.header
        text = header
        for piece in ordered:
            content = piece.candidate.text[piece.head :]
            at = len(header) + piece.start - base
            shared = min(len(text) - at, len(content))
            if shared > 0 and content[:shared] != text[at : at + shared]:
                source = piece.candidate.span.source if piece.candidate.span is not None else "its span"
                raise CandidateError(
                    f"candidates[{piece.rank}]: {source} puts it {shared} characters into another "
                    "piece of its document, but their texts differ there; fix the offsets, or leave "
                    "them out"
                )
            if len(content) > shared:
                text += content[max(shared, 0) :]
            self.regions[piece.rank] = [(at, at + len(content), piece.head)]
        if header:
            self.regions[lead.rank].insert(0, (0, len(header), 0))
        self.text = text

    @property
    def candidate(self) -> Candidate:
        return self.lead.candidate

    def piece_spans(self, rank: int, spans: Sequence[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
        """``spans`` of the document's text, as ranges of piece ``rank``'s own text."""
        out: list[tuple[int, int]] = []
        for start, end, own in self.regions[rank]:
            shift = own - start
            out.extend(
                (max(s, start) + shift, min(e, end) + shift) for s, e in spans if s < end and e > start
            )
        return tuple(out)


def _pieces(
    shown: Sequence[tuple[int, Candidate]], uri_of: Callable[[Candidate], str | None],
    extents: dict[int, int],
) -> list[_Document]:
    """The shown candidates as documents, in rank order: pieces of one parent that overlap or
    touch are one document (same lane, scopes, header and resource line, or they stay apart).
    A candidate read only in part (``extents``) is a document of its own."""
    whole = [(r, c) for r, c in shown if r not in extents]
    spans: dict[int, Span] = {r: c.span for r, c in whole if c.span is not None}
    unplaced = [(r, c) for r, c in whole if c.span is None]
    if len(unplaced) > 1:
        spans.update(_exact_overlaps(unplaced))
    groups: dict[tuple[Any, ...], list[_Piece]] = {}
    singles: list[_Document] = []
    for rank, c in shown:
        span = spans.get(rank)
        if span is None:
            singles.append(_Document([_Piece(rank, c, 0, 0, len(c.text))], extents.get(rank)))
            continue
        head = len(c.text) - (span.end - span.start)
        key = (span.parent, c.lane, c.scope_ids, c.text[:head], uri_of(c))
        groups.setdefault(key, []).append(_Piece(rank, c, head, span.start, span.end))
    documents = singles
    for pieces in groups.values():
        pieces.sort(key=lambda p: (p.start, p.rank))
        run = [pieces[0]]
        reach = pieces[0].end
        for piece in pieces[1:]:
            if piece.start <= reach:
                run.append(piece)
                reach = max(reach, piece.end)
            else:
                documents.append(_Document(run))
                run, reach = [piece], piece.end
        documents.append(_Document(run))
    documents.sort(key=lambda d: d.lead.rank)
    return documents


def _exact_overlaps(items: Sequence[tuple[int, Candidate]]) -> dict[int, Span]:
    """Spans for candidates that overlap another exactly (a splitter's overlap: the end of one
    is the start of the next) when nothing recorded where they sit. Among the first
    OVERLAP_CANDIDATES of them, the second half of each text is searched for the start of each
    other: a few hundred substring searches at most."""
    items = [(r, c) for r, c in items[:OVERLAP_CANDIDATES] if len(c.text) >= 2 * OVERLAP_PROBE]
    if len(items) < 2:
        return {}
    by_rank = dict(items)
    follows: dict[int, tuple[int, int]] = {}  # rank -> (the rank it continues, at what offset)
    for other, b in items:
        head = b.text[:OVERLAP_PROBE]
        for rank, a in items:
            if rank == other:
                continue
            at = a.text.find(head, len(a.text) // 2)
            if at < 0:
                continue
            tail = a.text[at:]
            if len(b.text) > len(tail) and b.text.startswith(tail):
                follows[other] = (rank, at)
                break
    if not follows:
        return {}
    placed: dict[int, tuple[str, int]] = {}

    def place(rank: int, seen: frozenset[int] = frozenset()) -> tuple[str, int]:
        if rank in placed:
            return placed[rank]
        before = follows.get(rank)
        if before is None or before[0] in seen:
            placed[rank] = (f"overlap:{rank}", 0)
        else:
            parent, start = place(before[0], seen | {rank})
            placed[rank] = (parent, start + before[1])
        return placed[rank]

    spans = {}
    for rank in {*follows, *(r for r, _ in follows.values())}:
        parent, start = place(rank)
        spans[rank] = Span(parent=parent, start=start, end=start + len(by_rank[rank].text), source="overlap")
    return spans


#: A document's units: where each starts, where each ends.
_UnitBounds = tuple[list[int], list[int]]


# --- scoring ----------------------------------------------------------------------------------


def _inside_word(char: str) -> bool:
    return char.isalnum() or char == "_"  # what \w matches


def _hits(text: str, terms: Sequence[str], limit: int) -> dict[str, list[int]]:
    """Where each query word occurs in ``text`` as a whole word, case folded, linear in the text;
    a word found, even inside other words, more than ``limit`` times is left out.

    A word that occurs more often than there are units (``the``, ``of``) says little about which
    one answers (its BM25 weight is near zero), and taking each occurrence would be most of the
    work. ``str.count`` tells that at the speed of the string search, and the other words'
    occurrences are found by ``str.find``, several times faster than a regular expression scans
    a text that is not ASCII."""
    lowered = fold(text)  # the same length as the text: a position in it is one in the text
    found: dict[str, list[int]] = {}
    if len(terms) > _TERM_SEARCHES:
        # A long query: one pass over the text's words costs the same whatever its length.
        return {term: at for term, at in word_hits(lowered, terms).items() if len(at) <= limit}
    size = len(lowered)
    for term in terms:
        if not 0 < lowered.count(term) <= limit:
            continue
        width, at, whole = len(term), lowered.find(term), []
        while at >= 0:
            end = at + width
            starts_word = not at or not _inside_word(lowered[at - 1])
            if starts_word and (end >= size or not _inside_word(lowered[end])):
                whole.append(at)
            at = lowered.find(term, end)
        if whole:
            found[term] = whole
    return found


@dataclass(frozen=True)
class _Layout:
    """The documents as one text, apart by a blank line (no unit or word spans it), split into
    units once: each unit's start and end in that text, which document and unit it is."""

    text: str
    starts: list[int]
    ends: list[int]
    owner: list[tuple[int, int]]
    units: list[_UnitBounds]  # per document, in the document's own text


def _layout(documents: Sequence[_Document]) -> _Layout:
    text = "\n\n".join(doc.text for doc in documents)
    starts, ends = split_units(text, UNIT_CHARS)
    offsets = list(itertools.accumulate((len(doc.text) + 2 for doc in documents), initial=0))
    units: list[_UnitBounds] = [([], []) for _ in documents]
    owner: list[tuple[int, int]] = []
    d = 0
    for start, end in zip(starts, ends):
        while start >= offsets[d + 1]:
            d += 1
        doc_starts, doc_ends = units[d]
        owner.append((d, len(doc_starts)))
        doc_starts.append(start - offsets[d])
        doc_ends.append(min(end, offsets[d + 1] - 2) - offsets[d])
    return _Layout(text, starts, ends, owner, units)


def _lexical(layout: _Layout, query: str) -> dict[tuple[int, int], float]:
    """BM25 of every unit that holds a query word, over all the units of all the documents.

    The documents are searched as one text, so the work per query word does not grow with the
    number of documents."""
    text, starts, ends, owner = layout.text, layout.starts, layout.ends, layout.owner
    n = len(starts)
    terms = query_terms(query)
    if not terms or not n:
        return {}
    # Each hit's unit, by C-level bisection over the units' starts: a hit is in the unit it
    # starts in (a word never spans two units: they split at spaces and line breaks).
    where = functools.partial(bisect_right, starts)
    by_term = _hits(text, terms, n)
    if not by_term:
        return {}
    average = max(1.0, (sum(ends) - sum(starts)) / n)
    scores: dict[tuple[int, int], float] = {}
    for found in by_term.values():
        tf = Counter(map(where, found))  # unit + 1 -> occurrences
        idf = math.log(1.0 + (n - len(tf) + 0.5) / (len(tf) + 0.5))
        for after, count in tf.items():
            unit = after - 1
            norm = _K1 * (1.0 - _B + _B * (ends[unit] - starts[unit]) / average)
            place = owner[unit]
            scores[place] = scores.get(place, 0.0) + idf * count * (_K1 + 1.0) / (count + norm)
    return scores


def _embedded(documents: Sequence[_Document], units: Sequence[_UnitBounds], query: str,
              embed: EmbedFn) -> dict[tuple[int, int], float]:
    """Similarity of every unit to the query, from one call of ``embed``, scaled to 0..1."""
    keys = [(d, u) for d, (starts, _) in enumerate(units) for u in range(len(starts))]
    texts = [documents[d].text[units[d][0][u] : units[d][1][u]] for d, u in keys]
    scored = similarities(embed, query, texts)
    finite = [s for s in scored.values() if math.isfinite(s)]
    if not finite:
        return {}
    low, high = min(finite), max(finite)
    spread = high - low or 1.0
    return {key: (scored[i] - low) / spread for i, key in enumerate(keys) if math.isfinite(scored[i])}


def _combined(scores: dict[tuple[int, int], float], units: Sequence[_UnitBounds],
              ) -> tuple[dict[tuple[int, int], float], list[dict[int, float]]]:
    """Each unit's score raised by its neighbours', scaled to the best, divided by its document's
    prior; and per document the raised scores (which side a passage grows to)."""
    raised: list[dict[int, float]] = [{} for _ in units]
    for (d, u), score in scores.items():
        own = raised[d]
        own[u] = own.get(u, 0.0) + score
        for v in (u - 1, u + 1):
            if 0 <= v < len(units[d][0]):
                own[v] = own.get(v, 0.0) + NEIGHBOR_SHARE * score
    best = max((s for own in raised for s in own.values()), default=0.0)
    if best <= 0:
        return {}, raised
    combined = {
        (d, u): s / best / (1.0 + RANK_PRIOR * d)
        for d, own in enumerate(raised)
        for u, s in own.items()
        if s > 0
    }
    return combined, raised


# --- choosing units ---------------------------------------------------------------------------


class _Estimated(Focus):
    """A document's units, each costed from its length at the tokens per character this call
    measured: choosing counts no unit, and only what is kept is counted, once, exactly."""

    def __init__(self, text: str, starts: list[int], ends: list[int], max_tokens: int, tokenizer: Any,
                 ratio: float) -> None:
        super().__init__(text, starts, ends, max_tokens, tokenizer)
        self.ratio = ratio

    def unit_cost(self, i: int) -> int:
        cost = self._unit_cost.get(i)
        if cost is None:
            cost = self._unit_cost[i] = max(1, math.ceil((self.ends[i] - self.starts[i]) * self.ratio))
        return cost


def _ratio(documents: Sequence[_Document], units: Sequence[_UnitBounds],
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


class _Selection:
    """Which units of which documents are kept, with what they are estimated to cost."""

    def __init__(self, walk: PassagesWalk, documents: list[_Document], units: list[_UnitBounds],
                 room: int, ranked: list[tuple[int, int]], raised: list[dict[int, float]]) -> None:
        self.walk = walk
        self.documents = documents
        self.ranked = ranked
        self.raised = raised
        self.room = room
        self.goal = max(1, int(CONTEXT_SHARE * room))
        tok = walk.tok
        ratio = _ratio(documents, units, ranked, tok)
        self.cuts = [
            _Estimated(doc.text, starts, ends, room, tok, ratio)
            for doc, (starts, ends) in zip(documents, units)
        ]
        self.overhead: dict[int, int] = {}
        self.lane_keys = [walk._lane_keys(doc.candidate) for doc in documents]
        self.lane_used: dict[LaneKind | Provenance, int] = {}
        self.used = walk.header_estimate
        self.opened = 0
        self.order: list[tuple[int, int]] = []
        self.seeds: list[tuple[int, int]] = []
        self.refills = _REFILLS

    def _framing(self, d: int) -> int:
        cost = self.overhead.get(d)
        if cost is None:
            doc = self.documents[d]
            cost = self.overhead[d] = self.walk.framing(doc.candidate)
        return cost

    def try_add(self, d: int, u: int) -> bool:
        cut = self.cuts[d]
        if u in cut.kept or self.used >= self.room or cut.unit_cost(u) > self.room - self.used:
            return False
        added = cut.added_cost(u)
        opening = not cut.kept
        if opening:
            if self.walk.s.max_items is not None and self.opened >= self.walk.s.max_items:
                return False
            added += self._framing(d)
        if self.used + added > self.room:
            return False
        budgets = self.walk.s.lane_budgets
        for key in self.lane_keys[d]:
            if self.lane_used.get(key, 0) + added > budgets[key]:
                return False
        for key in self.lane_keys[d]:
            self.lane_used[key] = self.lane_used.get(key, 0) + added
        cut.kept.add(u)
        cut.total += added - (self._framing(d) if opening else 0)
        cut.last = max(cut.last, u)
        self.used += added
        self.opened += opening
        self.order.append((d, u))
        return True

    def grow(self, d: int, seed: int, goal: float) -> None:
        """Widen the passage around ``seed`` of document ``d`` to ``goal`` tokens, as a focus cut
        does, within this choice's room."""
        self.cuts[d].grow(seed, self.raised[d], goal, add=lambda unit: self.try_add(d, unit))

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
            return self.give_back(over[0][1], over[0][0])
        if used > max_tokens:
            return self.give_back(used - max_tokens)
        if self.refills <= 0 or max_tokens - used <= max(4, FILL_SLACK * max_tokens):
            return False
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
    layout = _layout(documents)
    units = layout.units
    if walk.embed is None:
        scores = _lexical(layout, walk.query)
    else:
        scores = _embedded(documents, units, walk.query, walk.embed)
    combined, raised = _combined(scores, units)
    ranked = sorted(combined, key=lambda k: (-combined[k], k))
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
        self.documents: list[_Document] = []
        self.selection: _Selection | None = None
        self.header_estimate = 0
        self.item_costs: dict[tuple[int, str], int] = {}  # what a document's kept text costs
        self.looks: dict[int, tuple[tuple[Scope, ...], tuple[str, ...], str | None]] = {}

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
        return self.view.item(self, c, names, "", uri, None)

    # -- the run --------------------------------------------------------------------------------

    def run(self) -> None:
        shown = self._reach()
        if not shown:
            self._materialize(whole=True)
            return
        self.documents = _pieces(shown, lambda c: resource_of(c, self.s), self.extents)
        if self.s.max_tokens is None:
            self._materialize(whole=True)
            return
        # Most texts count about four characters a token: far more characters than that could
        # fill are not tried whole (the choice below keeps everything anyway when it fits).
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

    def _reset(self) -> None:
        self.kept = []
        self.entries = []
        self.reasons = {}
        self.used = 0
        self.lane_used = {}
        self.full = set()
        self.scope_order = {}
        self.dropped_sizes = {}
        self.seen = {}
        self.floor_applied = False
        self.tail_reason = None
        self.header_cost = 0

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

    def _keep_document(self, rank: int, doc: _Document, spans: list[tuple[int, int]] | None,
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
            room, lane_room = self._rooms(c, header)
            limit = room if lane_room is None else (lane_room if room is None else min(room, lane_room))
            cost = self.view.item(self, c, names, text, uri, limit)
            if limit is not None and cost > limit:
                return False
        else:  # a refit changes a document or two: the others are not counted again
            key = (doc.lead.rank, text)
            cost = self.item_costs.get(key, -1)
            if cost < 0:
                cost = self.item_costs[key] = self.view.item(self, c, names, text, uri, None)
        whole = [(0, len(doc.text))]
        cut = None if spans is None and not merged else Cut(text, tuple(spans or whole), "passages")
        self._keep(rank, c, scopes, names, text, cost, header, cut, uri)
        if cut is not None:
            self.entries[-1] = self.entries[-1]._replace(kept_spans=doc.piece_spans(rank, spans or whole))
        return True

    def _merged(self, rank: int, c: Candidate, doc: _Document, spans: list[tuple[int, int]]) -> None:
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
