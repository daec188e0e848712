"""How well each unit of the documents answers the query (the ``passages`` policy's step 2).

Every document's text is split into sentences and lines once, and each unit is scored: BM25 over
all the units of all the documents (raw text: nothing is tokenized to score; a long query word
also matches its inflections, :func:`base_of`), or ``embed`` when given. A unit's score is then
raised by a share of its neighbours' (an answer is often the sentence next to the one that names
the question's words), scaled to the best, and divided by ``1 + RANK_PRIOR * position`` of its
document: the retriever's order is a prior.
``docs/how-the-walk-decides.md`` says why.
"""

from __future__ import annotations

import functools
import itertools
import math
import re
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from recallpack.packing.analysis import AUTO, Reading
from recallpack.packing.embedding import EmbedFn, similarities
from recallpack.packing.units import fold, query_terms, split_units, word_hits

__all__ = [
    "Layout", "UnitBounds", "layout_of", "lexical", "embedded", "combined", "hits", "base_of",
    "RANK_PRIOR", "NEIGHBOR_SHARE", "UNIT_CHARS", "LONG_UNIT_PIECE_BYTES",
    "INFLECTED_TERM", "INFLECTED_BASE", "BASE_ENDINGS", "INFLECTIONS", "UNIT_BYTES_PER_TOKEN",
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
#: A query word of at least this many characters also matches its inflections: its base (the word
#: without one of BASE_ENDINGS, when at least INFLECTED_BASE characters are left) followed by one
#: of INFLECTIONS, so "disobedience" finds "disobediences" and "played" finds "playing" and "player".
#: Every base ending is an inflection: a query word always finds itself.
INFLECTED_TERM = 5
INFLECTED_BASE = 4
BASE_ENDINGS = ("ing", "es", "ed", "s")
INFLECTIONS = ("", "s", "es", "ed", "d", "ing", "er", "ers", "e", "ion", "ions", "al")
_TERM_SEARCHES = 16  # query words searched for one by one; more read the text's words once
_K1 = 1.2
_B = 0.75

#: A document's units: where each starts, where each ends.
UnitBounds = tuple[list[int], list[int]]


def base_of(term: str) -> str:
    """What :func:`hits` searches for ``term``: the word itself, or for a word of at least
    INFLECTED_TERM characters its base (one of BASE_ENDINGS off, INFLECTED_BASE characters left)."""
    if len(term) >= INFLECTED_TERM:
        for ending in BASE_ENDINGS:
            if term.endswith(ending) and len(term) - len(ending) >= INFLECTED_BASE:
                return term[: -len(ending)]
    return term


def _forms(terms: Sequence[str]) -> dict[str, list[str]]:
    """Every word of the text that matches a query word, and which query words it matches."""
    forms: dict[str, list[str]] = {}
    for term in terms:
        if len(term) < INFLECTED_TERM:
            forms.setdefault(term, []).append(term)
            continue
        base = base_of(term)
        for ending in INFLECTIONS:
            forms.setdefault(base + ending, []).append(term)
    return forms


# One of INFLECTIONS and the end of the word, matched where a base ends: one call, in C.
_INFLECTION_END = re.compile("(?:" + "|".join(sorted(INFLECTIONS[1:], key=len, reverse=True)) + r")(?!\w)")


def hits(text: str, terms: Sequence[str], limit: int) -> dict[str, list[int]]:
    """Where each query word occurs in ``text`` as a whole word, case folded, linear in the text:
    the word itself, or (a word of at least INFLECTED_TERM characters) its base followed by one of
    INFLECTIONS. A word whose base is found, even inside other words, more than ``limit`` times is
    left out.

    A word that occurs more often than there are units (``the``, ``of``) says little about which
    one answers (its BM25 weight is near zero), and taking each occurrence would be most of the
    work. Occurrences are found by ``str.find``, several times faster than a regular expression
    scans a text that is not ASCII, one pass a word: the search stops once a word is past
    ``limit``, and a word that looks frequent is counted first (``str.count`` runs at the speed
    of the search, without a step per occurrence)."""
    lowered = fold(text)  # the same length as the text: a position in it is one in the text
    found: dict[str, list[int]] = {}
    if len(terms) > _TERM_SEARCHES:
        # A long query: one pass over the text's words costs the same whatever its length. The
        # limit counts a base inside other words too, as the searches below do.
        forms = _forms(terms)
        grouped: dict[str, list[int]] = {}
        for word, positions in word_hits(lowered, forms).items():
            for term in forms[word]:
                grouped.setdefault(term, []).extend(positions)
        for term in terms:
            if (where := grouped.get(term)) and lowered.count(base_of(term)) <= limit:
                found[term] = sorted(where)
        return found
    size = len(lowered)
    probe = size // 8
    for term in terms:
        base = base_of(term)
        # The search below stops past ``limit``, so it tells a frequent word on its own; where
        # the text's first eighth suggests one, counting it first is cheaper than walking it.
        if lowered.count(base, 0, probe) * 16 > limit and lowered.count(base) > limit:
            continue
        inflected = len(term) >= INFLECTED_TERM
        width, at, seen = len(base), lowered.find(base), 0
        whole: list[int] = []
        while at >= 0:
            seen += 1
            if seen > limit:
                whole = []
                break
            end = at + width
            # Inside a word is what \w matches: a letter, a digit or "_".
            before = lowered[at - 1] if at else " "
            if not (before.isalnum() or before == "_"):
                after = lowered[end] if end < size else " "
                # The word ends here, or (a long query word) goes on by an inflection and ends.
                ends = not (after.isalnum() or after == "_")
                if ends or (inflected and _INFLECTION_END.match(lowered, end)):
                    whole.append(at)
            at = lowered.find(base, end)
        if whole:
            found[term] = whole
    return found


def _piece_bytes(max_tokens: int | None) -> int:
    """How long a long unit's pieces are, in bytes, for a budget of ``max_tokens``."""
    if max_tokens is None:
        return LONG_UNIT_PIECE_BYTES
    return max(_LEAST_PIECE_BYTES, min(LONG_UNIT_PIECE_BYTES, max_tokens // 4))


@dataclass(frozen=True)
class Layout:
    """The documents as one text, apart by a blank line (no unit or word spans it), split into
    units once: each unit's start and end in that text, which document and unit it is."""

    text: str
    starts: list[int]
    ends: list[int]
    owner: list[tuple[int, int]]
    units: list[UnitBounds]  # per document, in the document's own text


def layout_of(texts: Sequence[str], max_tokens: int | None = None) -> Layout:
    text = "\n\n".join(texts)
    most = None if max_tokens is None else int(UNIT_BYTES_PER_TOKEN * max_tokens)
    starts, ends = split_units(text, UNIT_CHARS, _piece_bytes(max_tokens), most)
    units: list[UnitBounds] = []
    owner: list[tuple[int, int]] = []
    offset = first = 0
    for d, doc in enumerate(texts):
        limit = offset + len(doc)
        # The document's units are those that start before the next document does.
        last = bisect_left(starts, limit + 2, first)
        doc_starts = [s - offset for s in starts[first:last]]
        units.append((doc_starts, [min(e, limit) - offset for e in ends[first:last]]))
        owner.extend(zip(itertools.repeat(d), range(last - first)))
        first, offset = last, limit + 2
    return Layout(text, starts, ends, owner, units)


def lexical(layout: Layout, query: str, language: str | None = AUTO) -> dict[tuple[int, int], float]:
    """BM25 of every unit that holds a query term, over all the units of all the documents.

    The documents are searched as one text, so the work per query term does not grow with the
    number of documents. Terms are read as :class:`~recallpack.packing.analysis.Reading` says
    for ``language`` (``"auto"``: the query's): English words with their inflections
    (:func:`hits`), another language's words by its stemmer, pairs of characters of a script
    without spaces."""
    text, starts, ends, owner = layout.text, layout.starts, layout.ends, layout.owner
    n = len(starts)
    if not n:
        return {}
    reading = Reading.of(language, query, text)
    terms = query_terms(query) if reading.english else reading.terms(query)
    if not terms:
        return {}
    # Each hit's unit, by C-level bisection over the units' starts: a hit is in the unit it
    # starts in (a word never spans two units: they split at spaces and line breaks; a pair of
    # characters may, and counts in the unit it starts in).
    where = functools.partial(bisect_right, starts)
    by_term = hits(text, terms, n) if reading.english else reading.hits(fold(text), terms, n)
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
    raised: list[dict[int, float]] = [{} for _ in units]
    sizes = [len(starts) for starts, _ in units]
    for (d, u), score in scores.items():
        own = raised[d]
        own[u] = own.get(u, 0.0) + score
        share = NEIGHBOR_SHARE * score
        if u > 0:
            own[u - 1] = own.get(u - 1, 0.0) + share
        if u + 1 < sizes[d]:
            own[u + 1] = own.get(u + 1, 0.0) + share
    best = max((s for own in raised for s in own.values()), default=0.0)
    if best <= 0:
        return {}, raised
    combined: dict[tuple[int, int], float] = {}
    for d, own in enumerate(raised):
        prior = 1.0 + RANK_PRIOR * d
        combined.update(((d, u), s / best / prior) for u, s in own.items() if s > 0)
    return combined, raised
