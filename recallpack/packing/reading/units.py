"""A text's units: its sentences and lines, their words, and how kept units are joined.

The focus cut (:mod:`recallpack.packing.choosing.cuts`) and the passages policy
(:mod:`recallpack.packing.choosing.passages`) both choose units of a text to keep and show them in order,
with the mark "…" wherever something was dropped. This module is what they share: where a text's
units begin and end (:func:`split_units`); the kept ranges are written out by
:func:`~recallpack.packing.reading.kept.join_spans`, handed on here.
Which words of a text match a query is the analysis chain's alone
(:mod:`recallpack.packing.reading.analysis`). What keeping units costs is
:mod:`recallpack.packing.choosing.focus`.
Every start and end it gives is a grapheme boundary.

>>> text = "One. Two!\\n    code = 1\\nThree"
>>> starts, ends = split_units(text, 800)
>>> [text[s:e] for s, e in zip(starts, ends)]
['One.', 'Two!', 'code = 1', 'Three']
>>> join_spans(text, [(0, 4), (23, 28)])
'One.…Three'
"""

from __future__ import annotations

import functools
import re
from bisect import bisect_right
from collections.abc import Callable, Iterable
from itertools import accumulate, compress, repeat
from operator import add, itemgetter, sub

import regex

from recallpack.packing.reading.analysis import (
    MAX_TERM_CHARS,
    MAX_TERMS,
    class_of,
    fold,
    other_terminators,
    phrase_letters,
)
from recallpack.packing.reading.kept import MARK, has_text, join_spans
from recallpack.packing.reading.text import (
    LINE_BREAKS,
    ceil_boundary,
    clear_boundary,
    floor_boundary,
    is_boundary,
)

__all__ = [
    "MARK",
    "MAX_QUERY_TERMS",
    "MAX_TERM_CHARS",
    "Measure",
    "fold",
    "has_text",
    "is_stray",
    "join_spans",
    "last_break",
    "sentence_start",
    "split_units",
    "units_and_sentences",
    "strip_end",
]

#: What a cut's text costs where it is spent (inside its rendered item, say), in tokens.
Measure = Callable[[str], int]

_LB = re.escape(LINE_BREAKS)
#: Terminators that end a sentence only before a space ("3.14", "e.g.", "Wait...").
_TERMINATORS = ".!?…"
_CLOSERS = "\"')]}»”’"
# The end of a sentence (after its terminator and closing quotes) or of a line (before its break),
# in ASCII text; :func:`_scripts` has the same for text in any script.
_BREAK = re.compile(rf"[{re.escape(_TERMINATORS)}][{re.escape(_CLOSERS)}]*(?=\s)|(?=[{_LB}])")
_SPAN = re.Match.span
_FIRST, _SECOND = itemgetter(0), itemgetter(1)


def strip_end(text: str, start: int, end: int) -> int:
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


def last_break(text: str, start: int, end: int) -> int | None:
    """The last sentence or line end in ``text[start:end]`` that is a grapheme boundary."""
    last = None
    stop = min(len(text), end + 1)
    pattern = _BREAK if text.isascii() else _scripts().sentence_break
    for match in pattern.finditer(text, start, stop):
        if start < match.end() <= end:
            last = match.end()
    if last is not None and not is_boundary(text, last, start):
        last = floor_boundary(text, last, start)
    return last if last is not None and last > start else None


#: The distinct words of a query that are scored, in the order the query gives them
#: (:data:`~recallpack.packing.reading.analysis.MAX_TERMS`, one definition for every language).
MAX_QUERY_TERMS = MAX_TERMS


# --- sentences and lines ----------------------------------------------------------------------

