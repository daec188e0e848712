"""A policy returns decisions; the ledger's door applies and checks them (issue 45).

A hostile policy (random decisions, garbage included) over random scoped candidates, with and
without a Reader: nothing of a withheld item anywhere (block, report, trace, events, logs, the
error's message), never over ``max_items``, a lane's budget or the total, and nothing raised but
a RecallpackError. The same under ``python -O`` (a subprocess; run this file with
``python -O -m pytest`` too). And the rules one at a time, through the public API.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recallpack import Candidate, PolicyError, Reader, Scope, recall
from recallpack.packing.choosing.cuts import Excerpt
from recallpack.packing.choosing.door import PolicyView
from recallpack.packing.choosing.embedding import EmbedFn
from recallpack.packing.choosing.ledger import Ledger
from recallpack.packing.decisions import Cut, Decision, Drop, End, Keep, Merge
from recallpack.packing.errors import RecallpackError
from recallpack.packing.results.result import Outcome, Reason, RecallResult
from tests.conftest import policy_registered

ROOT = Path(__file__).resolve().parents[1]
READER = Reader(id="u-1", scopes={"team": Scope(name="team")})
#: What a withheld item holds: none of it may be shown, said or logged.
SECRET_TEXT, SECRET_ID, SECRET_CITATION = "zebracorn", "artifact-okapi", "narwhal.md"
SECRET_WORDS = (SECRET_TEXT, SECRET_ID, SECRET_CITATION)
WORDS = ("harbour", "ledger", "pumpkin", "gravel", "orchid", "tunnel", "violin", "meadow")


class Scripted:
    """A policy that yields what the test scripted, whatever it is."""

    summary = "yields what the test scripted"
    needs_query = False

    def __init__(self) -> None:
        self.script: list[object] = []

    def choose(self, view: PolicyView, query: str | None, embed: EmbedFn | None) -> Iterator[Any]:
        for decision in self.script:
            if callable(decision):  # decided from what the view shows, as a real policy does
                decision = decision(view)
            yield decision


@pytest.fixture(scope="module")
def scripted() -> Iterator[Scripted]:
    policy = Scripted()
    with policy_registered("scripted_decisions", policy):
        yield policy


def _candidate(i: int, kind: str, words: int) -> Any:
    text = " ".join(WORDS[(i + w) % len(WORDS)] for w in range(words)) + f" item {i}."
    lane = ("sources", "facts")[i % 2]
    if kind == "secret":  # withheld from every reader of the test
        return {"text": f"{SECRET_TEXT} {text}", "scope_ids": ["secret"], "artifact_id": SECRET_ID,
                "citation": SECRET_CITATION, "lane": lane}
    if kind == "malformed":  # withheld and malformed: never validated
        return {"text": 12345, "scope_ids": ["secret"], "citation": SECRET_CITATION}
    if kind == "team":  # readable with the reader, withheld without one
        return Candidate(text=text, scope_ids=("team",), lane=lane, citation=f"team-{i}.md")
    if kind == "blank":
        return {"text": "   ", "lane": lane}
    return Candidate(text=text, lane=lane, citation=f"open-{i}.md")


candidates_st = st.lists(
    st.tuples(st.sampled_from(["open", "open", "team", "secret", "malformed", "blank"]), st.integers(1, 60)),
    min_size=0,
    max_size=10,
).map(lambda kinds: [_candidate(i, kind, words) for i, (kind, words) in enumerate(kinds)])

ranks = st.one_of(st.integers(-2, 12), st.sampled_from([999, True, "1", None, 1.0]))
reasons = st.sampled_from([*Reason, "over_budget", None])
spans = st.one_of(st.just(((0, 3),)), st.just(()), st.just([(0, 3)]), st.just(((0, -1),)), st.just("x"))
excerpts = st.one_of(
    st.none(),
    st.builds(Excerpt, st.sampled_from(["a cut…", "x"]), spans, st.sampled_from(["head", "focus"])),
    st.builds(Excerpt, st.just(12345), st.just(()), st.just("head")),
)
decisions_st = st.one_of(
    st.builds(Keep, ranks, excerpts),
    st.builds(Cut, ranks, st.one_of(st.none(), st.integers(-3, 200), st.just("ten"))),
    st.builds(Drop, ranks, reasons, st.one_of(st.none(), st.integers(-5, 500), st.just("x"))),
    st.builds(Merge, ranks, ranks, spans),
    st.builds(End, reasons, st.one_of(st.none(), ranks)),
    st.sampled_from([5, "keep", None, (1, 2), Keep]),
)
#: "The next one the view shows, kept": a hostile policy that ignores every cap.
keep_next = st.just(lambda view: Keep(view.decided))


def _everything_said(result: RecallResult) -> str:
    event = result.to_event() if hasattr(result, "to_event") else {}
    return "\n".join(
        (
            result.to_markdown(),
            json.dumps(result.to_dict(), default=str),
            json.dumps(event, default=str),
            result.report.summary(),
            repr(result.trace.rows()),
        )
    )


def _held(result: RecallResult, max_tokens: int, max_items: int | None, lanes: dict[str, int]) -> None:
    """Never over the item cap, a lane's budget or the total."""
    report = result.report
    assert report.tokens_used <= max_tokens
    if max_items is not None:
        assert report.items_selected <= max_items
    spent: dict[str, int] = {}
    for entry in result.trace:
        if entry.outcome is Outcome.SELECTED:
            assert entry.lane is not None and entry.tokens is not None
            lane = getattr(entry.lane, "value", entry.lane)
            spent[lane] = spent.get(lane, 0) + entry.tokens
    for lane, budget in lanes.items():
        assert spent.get(lane, 0) <= budget


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    candidates=candidates_st,
    script=st.lists(st.one_of(decisions_st, keep_next), max_size=14),
    reader=st.sampled_from([None, READER]),
    max_tokens=st.integers(60, 400),
    max_items=st.one_of(st.none(), st.integers(1, 3)),
    lanes=st.sampled_from([{}, {"facts": 20}, {"sources": 40, "facts": 30}]),
)
def test_a_hostile_policy_never_shows_a_withheld_item_never_breaks_a_cap_and_raises_only_recallpack_errors(
    scripted: Scripted, caplog: pytest.LogCaptureFixture, candidates: list[Any], script: list[object],
    reader: Reader | None, max_tokens: int, max_items: int | None, lanes: dict[str, int],
) -> None:
    """Random decisions over random scoped candidates: withheld stays unsaid, every cap holds."""
    scripted.script = script
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="recallpack"):
        try:
            result = recall(candidates, max_tokens=max_tokens, max_items=max_items, lane_budgets=lanes,
                            policy="scripted_decisions", reader=reader)
        except RecallpackError as error:
            said = f"{error}\n{error.__cause__}\n{caplog.text}"
            if isinstance(error, PolicyError):
                assert error.policy == "scripted_decisions" and error.rule
        else:
            said = _everything_said(result) + caplog.text
            _held(result, max_tokens, max_items, lanes)
            assert result.report.candidates == len(candidates)
    for word in SECRET_WORDS:
        assert word not in said
    if reader is None:  # without a reader, the team's items are withheld too
        assert "team-" not in said


