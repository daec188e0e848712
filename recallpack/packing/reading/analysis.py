"""Reading text in every script: which words of a query a text holds, and where.

The focus cut and the ``passages`` policy score sentences by the query's words they hold. What a
"word" is depends on the script, and what counts as the same word depends on the language. This
module is that analysis, in the manner of Lucene's chain: the script decides how text is cut into
terms, the language how a term matches its inflected forms, and both are chosen from the data.

- **Scripts with spaces** (Latin, Cyrillic, Greek, Arabic, Devanagari, Tamil...): a word is a run
  of letters, marks and digits (``regex``'s Unicode ``\\w``: a Hindi or Tamil word keeps its vowel
  signs, which Python's own ``\\w`` drops).
- **Scripts without spaces** (Han, kana, Thai, Lao, Khmer, Myanmar): a run is matched by its
  overlapping pairs of grapheme clusters (Lucene's CJK bigrams), found anywhere in the text.
- **Inflections**: a language with a Snowball stemmer (PyStemmer) matches a word by its stem;
  English keeps the suffix rules measured on SQuAD (:mod:`recallpack.packing.reading.english`); a
  language without a stemmer is matched word for word. English rules never read another
  language.

Everything that reads text for a query reads it through one :class:`Reading`, chosen once per
call: ``passages``, the focus cut of every policy (both score with
:func:`recallpack.packing.choosing.bm25.unit_scores`), the MCP docs index (:meth:`Reading.keys`) and the
offline :class:`~recallpack.testing.HashingEmbeddings`. No other module matches words
(``tests/test_analysis_chain.py`` checks it).

The language is the caller's ``language=`` or, by default (``"auto"``), read from the query's
script, and for the Latin script from letters that only one language uses (``ñ``, ``ß``,
``ğ``...): :mod:`recallpack.packing.reading.languages`. ``docs/how-the-walk-decides.md`` says what each
script gets.

>>> Reading.of("auto", "Какие книги читали?", "").language
'ru'
>>> Reading.of("auto", "北京大学在哪里", "").terms("北京大学在哪里")[:3]
['北京', '京大', '大学']
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import regex

from recallpack.packing.reading import english
from recallpack.packing.reading.languages import (
    AUTO,
    MAX_TERM_CHARS,
    MAX_TERMS,
    SPACELESS_SCRIPTS,
    STEMMED_LANGUAGES,
    check_language,
    fold,
    language_of,
    stemmer,
)

__all__ = [
    "ANALYSIS_VERSION",
    "AUTO",
    "CallReading",
    "MAX_TERMS",
    "MAX_TERM_CHARS",
    "STEMMED_LANGUAGES",
    "Reading",
    "check_language",
    "fold",
    "language_of",
    "characters",
    "class_of",
    "other_terminators",
    "phrase_letters",
]

#: Changes whenever what :meth:`Reading.keys` gives for a text changes: an index that stored
#: keys under another version is rebuilt (``recallpack serve --docs --index``).
ANALYSIS_VERSION = "1"

_SPACELESS_CLASS = "[" + "".join(rf"\p{{{s}}}" for s in SPACELESS_SCRIPTS) + r"\u30fc\u3005]"
_SPACELESS = regex.compile(_SPACELESS_CLASS + "+")
_WORD = regex.compile(r"\w+")
_ASCII_WORD = re.compile(r"\w+", re.ASCII)
#: A run of a script without spaces, or a word of the others.
_KEY_PARTS = regex.compile(rf"(?P<run>{_SPACELESS_CLASS}+)|(?:(?!{_SPACELESS_CLASS})\w)+")
_CLUSTER = regex.compile(r"\X")


# --- character classes for the standard library's `re` ------------------------------------------


@functools.cache
def characters(prop: str) -> frozenset[str]:
    """The characters with the Unicode property ``prop`` (``regex`` syntax, e.g.
    ``\\p{Sentence_Terminal}``), read once from the Unicode database of the installed ``regex``."""
    return frozenset(regex.findall(prop, _all_chars()))


def class_of(chars: Iterable[str]) -> str:
    """``chars`` as the body of a ``re`` character class, in ranges: the splitting patterns run
    in ``re``, which scans several times faster than ``regex``."""
    found = sorted(chars)
    ranges: list[str] = []
    i = 0
    while i < len(found):
        j = i
        while j + 1 < len(found) and ord(found[j + 1]) == ord(found[j]) + 1:
            j += 1
        ranges.append(re.escape(found[i]) if i == j else f"{re.escape(found[i])}-{re.escape(found[j])}")
        i = j + 1
    return "".join(ranges)


@functools.lru_cache(maxsize=1)
def _all_chars() -> str:
    # The planes that hold sentence terminals and the scripts read here (the BMP and the
    # supplementary multilingual plane; the planes above hold only more ideographs), no surrogates.
    return "".join(map(chr, [*range(0xD800), *range(0xE000, 0x20000)]))


def other_terminators() -> frozenset[str]:
    """Unicode's sentence terminals but ``.``, ``!`` and ``?`` (which end a sentence only
    before a space: "3.14", "e.g."): the danda, ``؟``, ``。``, ``።``..."""
    return characters(r"\p{Sentence_Terminal}") - {".", "!", "?"}


def phrase_letters() -> frozenset[str]:
    """The Thai and Lao letters and marks: a space between two of them ends a unit (these
    scripts write no sentence terminal; a space sets phrases apart)."""
    return characters(r"[\p{Thai}\p{Lao}]")


# --- one call's reading -----------------------------------------------------------------------

#: The longest grapheme cluster of a script without spaces read whole (a Thai consonant with its
#: vowel and tone marks); longer ones are rare, and only bound how far a run is read.
_MAX_CLUSTER_CHARS = 4
#: The longest prefix a stemmer takes off a word (Arabic's "وبال"), read back over from a stem
#: found inside a word.
_PREFIX_CHARS = 4
#: A stem shorter than this is matched as the whole word only: a short stem is a prefix of too
#: many other words to be worth checking each.
_LEAST_STEM = 3


def _inside_word(char: str) -> bool:
    """Whether ``char`` continues a word: a letter, a digit, ``_``, a mark or a joiner."""
    if char.isalnum() or char == "_":
        return True
    return char > "\u02ff" and (unicodedata.category(char)[0] == "M" or char in "\u200c\u200d")


@dataclass(frozen=True)
class Reading:
    """How one call reads its text, in the shape of Lucene's analysis chain: a tokenizer (words;
    for a run of a script without spaces, its overlapping pairs of grapheme clusters), then the
    language's filters (case; accents and the Snowball stem for a stemmed ``language``; the
    English suffix rules for ``"en"``; words as written for None). The query and the text are
    read by the same one."""

    language: str | None

    @classmethod
    def of(cls, setting: str | None, query: str, texts: str | Sequence[str]) -> Reading:
        """The reading for ``query`` over ``texts`` under the ``language=`` ``setting``."""
        if setting != AUTO:
            return cls(setting)
        return cls(language_of(query, [texts] if isinstance(texts, str) else texts))

    @property
    def english(self) -> bool:
        """Whether words match by the English suffix rules (the measured SQuAD path)."""
        return self.language == "en"

    @property
    def signature(self) -> str:
        """What names this chain, for an index that stores its keys: the analysis version and
        the language."""
        return f"{ANALYSIS_VERSION}:{self.language or '-'}"

    def terms(self, query: str) -> list[str]:
        """The query's distinct terms, case folded, in order: its words, and for a run of a
        script without spaces its overlapping pairs of clusters (one cluster alone is a term)."""
        terms: dict[str, None] = {}
        for match in _WORD.finditer(query):
            for part, spaceless in _by_spacing(match.group()):
                if spaceless:
                    # A run gives a pair per character: no more than the terms still wanted are
                    # read (a query is end-user input, and may be a megabyte of Chinese).
                    for gram in _pairs(part[: _MAX_CLUSTER_CHARS * (MAX_TERMS + 1)].lower()):
                        terms.setdefault(gram, None)
                elif len(part) <= MAX_TERM_CHARS:
                    terms.setdefault(fold(part), None)
                if len(terms) >= MAX_TERMS:
                    return list(terms)[:MAX_TERMS]
        return list(terms)

    def hits(self, lowered: str, terms: Sequence[str], limit: int) -> dict[str, list[int]]:
        """Where each term occurs in ``lowered`` (the folded text): a pair of clusters anywhere,
        a word as a whole word or (with a stemmer) as any word of the same stem, (English) as the
        word or one of its inflections. A term found more than ``limit`` times is left out (it
        tells no unit from another); the work is linear in the text, and per term stops past
        the limit."""
        if self.english:
            return self._english_hits(lowered, terms, limit)
        found: dict[str, list[int]] = {}
        snowball = None
        plain = lowered
        if self.language is not None:
            snowball = stemmer(STEMMED_LANGUAGES[self.language])
            if not lowered.isascii():
                plain = lowered.translate(_unaccented())
        for term in terms:
            if _SPACELESS.fullmatch(term):
                where = _occurrences(lowered, term, limit)
            elif snowball is not None and len(stem := snowball.stemWord(term)) >= _LEAST_STEM:
                where = _stem_hits(lowered, plain, term, stem, snowball, limit)
            else:
                where = _word_hits(lowered, term, limit)
            if where:
                found[term] = where
        return found

    @staticmethod
    def _english_hits(lowered: str, terms: Sequence[str], limit: int) -> dict[str, list[int]]:
        """English words by the suffix rules; a pair of a script without spaces anywhere (an
        English query may name a Chinese place)."""
        words = [t for t in terms if not _SPACELESS.fullmatch(t)]
        found = english.hits(lowered, words, limit) if words else {}
        if len(words) < len(terms):
            pairs = {t: _occurrences(lowered, t, limit) for t in terms if _SPACELESS.fullmatch(t)}
            found = {t: where for t in terms if (where := found.get(t) or pairs.get(t))}
        return found

    def keys(self, text: str) -> list[str]:
        """What an index stores for ``text``, a bag of keys: each word folded and reduced by the
        language's filter (its Snowball stem; English's suffix rules; as written for None), then
        for each run of a script without spaces its pairs of clusters. A query read by the same
        reading shares its keys with the words it matches."""
        folded = fold(text)
        if folded.isascii():
            words = [w for w in _ASCII_WORD.findall(folded) if len(w) <= MAX_TERM_CHARS]
            runs: list[str] = []
        else:
            words, runs = [], []
            for match in _KEY_PARTS.finditer(folded):
                part = match.group()
                if match.lastgroup == "run":
                    runs.extend(_pairs(part))
                elif len(part) <= MAX_TERM_CHARS:
                    words.append(part)
        if self.english:
            words = [english.key(w) for w in words]
        elif self.language is not None:
            words = stemmer(STEMMED_LANGUAGES[self.language]).stemWords(words)
        return words + runs if runs else words


class CallReading:
    """The one :class:`Reading` of a call, chosen from the first texts it reads: every scorer of
    the call (``passages``, each focus cut) then reads the query and every text the same way.
    Only texts that passed the gate are read to choose it (the walk hands nothing else)."""

    __slots__ = ("setting", "query", "_chosen")

    def __init__(self, setting: str | None, query: str) -> None:
        self.setting = setting
        self.query = query
        self._chosen: Reading | None = None

    def of(self, texts: str | Sequence[str]) -> Reading:
        """The call's reading: chosen from ``texts`` the first time, the same one after."""
        if self._chosen is None:
            self._chosen = Reading.of(self.setting, self.query, texts)
        return self._chosen


