"""No excerpt begins or ends with a stray terminal beside the mark, in any script.

A terminator that stands alone (" . . . ", "。。", "？！", a piece of text that begins with the
previous sentence's ". ") was a unit of its own: kept alone beside a dropped neighbour it read
".…", dropped alone it cost a mark for one character. Units of terminators alone now join their
neighbour on the line, and :func:`sentence_start` moves a cut range past a sentence's end.
Terminators are Unicode's Sentence_Terminal (every script's), and "…".
"""

from __future__ import annotations

import sys

import regex
from hypothesis import example, given, settings
from hypothesis import strategies as st

from recallpack import Candidate, recall
from recallpack.packing.reading.units import MARK, sentence_start, split_units

#: Every Sentence_Terminal in Unicode ("." "!" "?" "。" "।" "؟" "።" "܀" "᙮" ...), and "…".
TERMINALS = sorted(
    {chr(c) for c in range(sys.maxunicode + 1) if regex.match(r"\p{Sentence_Terminal}", chr(c))} | {"…"}
)
CLOSERS = "\"')]}»”’"
WORDS = ["word", "Wort", "शब्द", "كلمة", "词语", "ቃል", "λέξη", "слово", "คำศัพท์", "3.14", "e.g"]
_TERMINAL = st.sampled_from(TERMINALS)
_PIECE = st.one_of(
    st.sampled_from(WORDS),
    _TERMINAL,
    st.tuples(_TERMINAL, st.sampled_from(CLOSERS)).map("".join),
    st.sampled_from([" ", " ", "  ", "\n", "\n\n", "\t"]),
)
TEXT = st.lists(_PIECE, min_size=1, max_size=40).map("".join)


def _only_terminals(piece: str) -> bool:
    return bool(piece.strip()) and all(c in TERMINALS or c in CLOSERS or c.isspace() for c in piece)


def _lines_of_terminals(text: str) -> set[str]:
    return {line.strip() for line in text.splitlines() if _only_terminals(line)}


@settings(max_examples=500)
@given(TEXT)
def test_a_unit_of_terminals_alone_is_a_whole_line(text: str) -> None:
    """Every unit that is terminators (and closing quotes) alone is the whole of its line."""
    starts, ends = split_units(text, 800)
    lines_alone = _lines_of_terminals(text)
    for start, end in zip(starts, ends):
        unit = text[start:end]
        if _only_terminals(unit):
            assert unit.strip() in lines_alone, (text, unit)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(TEXT.filter(lambda t: MARK not in t), min_size=1, max_size=3),
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=3).map(" ".join),
    st.integers(40, 200),
    st.sampled_from(["passages", "truncate"]),
)
# A unit with no space, cut into pieces for its length, once left its "!" a piece alone.
@example(["wordwordwordशब्दशब्दशब्दशब्दशब्द!"], "word", 40, "passages")
def test_no_kept_piece_beside_a_mark_is_a_stray_terminal(
    texts: list[str], query: str, budget: int, policy: str
) -> None:
    """Texts of every script's terminators cut to a budget: no piece beside a mark is terminators
    alone, unless the text has such a line (then it is that line, kept as written)."""
    result = recall([Candidate(text=t) for t in texts], query=query, max_tokens=budget, policy=policy)
    lines_alone = set().union(*map(_lines_of_terminals, texts))
    for evidence in result.evidence:
        pieces = evidence.text.split(MARK)
        for piece in pieces if len(pieces) > 1 else []:
            if _only_terminals(piece):
                assert all(line.strip() in lines_alone for line in piece.splitlines() if line.strip()), (
                    texts, evidence.text)


@given(TEXT, st.data())
def test_sentence_start_skips_only_a_sentences_end(text: str, data: st.DataObject) -> None:
    """sentence_start moves a range's start over terminators, closing quotes and white space only,
    at once as far as it goes (asked again, it stays), and never past the range's end."""
    start = data.draw(st.integers(0, len(text)))
    end = data.draw(st.integers(start, len(text)))
    moved = sentence_start(text, start, end)
    assert start <= moved <= end
    skipped = text[start:moved]
    assert all(c in TERMINALS or c in CLOSERS or c.isspace() for c in skipped), (text, start, skipped)
    assert sentence_start(text, moved, end) == moved
    if start > 0 and moved < end and text[moved] in TERMINALS:
        # What is left begins with a terminator only where it ends no sentence ("3.14", "...and").
        assert text[moved] in ".!?…" and not text[moved + 1 : moved + 2].isspace() and moved + 1 < end


@given(st.sampled_from([t for t in TERMINALS if t not in ".!?…"]), st.sampled_from(WORDS))
def test_every_other_scripts_terminal_ends_a_sentence_at_a_cut(terminal: str, word: str) -> None:
    """A range cut just before any script's terminator (no space needed after it) begins after it."""
    text = f"{word}{terminal}{word} next"
    assert text[sentence_start(text, len(word), len(text)) :] == f"{word} next"


def test_the_issues_excerpt_begins_with_no_stray_full_stop() -> None:
    """A chunk that begins with the previous sentence's ". ", and a quote elided with ". . .",
    packed tight: no item shows a terminator alone beside the mark."""
    texts = [
        ". The block's shape lives in render.py alone. The walk does work in proportion to what it "
        "keeps. The floor (a match is never answered with nothing) is Walk._floor.",
        'He pleaded guilty and told the court, "I am here to . . . accept the floor of the law." '
        "Then the floor was closed. Nothing else was said about it.",
        "该城市有两所大学。。诺桑比亚大学是新星大学。真的吗？！地板是最低的。",
    ]
    for budget in range(40, 160, 8):
        result = recall([Candidate(text=t) for t in texts], query="how does the floor work", max_tokens=budget)
        for evidence in result.evidence:
            for piece in evidence.text.split(MARK):
                assert not _only_terminals(piece), (budget, evidence.text)