def _ignores_caps(view: PolicyView) -> Iterator[Decision]:
    for rank in range(len(view)):
        yield Keep(rank)


class KeepsEverything:
    """Keeps every candidate, whatever the caps: the issue's repro (21 items past max_items=2)."""

    summary = "keeps everything"
    needs_query = False

    def choose(self, view: PolicyView, query: str | None, embed: EmbedFn | None) -> Iterator[Decision]:
        return _ignores_caps(view)


def test_a_policy_that_ignores_max_items_and_a_lane_budget_is_held_to_both() -> None:
    """max_items=2 keeps 2 (it kept 21), a 20-token lane holds 20 tokens at most (it held 140)."""
    texts = [Candidate(text=f"Fact {n}: the harbour opens at {n} o'clock.", lane="facts") for n in range(21)]
    with policy_registered("keeps_everything", KeepsEverything()):
        capped = recall(texts, max_tokens=2000, max_items=2, policy="keeps_everything")
        laned = recall(texts, max_tokens=2000, lane_budgets={"facts": 20}, policy="keeps_everything")
    assert capped.report.items_selected == 2
    assert capped.trace[2].reason is Reason.OVER_ITEM_CAP and capped.report.reasons["over_item_cap"] == 19
    assert 0 < sum(e.tokens or 0 for e in laned.trace if e.outcome is Outcome.SELECTED) <= 20
    assert laned.report.reasons.get("over_lane_budget", 0) >= 19


