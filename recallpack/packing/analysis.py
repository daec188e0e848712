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
  English keeps the suffix rules measured on SQuAD (:mod:`recallpack.packing.scoring`); a
  language without a stemmer is matched word for word. English rules never read another
  language.

The language is the caller's ``language=`` or, by default (``"auto"``), read from the query's
script, and for the Latin script from letters that only one language uses (``ñ``, ``ß``,
``ğ``...): :func:`language_of`. ``docs/how-the-walk-decides.md`` says what each script gets.

>>> Reading.of("auto", "Какие книги читали?", "").language
'ru'
>>> Reading.of("auto", "北京大学在哪里", "").terms("北京大学在哪里")[:3]
['北京', '京大', '大学']
"""

from __future__ import annotations

import functools
import importlib
import re
import threading
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import regex

from recallpack.packing.errors import ConfigError
from recallpack.packing.validation import did_you_mean

__all__ = [
    "AUTO",
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

#: The ``language=`` that reads the language from the query (and the texts' letters).
AUTO = "auto"

#: Every language with a Snowball stemmer, by ISO 639-1 code, with the stemmer's name.
STEMMED_LANGUAGES: Mapping[str, str] = {
    "ar": "arabic", "ca": "catalan", "da": "danish", "de": "german", "el": "greek",
    "en": "english", "es": "spanish", "eu": "basque", "fi": "finnish", "fr": "french",
    "ga": "irish", "hi": "hindi", "hu": "hungarian", "hy": "armenian", "id": "indonesian",
    "it": "italian", "lt": "lithuanian", "ne": "nepali", "nl": "dutch", "no": "norwegian",
    "pt": "portuguese", "ro": "romanian", "ru": "russian", "sr": "serbian", "sv": "swedish",
    "ta": "tamil", "tr": "turkish", "yi": "yiddish",
}
_BY_NAME = {name: code for code, name in STEMMED_LANGUAGES.items()}

#: Scripts whose words are not written apart: matched by pairs of grapheme clusters.
SPACELESS_SCRIPTS = ("Han", "Hiragana", "Katakana", "Thai", "Lao", "Khmer", "Myanmar")
_SPACELESS = regex.compile(
    "[" + "".join(rf"\p{{{s}}}" for s in SPACELESS_SCRIPTS) + r"\u30fc\u3005]+"
)
_WORD = regex.compile(r"\w+")
_CLUSTER = regex.compile(r"\X")

#: A script that one stemmed language writes (nearly) alone: its letters name the language.
_SCRIPT_LANGUAGE = {
    "Cyrillic": "ru", "Greek": "el", "Arabic": "ar", "Devanagari": "hi", "Tamil": "ta",
    "Armenian": "hy",
}
#: Letters of one script that tell a language apart from the others that write it, and the
#: language they tell (None: a language without a stemmer, matched word for word).
_MARKERS: dict[str, tuple[tuple[str | None, str], ...]] = {
    "Latin": (
        ("de", "äöüß"), ("es", "ñ¿¡áíóú"), ("pt", "ãõâêôáíóúç"), ("fr", "œæèêëçàùûîïÿ"),
        ("it", "àèìòù"), ("ro", "ășțţâî"), ("tr", "ğışöüç"), ("hu", "őűöüáíóú"), ("sv", "åäö"),
        ("fi", "äö"), ("no", "æøå"), (None, "ơưđ\u1ea0-\u1ef9"),  # Vietnamese: no stemmer
    ),
    "Cyrillic": (("sr", "ђћџљњј"), (None, "іїєґў")),  # Ukrainian, Belarusian: no stemmer
    "Arabic": ((None, "پچژگکیےٹڈڑں"),),  # Persian, Urdu: no stemmer
}
#: Scripts read apart from the others, with no language of their own here (None).
_OTHER_SCRIPTS = ("Hebrew", "Hangul", "Bengali", "Gurmukhi", "Gujarati", "Telugu", "Kannada",
                  "Malayalam", "Sinhala", "Georgian", "Ethiopic", "Tibetan")
_SCRIPT_RUNS = regex.compile("|".join(
    rf"(?P<{s}>\p{{{s}}}+)" for s in ("Latin", *_SCRIPT_LANGUAGE, *SPACELESS_SCRIPTS, *_OTHER_SCRIPTS)
))
#: Of the letters of a script, this share of one language's markers names it: a name or two
#: ("Zürich", "José") in English text does not; German (ä, ö, ü, ß) writes about 1.5%, the
#: others more.
_MARKER_SHARE = 0.008
#: Latin letters this plain (ASCII) with no language's markers read as English.
_PLAIN_ENGLISH = 0.98
#: An ASCII query over texts with fewer bytes beyond ASCII than this share reads as English
#: without weighing scripts (a dash, a curly quote or a name in English text).
_FEW_BYTES = 0.0025
#: Letters read to tell the language: the query's, then the texts' first ones.
_SAMPLE_CHARS = 4000


def check_language(value: object) -> str | None:
    """The ``language=`` setting as a code (``"ru"``), ``"auto"``, or None (words as written).

    Accepts an ISO 639-1 code or a Snowball stemmer's name, in any case."""
    if value is None or value == AUTO:
        return value
    if not isinstance(value, str):
        raise ConfigError(
            f"language={value!r} must be a str: 'auto', an ISO 639-1 code such as 'ru', or None",
            field="language",
        )
    key = value.strip().lower().replace("_", "-").split("-")[0]
    code = key if key in STEMMED_LANGUAGES else _BY_NAME.get(key)
    if code is None:
        close = did_you_mean(key, sorted({*STEMMED_LANGUAGES, *_BY_NAME}))
        hint = f"did you mean {close!r}? " if close else ""
        raise ConfigError(
            f"language={value!r} has no Snowball stemmer; {hint}use one of "
            f"{', '.join(sorted(STEMMED_LANGUAGES))}, 'auto' (read from the query), or None "
            "(match words as written, e.g. for Vietnamese; Chinese, Japanese and Thai need none)",
            field="language",
        )
    _stemmer(STEMMED_LANGUAGES[code])  # a stemmer that is not installed fails here
    return code


