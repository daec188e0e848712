"""The ledger (packing/choosing/ledger.py) as a policy sees it: the one record of a walk.

A policy decides; the ledger it is handed records. Whatever a policy does, every candidate it
reaches is recorded once, in rank order, and the report's counts add up; a withheld item is
gated first and nothing of it is read or named; the floor, the give-back and the re-cut keep the
header's scopes those of what is kept; a duplicate's citation joins its kept twin's. Policies are
registered here from the test module (as tests/test_policies.py does) and packed through the
public API; the ledger is used directly only as a policy uses it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recallpack import POLICIES, Candidate, Packer, Reader, Scope, recall
from recallpack.packing.choosing.embedding import EmbedFn
from recallpack.packing.choosing.ledger import Ledger
from recallpack.packing.choosing.policies import register_policy, unregister_policy
from recallpack.packing.errors import RecallpackError
from recallpack.packing.results.result import Outcome, Reason, RecallResult
from recallpack.packing.tokenizers import CallableTokenizer
from recallpack.testing import paragraphs
from tests.conftest import policy_registered, words

QUERY = "parse command line arguments"
READER = Reader(scopes={"team": Scope(name="team"), "ops": Scope(name="ops")})
#: What a policy may do with each candidate it reaches, as a script of the test's.
ACTIONS = ("keep", "drop", "end", "skip_rest")


class Scripted:
    """A toy policy that does what its script says with each candidate (the script is set per
    call): keep it whole whatever it costs, drop it, end the walk at it, or stop before it."""

    summary = "does what the test's script says"
    needs_query = False
    script: tuple[str, ...] = ()

    def choose(self, ledger: Ledger, query: str | None, embed: EmbedFn | None) -> None:
        for rank in range(len(ledger.candidates)):
            action = self.script[rank % len(self.script)] if self.script else "keep"
            if action == "skip_rest":
                ledger.stop(Reason.OVER_ITEM_CAP)
                return
            c = ledger.admit(rank)
            if c is None:
                continue
            if action == "drop":
                ledger.drop(rank, c, Reason.OVER_BUDGET, tokens=1)
            elif action == "end":
                ledger.end(rank, c, Reason.OVER_BUDGET)
                return
            else:  # kept at any cost: the walk gives back what the exact count puts over
                scopes, names, uri = ledger.look(c)
                header = ledger.view.header_delta(ledger, scopes)
                cost = ledger.view.item(ledger, c, names, c.text, uri, None)
                ledger.keep(rank, c, scopes, names, c.text, cost, header, None, uri)


class CutsTheLast:
    """A toy policy that keeps candidates whole while they fit and cuts the next one to the room
    (``Ledger.keep_cut``), reporting no header for it: the walk's exact count then finds it over,
    and re-cuts it or gives it back."""

    summary = "keeps whole while it fits, cuts the next, forgets its header"
    needs_query = False

    def choose(self, ledger: Ledger, query: str | None, embed: EmbedFn | None) -> None:
        for rank in range(len(ledger.candidates)):
            c = ledger.admit(rank)
            if c is None:
                continue
            scopes, names, uri = ledger.look(c)
            header = ledger.view.header_delta(ledger, scopes)
            room, _, _ = ledger.limits(c, header)
            cost = ledger.view.item(ledger, c, names, c.text, uri, None)
            if room is None or cost <= room:
                ledger.keep(rank, c, scopes, names, c.text, cost, header, None, uri)
                continue
            if room + header > 0 and ledger.keep_cut(rank, c, scopes, 0, room + header):
                ledger.stop(Reason.OVER_BUDGET)
                return
            ledger.end(rank, c, Reason.OVER_BUDGET, tokens=cost)
            return


@pytest.fixture
def scripted() -> Iterator[Scripted]:
    policy = Scripted()
    with policy_registered("scripted", policy):
        yield policy


@pytest.fixture
def cuts_the_last() -> Iterator[str]:
    with policy_registered("cuts_the_last", CutsTheLast()) as name:
        yield name


def _candidates(n: int = 24, *, offset: int = 0) -> list[Any]:
    """Real paragraphs, some in scopes (one the reader cannot read), a duplicate, a blank one."""
    out: list[Any] = []
    for i, (module, text) in enumerate(paragraphs()[offset : offset + n]):
        scoped = {1: ["team"], 4: ["secret"], 6: ["ops", "team"]}.get(i % 9)
        fields: dict[str, Any] = {"scope_ids": scoped} if scoped else {}
        out.append(Candidate(text=text, metadata={"source": module}, **fields))
    out.append(out[0].model_copy(update={"metadata": {"source": "copy"}}))
    out.append({"text": "   ", "metadata": {"source": "blank"}})
    return out


def _accounted(result: RecallResult, total: int) -> None:
    """Every candidate once, in rank order, and the report's counts add up."""
    report, trace = result.report, result.trace
    assert len(trace) == total == report.candidates
    assert [e.rank for e in trace] == list(range(total))
    assert report.items_selected + report.items_dropped + report.items_withheld == total
    assert sum(report.reasons.values()) == report.items_dropped + report.items_withheld
    outcomes = [e.outcome for e in trace]
    assert outcomes.count(Outcome.SELECTED) == report.items_selected == len(result.evidence)
    assert outcomes.count(Outcome.WITHHELD) == report.items_withheld
    assert list(result.selected_ranks) == sorted(result.selected_ranks)