@pytest.mark.parametrize(
    ("script", "rule"),
    [
        ([Keep(0)], "end"),  # stops without End, the gate still showing candidate 1
        ([Keep(0), Keep(0)], "rank order"),
        ([Keep(999)], "rank"),
        ([Keep(0, Excerpt(12345, (), "head"))], "text"),  # type: ignore[arg-type]
        ([5], "decision"),
        ([Drop(0, Reason.UNREADABLE)], "reason"),
        ([Keep(1)], "rank order"),  # candidate 0 skipped
        ([Merge(0, 1)], "merge"),
    ],
)
def test_a_broken_decision_is_a_policy_error_naming_the_rule_and_the_policy(
    scripted: Scripted, script: list[object], rule: str
) -> None:
    """Each mistake the issue lists is a PolicyError (rule, policy, index), never an assert."""
    scripted.script = script
    texts = [Candidate(text="The harbour opens at nine."), Candidate(text="The tunnel closes at six.")]
    with pytest.raises(PolicyError) as caught:
        recall(texts, max_tokens=400, policy="scripted_decisions")
    assert caught.value.rule == rule and caught.value.policy == "scripted_decisions"
    assert "scripted_decisions" in str(caught.value) and caught.value.field == "policy"


def test_what_a_policy_raises_is_a_policy_error_with_its_cause(scripted: Scripted) -> None:
    """A policy's own bug is said as the policy's, with the exception kept as the cause."""
    scripted.script = [lambda view: 1 / 0]
    with pytest.raises(PolicyError, match="choose raised ZeroDivisionError") as caught:
        recall([Candidate(text="The harbour opens at nine.")], max_tokens=400, policy="scripted_decisions")
    assert isinstance(caught.value.__cause__, ZeroDivisionError)


def test_gated_candidates_are_recorded_by_the_door_and_a_withheld_one_stays_withheld(scripted: Scripted) -> None:
    """Candidates the gate stops need no decision; a keep of a withheld one records it withheld."""
    items = [_candidate(0, "secret", 5), _candidate(1, "open", 5), _candidate(2, "blank", 1), _candidate(3, "open", 5)]
    scripted.script = [Keep(0), Keep(1), Keep(3)]
    result = recall(items, max_tokens=400, policy="scripted_decisions")
    assert [e.outcome for e in result.trace] == [Outcome.WITHHELD, Outcome.SELECTED, Outcome.DROPPED, Outcome.SELECTED]
    assert result.trace[2].reason is Reason.EMPTY
    assert SECRET_TEXT not in _everything_said(result)


def test_the_view_shows_what_is_left_and_nothing_of_a_withheld_item(scripted: Scripted) -> None:
    """view.candidate is None for a withheld rank; the budgets left shrink as decisions apply."""
    seen: list[tuple[bool, int | None, int | None]] = []

    def look(view: PolicyView) -> Decision:
        seen.append((view.candidate(view.decided) is None, view.items_left, view.tokens_left))
        return Keep(view.decided)

    scripted.script = [look, look, End(Reason.OVER_BUDGET)]
    items = [Candidate(text="The harbour opens at nine."), _candidate(1, "secret", 4), _candidate(2, "open", 4)]
    recall(items, max_tokens=400, max_items=2, policy="scripted_decisions")
    (hidden0, items0, left0), (hidden1, items1, left1) = seen
    assert (hidden0, hidden1) == (False, True) and (items0, items1) == (2, 1)
    assert left0 == 400 and left1 is not None and left1 < 400


