"""Unit scores are the same floats however they are computed: BM25 and the neighbours' raise,
for texts where few units match (unit by unit) and where most do (by whole lists).

Each expected value is the plain formula, summed in the order the contributions come, written
out here; a fast path that reordered a float addition would differ from it in the last bit.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from recallpack.packing.choosing.bm25 import K1, B, unit_scores
from recallpack.packing.choosing.scoring import NEIGHBOR_SHARE, RANK_PRIOR, combined
from recallpack.packing.reading.analysis import Reading, fold
from recallpack.packing.reading.units import split_units

WORDS = ("crates", "packed", "port", "import", "shipped", "x", "the", "a")


def _raised(scores: dict[tuple[int, int], float], sizes: list[int]) -> list[dict[int, float]]:
    raised: list[dict[int, float]] = [{} for _ in sizes]
    for (d, u), score in scores.items():
        own = raised[d]
        own[u] = own.get(u, 0.0) + score
        if u > 0:
            own[u - 1] = own.get(u - 1, 0.0) + NEIGHBOR_SHARE * score
        if u + 1 < sizes[d]:
            own[u + 1] = own.get(u + 1, 0.0) + NEIGHBOR_SHARE * score
    return raised


@st.composite
def _scores(draw: st.DrawFn) -> tuple[dict[tuple[int, int], float], list[int]]:
    sizes = draw(st.lists(st.integers(0, 12), min_size=1, max_size=4))
    share = draw(st.sampled_from((0.1, 0.5, 1.0)))
    keys = [(d, u) for d, size in enumerate(sizes) for u in range(size) if draw(st.floats(0, 1)) < share]
    keys = draw(st.permutations(keys)) if draw(st.booleans()) else keys
    values = st.one_of(st.just(0.0), st.floats(1e-300, 50.0))
    return {key: draw(values) for key in keys}, sizes


@settings(max_examples=300, deadline=None)
@given(_scores())
def test_combined_raises_in_the_order_the_scores_come(case: tuple[dict[tuple[int, int], float], list[int]]) -> None:
    """Dense or sparse, in unit order or not: each unit's raised score and final score are the formula's floats."""
    scores, sizes = case
    units = [(list(range(size)), list(range(1, size + 1))) for size in sizes]
    best, raised = combined(scores, units)
    expected = _raised(scores, sizes)
    for got, want in zip(raised, expected, strict=True):
        assert {u: s for u, s in got.items() if s} == {u: s for u, s in want.items() if s}
    top = max((max(own.values()) for own in expected if own), default=0.0)
    assert best == ({} if top <= 0 else {
        (d, u): s / top / (1.0 + RANK_PRIOR * d) for d, own in enumerate(expected) for u, s in own.items() if s > 0
    })


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=6), min_size=1, max_size=40),
       st.sampled_from(("\n", ". ", "\n\n")), st.lists(st.sampled_from(WORDS), min_size=1, max_size=3))
def test_bm25_is_the_formula_for_sparse_and_dense_terms(lines: list[list[str]], join: str, query: list[str]) -> None:
    """Whether a query word matches few units or most, each unit's BM25 is the formula's float."""
    text = join.join(" ".join(line) for line in lines)
    starts, ends = split_units(text, 600)
    reading = Reading("en")
    got = unit_scores(reading, text, starts, ends, " ".join(query))
    n = len(starts)
    terms = reading.terms(" ".join(query))
    found = reading.hits(fold(text), terms, n) if terms else {}
    average = max(1.0, (sum(ends) - sum(starts)) / n)
    want: dict[int, float] = {}
    for where in found.values():
        tf = Counter(bisect_right(starts, at) - 1 for at in where)
        idf = math.log(1.0 + (n - len(tf) + 0.5) / (len(tf) + 0.5))
        for unit, count in tf.items():
            norm = K1 * (1.0 - B + B * (ends[unit] - starts[unit]) / average)
            want[unit] = want.get(unit, 0.0) + idf * count * (K1 + 1.0) / (count + norm)
    assert got == want
