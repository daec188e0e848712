"""Whatever ``embed=`` returns, a call answers or raises a RecallpackError that names embed."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recallpack import Candidate, ConfigError, RecallpackError, recall
from recallpack.packing.choosing.cuts import cut_focus
from recallpack.packing.tokenizers import get_tokenizer

LONG = [
    Candidate(text="Paris is the capital of France. " * 40 + "The answer is 42. " + "Filler here. " * 40),
    Candidate(text="Lyon is a city in France. " * 30 + "Another answer. " * 5),
]
TEXT = "Alpha is first. Beta is second. Gamma is third. Delta is fourth."

#: Numbers and not-numbers an embedding client could hand back.
ODD = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(10**500), max_value=10**500),
    st.sampled_from([10**400, -(10**400), 10**5000, math.nan, math.inf, -math.inf, 1e308, -1e308]),
    st.sampled_from([Decimal("NaN"), Decimal("sNaN"), Decimal("1e400"), 1j, True]),
    st.text(max_size=3),
    st.none(),
)


@st.composite
def embeddings(draw: st.DrawFn) -> Callable[[list[str]], Any]:
    """An ``embed`` callable (texts -> vectors) that returns odd values: huge ints, NaN and
    infinities, strings, ragged rows, too few or too many rows, or no list at all."""
    values = draw(st.lists(ODD, min_size=1, max_size=6))
    dim = draw(st.integers(min_value=0, max_value=4))
    ragged = draw(st.booleans())
    extra_rows = draw(st.sampled_from([0, 0, 0, -1, 1]))
    whole = draw(st.sampled_from([None, None, None, "rows", 7, "no-rows"]))

    def embed(texts: list[str]) -> Any:
        if whole == "no-rows":
            return None
        if whole is not None:
            return whole
        count = max(0, len(texts) + extra_rows)
        return [
            [values[(i + j) % len(values)] for j in range(dim + (i % 2 if ragged else 0))]
            for i in range(count)
        ]

    return embed


def _answers_or_names_embed(call: Callable[[], object]) -> None:
    try:
        call()
    except RecallpackError as exc:
        assert "embed" in str(exc), str(exc)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(embed=embeddings(), policy=st.sampled_from(["passages", "truncate"]),
       max_tokens=st.sampled_from([30, 60, 200]))
def test_odd_vectors_give_a_result_or_an_error_naming_embed(
    embed: Callable[[list[str]], Any], policy: str, max_tokens: int
) -> None:
    """Any vectors from embed= (huge ints, NaN, inf, strings, wrong lengths): a result, or a
    RecallpackError naming embed, never another exception."""
    _answers_or_names_embed(lambda: recall(LONG, max_tokens=max_tokens, query="answer", policy=policy,
                                           embed=embed))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scores=st.lists(ODD, min_size=0, max_size=6))
def test_odd_similarities_give_a_cut_or_an_error_naming_embed(scores: Sequence[object]) -> None:
    """A similarity function (query, texts -> scores) returning odd scores, or too few or too
    many: a cut, or a RecallpackError naming embed."""
    tok = get_tokenizer("chars")
    _answers_or_names_embed(lambda: cut_focus(TEXT, "q", 6, tok, embed=lambda query, texts: list(scores)))


@pytest.mark.parametrize(
    ("vectors", "said"),
    [
        ([[10**400] * 3], "cannot be used as floats"),
        ([[1.2e154, 1.2e154]], "cannot be used as floats"),  # squares that sum past a float
        ([[math.inf, -math.inf]], None),
        ([[10**5000]], "cannot be used as floats"),
    ],
)
def test_numbers_that_are_no_floats_are_a_config_error_on_embed(vectors: list[list[object]], said: str | None) -> None:
    """Huge ints (the reported OverflowError) and sums that overflow are a ConfigError on the
    field embed that says what to return; infinities that still sum are a result."""
    def embed(texts: list[str]) -> list[list[object]]:
        return [vectors[0] for _ in texts]

    if said is None:
        assert recall(LONG, max_tokens=60, query="answer", embed=embed).evidence
        return
    with pytest.raises(ConfigError, match=said) as caught:
        recall(LONG, max_tokens=60, query="answer", embed=embed)
    assert caught.value.field == "embed" and "finite floats" in str(caught.value)
