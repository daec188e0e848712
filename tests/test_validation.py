"""One validation module: every error names its field, one "did you mean", one translator."""

from __future__ import annotations

import pickle
from collections.abc import Callable

import pytest

from recallpack import Candidate, Packer, Reader, RecallpackError, Scope, recall
from recallpack.allowance import Allowance, Remaining, coerce_receipt, issue_receipt
from recallpack.packing.validation import PositiveInt, did_you_mean, recallpack_error

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
