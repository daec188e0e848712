"""How well each unit of the documents answers the query (the ``passages`` policy's step 2).

Every document's text is split into sentences and lines once, and each unit is scored: BM25 over
all the units of all the documents (:mod:`recallpack.packing.choosing.bm25`, reading the text through the
call's analysis chain), or ``embed`` when given. A unit's score is then
raised by a share of its neighbours' (an answer is often the sentence next to the one that names
the question's words), scaled to the best, and divided by ``1 + RANK_PRIOR * position`` of its
document: the retriever's order is a prior.
``docs/how-the-walk-decides.md`` says why.
"""

from __future__ import annotations

import itertools
import math
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from operator import add, itemgetter, mul, neg, sub, truediv
from typing import overload

from recallpack.packing.choosing.bm25 import scored_units
from recallpack.packing.choosing.embedding import EmbedFn, similarities
from recallpack.packing.reading.analysis import Reading
from recallpack.packing.reading.units import units_and_sentences

__all__ = [
    "Layout", "UnitBounds", "layout_of", "lexical", "lexical_scores", "embedded", "combined",
    "ranked", "Ranked",
    "RANK_PRIOR", "NEIGHBOR_SHARE", "UNIT_CHARS", "LONG_UNIT_PIECE_BYTES", "UNIT_BYTES_PER_TOKEN",
]

#: A passage of the document at position ``p`` (0 is the first shown) scores ``1 / (1 + RANK_PRIOR * p)``
#: of what it would in the first: the retriever's rank is a prior.
RANK_PRIOR = 0.3
#: A unit's score is raised by this share of each neighbour's.
NEIGHBOR_SHARE = 0.3
#: Units are sentences and lines, split at a space past this many characters...
UNIT_CHARS = 600
#: ...into pieces of about this many bytes of UTF-8 (250 characters of English, 83 of Chinese),
#: or a quarter of the budget's tokens in bytes when that is less (64 at the least): a text with
#: few sentence ends (a transcript, scraped text, a log) then has units about as long as prose's
#: sentences, not 600-character slabs that a small budget cannot take, and a small budget is
#: not left half empty by two pieces that do not fit together.
LONG_UNIT_PIECE_BYTES = 250
_LEAST_PIECE_BYTES = 64
#: A unit of more than this many bytes of UTF-8 per budget token is cut into pieces of half that:
#: the best sentence must fit the room. A sentence of Greek or Hindi costs three to four times the
#: tokens of the same sentence in English (cl100k), and at 256 tokens one of 270 letters alone
#: filled the room left after the header: it was passed over for a worse one that fitted. 1.75
#: bytes a token is 448 bytes at 256 tokens (an English sentence of 448 letters, about 100
#: tokens; a Greek one of 224, about 190).
UNIT_BYTES_PER_TOKEN = 1.75
#: A document's units: where each starts, where each ends.
UnitBounds = tuple[list[int], list[int]]