def _by_spacing(word: str) -> Iterable[tuple[str, bool]]:
    """The parts of ``word`` in a script without spaces (True) and the others (False)."""
    at = 0
    for run in _SPACELESS.finditer(word):
        if run.start() > at:
            yield word[at : run.start()], False
        yield run.group(), True
        at = run.end()
    if at < len(word):
        yield word[at:], False


def _pairs(run: str) -> list[str]:
    clusters = _CLUSTER.findall(run)
    if len(clusters) == 1:
        return clusters
    return [a + b for a, b in zip(clusters, clusters[1:])]


def _occurrences(lowered: str, term: str, limit: int) -> list[int]:
    if lowered.count(term) > limit:
        return []
    out: list[int] = []
    at = lowered.find(term)
    while at >= 0:
        out.append(at)
        at = lowered.find(term, at + 1)
    return out


def _word_hits(lowered: str, term: str, limit: int) -> list[int]:
    """``term`` where it is a whole word."""
    size, width = len(lowered), len(term)
    out: list[int] = []
    seen = 0
    at = lowered.find(term)
    while at >= 0:
        seen += 1
        if seen > limit:
            return []
        end = at + width
        if (at == 0 or not _inside_word(lowered[at - 1])) and (end >= size or not _inside_word(lowered[end])):
            out.append(at)
        at = lowered.find(term, end)
    return out


