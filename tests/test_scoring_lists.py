"""Scores held as one list per document rank and raise exactly as the same scores by (document,
unit) do, and a text split by lone newlines has the units of the general line split.

The list path is the one ``passages`` takes when one query term matches most units; the mapping
path is the one it takes otherwise: a choice must not depend on which ran.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from recallpack.packing.choosing.scoring import ranked
from recallpack.packing.reading.units import split_units, units_and_sentences


@st.composite
def _lists(draw: st.DrawFn) -> list[list[float]]:
    sizes = draw(st.lists(st.integers(0, 12), min_size=1, max_size=4))
    value = st.one_of(st.just(0.0), st.sampled_from((0.5, 1.25)), st.floats(1e-300, 50.0))
    return [[draw(value) for _ in range(size)] for size in sizes]


@settings(max_examples=300, deadline=None)
@given(_lists())
def test_lists_rank_and_raise_as_the_mapping_of_the_same_scores(lists: list[list[float]]) -> None:
    """Per-document lists (ties, zeros, empty documents) give the mapping's order and raised floats."""
    units = [(list(range(len(own))), list(range(1, len(own) + 1))) for own in lists]
    by_unit = {(d, u): s for d, own in enumerate(lists) for u, s in enumerate(own) if s}
    order, raised = ranked(lists, units)
    want_order, want_raised = ranked(by_unit, units)
    assert list(order) == list(want_order)
    assert [order[i] for i in range(len(order))] == list(want_order)
    for got, want in zip(raised, want_raised, strict=True):
        assert isinstance(got, list) and isinstance(want, dict)
        assert {u: s for u, s in enumerate(got) if s} == {u: s for u, s in want.items() if s}


# Lines with text at both ends, so that only the breaks between them differ.
_LINE = st.text(st.sampled_from("xy. é\t"), min_size=1, max_size=6).map(str.strip).filter(bool)


@settings(max_examples=300, deadline=None)
@given(st.lists(_LINE, min_size=1, max_size=30), st.sampled_from(("", " ", "\n")))
def test_lone_newlines_split_as_the_general_line_split(lines: list[str], edge: str) -> None:
    """Lines joined by lone newlines (read from their lengths) split as the same lines with a gap do."""
    text = edge + "\n".join(lines) + edge
    # A space before each break sends the text down the general path (which strips it): it moves
    # the units by one character a line, and the units' texts are the same.
    spaced = edge + " \n".join(lines) + edge
    starts, ends, sentences = units_and_sentences(text, 600)
    spaced_starts, spaced_ends = split_units(spaced, 600)
    assert [text[s:e] for s, e in zip(starts, ends)] == [spaced[s:e] for s, e in zip(spaced_starts, spaced_ends)]
    assert (starts, ends) == split_units(text, 600) and sentences == split_units(text, len(text) + 1)[0]
