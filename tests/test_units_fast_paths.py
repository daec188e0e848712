"""Scoring reads every character it is handed, so its two scans (units, and the English chain's
query words) take fast paths; these tests hold each to its plain definition on hostile text."""

from __future__ import annotations

import re

import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from recallpack.packing.reading.analysis import Reading, fold
from recallpack.packing.reading.english import INFLECTED_TERM, INFLECTIONS, base_of
from recallpack.packing.reading.units import split_units


def hits(text: str, terms: list[str], limit: int) -> dict[str, list[int]]:
    """The English chain's hits, as every scorer reads them."""
    return Reading("en").hits(fold(text), terms, limit)

# Terminators, closers, spaces, line breaks, CJK ends, combining marks, code markers, letters.
_ALPHABET = list(".!?…。！？ \t\n\r\"')]}»”’>abAİ\u0301\u200d_1é")
_texts = st.text(alphabet=st.sampled_from(_ALPHABET), max_size=60)

_CLOSERS = "\"')]}»”’"
# The definition: one pattern for every terminator (the fast path searches one a terminator).
_ONE_PATTERN = re.compile(rf"([.!?…][{re.escape(_CLOSERS)}]*)[ \t]+(?=[^\n])")


def _units_with_one_pattern(text: str, max_chars: int) -> tuple[list[int], list[int]]:
    import recallpack.packing.reading.units as units

    saved = units._SENTENCE_SPLITS
    units._SENTENCE_SPLITS = {"": _ONE_PATTERN}
    try:
        return split_units(text, max_chars)
    finally:
        units._SENTENCE_SPLITS = saved


@settings(max_examples=800, deadline=None)
@given(_texts, st.sampled_from([3, 8, 600]))
def test_units_are_those_of_one_pattern_for_every_terminator(text: str, max_chars: int) -> None:
    """Searching each terminator on its own finds the same units as one pattern for them all."""
    assert split_units(text, max_chars) == _units_with_one_pattern(text, max_chars)


def _clusters(text: str) -> set[int]:
    return {0, *(m.end() for m in regex.finditer(r"\X", text))}


# Combining marks, a zero-width joiner and a prepended mark beside the spaces and line breaks that
# units split at: the neighbours the fast check must notice.
_BESIDE = st.text(alphabet=st.sampled_from(list("a. \n\r\u0301\u200d\u0600é!")), max_size=60)


@settings(max_examples=800, deadline=None)
@given(_BESIDE, st.sampled_from([3, 600]))
def test_every_unit_starts_and_ends_on_a_grapheme_boundary(text: str, max_chars: int) -> None:
    """Whatever sits beside a split, no unit starts or ends inside a grapheme cluster (by the
    regex module's \\X, not recallpack's own rules)."""
    starts, ends = split_units(text, max_chars)
    boundaries = _clusters(text)
    assert set(starts) <= boundaries and set(ends) <= boundaries


def _hits_by_definition(text: str, terms: list[str], limit: int) -> dict[str, list[int]]:
    lowered = fold(text)
    found = {}
    for term in terms:
        base = base_of(term)
        endings = INFLECTIONS if len(term) >= INFLECTED_TERM else ("",)
        inflected = "|".join(map(re.escape, endings))
        whole = [m.start() for m in re.finditer(rf"(?<!\w){re.escape(base)}(?:{inflected})(?!\w)", lowered)]
        if 0 < len(whole) <= limit:  # found more than limit times: left out
            found[term] = whole
    return found


_words = st.text(alphabet=st.sampled_from(list("ab_1é")), min_size=1, max_size=3)


@settings(max_examples=800, deadline=None)
@given(
    st.text(alphabet=st.sampled_from(list("ab_1é .\n-")), max_size=300),
    st.lists(_words, min_size=1, max_size=24, unique=True),
    st.integers(min_value=1, max_value=40),
)
def test_query_word_hits_are_their_definition(text: str, terms: list[str], limit: int) -> None:
    """Whole-word hits of each query word, with a word found more than ``limit`` times left out,
    whether the search tells a frequent base by counting first, by stopping past the limit (then
    one scan in C counts the whole words), or (a query of more than 16 words) from one pass over
    the text's words."""
    assert hits(text, terms, limit) == _hits_by_definition(text, terms, limit)


# Query words long enough to match their inflections, and texts made of them, their bases with
# every ending (and endings that are not one: "y", "ly"), other words and separators.
_long_words = st.text(alphabet=st.sampled_from(list("abé_1")), min_size=2, max_size=5).map(
    lambda stem: stem + "ab"
) | st.sampled_from(["played", "dances", "colonies", "stated", "wins", "abab", "ababing"])
_endings = st.sampled_from([*INFLECTIONS, "y", "ly", "ings", "_", "1"])


@settings(max_examples=800, deadline=None)
@given(st.data(), st.lists(_long_words, min_size=1, max_size=24, unique=True), st.integers(1, 40))
def test_inflected_query_word_hits_are_their_definition(data: st.DataObject, terms: list[str],
                                                         limit: int) -> None:
    """A query word of five or more characters also finds its base followed by one of the
    inflections, and nothing else, in both searches (one word at a time, or one pass for a query
    of more than 16 words)."""
    bases = [base_of(term) for term in terms]
    word = st.builds(lambda b, e: b + e, st.sampled_from(bases), _endings) | st.sampled_from(terms) | _words
    parts = data.draw(st.lists(st.tuples(word, st.sampled_from([" ", "\n", "-", ". ", "a", ""])), max_size=60))
    text = "".join(w + sep for w, sep in parts)
    assert hits(text, terms, limit) == _hits_by_definition(text, terms, limit)
    assert hits(text, terms[:3], limit) == _hits_by_definition(text, terms[:3], limit)


