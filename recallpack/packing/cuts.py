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

>>> from recallpack.packing.tokenizer import get_tokenizer
>>> tok = get_tokenizer("chars")
>>> text = "Intro, part one. Intro, part two.\\nThe port is set by PORT. More.\\nOutro line.\\n"
>>> cut_head(text, 10, tok).text
'Intro, part one. Intro, part two.…'
>>> cut_focus(text, "which port?", 10, tok).text
'…\\nThe port is set by PORT. More.…'
"""

from __future__ import annotations

import asyncio
import inspect
import math
import re
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from operator import sub
from typing import Any, Literal

import regex

from recallpack.packing.errors import BudgetError, ConfigError
from recallpack.packing.limits import ELLIPSIS
from recallpack.packing.tokenizer import Tokenizer

__all__ = [
    "MARK", "Cut", "CutKind", "EmbedFn", "Measure", "cut_head", "cut_focus", "embed_function", "CALLER_LOOP",
]

MARK = ELLIPSIS  # the walk's mark for text cut out of an item, one definition
CutKind = Literal["head", "focus", "passages"]
#: ``(query, texts) -> one similarity per text``; higher means closer to the query.
EmbedFn = Callable[[str, Sequence[str]], Sequence[float]]
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


# --- grapheme clusters ------------------------------------------------------------------------
# A boundary is decided from the two characters around it in all but a few cases (flags, emoji
# ZWJ sequences, Indic conjuncts, Hangul); only those ask the `regex` module's \X, starting from a
# nearby position that is certainly a boundary. That keeps every check local and cheap.

_CLUSTER = regex.compile(r"\X")
_CONTROL = regex.compile(r"[\p{GCB=Control}\p{GCB=CR}\p{GCB=LF}]")
_NO_BREAK_BEFORE = regex.compile(r"[\p{GCB=Extend}\p{GCB=ZWJ}\p{GCB=SpacingMark}]")
_PREPEND = regex.compile(r"\p{GCB=Prepend}")
_HANGUL = regex.compile(r"[\p{GCB=L}\p{GCB=V}\p{GCB=T}\p{GCB=LV}\p{GCB=LVT}]")
_REGIONAL = regex.compile(r"\p{GCB=Regional_Indicator}")
_PICTOGRAPHIC = regex.compile(r"\p{Extended_Pictographic}")
_CONSONANT = regex.compile(r"\p{InCB=Consonant}")
_CONJUNCT_JOIN = regex.compile(r"[\p{InCB=Extend}\p{InCB=Linker}]")


def _pair_break(a: str, b: str) -> bool | None:
    """Whether a grapheme boundary falls between ``a`` and ``b`` (UAX #29), or None when the
    characters before ``a`` decide it."""
    if a < "\x80" and b < "\x80":
        return not (a == "\r" and b == "\n")
    if _CONTROL.match(a) or _CONTROL.match(b):
        return True
    if _NO_BREAK_BEFORE.match(b):
        return False
    if _PREPEND.match(a):
        return False
    if _HANGUL.match(b):
        return None if _HANGUL.match(a) else True
    if _REGIONAL.match(b):
        return None if _REGIONAL.match(a) else True
    if _PICTOGRAPHIC.match(b):
        return None if a == "\u200d" else True
    if _CONSONANT.match(b):
        return None if _CONJUNCT_JOIN.match(a) else True
    return True


def _safe_start(text: str, i: int, floor: int = 0) -> int:
    """The nearest position at or before ``i`` (and not before ``floor``, a known boundary) that
    is certainly a grapheme boundary."""
    while i > floor and _pair_break(text[i - 1], text[i]) is not True:
        i -= 1
    return i


def _is_boundary(text: str, i: int, floor: int = 0) -> bool:
    if i <= 0 or i >= len(text):
        return True
    decided = _pair_break(text[i - 1], text[i])
    if decided is not None:
        return decided
    # A boundary depends only on what precedes it and the next character: endpos i + 1 suffices.
    for cluster in _CLUSTER.finditer(text, _safe_start(text, i - 1, floor), i + 1):
        if cluster.end() >= i:
            return cluster.end() == i
    return True  # pragma: no cover - the clusters always reach i


def _floor_boundary(text: str, i: int, floor: int = 0) -> int:
    """The last grapheme boundary at or before ``i`` (``floor`` is a boundary known to be before)."""
    if _is_boundary(text, i, floor):
        return i
    last = start = _safe_start(text, i - 1, floor)
    for cluster in _CLUSTER.finditer(text, start):
        if cluster.end() > i:
            break
        last = cluster.end()
    return last


def _ceil_boundary(text: str, i: int, floor: int = 0) -> int:
    """The first grapheme boundary at or after ``i``."""
    if _is_boundary(text, i, floor):
        return i
    for cluster in _CLUSTER.finditer(text, _safe_start(text, i - 1, floor)):
        if cluster.end() >= i:
            return cluster.end()
    return len(text)  # pragma: no cover


def _clear_boundary(text: str, start: int, end: int) -> int | None:
    """The first position in ``[start, end)`` that its two neighbours alone make a boundary."""
    for i in range(max(start, 1), min(end, len(text))):
        if _pair_break(text[i - 1], text[i]) is True:
            return i
    return None


# --- shared pieces ----------------------------------------------------------------------------

_LINE_BREAKS = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"  # what str.splitlines() splits at
_LB = re.escape(_LINE_BREAKS)
_TERMINATORS = ".!?…"
_CJK_TERMINATORS = "。！？"
_CLOSERS = "\"')]}»”’"
# The end of a sentence (after its terminator and closing quotes) or of a line (before its break).
_BREAK = re.compile(
    rf"[{re.escape(_TERMINATORS)}][{re.escape(_CLOSERS)}]*(?=\s)|[{_CJK_TERMINATORS}]|(?=[{_LB}])"
)
_NONSPACE = re.compile(r"\S")
_WORD = re.compile(r"\w+")


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
        floored = max(start, _floor_boundary(text, end, start))
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
    if last is not None and not _is_boundary(text, last, start):
        last = _floor_boundary(text, last, start)
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
        cut = _strip_end(text, start, max(start, _floor_boundary(text, cut, start)))
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
    first = _ceil_boundary(text, start + 1, start)
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
_SENTENCE_SPLIT = re.compile(rf"([{re.escape(_TERMINATORS)}][{re.escape(_CLOSERS)}]*)[ \t]+")
_CJK_SENTENCE_SPLIT = re.compile(
    rf"([{re.escape(_TERMINATORS)}][{re.escape(_CLOSERS)}]*)[ \t]+|([{_CJK_TERMINATORS}])[ \t]*"
)
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
    splits = [(m.start(), m.end()) for m in _LINE_SPLIT.finditer(text, first, last)]
    line_starts = [first, *(e for _, e in splits)]
    splits = [(_strip_spaces(text, s) if text[s - 1].isspace() else s, e) for s, e in splits]
    cjk = any(t in text for t in _CJK_TERMINATORS)
    pattern = _CJK_SENTENCE_SPLIT if cjk else _SENTENCE_SPLIT
    sentences = [
        (m.end(m.lastindex or 0), m.end())
        for m in pattern.finditer(text, first, last)
        # A sentence end at a line end (or the text's) is where the line ends anyway.
        if m.end() < last and text[m.end()] != "\n"
    ]
    if sentences:
        sentences = [(end, start) for end, start in sentences if not _in_code_line(text, line_starts, end)]
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
        s, e = _floor_boundary(text, s), _ceil_boundary(text, e)
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
        cut = _clear_boundary(text, window, min(e, window + _BOUNDARY_SEARCH))
        if cut is not None:
            return cut, cut
        space = text.find(" ", window, e)
    while space > s:
        after = space + 1
        while after < e and text[after] == " ":
            after += 1
        end = _strip_end(text, s, space)
        if end > s and after < e and _is_boundary(text, after, s):
            return end, after
        space = text.find(" ", after, e)
    return None


# --- focus cut: scoring -----------------------------------------------------------------------

_K1 = 1.2
_B = 0.75
_TERM_SEARCHES = 16  # query words searched for one by one; a longer query reads the text's words once


def _is_word_char(char: str) -> bool:
    return char.isalnum() or char == "_"  # what \w matches


def _query_terms(query: str) -> list[str]:
    return sorted({word.lower() for word in _WORD.findall(query)})


def _bm25(text: str, starts: list[int], ends: list[int], query: str) -> dict[int, float]:
    """BM25 of each unit that holds a query term (the others score zero), over the text's units.

    Unit length is measured in characters, which normalises the same way words would."""
    terms = _query_terms(query)
    if not terms:
        return {}
    tf: Counter[tuple[int, str]] = Counter()
    lowered = text.lower()
    if len(lowered) == len(text) and len(terms) <= _TERM_SEARCHES:
        # One literal search per term is many times faster than one pattern of alternatives;
        # the word boundary before a match is checked here, as \w is: alphanumeric or "_".
        for term in terms:
            found = [m.start() for m in re.finditer(re.escape(term) + r"(?!\w)", lowered)]
            found = [at for at in found if not at or not _is_word_char(lowered[at - 1])]
            units = [bisect_right(starts, at) - 1 for at in found]
            size = len(term)
            tf.update((u, term) for u, at in zip(units, found) if u >= 0 and at + size <= ends[u])
    elif len(lowered) == len(text):
        # A long query: one pass over the text's words costs the same whatever its length.
        known = set(terms)
        hits = [(m.start(), m.group()) for m in _WORD.finditer(lowered) if m.group() in known]
        for at, term in hits:
            unit = bisect_right(starts, at) - 1
            if unit >= 0 and at + len(term) <= ends[unit]:
                tf[unit, term] += 1
    else:  # lower-casing changed the length (a dotted capital I): match case-insensitively
        alternatives = "|".join(re.escape(t) for t in sorted(terms, key=lambda t: (-len(t), t)))
        pattern = re.compile(rf"(?<!\w)(?:{alternatives})(?!\w)", re.IGNORECASE)
        known = set(terms)
        for match in pattern.finditer(text):
            term = match.group().lower()
            unit = bisect_right(starts, match.start()) - 1
            if term in known and unit >= 0 and match.end() <= ends[unit]:
                tf[unit, term] += 1
    if not tf:
        return {}
    n = len(starts)
    average = max(1.0, (sum(ends) - sum(starts)) / n)
    df = Counter(term for _, term in tf)
    idf = {term: math.log(1.0 + (n - count + 0.5) / (count + 0.5)) for term, count in df.items()}
    scores: dict[int, float] = {}
    for (unit, term), count in sorted(tf.items()):
        norm = _K1 * (1.0 - _B + _B * (ends[unit] - starts[unit]) / average)
        scores[unit] = scores.get(unit, 0.0) + idf[term] * count * (_K1 + 1.0) / (count + norm)
    return scores


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
            if lead > floor and self.text[lead - 1] in _LINE_BREAKS:
                lead -= 1
                if lead > floor and self.text[lead - 1 : lead + 1] == "\r\n":
                    lead -= 1
            if not _is_boundary(self.text, lead):
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
    stays line by line). Each is scored against the query: BM25 over the text's units by default,
    or ``embed(query, units)`` when given (see :func:`embed_function`; it is called once, with
    every sentence of this one text). The best unit is kept with its neighbours (the
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


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = math.fsum(x * y for x, y in zip(a, b))
    norm = math.sqrt(math.fsum(x * x for x in a)) * math.sqrt(math.fsum(y * y for y in b))
    return dot / norm if norm else 0.0


#: The event loop of an async call (``Packer.arecall``) whose packing runs in a worker thread;
#: set only in that worker's context. An embedding with async methods is awaited there.
CALLER_LOOP: ContextVar[asyncio.AbstractEventLoop | None] = ContextVar("recallpack_caller_loop", default=None)
#: The async methods of each kind of embedding: (the query's, the texts').
_ASYNC_METHODS = {
    "langchain": ("aembed_query", "aembed_documents"),
    "llamaindex": ("aget_query_embedding", "aget_text_embedding_batch"),
}


@dataclass(frozen=True)
class _Similarity:
    """Cosine similarity of the query's embedding with each text's, from a host's embedding.

    It holds the embedding object itself (no closures), so it pickles whenever that does.
    Called in the worker thread of an async call, it awaits the embedding's async methods on
    the caller's loop when the embedding has them."""

    source: Any
    kind: Literal["langchain", "llamaindex", "callable"]

    def __call__(self, query: str, texts: Sequence[str]) -> list[float]:
        if not texts:
            return []
        loop = CALLER_LOOP.get()
        if loop is not None and self._async_methods() is not None:
            target, vectors = asyncio.run_coroutine_threadsafe(self._aembed(query, texts), loop).result()
        else:
            target, vectors = self._embed(query, texts)
        return self._cosines(target, vectors, len(texts))

    def _async_methods(self) -> tuple[Callable[..., Any], Callable[..., Any]] | None:
        names = _ASYNC_METHODS.get(self.kind)
        if names is None:
            return None
        of_query, of_texts = (getattr(self.source, name, None) for name in names)
        if inspect.iscoroutinefunction(of_query) and inspect.iscoroutinefunction(of_texts):
            return of_query, of_texts
        return None

    async def _aembed(self, query: str, texts: Sequence[str]) -> tuple[Any, Any]:
        methods = self._async_methods()
        assert methods is not None
        return await methods[0](query), await methods[1](list(texts))

    def _embed(self, query: str, texts: Sequence[str]) -> tuple[Any, Any]:
        if self.kind == "langchain":
            return self.source.embed_query(query), self.source.embed_documents(list(texts))
        if self.kind == "llamaindex":
            return self.source.get_query_embedding(query), self.source.get_text_embedding_batch(list(texts))
        target, *vectors = self.source([query, *texts]) or [[]]  # one call for the query and the texts
        return target, vectors

    def _cosines(self, target: Any, vectors: Any, expected: int) -> list[float]:
        if len(vectors) != expected:
            raise ConfigError(
                f"embed ({type(self.source).__name__}) returned {len(vectors)} vectors for "
                f"{expected} texts; it must return one per text"
            )
        try:
            if any(len(vector) != len(target) for vector in vectors):
                raise TypeError("vectors of different lengths")
            return [_cosine(target, vector) for vector in vectors]
        except TypeError as exc:  # strings, None, ragged rows: zip() would quietly truncate those
            raise ConfigError(
                f"embed ({type(self.source).__name__}) returned vectors that are not lists of "
                f"numbers of one length ({exc})"
            ) from None


def embed_function(obj: object) -> EmbedFn:
    """An :data:`EmbedFn` from a LangChain ``Embeddings`` (``embed_query`` + ``embed_documents``),
    a LlamaIndex ``BaseEmbedding`` (``get_query_embedding`` + ``get_text_embedding_batch``), or a
    callable ``list[str] -> list[list[float]]``: cosine similarity of the query to each text.

    >>> similarity = embed_function(lambda texts: [[len(t), 1.0] for t in texts])
    >>> [round(s, 3) for s in similarity("abc", ["xyz", "a"])]
    [1.0, 0.894]
    """
    if isinstance(obj, _Similarity):
        return obj
    if callable(getattr(obj, "embed_query", None)) and callable(getattr(obj, "embed_documents", None)):
        return _Similarity(obj, "langchain")
    if callable(getattr(obj, "get_query_embedding", None)) and callable(
        getattr(obj, "get_text_embedding_batch", None)
    ):
        return _Similarity(obj, "llamaindex")
    if callable(obj):
        return _Similarity(obj, "callable")
    raise ConfigError(
        f"embed={obj!r} is not an embedding recallpack can use; pass a LangChain Embeddings "
        "(embed_query and embed_documents), a LlamaIndex BaseEmbedding (get_query_embedding and "
        "get_text_embedding_batch), or a callable list[str] -> list[list[float]]"
    )