#: PyStemmer's stemmers are not thread-safe: each thread has its own, made on first use.
_STEMMERS = threading.local()


def _stemmer(name: str) -> Any:
    """The Snowball stemmer ``name`` of this thread (its own cache makes a repeated word free)."""
    made: dict[str, Any] = _STEMMERS.__dict__.setdefault("made", {})
    stemmer = made.get(name)
    if stemmer is None:
        try:
            # PyStemmer ships no type stubs.
            Stemmer: Any = importlib.import_module("Stemmer")
        except ImportError as exc:  # a core dependency: only a broken install gets here
            raise ConfigError(
                f"language={name!r} needs PyStemmer, which is not installed: pip install PyStemmer",
                field="language",
            ) from exc
        if name not in Stemmer.algorithms():
            raise ConfigError(
                f"language={name!r}: the installed PyStemmer has no {name!r} stemmer; upgrade it "
                "(pip install -U PyStemmer) or pass language=None",
                field="language",
            )
        stemmer = made[name] = Stemmer.Stemmer(name)
    return stemmer


def language_of(query: str, texts: Iterable[str] = ()) -> str | None:
    """The language the query is in, from its script and letters (None: one with no stemmer).

    Plain ASCII reads as English; other letters by their script, and within a script that
    several languages write (Latin, Cyrillic, Arabic) by letters that only one of them uses,
    counted over the query and the texts' first letters. No clear winner: None."""
    # The query's distinct words, as they are scored: a word repeated (end-user input) weighs once.
    query = " ".join(_distinct_words(query))
    sample = query + " " + "".join(_first(texts))
    if sample.isascii():
        return "en"
    # Nearly all ASCII (an English text with a dash, a quote or a name): no script to weigh.
    if query.isascii() and len(sample.encode("utf-8")) - len(sample) < _FEW_BYTES * len(sample):
        return "en"
    script = _main_script(query) or _main_script(sample)
    if script is None or script in SPACELESS_SCRIPTS:
        return None
    letters = sample.lower()
    runs = "".join(_script_runs(script).findall(sample))
    # The language with the most markers; a tie goes to the one listed first (Spanish before
    # Portuguese and Hungarian, which write ã, ç or ő, ű almost always as well).
    markers = _MARKERS.get(script, ())
    counts = ((sum(map(letters.count, _expand(chars))), -i) for i, (_, chars) in enumerate(markers))
    best, first = max(counts, default=(0, 0))
    if best >= max(2, _MARKER_SHARE * len(runs)):
        return markers[-first][0]
    if script == "Latin":
        # Latin letters with no language's markers: English if they are (nearly) plain ASCII.
        return "en" if len(runs.encode("ascii", "ignore")) >= _PLAIN_ENGLISH * len(runs) else None
    return _SCRIPT_LANGUAGE.get(script)