# Units split at "\n" (with the blank lines and the next line's indentation after it) and after
# a sentence's terminator and closing quotes. Two plain patterns, each fast to scan for, merged
# in one pass: one pattern with lookbehinds reads a megabyte as slowly as tiktoken encodes it.
_LINE_SPLIT = re.compile(r"\n\s*")
_SPACE_BEFORE_BREAK = re.compile(r"\s\n")
_LINE_GAP = re.compile(r"\n\s")  # a break that is more than one "\n"
_SENTENCE_END = rf"([{re.escape(_TERMINATORS)}][{re.escape(_CLOSERS)}]*)[ \t]+(?=[^\n])"
# One pattern a terminator, searched only when the text has it: a pattern that starts with one
# character is scanned for it several times faster than one that starts with a class, and the
# matches are the same (each holds one terminator, so no two can overlap).
_SENTENCE_SPLITS = {
    t: re.compile(rf"({re.escape(t)}[{re.escape(_CLOSERS)}]*)[ \t]+(?=[^\n])") for t in _TERMINATORS
}
#: A character between which and any other of its kind a grapheme boundary always falls: UAX #29's
#: "Other" (no mark, joiner, prepended mark, Hangul jamo, regional indicator) and the controls and
#: line feed, which break on both sides (not the carriage return: it joins a line feed after it).
_PLAIN_CLASS = regex.compile(r"[\p{GCB=Other}\p{GCB=Control}\p{GCB=LF}]")
_BOUNDARY_SEARCH = 64  # characters searched for a place to split a long unit without a space


class _Scripts:
    """The patterns that read sentence and phrase ends in every script, made on the first text
    that is not ASCII (their classes are read from the Unicode database once)."""

    def __init__(self) -> None:
        #: The terminators of other scripts: the danda, "؟", "。", "።"... (no space needed after).
        #: A text's distinct characters are a set in C, faster than a scan for a class this large.
        self.terminators = other_terminators()
        other = class_of(self.terminators)
        closers = re.escape(_CLOSERS)
        self.sentence_break = re.compile(
            rf"[{re.escape(_TERMINATORS)}][{closers}]*(?=\s)|[{other}][{closers}]*|(?=[{_LB}])"
        )
        # Thai and Lao write no terminator: a space between two of their letters ends a phrase,
        # which is their unit.
        self.phrase_letters = phrase_letters()
        spaced = class_of(self.phrase_letters)
        self.phrase_split = re.compile(f"(?<=[{spaced}])[ \t]+(?=[{spaced}])")
        #: A sentence's end at the start of a range (:func:`sentence_start`).
        ascii_ = re.escape(_TERMINATORS)
        self.stray = re.compile(
            rf"(?:[{closers}]*(?:[{ascii_}]+[{closers}]*(?:\s+|$)|[{other}][{other}{ascii_}{closers}]*\s*))+"
        )


@functools.lru_cache(maxsize=1)
def _scripts() -> _Scripts:
    return _Scripts()


@functools.lru_cache(maxsize=64)
def _sentence_split(terminators: frozenset[str]) -> re.Pattern[str]:
    """The split after a sentence, for a text whose other scripts' terminators are these: a class
    of the few a text holds scans several times faster than one of all of Unicode's."""
    other = class_of(terminators)
    return re.compile(rf"{_SENTENCE_END}|([{other}][{re.escape(_CLOSERS)}]*)[ \t]*(?=[^\n])")


def split_units(
    text: str, max_chars: int, piece_bytes: int | None = None, max_bytes: int | None = None
) -> tuple[list[int], list[int]]:
    """The text's sentences and lines, stripped of the whitespace around them, in order.

    Prose lines are split after sentence terminators; indented lines and ``>>>`` lines are kept
    whole (a line of code is one unit, so a code sample stays line by line). Units longer than
    ``max_chars`` are split at a space, or failing that at a grapheme boundary, into pieces of
    ``max_chars`` or of about ``piece_bytes`` bytes of UTF-8 (a character of Chinese costs
    several English letters' tokens); shorter units of more than ``max_bytes`` bytes, into
    pieces of half that. Every start and end is a grapheme boundary.
    """
    starts, ends, _ = units_and_sentences(text, max_chars, piece_bytes, max_bytes)
    return starts, ends


