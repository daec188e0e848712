"""Cutting one text that is too long for the room left: a head cut, or a focus cut around the query.

A cut keeps pieces of the original text, in order, and marks every place where something was
dropped with "…" (U+2026). It says which character ranges it kept (``Cut.spans``), so a report
can show exactly what the reader saw. Both cuts fit the room exactly as the tokenizer counts,
never split a grapheme cluster (an emoji ZWJ sequence, a flag, a letter and its combining marks),
and give the same bytes for the same input.

- :func:`cut_head` keeps the beginning, ending at a sentence or line end when that keeps at least
  two thirds of the room. Its work grows with the room, not with the text.
- :func:`cut_focus` keeps the passages that best match a query: lexical (BM25) scoring over the
  text's sentences and lines by default, or an embedding the caller passes. It reads the text
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
import re
import warnings
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import sub
from typing import Literal

from recallpack.packing import embedding
from recallpack.packing.embedding import EmbedFn
from recallpack.packing.errors import BudgetError, ConfigError
from recallpack.packing.limits import ELLIPSIS
from recallpack.packing.text import LINE_BREAKS, ceil_boundary, clear_boundary, floor_boundary, is_boundary
from recallpack.packing.tokenizers import Tokenizer

__all__ = [
    "MARK",
    "MAX_QUERY_TERMS",
    "MAX_TERM_CHARS",
    "Cut",
    "CutKind",
    "EmbedFn",
    "Measure",
    "cut_head",
    "cut_focus",
]

#: Names that moved to :mod:`recallpack.packing.embedding`; importing them from here still works
#: for one release, with a DeprecationWarning naming the new home.
_MOVED_TO_EMBEDDING = frozenset({"embed_function", "CALLER_LOOP"})


def __getattr__(name: str) -> object:
    if name in _MOVED_TO_EMBEDDING:
        warnings.warn(
            f"recallpack.packing.cuts.{name} moved to recallpack.packing.embedding.{name}; "
            "import it from there (this alias goes in the next release)",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(embedding, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

MARK = ELLIPSIS  # the walk's mark for text cut out of an item, one definition
CutKind = Literal["head", "focus", "passages"]
#: What a cut's text costs where it is spent (inside its rendered item, say), in tokens.
Measure = Callable[[str], int]


@dataclass(frozen=True)
class Cut:
    """What a cut kept: the text to show, and the ranges of the original it came from.

    ``text`` is the kept ranges joined in order, with "…" wherever something other than
    whitespace was dropped (before the first range, between two, after the last).
    """

    text: str
    spans: tuple[tuple[int, int], ...]
    kind: CutKind


# --- shared pieces ----------------------------------------------------------------------------

_LB = re.escape(LINE_BREAKS)
_TERMINATORS = ".!?…"
_CJK_TERMINATORS = "。！？"
_CLOSERS = "\"')]}»”’"
# The end of a sentence (after its terminator and closing quotes) or of a line (before its break).
_BREAK = re.compile(
    rf"[{re.escape(_TERMINATORS)}][{re.escape(_CLOSERS)}]*(?=\s)|[{_CJK_TERMINATORS}]|(?=[{_LB}])"
)
_NONSPACE = re.compile(r"\S")
_WORD = re.compile(r"\w+")
_START = re.Match.start
_SPAN = re.Match.span


def _check(text: object, max_tokens: object, tokenizer: object, measure: object) -> None:
    if not isinstance(text, str):
        raise ConfigError(f"text={type(text).__name__} must be a str; cut only the text of an item")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 0:
        raise BudgetError(f"max_tokens={max_tokens!r} must be an int >= 0")
    if not isinstance(tokenizer, Tokenizer):
        raise ConfigError(
            f"tokenizer={tokenizer!r} must be a Tokenizer; resolve it with get_tokenizer() first"
        )
    if measure is not None and not callable(measure):
        raise ConfigError(f"measure={measure!r} must be a callable str -> int (the tokens a cut text costs)")


def _has_text(text: str, start: int, end: int) -> bool:
    """Whether ``text[start:end]`` holds anything but whitespace (without copying it)."""
    return start < end and _NONSPACE.search(text, start, end) is not None


def _join(text: str, spans: Sequence[tuple[int, int]]) -> str:
    """The kept ranges in order, with the mark wherever non-whitespace text was dropped."""
    parts: list[str] = []
    previous = 0
    for start, end in spans:
        if _has_text(text, previous, start):
            parts.append(MARK)
        parts.append(text[start:end])
        previous = end
    if _has_text(text, previous, len(text)):
        parts.append(MARK)
    return "".join(parts)


def _whole(text: str, kind: CutKind) -> Cut:
    return Cut(text, ((0, len(text)),) if text else (), kind)


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


def _strip_end(text: str, start: int, end: int) -> int:
    """Move ``end`` back over trailing whitespace, staying on a grapheme boundary (``start`` is
    one)."""
    while end > start:
        while end > start and text[end - 1].isspace():
            end -= 1
        floored = max(start, floor_boundary(text, end, start))
        if floored == end:
            return end
        end = floored
    return start


def _last_break(text: str, start: int, end: int) -> int | None:
    """The last sentence or line end in ``text[start:end]`` that is a grapheme boundary."""
    last = None
    for match in _BREAK.finditer(text, start, min(len(text), end + 1)):
        if start < match.end() <= end:
            last = match.end()
    if last is not None and not is_boundary(text, last, start):
        last = floor_boundary(text, last, start)
    return last if last is not None and last > start else None


def _head_end(
    text: str, start: int, end: int, max_tokens: int, tokenizer: Tokenizer, measure: Measure, before: str
) -> int:
    """The end of the longest head of ``text[start:end]`` such that ``measure(before + head + "…")``
    is within ``max_tokens``, preferring a sentence or line end that keeps two thirds of the room.
    Returns ``start`` when not even one grapheme cluster fits."""
    room = budget = max_tokens - measure(before + MARK)
    while budget > 0:
        cut = start + _truncate(text, start, end, budget, tokenizer)
        cut = _strip_end(text, start, max(start, floor_boundary(text, cut, start)))
        if cut == start:
            break
        sentence = _last_break(text, start, cut)
        if sentence is not None and sentence < cut:
            sentence = _strip_end(text, start, sentence)
            if sentence > start and 3 * tokenizer.count(text[start:sentence]) >= 2 * room:
                cut = sentence
        cost = measure(before + text[start:cut] + MARK)
        if cost <= max_tokens:
            return cut
        budget -= max(1, cost - max_tokens)
    first = ceil_boundary(text, start + 1, start)
    fits = measure(before + text[start:first] + MARK) <= max_tokens
    return first if first <= end and _has_text(text, start, first) and fits else start


def _fits_whole(text: str, max_tokens: int, tokenizer: Tokenizer, measure: Measure | None) -> bool:
    # The tokenizer's bounded check first: a measure may read (or render) the whole text.
    if tokenizer.count_upto(text, max_tokens) > max_tokens:
        return False
    return measure is None or measure(text) <= max_tokens


# --- head cut ---------------------------------------------------------------------------------


def cut_head(
    text: str, max_tokens: int, tokenizer: Tokenizer, *, measure: Measure | None = None
) -> Cut | None:
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
    return Cut(_join(text, spans), spans, "head")


# --- focus cut: sentences and lines -----------------------------------------------------------

# Units split at "\n" (with the blank lines and the next line's indentation after it) and after
# a sentence's terminator and closing quotes. Two plain patterns, each fast to scan for, merged
# in one pass: one pattern with lookbehinds reads a megabyte as slowly as tiktoken encodes it.
_LINE_SPLIT = re.compile(r"\n\s*")
_SPACE_BEFORE_BREAK = re.compile(r"\s\n")
_SENTENCE_END = rf"([{re.escape(_TERMINATORS)}][{re.escape(_CLOSERS)}]*)[ \t]+(?=[^\n])"
_SENTENCE_SPLIT = re.compile(_SENTENCE_END)
_CJK_SENTENCE_SPLIT = re.compile(rf"{_SENTENCE_END}|([{_CJK_TERMINATORS}])[ \t]*(?=[^\n])")
_UNIT_CHARS = (64, 800)  # bounds on a unit's length before it is split at a space
_BOUNDARY_SEARCH = 64  # characters searched for a place to split a long unit without a space


def _units(text: str, max_chars: int) -> tuple[list[int], list[int]]:
    """The text's sentences and lines, stripped of the whitespace around them, in order.

    Prose lines are split after sentence terminators; indented lines and ``>>>`` lines are kept
    whole (a line of code is one unit, so a code sample stays line by line). Units longer than
    ``max_chars`` are split at a space, or failing that at a grapheme boundary. Every start and
    end is a grapheme boundary.
    """
    # Everything here is a comprehension over regex matches: a megabyte has ~20,000 lines.
    first = len(text) - len(text.lstrip())
    last = len(text.rstrip())
    if last <= first:
        return [], []
    splits = list(map(_SPAN, _LINE_SPLIT.finditer(text, first, last)))
    line_starts = [first, *(e for _, e in splits)]
    if _SPACE_BEFORE_BREAK.search(text, first, last):  # a line that ends in spaces (or "\r")
        splits = [(_strip_spaces(text, s) if text[s - 1].isspace() else s, e) for s, e in splits]
    cjk = any(t in text for t in _CJK_TERMINATORS)
    pattern = _CJK_SENTENCE_SPLIT if cjk else _SENTENCE_SPLIT
    # A sentence end at a line end (or the text's) is where the line ends anyway: the pattern
    # needs a character after it that is no line break.
    sentences = [(m.end(m.lastindex or 0), m.end()) for m in pattern.finditer(text, first, last)]
    if sentences:
        # Asked per sentence only when some line is code: a text of short sentences has many.
        if ">>>" in text or any(text[start - 1] in " \t" for start in line_starts if start):
            sentences = [(e, s) for e, s in sentences if not _in_code_line(text, line_starts, e)]
        splits = sorted(splits + sentences)
    starts = [first, *(e for _, e in splits)]
    ends = [*(s for s, _ in splits), last]
    # Splits sit next to whitespace, so only a non-ASCII neighbour can join a cluster across
    # one (a combining mark after a space, a prepended mark before it).
    if not text.isascii() and (
        any(text[s] >= "\x80" or text[s - 1] >= "\x80" for s in starts if s)
        or any(text[e] >= "\x80" or text[e - 1] >= "\x80" for e in ends if e < len(text))
    ):
        starts, ends = _on_boundaries(text, starts, ends)
    if max(map(sub, ends, starts)) > max_chars:
        return _split_long(text, starts, ends, max_chars)
    return starts, ends


def _strip_spaces(text: str, end: int) -> int:
    while end > 0 and text[end - 1].isspace():
        end -= 1
    return end


def _in_code_line(text: str, line_starts: list[int], at: int) -> bool:
    """Whether ``at`` is on an indented line or a ``>>>`` line: a line of code is one unit, so
    "x = obj.attr. y" does not become two sentences."""
    start = line_starts[bisect_right(line_starts, at) - 1]
    return (start > 0 and text[start - 1] in " \t") or text.startswith(">>>", start)


def _on_boundaries(text: str, starts: list[int], ends: list[int]) -> tuple[list[int], list[int]]:
    """The units widened to grapheme boundaries, merged where they then touch."""
    out_starts: list[int] = []
    out_ends: list[int] = []
    for s, e in zip(starts, ends):
        s, e = floor_boundary(text, s), ceil_boundary(text, e)
        if out_ends and s < out_ends[-1]:
            out_ends[-1] = max(out_ends[-1], e)
        else:
            out_starts.append(s)
            out_ends.append(e)
    return out_starts, out_ends


def _split_long(text: str, starts: list[int], ends: list[int], max_chars: int) -> tuple[list[int], list[int]]:
    out_starts: list[int] = []
    out_ends: list[int] = []
    for s, e in zip(starts, ends):
        while e - s > max_chars:
            split = _split_point(text, s, e, max_chars)
            if split is None:
                break
            out_starts.append(s)
            out_ends.append(split[0])
            s = split[1]
        out_starts.append(s)
        out_ends.append(e)
    return out_starts, out_ends


def _split_point(text: str, s: int, e: int, max_chars: int) -> tuple[int, int] | None:
    """Where the first piece of the long unit ``text[s:e]`` ends and the next begins: at the
    last space of its second half, else at a clear grapheme boundary just after, else at the
    next space however far (a run of flags has no other place to split)."""
    window = s + max_chars
    space = text.rfind(" ", s + max_chars // 2, window)
    if space < 0:
        cut = clear_boundary(text, window, min(e, window + _BOUNDARY_SEARCH))
        if cut is not None:
            return cut, cut
        space = text.find(" ", window, e)
    while space > s:
        after = space + 1
        while after < e and text[after] == " ":
            after += 1
        end = _strip_end(text, s, space)
        if end > s and after < e and is_boundary(text, after, s):
            return end, after
        space = text.find(" ", after, e)
    return None


# --- focus cut: scoring -----------------------------------------------------------------------

_K1 = 1.2
_B = 0.75
_TERM_SEARCHES = 16  # query words searched for one by one; a longer query reads the text's words once
#: The distinct words of a query that are scored, in the order the query gives them. The query
#: is end-user input: past this many, more words would cost a pass each and add no passage.
MAX_QUERY_TERMS = 64
#: A query word longer than this is no term (no word of a passage is a megabyte long): searching
#: for it would cost in proportion to its length, and the query is end-user input.
MAX_TERM_CHARS = 128
#: The one character whose lower case is longer than itself ("İ" becomes "i" and a combining
#: dot): folded to "i" first, so the folded text keeps every position of the original.
_DOTTED_CAPITAL_I = "\u0130"


def _fold(text: str) -> str:
    """``text`` in lower case, of the same length, so that a position in it is one in ``text``."""
    if _DOTTED_CAPITAL_I in text:
        text = text.replace(_DOTTED_CAPITAL_I, "i")
    folded = text.lower()
    if len(folded) != len(text):  # a letter a later Unicode lengthens: it stays as it is
        folded = "".join(low if len(low := char.lower()) == 1 else char for char in text)
    return folded


def _query_terms(query: str) -> list[str]:
    """The query's distinct words, case folded: the first :data:`MAX_QUERY_TERMS` of them of at
    most :data:`MAX_TERM_CHARS` characters, sorted."""
    terms: dict[str, None] = {}
    for match in _WORD.finditer(query):
        if match.end() - match.start() <= MAX_TERM_CHARS:
            terms.setdefault(_fold(match.group()), None)
            if len(terms) >= MAX_QUERY_TERMS:
                break
    return sorted(terms)


def _bm25(text: str, starts: list[int], ends: list[int], query: str) -> dict[int, float]:
    """BM25 of each unit that holds a query term (the others score zero), over the text's units.

    Unit length is measured in characters, which normalises the same way words would. The text
    is case folded once, and the terms are found in time linear in its length whatever the query
    (whose terms are bounded by :data:`MAX_QUERY_TERMS`) and whatever the text: a unit's count
    of a term is made in C, by bisecting the positions of the term's matches."""
    terms = _query_terms(query)
    if not terms:
        return {}
    lowered = _fold(text)
    n = len(starts)
    average = max(1.0, (sum(ends) - sum(starts)) / n)
    scores: dict[int, float] = {}
    for _, found in sorted(_term_hits(lowered, terms).items()):
        # unit + 1 -> occurrences in it; a word belongs to the unit its first character is in.
        per_unit = Counter(map(bisect_right, repeat(starts, len(found)), found))
        idf = math.log(1.0 + (n - len(per_unit) + 0.5) / (len(per_unit) + 0.5))
        # idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / average)), as comprehensions:
        # a text of a million one-word lines has as many units to score.
        scale, base, slope = idf * (_K1 + 1.0), _K1 * (1.0 - _B), _K1 * _B / average
        term_scores = {
            after - 1: count * scale / (count + base + slope * (ends[after - 1] - starts[after - 1]))
            for after, count in per_unit.items()
        }
        if not scores:
            scores = term_scores
        else:
            for unit, score in term_scores.items():
                scores[unit] = scores.get(unit, 0.0) + score
    return scores


