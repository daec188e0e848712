"""Where text may be cut: grapheme-cluster boundaries (UAX #29) and Unicode line breaks; and
Markdown that renders as exactly a given text (:func:`inert_markdown`, for displays).

Cuts, token windows and tokenizer truncation all end a piece of text somewhere; none may end it
inside a grapheme cluster (an emoji ZWJ sequence, a flag, a letter and its combining marks).
A boundary is decided from the two characters around it in all but a few cases (flags, emoji
ZWJ sequences, Indic conjuncts, Hangul); only those ask the `regex` module's ``\\X``, starting
from a nearby position that is certainly a boundary. That keeps every check local and cheap.

>>> floor_boundary("e\\u0301te", 1)
0
>>> ceil_boundary("e\\u0301te", 1)
2
"""

from __future__ import annotations

import re

import regex

__all__ = [
    "CLUSTER",
    "LINE_BREAKS",
    "PREPEND",
    "ceil_boundary",
    "clear_boundary",
    "first_cluster_end",
    "floor_boundary",
    "inert_markdown",
    "is_boundary",
]

#: What ``str.splitlines()`` splits at: every Unicode line break.
LINE_BREAKS = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"
#: One extended grapheme cluster.
CLUSTER = regex.compile(r"\X")
#: A character that joins the cluster that follows it (a boundary never falls right after one).
PREPEND = regex.compile(r"\p{GCB=Prepend}")

_CONTROL = regex.compile(r"[\p{GCB=Control}\p{GCB=CR}\p{GCB=LF}]")
_NO_BREAK_BEFORE = regex.compile(r"[\p{GCB=Extend}\p{GCB=ZWJ}\p{GCB=SpacingMark}]")
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
    if PREPEND.match(a):
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


def is_boundary(text: str, i: int, floor: int = 0) -> bool:
    """Whether ``i`` is a grapheme boundary of ``text`` (``floor``, a boundary known to be at or
    before ``i``, bounds how far back the check may read). Both ends of the text are."""
    if i <= 0 or i >= len(text):
        return True
    decided = _pair_break(text[i - 1], text[i])
    if decided is not None:
        return decided
    # A boundary depends only on what precedes it and the next character: endpos i + 1 suffices.
    for cluster in CLUSTER.finditer(text, _safe_start(text, i - 1, floor), i + 1):
        if cluster.end() >= i:
            return cluster.end() == i
    return True  # pragma: no cover - the clusters always reach i


def floor_boundary(text: str, i: int, floor: int = 0) -> int:
    """The last grapheme boundary at or before ``i`` (``floor`` is a boundary known to be before)."""
    if is_boundary(text, i, floor):
        return i
    last = start = _safe_start(text, i - 1, floor)
    for cluster in CLUSTER.finditer(text, start):
        if cluster.end() > i:
            break
        last = cluster.end()
    return last


def ceil_boundary(text: str, i: int, floor: int = 0) -> int:
    """The first grapheme boundary at or after ``i``."""
    if is_boundary(text, i, floor):
        return i
    for cluster in CLUSTER.finditer(text, _safe_start(text, i - 1, floor)):
        if cluster.end() >= i:
            return cluster.end()
    return len(text)  # pragma: no cover


def clear_boundary(text: str, start: int, end: int) -> int | None:
    """The first position in ``[start, end)`` that its two neighbours alone make a boundary."""
    for i in range(max(start, 1), min(end, len(text))):
        if _pair_break(text[i - 1], text[i]) is True:
            return i
    return None


def first_cluster_end(text: str, start: int) -> int:
    """Where the grapheme cluster that starts at ``start`` ends (at least one character on)."""
    match = CLUSTER.match(text, start)
    return match.end() if match and match.end() > start else start + 1


# --- Markdown that shows a text as it is ----------------------------------------------------

_MARKDOWN_PUNCTUATION = re.compile(r"[!-/:-@\[-`{-~]")
_LEADING_SPACE = re.compile(rf"(?:^|(?<=[{''.join(sorted(LINE_BREAKS))}]))[ \t]+")


def _inert_char(match: re.Match[str]) -> str:
    char = match.group()
    return "&amp;" if char == "&" else "&lt;" if char == "<" else "\\" + char


def inert_markdown(text: str) -> str:
    """``text`` as Markdown that renders as exactly that text: every ASCII punctuation mark is
    escaped (a backslash, or an entity for ``&`` and ``<``), so no line of it can become a
    heading, a list item, a quote, a code fence, emphasis, a link, an image, an autolink or
    raw HTML. For displays that render Markdown (a notebook); the model's block is not this."""
    escaped = _MARKDOWN_PUNCTUATION.sub(_inert_char, text)
    # Leading spaces as entities: inside its bullet, a line indented four more would be a code
    # block, where the escapes above would show.
    return _LEADING_SPACE.sub(lambda m: "&nbsp;" * len(m.group()), escaped)