def units_and_sentences(
    text: str, max_chars: int, piece_bytes: int | None = None, max_bytes: int | None = None
) -> tuple[list[int], list[int], list[int]]:
    """:func:`split_units`' starts and ends, and where each sentence or line starts before any
    is cut for its length (the very list of starts when none is): one reading of the text gives
    both (``split_units(text, len(text) + 1, len(text) + 1)[0]`` is the third).
    """
    # Everything here is a comprehension over regex matches: a megabyte has ~20,000 lines.
    first = len(text) - len(text.lstrip())
    last = len(text.rstrip())
    if last <= first:
        return [], [], []
    line_ends: list[int] | None = None  # read from the lines' lengths, when no match was
    if _LINE_GAP.search(text, first, last) or _SPACE_BEFORE_BREAK.search(text, first, last):
        splits = list(map(_SPAN, _LINE_SPLIT.finditer(text, first, last)))
        line_starts = [first, *map(_SECOND, splits)]
        if _SPACE_BEFORE_BREAK.search(text, first, last):  # a line that ends in spaces (or "\r")
            # Only the breaks after a space are read again, found in C (most breaks follow text).
            after_space = map(str.isspace, _chars_before(text, map(_FIRST, splits)))
            for i in compress(range(len(splits)), after_space):
                s, e = splits[i]
                splits[i] = (_strip_spaces(text, s), e)
    else:  # every break a lone "\n": the lines' bounds from their lengths, in C, no match a line
        lengths = map(len, text[first:last].split("\n"))
        bounds = list(accumulate(map(add, lengths, repeat(1)), initial=first))
        line_starts = bounds[:-1]
        line_ends = list(map(sub, bounds[1:], repeat(1)))
        splits = []
    # A sentence end at a line end (or the text's) is where the line ends anyway: the pattern
    # needs a character after it that is no line break.
    scripts = None if text.isascii() else _scripts()
    chars = set() if scripts is None else set(text)
    if scripts is not None and (present := scripts.terminators & chars):
        found = _sentence_split(frozenset(present)).finditer(text, first, last)
        sentences = [(m.end(m.lastindex or 0), m.end()) for m in found]
    else:
        patterns = [pattern for t, pattern in _SENTENCE_SPLITS.items() if t in text]
        sentences = [(m.end(1), m.end()) for pattern in patterns for m in pattern.finditer(text, first, last)]
    if scripts is not None and not scripts.phrase_letters.isdisjoint(chars):
        sentences += _phrases(scripts.phrase_split.finditer(text, first, last), first)
    if sentences:
        # Asked per sentence only when some line is code: a text of short sentences has many.
        indents = _chars_before(text, line_starts)
        if ">>>" in text or " " in indents or "\t" in indents:
            sentences = [(e, s) for e, s in sentences if not _in_code_line(text, line_starts, e)]
        if line_ends is not None:
            splits = list(zip(line_ends[:-1], line_starts[1:]))
            line_ends = None
        splits = sorted(splits + sentences)
    if line_ends is not None:
        starts, ends = line_starts, line_ends
    else:
        starts = [first, *map(_SECOND, splits)]
        ends = [*map(_FIRST, splits), last]
    # A unit is terminators alone only where they stand apart (" . ", "。。", a line that begins
    # ". The", a quote closed after a line's last terminator): the units' first characters are
    # read in one pass, and only a unit that begins with one is read further.
    terminals = _TERMINAL_SET if scripts is None else _TERMINAL_SET | scripts.terminators
    heads = "".join(map(text.__getitem__, starts))
    if not terminals.isdisjoint(heads) or not _CLOSER_SET.isdisjoint(heads):
        starts, ends = _join_strays(text, starts, ends, terminals, heads)
    # Splits sit next to whitespace, so only a non-ASCII neighbour can join a cluster across
    # one (a combining mark after a space, a prepended mark before it).
    if not text.isascii():
        cuts = [*filter(None, starts), *filter(len(text).__gt__, ends)]
        near = "".join(map(text.__getitem__, cuts)) + _chars_before(text, cuts)
        # Between two characters of no special grapheme class (a Han character and "。", a
        # letter and a space) there is always a boundary: a text of a million short sentences
        # asks the rules only of the few distinct characters around its splits.
        if not near.isascii() and not all(map(_PLAIN_CLASS.match, set(near))):
            starts, ends = _on_boundaries(text, starts, ends)
    longest = max(map(sub, ends, starts))
    # A character is at most 4 bytes: a text whose longest unit is shorter than a quarter of
    # max_bytes has none over it, without encoding one.
    if longest > max_chars or (max_bytes is not None and 4 * longest > max_bytes):
        return (*_split_long(text, starts, ends, max_chars, piece_bytes, max_bytes), starts)
    return starts, ends, starts


_TERMINAL_SET = frozenset(_TERMINATORS)
_CLOSER_SET = frozenset(_CLOSERS)
#: A unit of terminators alone is short; a longer unit is read no further than this.
_STRAY_READ = 16