def _term_hits(lowered: str, terms: list[str]) -> dict[str, list[int]]:
    """Where each term occurs in ``lowered`` as a whole word, in order.

    A few terms are found by one literal search each, many times faster than one pattern of
    alternatives on ordinary text. The search of a literal tries it wherever it occurs inside
    words too, so when the terms occur that often (a text of one letter repeated), or there are
    many terms, the text's words are read once instead: either way the work is linear."""
    # A literal is tried wherever it occurs, at most its length times per occurrence counted.
    tries = sum(lowered.count(term) * len(term) for term in terms)
    if len(terms) <= _TERM_SEARCHES and tries <= 2 * len(lowered):
        hits: dict[str, list[int]] = {}
        for term in terms:
            # The boundary before a match is a lookbehind after the literal, so the search keeps
            # its fast scan for the literal, and only whole words come back.
            pattern = re.escape(term) + rf"(?<!\w{re.escape(term)})(?!\w)"
            found = list(map(_START, re.finditer(pattern, lowered)))
            if found:
                hits[term] = found
        return hits
    known = set(terms)
    grouped: dict[str, list[int]] = {}
    for match in _WORD.finditer(lowered):
        word = match.group()
        if word in known:
            grouped.setdefault(word, []).append(match.start())
    return grouped


# --- focus cut: assembly ----------------------------------------------------------------------

