"""Policies are one table: a policy is one object with one method, registered by name, and the
``policy`` setting, the command line's ``--policy`` and its help are read from the table.

A toy policy is registered here, from a test module, and packs through every entry point that
takes a policy's name: that is all a new policy needs besides its own module (and, for a
built-in, one line in ``BUILT_IN``).
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from recallpack import POLICIES, Candidate, ConfigError, Packer, PolicyError, Reader, Scope, recall
from recallpack.cli import main
from recallpack.packing.choosing.door import PolicyView
from recallpack.packing.choosing.embedding import EmbedFn
from recallpack.packing.choosing.policies import (
    BUILT_IN,
    check_policy,
    policy_help,
    policy_names,
    register_policy,
    unregister_policy,
)
from recallpack.packing.decisions import Decision, End, Keep
from recallpack.packing.results.result import Reason
from recallpack.testing import paragraphs
from tests.conftest import policy_registered


class HalfBudget:
    """Keep candidates in order while half the budget lasts (a toy: headroom for an answer)."""

    summary = "keeps items in order while half the budget lasts"
    needs_query = False

    def choose(self, view: PolicyView, query: str | None, embed: EmbedFn | None) -> Iterator[Decision]:
        max_tokens = view.tokens_left
        half = None if max_tokens is None else max_tokens // 2
        spent = 0
        for rank in range(len(view)):
            if view.candidate(rank) is None:  # the door records the gate's reason
                continue
            cost = view.measure(rank) or 0
            if half is not None and spent + cost > half:
                yield End(Reason.OVER_BUDGET, rank)
                return
            spent += cost
            yield Keep(rank)


@pytest.fixture
def half_budget() -> Iterator[str]:
    with policy_registered("half_budget", HalfBudget()) as name:
        yield name


def _candidates(n: int = 12) -> list[Candidate]:
    return [Candidate(text=text, metadata={"source": module}) for module, text in paragraphs()[:n]]


def test_the_built_in_table_is_the_policies_the_setting_names() -> None:
    """POLICIES, the setting's choices and the table are one list, in one order."""
    assert POLICIES == tuple(BUILT_IN) == ("prefix", "skip", "truncate", "passages")
    assert policy_names() == POLICIES
    for name in POLICIES:
        assert Packer(policy=name).policy == name


def test_a_registered_policy_packs_through_recall_and_the_packer(half_budget: str) -> None:
    """A toy policy registered from a test module is taken by name, keeps what it chooses, and
    every candidate is still accounted for, with the floor and the exact fit the walk's."""
    candidates = _candidates()
    result = recall(candidates, max_tokens=400, policy=half_budget)
    assert result.report.policy == half_budget
    assert 0 < result.report.tokens_used <= 200
    report = result.report
    assert report.items_selected + report.items_dropped + report.items_withheld == len(candidates)
    prefix = recall(candidates, max_tokens=200, policy="prefix")
    assert [e.text for e in result.evidence] == [e.text for e in prefix.evidence]
    # The floor is the walk's, not the policy's: a budget below every item still shows the top one.
    floored = Packer(max_tokens=60, policy=half_budget).recall(candidates)
    assert floored.report.floor_applied and floored.report.items_selected == 1


def test_a_registered_policy_is_a_choice_of_the_command_line(half_budget: str, tmp_path: Path) -> None:
    """``recallpack pack --policy`` takes the registered name, and its help says what it does."""
    lines = tmp_path / "in.jsonl"
    lines.write_text("".join(json.dumps({"text": c.text}) + "\n" for c in _candidates(6)), encoding="utf-8")
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["pack", str(lines), "--policy", half_budget, "--max-tokens", "300", "--format", "json"]) == 0
    assert json.loads(out.getvalue())["report"]["policy"] == half_budget
    assert f"{half_budget}: {HalfBudget.summary}" in policy_help()


def test_an_unregistered_policy_is_gone_everywhere(half_budget: str) -> None:
    """Unregistering takes the name back: the setting refuses it, naming the policies there are."""
    unregister_policy(half_budget)
    with pytest.raises(PolicyError, match="use one of: prefix, skip, truncate, passages$") as caught:
        Packer(policy=half_budget)
    assert caught.value.field == "policy"
    register_policy(half_budget, HalfBudget())  # the fixture unregisters it again


@pytest.mark.parametrize(
    ("name", "policy", "said"),
    [
        ("prefix", HalfBudget(), "built in"),
        ("two words", HalfBudget(), "identifier"),
        ("nothing", object(), "choose.* is not a method; its summary is not a str; its needs_query is not a bool"),
    ],
)
def test_registering_refuses_a_built_in_name_a_bad_name_or_a_non_policy(name: str, policy: object, said: str) -> None:
    """A built-in cannot be replaced, a name must be an identifier, a policy has its three parts."""
    with pytest.raises(ConfigError, match=said):
        register_policy(name, policy)  # type: ignore[arg-type]
    assert policy_names() == POLICIES


