"""English's filter in the analysis chain: the suffix rules measured on SQuAD.

A query word of at least :data:`INFLECTED_TERM` characters also matches its inflections: its base
(the word without one of :data:`BASE_ENDINGS`, when at least :data:`INFLECTED_BASE` characters are
left) followed by one of :data:`INFLECTIONS`, so "disobedience" finds "disobediences" and "played"
finds "playing" and "player". Every base ending is an inflection: a query word always finds itself.
English uses these rules, not Snowball's English stemmer, because they were measured to keep more
answers on SQuAD (``docs/how-the-walk-decides.md``); they never read another language.

:class:`~recallpack.packing.reading.analysis.Reading` is the chain; this module is only what it does for
English: :func:`hits` (where a query's words occur in a text) and :func:`key` (what an index
stores for a word, so that a query word and its inflections share a key).

>>> hits("he played. the players play.", ["played"], 10)
{'played': [3, 15, 23]}
>>> key("playing") == key("played") == key("players") == "play"
True
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Sequence

__all__ = ["INFLECTED_TERM", "INFLECTED_BASE", "BASE_ENDINGS", "INFLECTIONS", "base_of", "hits", "key"]

INFLECTED_TERM = 5
INFLECTED_BASE = 4
BASE_ENDINGS = ("ing", "es", "ed", "s")
INFLECTIONS = ("", "s", "es", "ed", "d", "ing", "er", "ers", "e", "ion", "ions", "al")
_TERM_SEARCHES = 16  # query words searched for one by one; more read the text's words once
#: A word as the suffix rules read it (``re``'s ``\\w``: the rules are ASCII endings).
_WORD = re.compile(r"\w+")
# One of INFLECTIONS and the end of the word, matched where a base ends: one call, in C.
_INFLECTION_END = re.compile("(?:" + "|".join(sorted(INFLECTIONS[1:], key=len, reverse=True)) + r")(?!\w)")
#: The endings an index strips, longest first: a word and the query words that find it share the
#: base they leave.
_KEY_ENDINGS = tuple(sorted({e for e in INFLECTIONS if e}, key=len, reverse=True))


def base_of(term: str) -> str:
    """What :func:`hits` searches for ``term``: the word itself, or for a word of at least
    INFLECTED_TERM characters its base (one of BASE_ENDINGS off, INFLECTED_BASE characters left)."""
    if len(term) >= INFLECTED_TERM:
        for ending in BASE_ENDINGS:
            if term.endswith(ending) and len(term) - len(ending) >= INFLECTED_BASE:
                return term[: -len(ending)]
    return term


def key(word: str) -> str:
    """What an index stores for the folded ``word``: its base, with the longest inflection that
    leaves INFLECTED_BASE characters taken off a word of at least INFLECTED_TERM ("players",
    "played", "playing" -> "play"). :func:`hits` is what packing reads; this is its index's
    approximation, so that a search finds the texts that packing then reads."""
    if len(word) >= INFLECTED_TERM:
        for ending in _KEY_ENDINGS:
            if word.endswith(ending) and len(word) - len(ending) >= INFLECTED_BASE:
                return word[: -len(ending)]
    return word


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


def _words_at(lowered: str, words: Iterable[str]) -> dict[str, list[int]]:
    """Where each of ``words`` occurs in ``lowered`` as a whole word, in order, from one pass
    over the text's words (its work does not grow with how many words are asked)."""
    known = set(words)
    grouped: dict[str, list[int]] = {}
    for match in _WORD.finditer(lowered):
        word = match.group()
        if word in known:
            grouped.setdefault(word, []).append(match.start())
    return grouped


def _scanned(lowered: str, base: str, inflected: bool, limit: int) -> list[int]:
    """Where ``base`` starts a whole word (or, ``inflected``, one of its inflections), by one
    scan in C; none when there are more than ``limit``. The boundary before a match is a
    lookbehind after the literal, so the scan keeps its fast search for it."""
    literal = re.escape(base)
    endings = _INFLECTION_GROUP if inflected else ""
    pattern = _patterns.get((base, inflected))
    if pattern is None:
        pattern = re.compile(rf"{literal}(?<!\w{literal}){endings}(?!\w)")
        if len(_patterns) < _MAX_PATTERNS:
            _patterns[base, inflected] = pattern
    # At most limit + 1 matches are taken, each by one step in C.
    found = list(map(_START, itertools.islice(pattern.finditer(lowered), limit + 1)))
    return [] if len(found) > limit else found


_START = re.Match.start
_INFLECTION_GROUP = "(?:" + "|".join(sorted(INFLECTIONS[1:], key=len, reverse=True)) + ")?"
#: Compiled scans kept for the words queried most: a bounded cache (the query is end-user input).
_patterns: dict[tuple[str, bool], re.Pattern[str]] = {}
_MAX_PATTERNS = 256
#: A base found more often than this in the text's first eighth is scanned for in C, not searched.
_SEARCHED_AT_MOST = 32


def hits(lowered: str, terms: Sequence[str], limit: int) -> dict[str, list[int]]:
    """Where each query word occurs in ``lowered`` (the case-folded text) as a whole word, linear
    in the text: the word itself, or (a word of at least INFLECTED_TERM characters) its base
    followed by one of INFLECTIONS. A word found (whole, or inflected) more than ``limit`` times
    is left out.

    A word that occurs more often than there are units (``the``, ``of``) says little about which
    one answers (its BM25 weight is near zero), and taking each occurrence would be most of the
    work. Occurrences are found by ``str.find``, several times faster than a regular expression
    scans a text that is not ASCII, one pass a word; a base found more than ``limit`` times,
    whole or inside other words ("port" in "import", "important"), is counted instead by one
    scan in C for the whole word (``str.count`` first tells a frequent one without a step per
    occurrence). The work stays linear in the text either way."""
    found: dict[str, list[int]] = {}
    if len(terms) > _TERM_SEARCHES:
        # A long query: one pass over the text's words costs the same whatever its length. The
        # limit counts a base inside other words too, as the searches below do.
        forms = _forms(terms)
        grouped: dict[str, list[int]] = {}
        for word, positions in _words_at(lowered, forms).items():
            for term in forms[word]:
                grouped.setdefault(term, []).extend(positions)
        for term in terms:
            if (where := grouped.get(term)) and len(where) <= limit:
                found[term] = sorted(where)
        return found
    size = len(lowered)
    probe = size // 8
    for term in terms:
        base = base_of(term)
        # The search below stops past ``limit``, so it tells a frequent word on its own; where
        # the text's first eighth suggests one, counting it first is cheaper than walking it.
        inflected = len(term) >= INFLECTED_TERM
        # Both ways find the same words. The scan in C takes a Python step per match, the search
        # below several per occurrence: a base frequent in the text's first eighth is scanned.
        if lowered.count(base, 0, probe) > _SEARCHED_AT_MOST:
            if (whole := _scanned(lowered, base, inflected, limit)):
                found[term] = whole
            continue
        width, at, seen = len(base), lowered.find(base), 0
        whole = []
        while at >= 0:
            seen += 1
            if seen > limit:
                whole = _scanned(lowered, base, inflected, limit)
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
