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
from collections.abc import Sequence

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
#: Where frequent query words' bases occur more often than this a character, all together, one
#: pass over the words is cheaper than scanning for each: a scan takes about 19 ns an occurrence
#: and the pass 160 to 350 ns a word, a word being about six characters of English.
_SCANNED_PER_CHAR = 2


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
    occurrence), or, where such words sit inside one another, by one pass over the text's words
    (:func:`_frequent_hits`). The work stays linear in the text either way, whatever the query."""
    if len(terms) > _TERM_SEARCHES:
        # A long query: one pass over the text's words costs the same whatever its length.
        return _read_words(lowered, terms, limit)
    found: dict[str, list[int]] = {}
    frequent: list[str] = []  # found after the others, all at once
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
            frequent.append(term)
            continue
        width, at, seen = len(base), lowered.find(base), 0
        whole: list[int] = []
        while at >= 0:
            seen += 1
            if seen > limit:
                frequent.append(term)
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
    if frequent:
        found.update(_frequent_hits(lowered, frequent, limit))
        found = {term: found[term] for term in terms if term in found}  # in the query's order
    return found


def _frequent_hits(lowered: str, terms: Sequence[str], limit: int) -> dict[str, list[int]]:
    """:func:`hits` of query words whose bases occur often in ``lowered``, whole or inside other
    words. Each is scanned for in C, a step per occurrence of its base; but words inside one
    another ("a", "aa", "aaa" over "aaaa aaaa …") can each occur at nearly every character, so
    where their occurrences add up to more than _SCANNED_PER_CHAR a character, one pass over the
    text's words finds them all instead: its work is bounded by the text, not by the query."""
    occurrences = sum(lowered.count(base_of(term)) for term in terms)
    if occurrences > _SCANNED_PER_CHAR * len(lowered):
        return _read_words(lowered, terms, limit)
    found: dict[str, list[int]] = {}
    for term in terms:
        if whole := _scanned(lowered, base_of(term), len(term) >= INFLECTED_TERM, limit):
            found[term] = whole
    return found


def _read_words(lowered: str, terms: Sequence[str], limit: int) -> dict[str, list[int]]:
    """:func:`hits` from one pass over the text's words, which stops once every query word is
    past ``limit`` (each is then left out)."""
    forms = _forms(terms)
    grouped: dict[str, list[int]] = {term: [] for term in terms}
    left = len(grouped)
    for match in _WORD.finditer(lowered):
        matched = forms.get(match.group())
        if matched is None:
            continue
        for term in matched:
            where = grouped[term]
            where.append(match.start())
            if len(where) == limit + 1:
                left -= 1
        if not left:
            break
    return {term: where for term in terms if 0 < len(where := grouped[term]) <= limit}