def _header_is_what_is_kept(result: RecallResult) -> None:
    """The block's shared scopes are exactly the scopes of the kept items, in first-kept order."""
    kept = list(dict.fromkeys(name for e in result.evidence for name in e.scopes))
    assert [s.name for s in result.shared_scopes] == kept


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    script=st.lists(st.sampled_from(ACTIONS), min_size=1, max_size=6).map(tuple),
    budget=st.integers(min_value=80, max_value=1500),
    offset=st.integers(min_value=0, max_value=300),
)
def test_whatever_a_policy_does_every_candidate_is_recorded_once_and_the_counts_add_up(
    scripted: Scripted, script: tuple[str, ...], budget: int, offset: int
) -> None:
    """Keep, drop, end or stop in any order: each candidate has one trace entry, in rank order,
    selected + dropped + withheld == candidates, and the whole fits with the right header."""
    scripted.script = script
    candidates = _candidates(offset=offset)
    result = Packer(max_tokens=budget, policy="scripted", reader=READER).recall(candidates)
    _accounted(result, len(candidates))
    _header_is_what_is_kept(result)
    assert result.report.tokens_used <= budget
    # The tail after a stop is recorded with the reason that ended the walk, not read.
    if "skip_rest" in script or "end" in script:
        unreached = [e for e in result.trace if not e.reached]
        assert all(e.preview == "" and e.reason is not None for e in unreached)


@pytest.mark.parametrize("policy", POLICIES)
def test_every_built_in_policy_accounts_for_every_candidate(policy: str) -> None:
    """The built-ins record through the same ledger: counts add up at a tight and a loose budget."""
    candidates = _candidates(30)
    for budget in (90, 700):
        result = Packer(max_tokens=budget, policy=policy, reader=READER).recall(candidates, query=QUERY)
        _accounted(result, len(candidates))
        _header_is_what_is_kept(result)


# --- withheld: gated first, never validated, never named ----------------------------------------

MARK = "GARBAGE-7f3a"
#: Scope fields that are not well formed: each withholds its item, whatever else it holds.
MALFORMED_SCOPES: list[Any] = [0, "", [], None, [1], [""], {"team": 1}, ("team", 5), ["\ud800"]]
#: Fields no candidate could be made of.
GARBAGE: dict[str, Any] = {
    "text": 12345, "score": MARK, "lane": MARK, "provenance": [MARK], "metadata": MARK,
    "artifact_id": {MARK: MARK}, "span": MARK,
}


