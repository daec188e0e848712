"""One validation module: every error names its field, one "did you mean", one translator."""

from __future__ import annotations

import pickle
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from recallpack import (
    BudgetError,
    Candidate,
    ConfigError,
    Packer,
    Reader,
    RecallpackError,
    Scope,
    TokenizerError,
    chunk_size_for,
    count_tokens,
    get_tokenizer,
    recall,
    token_windows,
    truncate_to_tokens,
)
from recallpack.allowance import Allowance, Remaining, coerce_receipt, issue_receipt
from recallpack.packing.choosing.cuts import cut_head
from recallpack.packing.fusion import check_rrf_k
from recallpack.packing.validation import PositiveInt, check_count, did_you_mean, is_int, recallpack_error

FIELD_OF_ERROR: list[tuple[Callable[[], object], str]] = [
    (lambda: Packer(max_tokens=0), "max_tokens"),
    (lambda: Packer(max_tokens=10**6), "max_tokens"),
    (lambda: Packer(max_items=True), "max_items"),
    (lambda: Packer(policy="best"), "policy"),
    (lambda: Packer(max_token=5), "max_token"),
    (lambda: Packer().replace(dedupe="yes"), "dedupe"),
    (lambda: Candidate(text=5), "text"),
    (lambda: Candidate(text="x", score="high"), "score"),
    (lambda: Reader(id=5), "id"),
    (lambda: Scope(name="club", descripton="x"), "descripton"),
    (lambda: Allowance(max_blocks=0), "max_blocks"),
    (lambda: Remaining(items=-1, tokens=0, blocks=0), "items"),
    (lambda: issue_receipt("block", items=-2), "items"),
    (lambda: coerce_receipt({"kind": "recallpack.receipt/v2", "items": "3"}), "items"),
]


@pytest.mark.parametrize(("probe", "field"), FIELD_OF_ERROR)
def test_each_error_carries_the_field_it_is_about(probe: Callable[[], object], field: str) -> None:
    """A bad value raises a recallpack error whose ``field`` names the setting or input."""
    with pytest.raises(RecallpackError) as caught:
        probe()
    assert caught.value.field == field, str(caught.value)


def test_an_error_about_one_candidate_carries_its_position() -> None:
    """A malformed candidate mapping in a list is named by its index as well as its field."""
    with pytest.raises(RecallpackError) as caught:
        recall([{"text": "fine"}, {"text": "fine too"}, {"text": 7}])
    assert (caught.value.index, caught.value.field) == (2, "text")
    assert str(caught.value).startswith("candidates[2]")


def test_field_and_index_survive_pickling() -> None:
    """An error sent back from a worker process keeps its field and index."""
    with pytest.raises(RecallpackError) as caught:
        recall([{"text": 7}])
    again = pickle.loads(pickle.dumps(caught.value))
    assert (type(again), str(again), again.field, again.index) == (
        type(caught.value),
        str(caught.value),
        "text",
        0,
    )


def test_did_you_mean_names_the_closest_or_nothing() -> None:
    """The one "did you mean": the closest valid name, None when nothing is close."""
    names = Packer.settings_names()
    assert did_you_mean("polcy", names) == "policy"
    assert did_you_mean("max_token", names) == "max_tokens"
    assert did_you_mean("zzzzzz", names) is None


def test_the_translator_says_every_problem_and_keeps_a_validators_own_error() -> None:
    """recallpack_error names each bad field of one ValidationError, and passes through a
    recallpack error a validator raised, as it is."""
    from pydantic import BaseModel, ConfigDict, ValidationError

    class Two(BaseModel):
        model_config = ConfigDict(extra="forbid")
        a: PositiveInt
        b: PositiveInt

    with pytest.raises(ValidationError) as caught:
        Two(a=0, b="x", c=1)  # type: ignore[arg-type, call-arg]
    error = recallpack_error("Two", caught.value, fields=Two.model_fields)
    text = str(error)
    assert text.startswith("Two: a=0 must be at least 1") and "b='x' must be an int" in text
    assert "c=1 is not a setting" in text and error.field == "a"
    with pytest.raises(RecallpackError) as own:
        Packer(max_tokens=20_000)
    assert "max_tokens_ceiling" in str(own.value) and own.value.field == "max_tokens"


@pytest.mark.parametrize("name", ["unknown_setting", "refuse_unknown", "recallpack_error"])
def test_the_packers_old_validation_names_warn_and_still_work(name: str) -> None:
    """The validation helpers that moved out of packing/packer.py keep working for one release."""
    from recallpack.packing import packer, validation

    with pytest.warns(DeprecationWarning, match=rf"recallpack\.packing\.validation\.{name}"):
        moved = getattr(packer, name)
    assert moved is getattr(validation, name)


#: Each int check the validation module now makes for another module: the call, the error, its
#: exact words (as they were before the checks moved), and the field it carries.
INT_CHECKS: list[tuple[Callable[[], object], type[RecallpackError], str, str]] = [
    (lambda: token_windows("text", 0), BudgetError,
     "max_tokens=0 must be an int of at least 1 (tokens per window)", "max_tokens"),
    (lambda: token_windows("text", 5, True), BudgetError,
     "overlap_tokens=True must be an int of at least 0 (0 means no overlap)", "overlap_tokens"),
    (lambda: chunk_size_for(2048, 0), BudgetError, "items=0 must be an int of at least 1", "items"),
    (lambda: chunk_size_for(2048, 8, lines_per_chunk=2.0), BudgetError,
     "lines_per_chunk=2.0 must be an int of at least 1", "lines_per_chunk"),
    (lambda: truncate_to_tokens("text", -1), BudgetError, "max_tokens=-1 must be an int >= 0", "max_tokens"),
    (lambda: cut_head("text", False, get_tokenizer("chars")), BudgetError,
     "max_tokens=False must be an int >= 0", "max_tokens"),
    (lambda: check_rrf_k("60"), ConfigError, "rrf_k='60' must be an int of at least 1 (60 is usual)", "rrf_k"),
    (lambda: recall([Candidate(text="a")], lane_budgets={"facts": -1}), BudgetError,
     "lane_budgets['facts']=-1 must be an int of at least 0", "lane_budgets"),
    (lambda: Packer().recall_many([[Candidate(text="a")]], workers=1.0), ConfigError,
     "workers=1.0 must be an int of at least 1 (more than 1 forks", "workers"),
    (lambda: count_tokens("text", lambda text: True), TokenizerError,
     "returned True for a text; a tokenizer callable must return a non-negative int", "tokenizer"),
]


@pytest.mark.parametrize(("probe", "error", "words", "field"), INT_CHECKS)
def test_each_int_check_keeps_its_words_and_names_its_field(
    probe: Callable[[], object], error: type[RecallpackError], words: str, field: str
) -> None:
    """A bool, a float, a str or a value out of range is refused with the check's own words and field."""
    with pytest.raises(error) as caught:
        probe()
    assert words in str(caught.value) and caught.value.field == field


@given(st.one_of(st.integers(), st.booleans(), st.floats(), st.text(max_size=3), st.none()), st.integers(-3, 3))
def test_is_int_is_an_int_not_a_bool_at_least_the_minimum(value: object, minimum: int) -> None:
    """is_int takes exactly the ints (never a bool) of at least the minimum, and check_count agrees."""
    expected = type(value) is int and value >= minimum
    assert is_int(value, minimum) is expected
    if expected:
        assert check_count(value, "n", minimum) == value
    else:
        with pytest.raises(BudgetError, match=r"^n=.* must be an int of at least"):
            check_count(value, "n", minimum)