_ROUNDS = 3  # real counts of the assembled text: the first, and two refills with a corrected estimate
_SEED_SHARE = 0.3  # of the best BM25 score, that a sentence needs to start a passage of its own
_MAX_MISSES = 8  # seeds in a row that do not fit before the search stops: the room is full


class _Units:
    """A text's units and what keeping some of them is estimated to cost, counted lazily: only
    the units a cut considers are ever counted."""

    def __init__(
        self, text: str, starts: list[int], ends: list[int], max_tokens: int, tokenizer: Tokenizer
    ) -> None:
        self.text = text
        self.starts = starts
        self.ends = ends
        self.max_tokens = max_tokens
        self.tok = tokenizer
        self.mark_cost = tokenizer.count(MARK)
        self._unit_cost: dict[int, int] = {}
        self._space_cost: dict[str, int] = {}
        self._lead: dict[int, int] = {}

    def unit_cost(self, i: int) -> int:
        cost = self._unit_cost.get(i)
        if cost is None:
            unit = self.text[self.starts[i] : self.ends[i]]
            cost = self._unit_cost[i] = self.tok.count_upto(unit, self.max_tokens)
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


class _Focus(_Units):
    """Grows kept passages around the best units, estimating the cost as it goes and checking
    it with the one real count."""

    def __init__(
        self,
        text: str,
        starts: list[int],
        ends: list[int],
        max_tokens: int,
        tokenizer: Tokenizer,
        measure: Measure | None = None,
        seed_floor: float = -math.inf,
    ) -> None:
        super().__init__(text, starts, ends, max_tokens, tokenizer)
        self.seed_floor = seed_floor  # the least score that starts a passage of its own
        self.measure = measure or tokenizer.count
        # What the measure adds to the estimate: its framing at first, then what counts tell.
        self.correction = self.measure(MARK) - self.mark_cost if measure is not None else 0
        self.kept: set[int] = set()
        self.order: list[int] = []
        self.total = 0  # estimate() of the kept units, kept up to date as units are added
        self.last = -1  # the last kept unit

    def _added_cost(self, i: int) -> int:
        """What keeping unit ``i`` adds to :meth:`estimate` of the kept units, in O(1)."""
        last_unit = len(self.starts) - 1
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
        added = self._added_cost(i)
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
        lo = hi = seed
        tokens = self.unit_cost(seed)
        blocked = [False, False]
        while True:
            while lo - 1 in self.kept:
                lo -= 1
                tokens += self.unit_cost(lo)
            while hi + 1 in self.kept:
                hi += 1
                tokens += self.unit_cost(hi)
            if tokens >= goal:
                return
            sides = []
            if lo > 0 and not blocked[0]:
                sides.append((-scores.get(lo - 1, 0.0), seed - lo, 0, lo - 1))
            if hi + 1 < len(self.starts) and not blocked[1]:
                sides.append((-scores.get(hi + 1, 0.0), hi - seed, 1, hi + 1))
            if not sides:
                return
            *_, side, unit = min(sides)
            if not add(unit):
                blocked[side] = True

    def partial(self, i: int) -> Cut | None:
        """The head of unit ``i`` alone, for a best unit larger than the room."""
        start = self.lead(i) if i > 0 else self.starts[i]
        before = MARK if _has_text(self.text, 0, start) else ""
        end = _head_end(self.text, start, self.ends[i], self.max_tokens, self.tok, self.measure, before)
        if end <= start or not _has_text(self.text, start, end):
            return None
        spans = ((start, end),)
        text = _join(self.text, spans)
        return Cut(text, spans, "focus") if self.measure(text) <= self.max_tokens else None

    def assemble(self, ranked: Sequence[int], scores: dict[int, float]) -> Cut | None:
        goal = max(1, self.max_tokens // 3)
        seeds: list[int] = []
        misses = 0
        for seed in ranked:
            if seed in self.kept:
                continue
            if seeds and scores[seed] < self.seed_floor:
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

    def verified(self) -> tuple[Cut | None, int]:
        """The kept units as a cut, the last added dropped until the real count fits."""
        while self.order:
            spans = self.spans(sorted(self.kept))
            text = _join(self.text, spans)
            # Counts do not add up exactly at the joins: the one real count decides.
            cost = self.measure(text)
            if cost <= self.max_tokens:
                return Cut(text, tuple(spans), "focus"), cost
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
) -> Cut | None:
    """The passages of ``text`` that best match ``query``, in their order, within ``max_tokens``.

    The text is split into sentences and lines (an indented or ``>>>`` line is one unit, so code
    stays line by line). Each is scored against the query: BM25 over the text's units by default
    (the query's first :data:`MAX_QUERY_TERMS` distinct words, case folded: the query is often
    end-user input, and the work stays linear in the text whatever it holds), or
    ``embed(query, units)`` when given (see :func:`recallpack.packing.embedding.embed_function`;
    it is called once, with every sentence of this one text). The best unit is kept with its neighbours (the
    better-matching side first) up to a third of the room, then the next best that scores at
    least 30% of the best, and the room left widens them. Every elision is marked "…"; a passage
    that starts a line keeps the line break after the mark. When no query word occurs in the
    text (and no ``embed`` is given) the result is :func:`cut_head`'s. A text that fits is
    returned whole. None when not even one grapheme cluster and the mark fit. ``measure`` is as
    for :func:`cut_head`: the cut is exact for it, and the text is still read only once.
    """
    _check(text, max_tokens, tokenizer, measure)
    if not isinstance(query, str):
        raise ConfigError(f"query={type(query).__name__} must be a str: the question being answered")
    if _fits_whole(text, max_tokens, tokenizer, measure):
        return _whole(text, "focus")
    starts, ends = _units(text, min(max(max_tokens * 3, _UNIT_CHARS[0]), _UNIT_CHARS[1]))
    if not starts:
        return cut_head(text, max_tokens, tokenizer, measure=measure)
    if embed is None:
        scores = _bm25(text, starts, ends, query)
        if not scores:
            return cut_head(text, max_tokens, tokenizer, measure=measure)
    else:
        scores = _similarities(embed, query, [text[s:e] for s, e in zip(starts, ends)])
    # Best first; a stable sort keeps ties in text order (scores are filled in text order).
    ranked = sorted(sorted(scores), key=scores.__getitem__, reverse=True)
    # Lexical scores are on one scale within a text: a passage needs a fair share of the best.
    floor = scores[ranked[0]] * _SEED_SHARE if embed is None else -math.inf
    cut = _Focus(text, starts, ends, max_tokens, tokenizer, measure, floor).assemble(ranked, scores)
    return cut if cut is not None else cut_head(text, max_tokens, tokenizer, measure=measure)


# --- embeddings -------------------------------------------------------------------------------


def _similarities(embed: EmbedFn, query: str, units: list[str]) -> dict[int, float]:
    values = list(embed(query, units))
    if len(values) != len(units):
        raise ConfigError(
            f"embed returned {len(values)} scores for {len(units)} sentences; it must return one per text"
        )
    scores: dict[int, float] = {}
    for i, value in enumerate(values):
        try:
            score = float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"embed returned {value!r} as a similarity; it must return numbers") from None
        scores[i] = score if score == score else -math.inf  # NaN ranks last, not anywhere
    return scores