def _join_strays(
    text: str, starts: list[int], ends: list[int], terminals: frozenset[str], heads: str
) -> tuple[list[int], list[int]]:
    """The units with each that is terminators and closing quotes alone joined to the unit
    before it on its line, or failing one, to the unit after it there: kept or dropped alone,
    such a unit would read as a stray ".", "।" or "。" beside the mark (".…"). A line that is
    terminators alone stays a unit. ``heads``: each unit's first character."""
    # Only a unit that begins with a terminator or a closing quote can be one alone: those are
    # read, and the units between them are copied by slices, not stepped through one by one.
    marks = terminals | _CLOSER_SET
    strays = [
        i for i in compress(range(len(heads)), map(marks.__contains__, heads))
        if _terminators_only(text, starts[i], ends[i], terminals)
    ]
    if not strays:
        return starts, ends
    out_starts: list[int] = []
    out_ends: list[int] = []
    alone = False  # the last unit is terminators alone, with no unit before it on its line
    done = 0  # the units before this one are read
    for stray in [*strays, len(starts)]:
        if done < stray and alone:  # the unit after a lone one joins it on its line
            s, e = starts[done], ends[done]
            if out_ends and not _crosses_line(text, out_ends[-1], s):
                out_ends[-1] = e
            else:
                out_starts.append(s)
                out_ends.append(e)
            alone = False
            done += 1
        out_starts += starts[done:stray]  # none alone: each a unit of its own
        out_ends += ends[done:stray]
        if stray == len(starts):
            break
        s, e = starts[stray], ends[stray]
        if out_ends and not _crosses_line(text, out_ends[-1], s):
            out_ends[-1] = e  # joins the unit before it on its line (alone, if that one was)
        else:
            out_starts.append(s)
            out_ends.append(e)
            alone = True
        done = stray + 1
    return out_starts, out_ends


def _terminators_only(text: str, s: int, e: int, terminals: frozenset[str]) -> bool:
    if (text[s] not in terminals and text[s] not in _CLOSER_SET) or e - s > _STRAY_READ:
        return False
    return all(c in terminals or c in _CLOSERS or c.isspace() for c in text[s:e])


def is_stray(text: str, start: int, end: int) -> bool:
    """Whether ``text[start:end]`` is terminators and closing quotes alone (a few characters at
    most, as ``"!"`` or ``"。」"``): a piece of no sentence, which beside the mark reads "!…"."""
    while start < end and text[start].isspace():
        start += 1
    if start >= end:
        return False
    piece_ascii = text[start:min(end, start + _STRAY_READ)].isascii()
    terminals = _TERMINAL_SET if piece_ascii else _TERMINAL_SET | _scripts().terminators
    return _terminators_only(text, start, end, terminals)


def _crosses_line(text: str, end: int, start: int) -> bool:
    """Whether the white space between two units holds a line break."""
    return any(c in LINE_BREAKS for c in text[end:start])


def sentence_start(text: str, start: int, end: int) -> int:
    """Where ``text[start:end]``, a range cut out of a longer text, may begin: past the end of
    a sentence that began before ``start`` (its terminators and closing quotes, and the white
    space after them), else ``start``. A range cut at a token (a window of a file, say) can
    begin at ". The"; shown after the mark that says text was left out, it would read "….".
    ASCII's terminators (and "…") end a sentence only before white space (or ``end``); any
    other script's (Unicode's Sentence_Terminal: "。", "।", "؟", "።"...) always.

    >>> text = "It ends here. The next one"
    >>> text[sentence_start(text, 12, len(text)):]
    'The next one'
    """
    if start <= 0 or start >= end:
        return start
    pattern = _STRAY_ASCII if text.isascii() else _scripts().stray
    found = pattern.match(text, start, end)
    return start if found is None else found.end()


# Closing quotes, then terminators that need white space after them, or any other script's;
# as many as stand there (" . . . ").
_STRAY_ASCII = re.compile(
    rf"(?:[{re.escape(_CLOSERS)}]*[{re.escape(_TERMINATORS)}]+[{re.escape(_CLOSERS)}]*(?:\s+|$))+"
)