def _distinct_words(query: str) -> list[str]:
    words: dict[str, None] = {}
    for match in _WORD.finditer(query):
        if len(match.group()) <= MAX_TERM_CHARS:
            words.setdefault(fold(match.group()), None)
            if len(words) >= MAX_TERMS:
                break
    return list(words)


def _main_script(text: str) -> str | None:
    """The script most of ``text``'s letters are in, of those this module reads apart."""
    counts: dict[str, int] = {}
    for run in _SCRIPT_RUNS.finditer(text):
        name = run.lastgroup or ""
        counts[name] = counts.get(name, 0) + len(run.group())
    return max(counts, key=counts.__getitem__) if counts else None


@functools.cache
def _script_runs(script: str) -> Any:
    return regex.compile(rf"\p{{{script}}}+")


def _first(texts: Iterable[str]) -> Iterable[str]:
    room = _SAMPLE_CHARS
    for text in texts:
        if room <= 0:
            return
        yield text[:room]
        room -= len(text)


@functools.cache
def _expand(chars: str) -> tuple[str, ...]:
    """The letters of a marker string, its ``a-b`` ranges spelled out."""
    out: list[str] = []
    i = 0
    while i < len(chars):
        if i + 2 < len(chars) and chars[i + 1] == "-":
            out.extend(map(chr, range(ord(chars[i]), ord(chars[i + 2]) + 1)))
            i += 3
        else:
            out.append(chars[i])
            i += 1
    return tuple(out)


#: The one character whose lower case is longer than itself ("İ" becomes "i" and a combining
#: dot): folded to "i" first, so the folded text keeps every position of the original.
_DOTTED_CAPITAL_I = "\u0130"


def fold(text: str) -> str:
    """``text`` in lower case, of the same length, so that a position in it is one in ``text``."""
    if _DOTTED_CAPITAL_I in text:
        text = text.replace(_DOTTED_CAPITAL_I, "i")
    folded = text.lower()
    if len(folded) != len(text):  # a letter a later Unicode lengthens: it stays as it is
        folded = "".join(low if len(low := char.lower()) == 1 else char for char in text)
    return folded


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

#: The distinct terms of a query that are scored, in the order the query gives them. The query is
#: end-user input: past this many, more terms would cost a pass each and add no passage.
MAX_TERMS = 64
#: A query word longer than this is no term (no word of a passage is a megabyte long: searching
#: for it would cost in proportion to its length); a run of a script without spaces gives its pairs.
MAX_TERM_CHARS = 128
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
    """How one call reads its text: the language's matching of words (``language`` None: words
    as written; ``"en"``: the English suffix rules, which :mod:`recallpack.packing.scoring`
    applies), and pairs of clusters for scripts without spaces."""

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
        a word as a whole word or (with a stemmer) as any word of the same stem. A term found
        more than ``limit`` times is left out (it tells no unit from another); the work is
        linear in the text, and per term stops past the limit."""
        found: dict[str, list[int]] = {}
        stemmer = None
        plain = lowered
        if self.language is not None and self.language != "en":
            stemmer = _stemmer(STEMMED_LANGUAGES[self.language])
            if not lowered.isascii():
                plain = lowered.translate(_unaccented())
        for term in terms:
            if _SPACELESS.fullmatch(term):
                where = _occurrences(lowered, term, limit)
            elif stemmer is not None and len(stem := stemmer.stemWord(term)) >= _LEAST_STEM:
                where = _stem_hits(lowered, plain, term, stem, stemmer, limit)
            else:
                where = _word_hits(lowered, term, limit)
            if where:
                found[term] = where
        return found


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
