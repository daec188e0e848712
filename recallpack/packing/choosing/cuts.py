"""Cutting one text that is too long for the room left: a head cut, or a focus cut around the query.

A cut keeps pieces of the original text, in order, and marks every place where something was
dropped with "…" (U+2026). It says which character ranges it kept (``Excerpt.spans``), so a report
can show exactly what the reader saw. Both cuts fit the room exactly as the tokenizer counts,
never split a grapheme cluster (an emoji ZWJ sequence, a flag, a letter and its combining marks),
and give the same bytes for the same input.

- :func:`cut_head` keeps the beginning, ending at a sentence or line end when that keeps at least
  two thirds of the room. Its work grows with the room, not with the text.
- :func:`cut_focus` keeps the passages that best match a query: lexical scoring over the text's
  sentences and lines by default (the one BM25, :mod:`recallpack.packing.choosing.bm25`, through the
  call's analysis chain, as ``passages`` scores), or an embedding the caller passes. It reads the text
  once; only the sentences it considers keeping are counted.

>>> from recallpack.packing.tokenizers import get_tokenizer
>>> tok = get_tokenizer("chars")
>>> text = "Intro, part one. Intro, part two.\\nThe port is set by PORT. More.\\nOutro line.\\n"
>>> cut_head(text, 10, tok).text
'Intro, part one. Intro, part two.…'
>>> cut_focus(text, "which port?", 10, tok).text
'…\\nThe port is set by PORT. More.…'
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from recallpack.packing._compat import moved_names
from recallpack.packing.choosing.bm25 import unit_scores
from recallpack.packing.choosing.embedding import EmbedFn, similarities
from recallpack.packing.choosing.focus import Focus
from recallpack.packing.errors import BudgetError, ConfigError
from recallpack.packing.reading.analysis import AUTO, CallReading, Reading, check_language
from recallpack.packing.reading.text import ceil_boundary, floor_boundary
from recallpack.packing.reading.units import (
    MARK,
    MAX_QUERY_TERMS,
    MAX_TERM_CHARS,
    Measure,
    has_text,
    is_stray,
    join_spans,
    last_break,
    split_units,
    strip_end,
)
from recallpack.packing.tokenizers import Tokenizer
from recallpack.packing.validation import is_int

__all__ = [
    "MARK",
    "MAX_QUERY_TERMS",
    "MAX_TERM_CHARS",
    "Excerpt",
    "CutKind",
    "EmbedFn",
    "Measure",
    "cut_head",
    "cut_focus",
    "FocusCutter",
]

#: Names that moved to :mod:`recallpack.packing.choosing.embedding` keep working for one release, with a
#: DeprecationWarning naming the new home: see :mod:`recallpack.packing._compat`.
__getattr__ = moved_names(__name__)


CutKind = Literal["head", "focus", "passages"]


@dataclass(frozen=True)
class Excerpt:
    """What a cut kept: the text to show, and the ranges of the original it came from.

    ``text`` is the kept ranges joined in order, with "…" wherever something other than
    whitespace was dropped (before the first range, between two, after the last).
    """

    text: str
    spans: tuple[tuple[int, int], ...]
    kind: CutKind


# --- shared pieces ----------------------------------------------------------------------------


def _check(text: object, max_tokens: object, tokenizer: object, measure: object) -> None:
    if not isinstance(text, str):
        raise ConfigError(f"text={type(text).__name__} must be a str; cut only the text of an item")
    if not is_int(max_tokens, 0):
        raise BudgetError(f"max_tokens={max_tokens!r} must be an int >= 0", field="max_tokens")
    if not isinstance(tokenizer, Tokenizer):
        raise ConfigError(
            f"tokenizer={tokenizer!r} must be a Tokenizer; resolve it with get_tokenizer() first"
        )
    if measure is not None and not callable(measure):
        raise ConfigError(f"measure={measure!r} must be a callable str -> int (the tokens a cut text costs)")


def _whole(text: str, kind: CutKind) -> Excerpt:
    return Excerpt(text, ((0, len(text)),) if text else (), kind)


def _truncate(text: str, start: int, end: int, max_tokens: int, tokenizer: Tokenizer) -> int:
    """The length of ``tokenizer.truncate`` of ``text[start:end]``, asked of a prefix just long
    enough for the answer: work bounded by the room even for tokenizers whose own truncation
    reads the whole text, and no copy of a long text."""
    probe = max(256, max_tokens * 8)
    while start + probe < end:
        head = tokenizer.truncate(text[start : start + probe], max_tokens)
        if len(head) < probe:
            return len(head)
        probe *= 4
    return len(tokenizer.truncate(text[start:end], max_tokens))


def _head_end(
    text: str, start: int, end: int, max_tokens: int, tokenizer: Tokenizer, measure: Measure, before: str
) -> int:
    """The end of the longest head of ``text[start:end]`` such that ``measure(before + head + "…")``
    is within ``max_tokens``, preferring a sentence or line end that keeps two thirds of the room.
    Returns ``start`` when not even one grapheme cluster fits."""
    room = budget = max_tokens - measure(before + MARK)
    while budget > 0:
        cut = start + _truncate(text, start, end, budget, tokenizer)
        cut = strip_end(text, start, max(start, floor_boundary(text, cut, start)))
        if cut == start:
            break
        sentence = last_break(text, start, cut)
        if sentence is not None and sentence < cut:
            sentence = strip_end(text, start, sentence)
            if sentence > start and 3 * tokenizer.count(text[start:sentence]) >= 2 * room:
                cut = sentence
        cost = measure(before + text[start:cut] + MARK)
        if cost <= max_tokens:
            return start if is_stray(text, start, cut) else cut  # "!…" shows nothing of the text
        budget -= max(1, cost - max_tokens)
    first = ceil_boundary(text, start + 1, start)
    fits = measure(before + text[start:first] + MARK) <= max_tokens
    shows = has_text(text, start, first) and not is_stray(text, start, first)
    return first if first <= end and shows and fits else start


def _fits_whole(text: str, max_tokens: int, tokenizer: Tokenizer, measure: Measure | None) -> bool:
    # The tokenizer's bounded check first: a measure may read (or render) the whole text.
    if tokenizer.count_upto(text, max_tokens) > max_tokens:
        return False
    return measure is None or measure(text) <= max_tokens


# --- head cut ---------------------------------------------------------------------------------


def cut_head(
    text: str, max_tokens: int, tokenizer: Tokenizer, *, measure: Measure | None = None
) -> Excerpt | None:
    """The beginning of ``text`` within ``max_tokens``, ending with "…".

    It ends at the last sentence or line end inside the room when that keeps at least two thirds
    of the room, else at a token boundary; never inside a grapheme cluster; trailing whitespace
    is dropped before the mark. A text that fits is returned whole, without a mark. None when not
    even one grapheme cluster and the mark fit. The work grows with ``max_tokens``, not with the
    length of ``text``.

    ``measure`` is what the cut text costs where it is spent (for example rendered inside its
    item, framing and indentation included); it defaults to ``tokenizer.count`` and should never
    be less. The cut is then exact for it: ``measure(cut.text) <= max_tokens``.
    """
    _check(text, max_tokens, tokenizer, measure)
    if _fits_whole(text, max_tokens, tokenizer, measure):
        return _whole(text, "head")
    end = _head_end(text, 0, len(text), max_tokens, tokenizer, measure or tokenizer.count, "")
    if end == 0:
        return None
    spans = ((0, end),)
    return Excerpt(join_spans(text, spans), spans, "head")


# --- focus cut: assembly ----------------------------------------------------------------------

_ROUNDS = 3  # real counts of the assembled text: the first, and two refills with a corrected estimate
_SEED_SHARE = 0.3  # of the best BM25 score, that a sentence needs to start a passage of its own
_MAX_MISSES = 8  # seeds in a row that do not fit before the search stops: the room is full
_UNIT_CHARS = (64, 800)  # bounds on a unit's length before it is split at a space


class _FocusCut(Focus):
    """A focus cut of one text: the passages grown around its best units, checked with the one
    real count."""

    #: What the cut is checked by: its text where it is spent (inside its rendered item, say).
    measure: Measure

    def checked_by(self, measure: Measure | None) -> _FocusCut:
        """This cut, checked by ``measure`` (default: the tokenizer's count), whose framing is
        then part of every estimate."""
        self.measure = measure or self.tok.count
        if measure is not None:
            self.correction = measure(MARK) - self.mark_cost
        return self

    def partial(self, i: int) -> Excerpt | None:
        """The head of unit ``i`` alone, for a best unit larger than the room."""
        start = self.lead(i) if i > 0 else self.starts[i]
        before = MARK if has_text(self.text, 0, start) else ""
        end = _head_end(self.text, start, self.ends[i], self.max_tokens, self.tok, self.measure, before)
        if end <= start or not has_text(self.text, start, end):
            return None
        spans = ((start, end),)
        text = join_spans(self.text, spans)
        return Excerpt(text, spans, "focus") if self.measure(text) <= self.max_tokens else None

    def assemble(self, ranked: Sequence[int], scores: dict[int, float], seed_floor: float) -> Excerpt | None:
        """The cut grown from the units ``ranked`` best first; a unit scoring under ``seed_floor``
        starts no passage of its own."""
        goal = max(1, self.max_tokens // 3)
        seeds: list[int] = []
        misses = 0
        for seed in ranked:
            if seed in self.kept:
                continue
            if seeds and scores[seed] < seed_floor:
                break  # a weak match is no passage of its own; the room widens the strong ones
            if not self.try_add(seed):
                if not self.kept:
                    return self.partial(seed)
                misses += 1
                if misses >= _MAX_MISSES:
                    break
                continue
            misses = 0
            seeds.append(seed)
            self.grow(seed, scores, goal)
        best = None
        for _ in range(_ROUNDS):
            for seed in seeds:  # the room left widens the passages, best first
                if seed in self.kept:
                    self.grow(seed, scores, math.inf)
            cut, cost = self.verified()
            if cut is None:
                break
            best = cut
            # Estimates add a token at many joins that the real text merges away: correct for
            # that and try to fill what the count says is still free.
            correction = cost - self.total
            if cost >= self.max_tokens or correction >= self.correction:
                break
            self.correction = correction
        if best is None:
            return self.partial(ranked[0]) if ranked else None
        return best

    def verified(self) -> tuple[Excerpt | None, int]:
        """The kept units as a cut, the last added dropped until the real count fits."""
        while self.order:
            spans = self.spans(sorted(self.kept))
            text = join_spans(self.text, spans)
            # Counts do not add up exactly at the joins: the one real count decides.
            cost = self.measure(text)
            if cost <= self.max_tokens:
                return Excerpt(text, tuple(spans), "focus"), cost
            # Drop the last added units worth the excess at once, not one count per unit.
            excess = cost - self.max_tokens
            while self.order and excess > 0:
                dropped = self.order.pop()
                self.kept.discard(dropped)
                excess -= max(1, self.unit_cost(dropped))
            self.total = self.estimate(sorted(self.kept))
            self.last = max(self.kept, default=-1)
        return None, 0


def cut_focus(
    text: str,
    query: str,
    max_tokens: int,
    tokenizer: Tokenizer,
    *,
    embed: EmbedFn | None = None,
    measure: Measure | None = None,
    language: str | None = AUTO,
    reading: Reading | None = None,
) -> Excerpt | None:
    """The passages of ``text`` that best match ``query``, in their order, within ``max_tokens``.

    The text is split into sentences and lines (an indented or ``>>>`` line is one unit, so code
    stays line by line). Each is scored against the query: BM25 over the text's units by default
    (the query's first :data:`MAX_QUERY_TERMS` distinct words, case folded: the query is often
    end-user input, and the work stays linear in the text whatever it holds), or
    ``embed(query, units)`` when given (see :func:`recallpack.packing.choosing.embedding.embed_function`;
    it is called once, with every sentence of this one text). The best unit is kept with its neighbours (the
    better-matching side first) up to a third of the room, then the next best that scores at
    least 30% of the best, and the room left widens them. Every elision is marked "…"; a passage
    that starts a line keeps the line break after the mark. When no query word occurs in the
    text (and no ``embed`` is given) the result is :func:`cut_head`'s. A text that fits is
    returned whole. None when not even one grapheme cluster and the mark fit. ``measure`` is as
    for :func:`cut_head`: the cut is exact for it, and the text is still read only once.
    ``language`` is how query words match the text's (:mod:`recallpack.packing.reading.analysis`):
    ``"auto"`` reads it from the query, an ISO 639-1 code names it, None matches words as written.
    ``reading`` is the chain already chosen for the call (the walk chooses one per call, so every
    item is read the same way), and then ``language`` is not read.
    """
    _check(text, max_tokens, tokenizer, measure)
    if reading is None:
        language = check_language(language)
    elif not isinstance(reading, Reading):
        raise ConfigError(f"reading={reading!r} must be a Reading (analysis.Reading.of)", field="reading")
    if not isinstance(query, str):
        raise ConfigError(f"query={type(query).__name__} must be a str: the question being answered")
    if _fits_whole(text, max_tokens, tokenizer, measure):
        return _whole(text, "focus")
    starts, ends = split_units(text, min(max(max_tokens * 3, _UNIT_CHARS[0]), _UNIT_CHARS[1]))
    if not starts:
        return cut_head(text, max_tokens, tokenizer, measure=measure)
    if embed is None:
        scores = unit_scores(reading or Reading.of(language, query, text), text, starts, ends, query)
        if not scores:
            return cut_head(text, max_tokens, tokenizer, measure=measure)
    else:
        scores = similarities(embed, query, [text[s:e] for s, e in zip(starts, ends)])
    # Best first; a stable sort keeps ties in text order (scores are filled in text order).
    ranked = sorted(sorted(scores), key=scores.__getitem__, reverse=True)
    # Lexical scores are on one scale within a text: a passage needs a fair share of the best.
    floor = scores[ranked[0]] * _SEED_SHARE if embed is None else -math.inf
    focus = _FocusCut(text, starts, ends, max_tokens, tokenizer).checked_by(measure)
    cut = focus.assemble(ranked, scores, floor)
    return cut if cut is not None else cut_head(text, max_tokens, tokenizer, measure=measure)


@dataclass(frozen=True)
class FocusCutter:
    """A call's focus cut, as the walk hands it down: ``cutter(text, max_tokens=..., measure=...)``
    cuts by :func:`cut_focus`, every text read by the call's one reading."""

    query: str
    tokenizer: Tokenizer
    embed: EmbedFn | None
    reading: CallReading

    def __call__(self, text: str, *, max_tokens: int, measure: Measure | None = None) -> Excerpt | None:
        reading = None if self.embed is not None else self.reading.of(text)
        return cut_focus(text, self.query, max_tokens, self.tokenizer, embed=self.embed, measure=measure,
                         reading=reading)