#: A Thai or Lao phrase shorter than this is joined to the next: a space there also sets apart
#: numbers, names and short clauses, and units of a word or two match one query term each.
LEAST_PHRASE_CHARS = 60


def _phrases(spaces: Iterable[re.Match[str]], start: int) -> list[tuple[int, int]]:
    """The spaces between Thai or Lao letters that end a phrase of LEAST_PHRASE_CHARS or more."""
    kept: list[tuple[int, int]] = []
    for space in spaces:
        if space.start() - start >= LEAST_PHRASE_CHARS:
            kept.append(space.span())
            start = space.end()
    return kept


def _chars_before(text: str, positions: Iterable[int]) -> str:
    """The character before each non-zero position, read without a Python step per position
    (a text has a split every sentence)."""
    return "".join(map(text.__getitem__, map((-1).__add__, filter(None, positions))))


def _strip_spaces(text: str, end: int) -> int:
    while end > 0 and text[end - 1].isspace():
        end -= 1
    return end


def _in_code_line(text: str, line_starts: list[int], at: int) -> bool:
    """Whether ``at`` is on an indented line or a ``>>>`` line: a line of code is one unit, so
    "x = obj.attr. y" does not become two sentences."""
    start = line_starts[bisect_right(line_starts, at) - 1]
    return (start > 0 and text[start - 1] in " \t") or text.startswith(">>>", start)


def _plain_break(a: str, b: str) -> bool:
    """True when ``a`` and ``b`` are ASCII with a boundary between them (all but CR LF)."""
    return a < "\x80" and b < "\x80" and not (a == "\r" and b == "\n")


def _on_boundaries(text: str, starts: list[int], ends: list[int]) -> tuple[list[int], list[int]]:
    """The units widened to grapheme boundaries, merged where they then touch."""
    out_starts: list[int] = []
    out_ends: list[int] = []
    size = len(text)
    for s, e in zip(starts, ends):
        # Most splits have ASCII on both sides, where only CR LF is no boundary: those are
        # settled here, without the grapheme rules.
        if 0 < s < size and not _plain_break(text[s - 1], text[s]):
            s = floor_boundary(text, s)
        if 0 < e < size and not _plain_break(text[e - 1], text[e]):
            e = ceil_boundary(text, e)
        if out_ends and s < out_ends[-1]:
            out_ends[-1] = max(out_ends[-1], e)
        else:
            out_starts.append(s)
            out_ends.append(e)
    return out_starts, out_ends


def _split_long(
    text: str, starts: list[int], ends: list[int], max_chars: int, piece_bytes: int | None,
    max_bytes: int | None = None,
) -> tuple[list[int], list[int]]:
    out_starts: list[int] = []
    out_ends: list[int] = []
    for s, e in zip(starts, ends):
        # A unit within max_chars (and max_bytes) stays whole; a longer one is cut into pieces.
        if e - s > max_chars:
            piece = _piece_chars(text, s, e, max_chars, piece_bytes)
        elif max_bytes is not None and 4 * (e - s) > max_bytes and _utf8_size(text, s, e) > max_bytes:
            piece = _piece_chars(text, s, e, max_chars, max_bytes // 2)
        else:
            piece = max_chars
        while e - s > piece:
            split = _split_point(text, s, e, piece)
            # What is left after a split may be the sentence's end alone ("!", "。」"): it stays
            # with the piece before it, or it would be kept alone beside the mark ("…!").
            if split is None or is_stray(text, split[1], e):
                break
            out_starts.append(s)
            out_ends.append(split[0])
            s = split[1]
        out_starts.append(s)
        out_ends.append(e)
    return out_starts, out_ends


def _utf8_size(text: str, s: int, e: int) -> int:
    unit = text[s:e]
    return len(unit) if unit.isascii() else len(unit.encode("utf-8", "surrogatepass"))


def _piece_chars(text: str, s: int, e: int, max_chars: int, piece_bytes: int | None) -> int:
    """Characters of ``text[s:e]`` that hold about ``piece_bytes`` bytes (at most ``max_chars``)."""
    if piece_bytes is None:
        return max_chars
    return max(1, min(max_chars, piece_bytes * (e - s) // _utf8_size(text, s, e)))


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
        end = strip_end(text, s, space)
        if end > s and after < e and is_boundary(text, after, s):
            return end, after
        space = text.find(" ", after, e)
    return None