def _stem_hits(lowered: str, plain: str, term: str, stem: str, stemmer: Any, limit: int) -> list[int]:
    """Every word of ``lowered`` whose stem is ``stem``. A stemmer may change letters as well as
    endings (Greek drops accents, German umlauts), so the words are searched in ``plain``, the
    text without accents (letter for letter, at the same positions), by what the term and its stem
    share there; each word found is then stemmed as written, once."""
    bare_term, bare_stem = term.translate(_unaccented()), stem.translate(_unaccented())
    shared = 0
    for a, b in zip(bare_term, bare_stem):
        if a != b:
            break
        shared += 1
    keys = [bare_term[:shared]] if shared >= _LEAST_STEM else [bare_term, bare_stem]
    # Only a stem that is no prefix of its word is looked for inside words.
    reach = 0 if shared >= _LEAST_STEM else _PREFIX_CHARS
    stems: dict[str, bool] = {}
    out: set[int] = set()
    seen = 0
    size = len(lowered)
    for key in keys:
        at = plain.find(key)
        while at >= 0:
            seen += 1
            if seen > limit:
                return []
            start = at
            # A stemmer may take off a prefix (Arabic's "ال", "بال", "لل"): the stem is then found
            # inside its word, a few letters after the word's start.
            while start > 0 and at - start < reach and _inside_word(lowered[start - 1]):
                start -= 1
            if start == 0 or not _inside_word(lowered[start - 1]):
                end = at + len(key)
                match = _WORD.match(lowered, end) if end < size and _inside_word(lowered[end]) else None
                word = lowered[start : match.end() if match else end]
                same = stems.get(word)
                if same is None:
                    same = stems[word] = word == term or stemmer.stemWord(word) == stem
                if same:
                    out.add(start)
            at = plain.find(key, at + len(key))
    return sorted(out)


@functools.lru_cache(maxsize=1)
def _unaccented() -> dict[int, int]:
    """Each precomposed letter of the Latin, Greek and Cyrillic blocks to its base letter (one
    character for one, so a position in the plain text is one in the text)."""
    table: dict[int, int] = {}
    for code in range(0xC0, 0x2000):
        parts = unicodedata.normalize("NFD", chr(code))
        if len(parts) > 1 and all(unicodedata.combining(c) for c in parts[1:]):
            table[code] = ord(parts[0])
    return table