@pytest.mark.parametrize("reader", [None, READER], ids=["no reader", "a reader"])
@pytest.mark.parametrize("policy", [*POLICIES, "scripted"])
@pytest.mark.parametrize("scope_ids", MALFORMED_SCOPES, ids=repr)
def test_a_malformed_candidate_that_is_withheld_never_raises_and_is_never_named(
    scripted: Scripted, policy: str, scope_ids: Any, reader: Reader | None, caplog: pytest.LogCaptureFixture
) -> None:
    """Malformed scope fields withhold a mapping of garbage, whoever reads: no error, and its
    trace entry, the report and the log carry its rank and why, nothing of it (no text, lane or
    score); so does garbage in a scope the reader does not hold."""
    texts = [text for _, text in paragraphs()[:3]]
    candidates: list[Any] = [
        {"text": texts[0]},
        {**GARBAGE, "scope_ids": scope_ids},
        {"text": texts[1]},
        {**GARBAGE, "scope_ids": ["secret"], "text": MARK},  # well formed, but the reader lacks it
        {"text": texts[2]},
    ]
    with caplog.at_level(logging.DEBUG, logger="recallpack"):
        result = Packer(max_tokens=2000, policy=policy, reader=reader).recall(candidates, query=QUERY)
    _accounted(result, len(candidates))
    assert result.report.items_withheld == 2
    assert result.report.reasons[Reason.MALFORMED_SCOPE.value] == 1
    assert result.report.reasons[(Reason.NO_READER if reader is None else Reason.UNREADABLE).value] == 1
    for rank in (1, 3):
        entry = result.trace[rank]
        assert entry.outcome is Outcome.WITHHELD
        assert (entry.preview, entry.lane, entry.score, entry.tokens, entry.kept_spans) == ("", None, None, None, ())
    assert MARK not in result.to_markdown()
    assert MARK not in repr(result.report) + repr(list(result.trace))
    assert not any(MARK in record.getMessage() for record in caplog.records)


def test_the_same_garbage_readable_is_validated_and_named() -> None:
    """The gate is what spares a withheld item: readable, the same garbage is a CandidateError."""
    with pytest.raises(RecallpackError, match=r"^candidates\[1\]") as caught:
        recall([{"text": "fine"}, dict(GARBAGE)], max_tokens=500)
    assert caught.value.index == 1


def test_a_withheld_item_never_counts_against_the_budget_or_takes_the_floor() -> None:
    """A withheld item is passed over for the floor: the top readable match is kept, cut."""
    texts = [text for _, text in paragraphs() if len(text) > 1500][:2]
    candidates = [Candidate(text=texts[0], scope_ids=["secret"]), Candidate(text=texts[1])]
    result = Packer(max_tokens=80, reader=READER).recall(candidates)
    assert result.report.floor_applied
    assert result.selected_ranks == (1,)
    assert result.evidence[0].truncated and texts[1].startswith(result.evidence[0].text.rstrip("…").rstrip())


# --- the floor ----------------------------------------------------------------------------------


class DropsEverything:
    """A toy policy that finds nothing fits whole: it drops every candidate by size."""

    summary = "drops everything as over budget"
    needs_query = False

    def choose(self, ledger: Ledger, query: str | None, embed: EmbedFn | None) -> None:
        for rank in range(len(ledger.candidates)):
            c = ledger.admit(rank)
            if c is not None:
                ledger.drop(rank, c, Reason.OVER_BUDGET, tokens=10**6)


@pytest.fixture
def drops_everything() -> Iterator[str]:
    register_policy("drops_everything", DropsEverything())
    try:
        yield "drops_everything"
    finally:
        unregister_policy("drops_everything")


@pytest.mark.parametrize("budget", [60, 200, 900])
def test_the_floor_is_the_ledgers_a_policy_that_keeps_nothing_still_shows_the_top_match(
    drops_everything: str, budget: int
) -> None:
    """A policy that drops everything by size: the top readable match is kept, cut to the room,
    floor_applied, its entry replaced (selected, cut), and the counts still add up."""
    candidates = _candidates(10)
    result = Packer(max_tokens=budget, policy=drops_everything, reader=READER).recall(candidates)
    _accounted(result, len(candidates))
    report = result.report
    assert report.floor_applied and report.items_selected == 1 and not report.floor_failed
    assert result.selected_ranks == (0,)
    assert result.trace[0].outcome is Outcome.SELECTED and result.trace[0].truncated
    # Every other readable one stays dropped by size (the blank one is dropped as empty).
    assert report.reasons[Reason.OVER_BUDGET.value] == len(candidates) - 1 - report.items_withheld - 1
    assert report.tokens_used <= budget
    assert Packer(max_tokens=budget).tokenizer_used.count(result.to_markdown()) == report.tokens_used


def test_without_the_floor_nothing_that_did_not_fit_is_kept(drops_everything: str) -> None:
    """floor=False: the ledger keeps nothing the policy dropped, and the report says no floor."""
    candidates = _candidates(10)
    result = Packer(max_tokens=200, policy=drops_everything, floor=False, reader=READER).recall(candidates)
    _accounted(result, len(candidates))
    assert result.report.items_selected == 0
    assert not result.report.floor_applied and not result.report.floor_failed
    assert (result.to_markdown(), result.report.tokens_used) == ("", 0)


