"""PackReport.summary() names cuts and speaks in tokens; items_cut counts the cut items."""

from __future__ import annotations

import inspect
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from recallpack import Candidate, recall

MANUAL = inspect.getdoc(json) or ""


def test_a_truncated_item_is_named_as_a_cut() -> None:
    """truncate keeps one item cut to fit: the summary says "(1 cut)" next to what was kept."""
    ranked = [Candidate(text="Alice moved to Berlin.", lane="facts"), Candidate(text=MANUAL)]
    report = recall(ranked, max_tokens=300, policy="truncate").report
    assert report.items_cut == 1 and report.truncated
    assert report.summary().startswith("kept 2 of 2 (1 cut) in ")
    assert f"in {report.tokens_used}/300 tokens (cl100k_base, truncate)" in report.summary()


def test_the_floor_cut_is_named_too() -> None:
    """The floor keeps the top match cut: "(1 cut)", and the sentence saying why."""
    report = recall([Candidate(text=MANUAL)], max_tokens=200).report
    summary = report.summary()
    assert summary.startswith("kept 1 of 1 (1 cut) in ") and "cut to fit (head cut)" in summary


def test_nothing_cut_says_nothing_about_cuts() -> None:
    """Whole items only: no cut count in the summary."""
    report = recall([Candidate(text="Alice moved to Berlin.")], max_tokens=300).report
    assert report.items_cut == 0 and "cut" not in report.summary()


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(min_value=1, max_value=400), min_size=1, max_size=6),
    budget=st.integers(min_value=24, max_value=600),
    policy=st.sampled_from(["prefix", "skip", "truncate"]),
)
def test_items_cut_counts_the_truncated_evidence(sizes: list[int], budget: int, policy: str) -> None:
    """items_cut is the number of kept items marked truncated, whatever the policy and sizes."""
    result = recall([Candidate(text="word " * n) for n in sizes], max_tokens=budget, policy=policy)
    assert result.report.items_cut == sum(e.truncated for e in result.evidence)
    assert ("cut)" in result.report.summary()) == bool(result.report.items_cut)
