"""pack(): seed 000's walk and its policies, with the invariants over several tokenizers."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from recallpack import BudgetError, Candidate, CandidateError, LaneError, PolicyError, pack

from .conftest import TOKENIZER_SPECS, make_tokenizer

SEED_TABLE = [612, 430, 880, 190, 40]


def sized(tokens: list[int]) -> list[Candidate]:
    """Candidates whose chars-tokenizer cost is exactly the given token counts."""
    return [Candidate(text=chr(ord("a") + i) * (4 * n)) for i, n in enumerate(tokens)]


def test_seed_table_keeps_the_first_three() -> None:
    """612/430/880/190/40 at 2048 keeps the first three; 40 would fit but is not promoted."""
    kept = pack(sized(SEED_TABLE), 2048, tokenizer="chars")
    assert [len(c.text) // 4 for c in kept] == [612, 430, 880]


def test_skip_passes_over_what_does_not_fit() -> None:
    """skip drops the 190 that overflows and keeps the later 40, in order."""
    kept = pack(sized(SEED_TABLE), 2048, tokenizer="chars", policy="skip")
    assert [len(c.text) // 4 for c in kept] == [612, 430, 880, 40]


def test_truncate_cuts_the_first_overflow_and_stops() -> None:
    """truncate cuts the fourth item to the room left, ending in an ellipsis."""
    kept = pack(sized(SEED_TABLE), 2048, tokenizer="chars", policy="truncate")
    assert len(kept) == 4
    assert kept[3].text.endswith("…") and kept[3].text.startswith("d")
    assert sum(len(c.text) // 4 + (len(c.text) % 4 > 0) + 1 for c in kept) <= 2048


def test_max_items_caps_the_count() -> None:
    """max_items stops the walk at that many items."""
    assert len(pack(sized([1, 1, 1, 1]), 100, tokenizer="chars", max_items=2)) == 2


def test_input_may_be_a_generator_or_dicts() -> None:
    """Any iterable works, and mappings are read as candidates."""
    kept = pack(({"text": f"item {i}"} for i in range(5)), 8, tokenizer="chars")
    assert [c.text for c in kept] == ["item 0", "item 1"]


@pytest.mark.parametrize(
    ("value", "message"),
    [(0, "at least 1"), (-5, "at least 1"), (True, "must be an int"), ("2048", "must be an int"), (16385, "ceiling")],
)
def test_bad_max_tokens_names_the_field(value: object, message: str) -> None:
    """Invalid max_tokens raises BudgetError naming the field and the value."""
    with pytest.raises(BudgetError, match=message) as info:
        pack([], value)  # type: ignore[arg-type]
    assert "max_tokens" in str(info.value) and isinstance(info.value, ValueError)


def test_ceiling_can_be_raised_explicitly() -> None:
    """A budget over 16384 works when the caller raises the ceiling too."""
    assert len(pack(sized([5000, 5000, 5000, 5000]), 20010, tokenizer="chars", max_tokens_ceiling=32768)) == 4


@pytest.mark.parametrize("value", [0, -1, 2.5, True])
def test_bad_max_items(value: object) -> None:
    """max_items must be None or a positive int."""
    with pytest.raises(BudgetError, match="max_items"):
        pack([], 10, max_items=value)  # type: ignore[arg-type]


def test_unknown_policy_lists_the_policies() -> None:
    """An unknown policy names prefix, skip and truncate."""
    with pytest.raises(PolicyError, match="prefix, skip, truncate"):
        pack([], 10, policy="greedy")  # type: ignore[arg-type]


def test_text_that_is_not_a_string_names_its_position() -> None:
    """A candidate mapping whose text is an int names its position."""
    with pytest.raises(CandidateError, match=r"candidates\[1\].*text"):
        pack([{"text": "fine"}, {"text": 42}], 100, tokenizer="chars")


def test_unknown_lane_lists_the_lanes() -> None:
    """An unknown lane lists the six lane kinds."""
    with pytest.raises(LaneError, match="sources, working_memory, facts, profile, communities, overview"):
        Candidate(text="x", lane="episodic")


candidate_lists = st.lists(
    st.builds(
        Candidate,
        text=st.text(min_size=1, max_size=120).filter(str.strip),
        lane=st.sampled_from(["sources", "working_memory", "facts", "overview"]),
    ),
    max_size=12,
)


@pytest.mark.parametrize("spec", TOKENIZER_SPECS)
@pytest.mark.parametrize("policy", ["prefix", "skip", "truncate"])
@settings(max_examples=40, deadline=None)
@given(candidates=candidate_lists, budget=st.integers(1, 200))
# 55 tokens with its trailing " \r", in 55: truncate cuts the whitespace alone, and shows no mark.
@example(candidates=[Candidate(text="0:0:0:0:0:0:0:0:0:0\x810\x81\x81ເ𐀀𐀀𐀀𐀀𐀀𐀀 \r")], budget=55)
def test_walk_invariants(spec: str, policy: str, candidates: list[Candidate], budget: int) -> None:
    """Kept items are an in-order subsequence (a prefix for prefix), within the budget,
    deterministic; truncate's last may be the head of an original, with the mark unless what it
    left out is whitespace alone."""
    tokenizer = make_tokenizer(spec)
    kept = pack(candidates, budget, tokenizer=tokenizer, policy=policy)  # type: ignore[arg-type]
    assert sum(tokenizer.count(c.text) + 1 for c in kept) <= budget
    assert kept == pack(candidates, budget, tokenizer=tokenizer, policy=policy)  # type: ignore[arg-type]
    originals = iter(candidates)
    for item in kept:  # a subsequence: each kept item matches a later original, in order
        if policy == "truncate" and item is kept[-1] and item not in candidates:
            head = item.text.removesuffix("…")
            marked = head != item.text
            assert any(o.text.startswith(head) and (marked or not o.text[len(head) :].strip()) for o in candidates)
            continue
        assert any(item == original for original in originals)
    if policy == "prefix":
        assert kept == candidates[: len(kept)]
        assert kept == pack(candidates, budget + 1, tokenizer=tokenizer)[: len(kept)]