class OldStyle:
    """A policy written for the ledger itself (before 0.2): it ignores max_items."""

    summary = "the old contract"
    needs_query = False

    def choose(self, ledger: Ledger, query: str | None, embed: EmbedFn | None) -> None:
        for rank in range(len(ledger.candidates)):
            c = ledger.admit(rank)
            if c is None:
                continue
            scopes, names, uri = ledger.look(c)
            ledger.keep(rank, c, scopes, names, c.text, 1, 0, None, uri)  # it says it costs 1


def test_an_old_style_policy_still_works_warned_and_is_held_to_the_caps() -> None:
    """The ledger's old methods work one release with a DeprecationWarning, through the door."""
    texts = [Candidate(text=f"Note {n}: the meadow floods in spring.", lane="facts") for n in range(8)]
    with policy_registered("old_style", OldStyle()), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        capped = recall(texts, max_tokens=2000, max_items=3, policy="old_style")
        laned = recall(texts, max_tokens=2000, lane_budgets={"facts": 30}, policy="old_style")
    assert any(issubclass(w.category, DeprecationWarning) and "ledger.keep" in str(w.message) for w in caught)
    assert capped.report.items_selected == 3
    kept_tokens = [e.tokens for e in laned.trace if e.outcome is Outcome.SELECTED]
    assert kept_tokens and all(t is not None and t > 1 for t in kept_tokens)  # priced by the door, not by it
    assert sum(t or 0 for t in kept_tokens) <= 30


_OPTIMIZED = """
from recallpack import Candidate, PolicyError, recall
from recallpack.packing.decisions import Keep
from tests.conftest import policy_registered

class Stops:
    summary, needs_query = "stops without End", False
    def __init__(self, script):
        self.script = script
    def choose(self, view, query, embed):
        return self.script

texts = [Candidate(text="The harbour opens at nine."), Candidate(text="The tunnel closes at six.")]
for script in ([Keep(0)], [Keep(0), Keep(0)], [Keep(999)], [Keep(0), 5]):
    with policy_registered("stops", Stops(script)):
        try:
            recall(texts, max_tokens=400, policy="stops")
        except PolicyError as error:
            print(error.rule)
print("asserts", "on" if __debug__ else "off")
"""


def test_under_python_O_a_broken_policy_is_still_a_policy_error() -> None:
    """With asserts off (python -O), each broken decision is still a PolicyError, not a crash."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-O", "-c", textwrap.dedent(_OPTIMIZED)], capture_output=True, text=True, cwd=ROOT,
        env=env, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n") == ["end", "rank order", "rank", "decision", "asserts off", ""]


class KeepsThenNarrows:
    """Keeps all it can, then, shown the exact count, chooses again: only the first."""

    summary = "keeps all, then only the first"
    needs_query = False

    def __init__(self) -> None:
        self.counts: list[int] = []

    def choose(self, view: PolicyView, query: str | None, embed: EmbedFn | None) -> list[Decision]:
        return [Keep(rank) for rank in range(len(view))]

    def refine(self, view: PolicyView, used: int) -> list[Decision] | None:
        self.counts.append(used)
        return [Keep(0), End(Reason.OVER_BUDGET)] if len(self.counts) == 1 else None


def test_a_registered_policy_refines_its_choice_with_the_exact_count() -> None:
    """refine(view, used) is shown each choice's exact count, and its new choice replaces the last."""
    texts = [Candidate(text=f"Note {n}: the orchid blooms in May.") for n in range(5)]
    policy = KeepsThenNarrows()
    with policy_registered("narrows", policy):
        result = recall(texts, max_tokens=2000, policy="narrows")
    assert result.report.items_selected == 1 and result.trace[1].reason is Reason.OVER_BUDGET
    first, second = policy.counts
    assert second == result.report.tokens_used < first
