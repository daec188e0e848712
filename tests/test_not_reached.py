"""The tail the walk never read has a reason of its own: ``not_reached``, not ``over_budget``.

``passages`` reads at most 64 documents (and 256 characters a budget token); the matches past
that are never read, so nothing says they would not have fitted. The report tells the two apart,
its summary says how many were never read and how to reach them, and the old count
(``PackReport.over_budget``) keeps them one more release, with a DeprecationWarning.
"""

from __future__ import annotations

import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recallpack import Candidate, recall
from recallpack.packing.results.result import Reason


def _notes(n: int, words: int = 12) -> list[Candidate]:
    """``n`` short notes, each mentioning Berlin, so every one is a match for the query."""
    return [Candidate(text=f"Note {i}: the office moves to Berlin. " + "more detail " * words) for i in range(n)]


def test_past_the_reach_the_matches_are_not_reached_with_room_left() -> None:
    """100 small matches, a large budget: the 36 past the 64-document reach are not_reached,
    none over_budget, and the budget still has room."""
    result = recall(_notes(100), max_tokens=8000, policy="passages", query="where does the office move")
    report = result.report
    unread = [entry for entry in result.trace if not entry.reached]
    assert len(unread) == report.not_reached == report.reasons["not_reached"] > 0
    assert all(entry.reason is Reason.NOT_REACHED for entry in unread)
    assert "over_budget" not in report.reasons and report.did_not_fit == 0
    assert report.tokens_used < report.max_tokens  # type: ignore[operator]
    assert report.items_selected + report.items_dropped + report.items_withheld == report.candidates
    said = report.summary()
    assert f"{report.not_reached} matches were never read" in said
    assert "pass fewer, larger candidates or pre-filter them" in said


def test_the_old_count_keeps_the_tail_for_one_release_with_a_warning() -> None:
    """``report.over_budget`` still counts what was never read, and says it will stop."""
    report = recall(_notes(100), max_tokens=8000, policy="passages", query="office").report
    with pytest.warns(DeprecationWarning, match="did_not_fit .* not_reached"):
        counted = report.over_budget
    assert counted == report.did_not_fit + report.not_reached == report.not_reached


def test_the_old_count_is_silent_when_everything_was_read() -> None:
    """With no unread tail, ``report.over_budget`` is what did not fit, with no warning."""
    report = recall(_notes(10, words=80), max_tokens=120, policy="skip").report
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert report.over_budget == report.did_not_fit > 0
    assert report.not_reached == 0 and "never read" not in report.summary()


def test_an_item_cap_that_is_full_keeps_its_own_reason_for_the_tail() -> None:
    """When the choice already holds max_items items, the unread tail could not have been kept
    anyway: it is over_item_cap, as before."""
    result = recall(_notes(100), max_tokens=8000, max_items=3, policy="passages", query="office")
    tail = [entry.reason for entry in result.trace if not entry.reached]
    assert tail and set(tail) == {Reason.OVER_ITEM_CAP} and result.report.not_reached == 0


@settings(max_examples=40, deadline=None)
@given(
    count=st.integers(1, 140),
    words=st.integers(0, 60),
    budget=st.integers(60, 6000),
    policy=st.sampled_from(["prefix", "skip", "truncate", "passages"]),
)
def test_not_reached_is_exactly_the_unread_tail(count: int, words: int, budget: int, policy: str) -> None:
    """Under every policy: a candidate is not_reached only when the walk never read it, the
    report's count is the trace's, and the in-order policies (which have no reach) never use it."""
    result = recall(_notes(count, words), max_tokens=budget, policy=policy, query="office Berlin")
    marked = [entry for entry in result.trace if entry.reason is Reason.NOT_REACHED]
    assert all(not entry.reached for entry in marked)
    assert result.report.not_reached == len(marked)
    if policy != "passages":
        assert marked == []
    report = result.report
    assert report.items_selected + report.items_dropped + report.items_withheld == report.candidates