@pytest.mark.parametrize("policy", POLICIES)
def test_the_floor_under_every_policy_and_not_when_off(policy: str) -> None:
    """A budget below the first item: the floor keeps it cut; with floor=False prefix keeps
    nothing."""
    long = [Candidate(text=text) for _, text in paragraphs() if len(text) > 1200][:3]
    on = Packer(max_tokens=70, policy=policy).recall(long, query=QUERY)
    assert on.report.items_selected == 1 and on.report.tokens_used <= 70
    if policy == "prefix":
        assert on.report.floor_applied and on.selected_ranks == (0,)
        off = Packer(max_tokens=70, policy=policy, floor=False).recall(long, query=QUERY)
        assert off.report.items_selected == 0 and not off.report.floor_applied


# --- give back and re-cut: the header follows what is kept ----------------------------------------


def test_giving_back_the_item_that_added_a_scope_takes_the_scope_out_of_the_header(scripted: Scripted) -> None:
    """Kept at any cost, the last item (the only one in scope 'ops') comes out over: the walk
    gives it back, and 'ops' leaves the header and the block."""
    scripted.script = ("keep",)
    texts = [text for _, text in paragraphs()[:40] if 300 < len(text) < 700][:2]
    first = Candidate(text=texts[0], scope_ids=["team"])
    second = Candidate(text=texts[1], scope_ids=["ops"])
    budget = Packer(max_tokens=2000, reader=READER).recall([first]).report.tokens_used + 5
    result = Packer(max_tokens=budget, policy="scripted", reader=READER).recall([first, second])
    assert result.selected_ranks == (0,)
    assert [s.name for s in result.shared_scopes] == ["team"]
    assert "ops" not in result.to_markdown()
    assert result.trace[1].outcome is Outcome.DROPPED and result.trace[1].reason is Reason.OVER_BUDGET
    assert result.report.tokens_used <= budget


#: A tokenizer whose count of the block is made from the block itself (it is not known to add
#: up across lines): the walk's exact count then sees what a policy priced wrong.
WORDS = CallableTokenizer(words, name="words")


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(budget=st.integers(min_value=40, max_value=600), offset=st.integers(min_value=0, max_value=200))
def test_a_re_cut_or_given_back_last_item_leaves_the_header_right(cuts_the_last: str, budget: int, offset: int) -> None:
    """A cut priced without its header comes out over: re-cut shorter or given back, the block
    fits, its header names exactly the kept items' scopes, and the counts add up."""
    candidates = _candidates(12, offset=offset)
    packer = Packer(max_tokens=budget, policy=cuts_the_last, reader=READER, tokenizer=WORDS)
    result = packer.recall(candidates)
    _accounted(result, len(candidates))
    _header_is_what_is_kept(result)
    assert result.report.tokens_used <= budget
    assert packer.tokenizer_used.count(result.to_markdown()) == result.report.tokens_used


def test_a_cut_scope_item_over_by_its_header_is_re_cut_and_keeps_its_scope(cuts_the_last: str) -> None:
    """The cut item (the only one in 'ops') is over by the header it did not price: the walk
    re-cuts it shorter (Ledger.recut_last) and 'ops' stays in the header, as it is still kept."""
    texts = [text for _, text in paragraphs()[:80] if len(text) > 1200][:2]
    candidates = [Candidate(text=texts[0][:300]), Candidate(text=texts[1], scope_ids=["ops"])]
    packer = Packer(max_tokens=200, policy=cuts_the_last, reader=READER, tokenizer=WORDS)
    result = packer.recall(candidates)
    assert result.selected_ranks == (0, 1) and result.evidence[1].truncated
    assert [s.name for s in result.shared_scopes] == ["ops"]
    assert packer.tokenizer_used.count(result.to_markdown()) == result.report.tokens_used <= 200


def test_a_header_a_policy_priced_wrong_is_still_counted(cuts_the_last: str) -> None:
    """The walk's exact count is of the block shown, not of what the policy said it costs."""
    texts = [text for _, text in paragraphs()[:80] if len(text) > 1200][:2]
    candidates = [Candidate(text=texts[0][:300]), Candidate(text=texts[1], scope_ids=["ops"])]
    packer = Packer(max_tokens=200, policy=cuts_the_last, reader=READER)
    result = packer.recall(candidates)
    assert packer.tokenizer_used.count(result.to_markdown()) == result.report.tokens_used <= 200


