"""Which language a call's text is in, and its stemmer: the choice of the analysis chain's filter.

The chain (:mod:`recallpack.packing.reading.analysis`) reads a word by its language's filter; this
module chooses the language, as Lucene chooses an analyzer by the data: the caller's
``language=``, or by default (``"auto"``) the query's script, and within a script that several
languages write (Latin, Cyrillic, Arabic) the letters that only one of them uses (``ñ``, ``ß``,
``ğ``...), counted over the query and the texts' first letters (:func:`language_of`). Also the
case folding every reading starts with (:func:`fold`), and the bounds on a query's terms.

>>> language_of("Какие книги читали?")
'ru'
>>> language_of("¿Dónde está la biblioteca?")
'es'
"""

from __future__ import annotations

import functools
import importlib
import threading
from collections.abc import Iterable, Mapping
from typing import Any

import regex

from recallpack.packing.errors import ConfigError
from recallpack.packing.validation import did_you_mean

__all__ = [
    "AUTO",
    "MAX_TERMS",
    "MAX_TERM_CHARS",
    "SPACELESS_SCRIPTS",
    "STEMMED_LANGUAGES",
    "check_language",
    "fold",
    "language_of",
    "stemmer",
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
_WORD = regex.compile(r"\w+")

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
    stemmer(STEMMED_LANGUAGES[code])  # a stemmer that is not installed fails here
    return code


#: PyStemmer's stemmers are not thread-safe: each thread has its own, made on first use.
_STEMMERS = threading.local()


def stemmer(name: str) -> Any:
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



#: The distinct terms of a query that are scored, in the order the query gives them. The query is
#: end-user input: past this many, more terms would cost a pass each and add no passage.
MAX_TERMS = 64
#: A query word longer than this is no term (no word of a passage is a megabyte long: searching
#: for it would cost in proportion to its length); a run of a script without spaces gives its pairs.
MAX_TERM_CHARS = 128