# Texts where query words are frequent: a short run of words repeated, after a filler that hides
# them from the text's first eighth or not; the query's words are pieces of the run's words, so
# they occur inside one another ("a", "aa", "aaa" over "aaaa") as often as whole.
_run_words = st.lists(st.text(alphabet=st.sampled_from(list("aaab1")), min_size=1, max_size=16), min_size=1, max_size=4)


@settings(max_examples=300, deadline=None)
@given(st.data(), _run_words, st.integers(30, 200), st.sampled_from(["", "x " * 300]), st.integers(1, 400))
def test_frequent_query_word_hits_are_their_definition(data: st.DataObject, words: list[str], repeats: int,
                                                       filler: str, limit: int) -> None:
    """Query words whose bases occur at nearly every character of the text are found as their
    definition says, whether each is scanned for or one pass over the words finds them all."""
    # Nested: a long word and its pieces "a", "aa", …: their scans would step at nearly every
    # character, so one pass over the words finds them.
    nested = data.draw(st.integers(0, 12))
    words = [*words, "a" * 16] if nested else words
    run = data.draw(st.sampled_from([" ", ". ", "\n", "-"])).join(words) + " "
    text = filler + run * repeats + data.draw(st.sampled_from(["", "a", "ab ab", "aaaa"]))
    pieces = sorted({w[i:j] for w in words for i in range(len(w)) for j in range(i + 1, len(w) + 1)})
    terms = ["a" * k for k in range(1, nested + 1)]
    terms += data.draw(st.lists(st.sampled_from([p for p in pieces if p not in terms]), min_size=0 if nested else 1,
                                max_size=16 - nested, unique=True))  # fmt: skip
    assert hits(text, terms, limit) == _hits_by_definition(text, terms, limit)


def test_words_inside_one_another_are_found_in_one_pass_over_the_words() -> None:
    """Sixteen query words, each inside every word of the text, are found as by their definition
    (by one pass over the words: their scans would take a step at nearly every character)."""
    text = ("a" * 16 + " ") * 400 + "aaaa. a aaa"
    terms = ["a" * k for k in range(16, 0, -1)]
    for limit in (1, 399, 400, 10_000):
        assert hits(text, terms, limit) == _hits_by_definition(text, terms, limit)
    assert list(hits(text, terms, 400)) == ["a" * 16, "aaaa", "aaa", "a"]
    # Each query word whole 50 times: the pass may stop once all are past the limit, not at it.
    every = " ".join("a" * k for k in range(1, 17)) + ". "
    for text in (every * 50, every * 50 + "aa"):
        assert hits(text, terms, 49) == _hits_by_definition(text, terms, 49) == {}
        assert hits(text, terms, 50) == _hits_by_definition(text, terms, 50)
    assert list(hits(every * 50 + "aa", terms, 50)) == [t for t in terms if t != "aa"]


def test_a_query_word_finds_its_inflections_and_no_other_word() -> None:
    text = "He played. The players play; a playful display, replayed."
    assert hits(text, ["played"], 10) == {"played": [text.index("played"), text.index("players"), text.index("play;")]}
    # Its base is "colonie": "colony" is no inflection of it, and a word always finds itself.
    assert hits("colonies and the colony", ["colonies"], 10) == {"colonies": [0]}
    for word in ["colonies", "playing", "stated", "wins", "glasses", "seeds", "ones"]:
        assert hits(f"a {word}.", [word], 5) == {word: [2]}, word
    # Short words match only themselves: "win" is not "wins", nor "wine".
    assert hits("win wins wine", ["win"], 10) == {"win": [0]}


def test_a_frequent_word_is_left_out_however_it_is_spread() -> None:
    """A word past the limit only after the text's first eighth is left out like one that is
    frequent from the start (the count first, or the search stopping past the limit)."""
    late = "x " * 400 + "ab " * 30
    early = "ab " * 30 + "x " * 400
    for text in (late, early):
        assert hits(text, ["ab", "x"], 29) == {}
        assert list(hits(text, ["ab"], 30)) == ["ab"]


_runs = st.lists(st.text(alphabet=st.sampled_from(list("abé1日")), min_size=1, max_size=6), max_size=90)


@settings(max_examples=400, deadline=None)
@given(_runs, st.sampled_from([". ", " "]), st.integers(20, 120), st.integers(8, 60))
def test_a_long_unit_is_cut_into_pieces_and_a_short_one_stays_whole(
    words: list[str], joint: str, max_chars: int, piece_bytes: int
) -> None:
    """Units within max_chars are as without pieces; a longer run is cut at its spaces into
    pieces of about piece_bytes bytes of UTF-8 (as many characters as the run holds for that
    many bytes), covering it; without piece_bytes, into pieces of max_chars as before."""
    text = joint.join(words)
    whole = split_units(text, 10**6)
    starts, ends = split_units(text, max_chars, piece_bytes)
    for s, e in zip(*whole):
        inside = [(a, b) for a, b in zip(starts, ends) if s <= a < e]
        if e - s <= max_chars:
            assert inside == [(s, e)]
            continue
        chars = max(1, min(max_chars, piece_bytes * (e - s) // len(text[s:e].encode())))
        assert all(b - a <= chars for a, b in inside)
        assert inside[0][0] == s and inside[-1][1] == e
        assert all(text[b:c].strip() == "" for (_, b), (c, _) in zip(inside, inside[1:]))
    if text.isascii():  # a byte is a character: pieces of piece_bytes characters
        assert split_units(text, max_chars, max_chars) == split_units(text, max_chars)