def test_check_policy_says_the_field_and_the_choices() -> None:
    """A misspelt policy is a PolicyError on the field ``policy`` listing every choice."""
    with pytest.raises(PolicyError, match="policy='passage' is not a policy; use one of: ") as caught:
        check_policy("passage")
    assert caught.value.field == "policy"
    err = io.StringIO()
    with redirect_stderr(err):
        assert main(["pack", "-", "--policy", "passage"]) == 2
    assert "did you mean passages?" in err.getvalue()


def test_a_registered_policy_admitting_through_the_ledger_keeps_a_duplicates_citation(half_budget: str) -> None:
    """A policy that admits candidates with ``Ledger.admit`` gets the gate's bookkeeping too: a
    duplicate of a kept item is dropped as one, and its citation joins the kept item's."""
    _, text = paragraphs()[3]
    copies = [Candidate(text=text, metadata={"source": f"{name}.txt"}) for name in ("a", "b")]
    result = recall(copies, max_tokens=2000, policy=half_budget)
    assert result.evidence[0].citations == ("a.txt", "b.txt")
    assert result.trace[1].reason is Reason.DUPLICATE and result.trace[1].duplicate_of == 0


class _Keeps(HalfBudget):
    """HalfBudget with its own summary, so that two registrations can be told apart."""

    def __init__(self, summary: str) -> None:
        self.summary = summary


@pytest.mark.parametrize(
    ("part", "value", "said"),
    [
        ("choose", 5, r"choose\(view, query, embed\) is not a method"),
        ("summary", None, "its summary is not a str"),
        ("needs_query", "yes", "its needs_query is not a bool"),
    ],
)
def test_the_shape_is_checked_when_registering(part: str, value: object, said: str) -> None:
    """``choose = 5`` (or a summary that is not a str, a needs_query that is not a bool) is refused
    when registered, as a ConfigError on the field ``policy``, not a TypeError in the first call."""
    policy = _Keeps("keeps")
    setattr(policy, part, value)
    with pytest.raises(ConfigError, match=said) as caught:
        register_policy("misshapen", policy)
    assert caught.value.field == "policy" and "misshapen" not in policy_names()


def test_a_taken_name_is_refused_until_unregistered(half_budget: str) -> None:
    """Registering a name twice is a ConfigError on ``policy`` saying to unregister it first."""
    with pytest.raises(ConfigError, match=r"registered already; unregister_policy\('half_budget'\) first") as caught:
        register_policy(half_budget, HalfBudget())
    assert caught.value.field == "policy"


class _Nothing:
    """Keeps nothing at all: every candidate ends the walk over budget (the floor still shows one)."""

    summary = "keeps nothing"
    needs_query = False

    def choose(self, view: PolicyView, query: str | None, embed: EmbedFn | None) -> list[Decision]:
        return [End(Reason.OVER_BUDGET, 0)]


def test_recall_runs_the_policy_registered_last_under_a_name() -> None:
    """recall() reuses its Packers, yet a name unregistered and registered again runs the new
    policy object, not the one a cached Packer held."""
    candidates = _candidates()
    with policy_registered("swapped", HalfBudget()):
        first = recall(candidates, max_tokens=600, policy="swapped")
    with policy_registered("swapped", _Nothing()):
        second = recall(candidates, max_tokens=600, policy="swapped")
    assert first.report.items_selected > 1
    assert second.report.items_selected <= 1 < first.report.items_selected


class RecordsAWithheldRankAsTooBig:
    """A hostile policy: it ends the walk at rank 0 as over the budget, without looking whether
    the gate shows it, and keeps nothing, so that the floor would reach it."""

    summary = "records a withheld rank as over the budget"
    needs_query = False

    def choose(self, view: PolicyView, query: str | None, embed: EmbedFn | None) -> list[Decision]:
        return [End(Reason.OVER_BUDGET, 0, tokens=10_000)]


@pytest.mark.parametrize("reader", [None, Reader(id="u-1", scopes={"org-1": Scope(name="org 1")})])
def test_the_floor_never_shows_an_item_the_gate_withholds(reader: Reader | None) -> None:
    """The floor reads and gates again what a policy recorded: org-2's text (or, without a reader,
    any scoped text) never reaches the block, and a malformed withheld item raises nothing (it
    did both, through Ledger._floor re-reading candidates[rank])."""
    secret = "org-2's quarterly numbers are confidential."
    hostile = [
        {"text": secret, "scope_ids": ["org-2"], "citation": "org2.md"},
        {"text": 12345, "scope_ids": ["org-2"]},  # malformed, and withheld: never validated
        Candidate(text="An open paragraph anyone may read."),
    ]
    with policy_registered("records_withheld", RecordsAWithheldRankAsTooBig()):
        for candidates in (hostile, [hostile[1], *hostile]):
            result = recall(candidates, max_tokens=200, policy="records_withheld", reader=reader)
            shown = result.to_markdown() + json.dumps(result.to_dict(), default=str)
            assert "quarterly" not in shown and "org2.md" not in shown
            assert not result.report.floor_applied
