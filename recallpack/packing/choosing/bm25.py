"""BM25 over a text's units: the one lexical score, for the focus cut and ``passages`` alike.

A text is split into units (sentences and lines, :func:`~recallpack.packing.reading.units.split_units`);
the query's terms are found in it by the call's :class:`~recallpack.packing.reading.analysis.Reading`,
and each unit that holds one is scored. Unit length is measured in characters, which normalises
the same way words would. Nothing is tokenized: the terms are found in time linear in the text,
a term found more often than there are units is left out (it tells no unit from another), and a
unit's count of a term is made in C, by bisecting the positions of the term's matches.

>>> from recallpack.packing.reading.analysis import Reading
>>> text = "The crates were packed. Nothing else. They shipped."
>>> scores = unit_scores(Reading("en"), text, [0, 24, 38], [23, 37, 51], "packing shipments")
>>> {unit: round(score, 2) for unit, score in scores.items()}  # "packed" matches "packing"
{0: 0.84}
"""

from __future__ import annotations

import functools
import itertools
import math
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Sequence
from operator import le, lt, sub

from recallpack.packing.reading.analysis import Reading, fold

__all__ = ["K1", "B", "unit_scores", "scored_units"]

K1 = 1.2
B = 0.75


def unit_scores(
    reading: Reading, text: str, starts: Sequence[int], ends: Sequence[int], query: str
) -> dict[int, float]:
    """BM25 of each unit of ``text`` (by index; ``starts[i]:ends[i]``) that holds a term of
    ``query`` as ``reading`` reads both; the others score zero and are left out."""
    scores = scored_units(reading, text, starts, ends, query)
    if isinstance(scores, list):
        return dict(zip(itertools.compress(range(len(scores)), scores), filter(None, scores)))
    return scores


def scored_units(
    reading: Reading, text: str, starts: Sequence[int], ends: Sequence[int], query: str
) -> dict[int, float] | list[float]:
    """:func:`unit_scores`, or, when one term of the query is found and in at least one unit
    in :data:`_DENSE_SHARE`, every unit's score as one list (0.0 where none): the same floats,
    worked out a whole list at a time, with no Python object per unit but the score."""
    n = len(starts)
    if not n:
        return {}
    terms = reading.terms(query)
    if not terms:
        return {}
    by_term = reading.hits(fold(text), terms, n)
    if not by_term:
        return {}
    average = max(1.0, (sum(ends) - sum(starts)) / n)
    if len(by_term) == 1:
        (found,) = by_term.values()
        if len(found) * _DENSE_SHARE >= n:
            dense = _dense_scores(sorted(found), starts, ends, average)
            if dense is not None:
                return dense
    # Each hit's unit: a hit is in the unit it starts in (a word never spans two units: they
    # split at spaces and line breaks; a pair of characters may, and counts where it starts).
    where = functools.partial(bisect_right, starts)
    norms: list[float] | None = None
    scores: dict[int, float] = {}
    for found in by_term.values():
        tf = Counter(map(where, found))  # unit + 1 -> occurrences
        idf = _idf(n, len(tf))
        # One comprehension a term (a text whose every unit matches has a score per unit); the
        # same float operations, in the same order, as a sum over the terms must be.
        if len(tf) * _DENSE_SHARE < n:
            term = {
                after - 1: idf * count * _K1_PLUS_1
                / (count + K1 * (1.0 - B + B * (ends[after - 1] - starts[after - 1]) / average))
                for after, count in tf.items()
            }
        else:  # most units: each unit's length term is worked out once, by distinct length
            norms = norms or _norms(starts, ends, average)
            term = {
                after - 1: idf * count * _K1_PLUS_1 / (count + norms[after]) for after, count in tf.items()
            }
        if not scores:
            scores = term  # 0.0 + a positive score is that score
            continue
        for unit, score in term.items():
            scores[unit] = scores.get(unit, 0.0) + score
    return scores


def _idf(n: int, matched: int) -> float:
    return math.log(1.0 + (n - matched + 0.5) / (matched + 0.5))


def _dense_scores(found: list[int], starts: Sequence[int], ends: Sequence[int],
                  average: float) -> list[float] | None:
    """Every unit's score for one term found at ``found`` (in order), by whole lists: each
    unit's count is the hits before the next unit's start less those before its own (one
    bisection a unit, in C); None when a hit lies before the first unit (it is scored by the
    unit-by-unit path, as it always was)."""
    if found[0] < starts[0]:
        return None
    if len(found) == len(starts) and all(map(le, starts, found)) and all(map(lt, found, starts[1:])):
        # Each unit holds the term once (a line a match): its score is its length's, once a
        # length, by the unit-by-unit path's float operations.
        idf = _idf(len(starts), len(starts))
        lengths = list(map(sub, ends, starts))
        by_length = {
            length: idf * 1 * _K1_PLUS_1 / (1 + K1 * (1.0 - B + B * length / average))
            for length in set(lengths)
        }
        return list(map(by_length.__getitem__, lengths))
    norms = _norms(starts, ends, average)
    before = list(map(functools.partial(bisect_left, found), starts))
    counts = list(map(sub, [*before[1:], len(found)], before))
    idf = _idf(len(starts), len(counts) - counts.count(0))
    # The very float operations of the unit-by-unit path; a unit without the term scores 0.0.
    return [
        idf * count * _K1_PLUS_1 / (count + norm) if count else 0.0
        for count, norm in zip(counts, itertools.islice(norms, 1, None))
    ]


_K1_PLUS_1 = K1 + 1.0
#: A term that matches at least one unit in this many is scored with its units' norms at hand.
_DENSE_SHARE = 4


def _norms(starts: Sequence[int], ends: Sequence[int], average: float) -> list[float]:
    """Each unit's ``K1 * (1 - B + B * length / average)``, at its index + 1 (as ``bisect_right``
    finds it), computed once a distinct length (the same float operations as a unit's own)."""
    lengths = list(map(sub, ends, starts))
    by_length = {length: K1 * (1.0 - B + B * length / average) for length in set(lengths)}
    return [0.0, *map(by_length.__getitem__, lengths)]