# --- duplicates and lanes ---------------------------------------------------------------------------


@pytest.mark.parametrize("policy", [*POLICIES, "scripted"])
def test_a_duplicate_is_dropped_and_its_citation_joins_the_kept_items(scripted: Scripted, policy: str) -> None:
    """Identical texts from three sources: one kept, standing for two duplicates, citing all
    three (its own first); each twin's entry names the kept rank and its own citation."""
    scripted.script = ("keep",)
    _, text = paragraphs()[5]
    candidates = [
        Candidate(text=text, metadata={"source": f"{name}.txt"}) for name in ("a", "b", "c")
    ] + [Candidate(text=paragraphs()[6][1], metadata={"source": "d.txt"})]
    result = Packer(max_tokens=2000, policy=policy).recall(candidates, query=QUERY)
    _accounted(result, len(candidates))
    kept = result.evidence[0]
    assert kept.duplicates == 2 and kept.citations == ("a.txt", "b.txt", "c.txt")
    for rank, source in ((1, "b.txt"), (2, "c.txt")):
        entry = result.trace[rank]
        assert (entry.reason, entry.duplicate_of, entry.citation) == (Reason.DUPLICATE, 0, source)
    assert result.report.reasons[Reason.DUPLICATE.value] == 2


def test_without_dedupe_identical_items_are_each_kept(scripted: Scripted) -> None:
    """dedupe=False: the ledger's gate lets a twin through, and nothing is merged."""
    scripted.script = ("keep",)
    _, text = paragraphs()[5]
    candidates = [Candidate(text=text, metadata={"source": f"{n}.txt"}) for n in "ab"]
    result = Packer(max_tokens=2000, policy="scripted", dedupe=False).recall(candidates)
    assert result.report.items_selected == 2 and result.evidence[0].duplicates == 0


LANES = ("facts", "sources", "working_memory")


@settings(max_examples=30, deadline=None)
@given(
    facts=st.integers(min_value=1, max_value=600),
    session=st.integers(min_value=1, max_value=600),
    policy=st.sampled_from(POLICIES),
)
def test_lane_budgets_hold_per_lane_and_a_closed_lane_stays_closed(facts: int, session: int, policy: str) -> None:
    """Each lane's kept items cost at most its budget; once an item of a lane is dropped for its
    lane, no later item of that lane is kept, while other lanes go on."""
    candidates = [
        Candidate(text=text, lane=LANES[i % 3], metadata={"source": module})
        for i, (module, text) in enumerate(paragraphs()[20:50])
    ]
    budgets = {"facts": facts, "session": session}
    result = Packer(max_tokens=4000, policy=policy, lane_budgets=budgets).recall(candidates, query=QUERY)
    _accounted(result, len(candidates))
    lane_of = {rank: candidates[rank].lane.value for rank in range(len(candidates))}
    spent: dict[str, int] = {}
    for rank, evidence in zip(result.selected_ranks, result.evidence):
        spent[lane_of[rank]] = spent.get(lane_of[rank], 0) + evidence.token_count
    assert spent.get("facts", 0) <= facts
    assert spent.get("working_memory", 0) <= session  # working_memory is the session provenance
    if policy != "passages":  # in order: a closed lane is closed for the rest of the walk
        for lane in ("facts", "working_memory"):
            closed = [e.rank for e in result.trace if e.reason is Reason.OVER_LANE_BUDGET and lane_of[e.rank] == lane]
            if closed:
                assert not [r for r in result.selected_ranks if lane_of[r] == lane and r > closed[0]]


def test_close_lanes_drops_later_items_of_a_full_lane_only() -> None:
    """A facts item too big for its lane closes it: the next small facts item is dropped
    over_lane_budget, a sources item after it is kept."""
    big, small, other = (text for _, text in paragraphs()[:60] if len(text) > 900), "A short fact.", "A source."
    candidates = [
        Candidate(text=next(big), lane="facts"),
        Candidate(text=small, lane="facts"),
        Candidate(text=other, lane="sources"),
    ]
    result = Packer(max_tokens=3000, policy="skip", lane_budgets={"facts": 40}).recall(candidates)
    assert [e.reason for e in result.trace] == [Reason.OVER_LANE_BUDGET, Reason.OVER_LANE_BUDGET, None]
    assert result.selected_ranks == (2,)