def _piece_bytes(max_tokens: int | None) -> int:
    """How long a long unit's pieces are, in bytes, for a budget of ``max_tokens``."""
    if max_tokens is None:
        return LONG_UNIT_PIECE_BYTES
    return max(_LEAST_PIECE_BYTES, min(LONG_UNIT_PIECE_BYTES, max_tokens // 4))


@dataclass(frozen=True)
class Layout:
    """The documents as one text, apart by a blank line (no unit or word spans it), split into
    units once: each unit's start and end in that text, each document's first unit in it."""

    text: str
    starts: list[int]
    ends: list[int]
    firsts: list[int]
    units: list[UnitBounds]  # per document, in the document's own text
    #: Where each sentence or line of a lone document starts before any is cut for its length
    #: (what the small room reads back to); None with several documents.
    sentences: list[int] | None = None


def layout_of(texts: Sequence[str], max_tokens: int | None = None) -> Layout:
    text = "\n\n".join(texts)
    most = None if max_tokens is None else int(UNIT_BYTES_PER_TOKEN * max_tokens)
    starts, ends, sentences = units_and_sentences(text, UNIT_CHARS, _piece_bytes(max_tokens), most)
    units: list[UnitBounds] = []
    firsts: list[int] = []
    offset = first = 0
    for doc in texts:
        limit = offset + len(doc)
        # The document's units are those that start before the next document does.
        last = bisect_left(starts, limit + 2, first)
        doc_starts, doc_ends = starts[first:last], ends[first:last]
        # The ends rise with the units: when the last is within the document, all are; one
        # document (or the first) needs no shift. Either way, no step per unit in Python.
        if not doc_ends or doc_ends[-1] > limit:
            doc_ends = [min(e, limit) for e in doc_ends]
        if offset:
            doc_starts = [s - offset for s in doc_starts]
            doc_ends = [e - offset for e in doc_ends]
        units.append((doc_starts, doc_ends))
        firsts.append(first)
        first, offset = last, limit + 2
    return Layout(text, starts, ends, firsts, units, sentences if len(texts) == 1 else None)


def lexical(layout: Layout, query: str, reading: Reading) -> dict[tuple[int, int], float]:
    """BM25 of every unit that holds a query term, over all the units of all the documents,
    keyed by (document, unit): :func:`lexical_scores` as one mapping."""
    scores = lexical_scores(layout, query, reading)
    if isinstance(scores, dict):
        return scores
    return {
        (d, u): score for d, own in enumerate(scores) for u, score in enumerate(own) if score
    }


def lexical_scores(layout: Layout, query: str, reading: Reading,
                   ) -> dict[tuple[int, int], float] | list[list[float]]:
    """BM25 of every unit that holds a query term, over all the units of all the documents:
    by (document, unit), or, when one term is found in most units, one list of every unit's
    score per document (0.0 where none).

    The documents are searched as one text, so the work per query term does not grow with the
    number of documents. The query and the text are read by the call's one
    :class:`~recallpack.packing.reading.analysis.Reading` (``Reading.of(language, query, layout.text)``),
    and scored by :func:`recallpack.packing.choosing.bm25.scored_units`, the one BM25 the focus
    cut uses too."""
    scores = scored_units(reading, layout.text, layout.starts, layout.ends, query)
    firsts = layout.firsts
    if isinstance(scores, list):  # cut at each document's first unit, in C
        return [scores[a:b] for a, b in zip(firsts, [*firsts[1:], len(scores)])]
    # Keyed by (document, unit), in C for one document. A unit is in the last document that
    # starts at or before it (one with no units starts where the next does).
    found = list(scores)
    if len(firsts) == 1:
        return dict(zip(zip(itertools.repeat(0), found), scores.values()))
    docs = [bisect_right(firsts, unit) - 1 for unit in found]
    return dict(zip(zip(docs, map(sub, found, map(firsts.__getitem__, docs))), scores.values()))


def embedded(texts: Sequence[str], units: Sequence[UnitBounds], query: str,
              embed: EmbedFn) -> dict[tuple[int, int], float]:
    """Similarity of every unit to the query, from one call of ``embed``, scaled to 0..1."""
    keys = [(d, u) for d, (starts, _) in enumerate(units) for u in range(len(starts))]
    shown = [texts[d][units[d][0][u] : units[d][1][u]] for d, u in keys]
    scored = similarities(embed, query, shown)
    finite = [s for s in scored.values() if math.isfinite(s)]
    if not finite:
        return {}
    low, high = min(finite), max(finite)
    spread = high - low or 1.0
    return {key: (scored[i] - low) / spread for i, key in enumerate(keys) if math.isfinite(scored[i])}


def combined(scores: dict[tuple[int, int], float], units: Sequence[UnitBounds],
              ) -> tuple[dict[tuple[int, int], float], list[dict[int, float]]]:
    """Each unit's score raised by its neighbours', scaled to the best, divided by its document's
    prior; and per document the raised scores (which side a passage grows to)."""
    sizes = [len(starts) for starts, _ in units]
    raised: list[dict[int, float]] = [{} for _ in sizes]
    # A unit's raised score is the sum of its contributions in the order the scores come (its
    # left neighbour's share, its own, its right neighbour's, when they come by unit: BM25's
    # do, but for a unit that only a later query word matches). A document most of whose units
    # match is raised by whole lists, with the very same float additions in that order (a
    # missing contribution adds 0.0, which changes no sum of scores >= 0); the rest unit by unit.
    items: Iterable[tuple[tuple[int, int], float]] = scores.items()
    keys = list(scores)
    if keys == sorted(keys):
        items = _raise_dense(keys, list(scores.values()), sizes, raised)
    for (d, u), score in items:
        own = raised[d]
        get = own.get
        own[u] = get(u, 0.0) + score
        share = NEIGHBOR_SHARE * score
        if u > 0:
            own[u - 1] = get(u - 1, 0.0) + share
        if u + 1 < sizes[d]:
            own[u + 1] = get(u + 1, 0.0) + share
    best = max((max(own.values()) for own in raised if own), default=0.0)
    if best <= 0:
        return {}, raised
    combined: dict[tuple[int, int], float] = {}
    for d, own in enumerate(raised):
        prior = 1.0 + RANK_PRIOR * d
        kept = [u for u, s in own.items() if s > 0]
        combined.update(zip(zip(itertools.repeat(d), kept), [own[u] / best / prior for u in kept]))
    return combined, raised


def _raise_dense(keys: list[tuple[int, int]], values: list[float], sizes: list[int],
                 raised: list[dict[int, float]]) -> Iterable[tuple[tuple[int, int], float]]:
    """Raise each document most of whose units match (scores by document and unit: ``keys`` in
    order, and their ``values``) into ``raised``, by whole lists; the other documents' scores."""
    rest: list[Iterable[tuple[tuple[int, int], float]]] = []
    docs = list(map(_FIRST, keys))
    lo = 0
    for d, size in enumerate(sizes):
        hi = bisect_left(docs, d + 1, lo)
        if (hi - lo) * _DENSE_SHARE < size:
            rest.append(zip(keys[lo:hi], values[lo:hi]))
        else:
            own = [0.0] * size
            list(map(own.__setitem__, map(_SECOND, keys[lo:hi]), values[lo:hi]))
            shares = [NEIGHBOR_SHARE * s for s in own]
            lifted = [(left + s) + right for left, s, right in zip([0.0, *shares], own, [*shares[1:], 0.0])]
            raised[d] = dict(zip(range(size), lifted))
        lo = hi
    return itertools.chain.from_iterable(rest)


_FIRST, _SECOND = itemgetter(0), itemgetter(1)
#: A document is raised by whole lists when at least one of this many of its units matches.
_DENSE_SHARE = 4


def ranked(scores: dict[tuple[int, int], float] | list[list[float]], units: Sequence[UnitBounds],
           ) -> tuple[Sequence[tuple[int, int]], Sequence[Mapping[int, float] | list[float]]]:
    """The units that score, best first (ties by place), and per document each unit's raised
    score (:func:`combined`'s, by unit, or one list of them all). ``scores``:
    :func:`lexical_scores`' or :func:`embedded`'s."""
    if isinstance(scores, dict):
        best, raised = combined(scores, units)
        # The pairs sort as they are, with no key function to call.
        return list(map(_SECOND, sorted(zip(map(neg, best.values()), best.keys())))), raised
    lifted = [_raise_list(own) for own in scores]
    top = max(map(max, filter(None, lifted)), default=0.0)
    if top <= 0:
        return [], lifted
    docs: list[int] = []
    kept: list[int] = []
    values: list[float] = []
    for d, own in enumerate(lifted):
        prior = 1.0 + RANK_PRIOR * d
        # A unit's raised score is 0.0 or above: those that are not 0.0 score.
        scoring = list(filter(None, own))
        kept += range(len(own)) if len(scoring) == len(own) else itertools.compress(range(len(own)), own)
        docs += itertools.repeat(d, len(scoring))
        # The first document's prior is 1.0, and a division by 1.0 changes no float.
        over_top = map(truediv, scoring, itertools.repeat(top))
        values += over_top if d == 0 else map(truediv, over_top, itertools.repeat(prior))
    # Best first, ties by place: a stable sort by score alone keeps the places' order.
    order = sorted(range(len(values)), key=values.__getitem__, reverse=True)
    if len(lifted) == 1:  # one document: when all its units score, the order is the units'
        units_first = order if len(kept) == len(lifted[0]) else list(map(kept.__getitem__, order))
        return Ranked(None, units_first), lifted
    return Ranked(list(map(docs.__getitem__, order)), list(map(kept.__getitem__, order))), lifted


class Ranked(Sequence[tuple[int, int]]):
    """(document, unit) pairs, best first, made as they are read: a choice reads the first few
    thousand of a text whose every unit scores, not a pair for each of its units."""

    __slots__ = ("docs", "units")

    def __init__(self, docs: list[int] | None, units: list[int]) -> None:
        self.docs, self.units = docs, units  # docs None: all of document 0

    def __len__(self) -> int:
        return len(self.units)

    def __iter__(self) -> Iterator[tuple[int, int]]:
        return zip(itertools.repeat(0) if self.docs is None else self.docs, self.units)

    @overload
    def __getitem__(self, at: int) -> tuple[int, int]: ...
    @overload
    def __getitem__(self, at: slice) -> Sequence[tuple[int, int]]: ...
    def __getitem__(self, at: int | slice) -> tuple[int, int] | Sequence[tuple[int, int]]:
        if isinstance(at, slice):
            return list(self)[at]
        return (0 if self.docs is None else self.docs[at], self.units[at])


def _raise_list(own: list[float]) -> list[float]:
    """Each unit's score raised by its neighbours', by whole lists: ``(left + own) + right``,
    the float additions :func:`combined` makes for scores that come by unit (an absent share
    adds 0.0, which changes no sum of scores >= 0)."""
    if not own:
        return own
    shares = list(map(mul, itertools.repeat(NEIGHBOR_SHARE), own))
    return list(map(add, map(add, [0.0, *shares[:-1]], own), [*shares[1:], 0.0]))
