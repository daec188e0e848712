"""recall(): the rendered block fits the budget, every candidate is accounted for."""

from __future__ import annotations

import inspect
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recallpack import (
    BudgetError,
    Candidate,
    LaneError,
    Outcome,
    Packer,
    Reader,
    Reason,
    RecallResult,
    Scope,
    TemplateError,
    count_tokens,
    recall,
)

from .conftest import TOKENIZER_SPECS, make_tokenizer

PLAN = "Q3 Retrieval Plan by Sam (author) observed 2026-07-02\n  Week three targets the reranker ablation."


def corpus(n: int, words: int = 60) -> list[Candidate]:
    """n distinct source candidates of about `words` words each."""
    return [Candidate(text=" ".join(f"doc{i}-word{j}" for j in range(words))) for i in range(n)]


def assert_accounted(result: RecallResult, total: int) -> None:
    report = result.report
    assert report.items_selected + report.items_dropped + report.items_withheld == total
    assert report.candidates == total == len(result.trace)
    assert sum(report.reasons.values()) == total - report.items_selected
    assert [e.rank for e in result.trace] == list(range(total))
    assert sum(e.outcome is Outcome.SELECTED for e in result.trace) == report.items_selected


def test_budget_covers_the_rendered_block() -> None:
    """to_markdown() counts at most max_tokens, header and labels included."""
    result = recall(corpus(50), max_tokens=300)
    rendered = result.to_markdown()
    assert 0 < count_tokens(rendered) <= 300
    assert result.report.tokens_used == count_tokens(rendered)
    # The items alone would have fit more: the header and labels really were charged.
    texts_only = sum(count_tokens(e.text) + 1 for e in result.evidence)
    assert texts_only < result.report.tokens_used


def test_report_counts_add_up_with_every_reason() -> None:
    """Selected + dropped + withheld equals the input, with a reason for each."""
    reader = Reader(id="me", scopes={"org": Scope(name="club")})
    candidates = [
        Candidate(text="kept", scope_ids=("me",)),
        Candidate(text="kept", scope_ids=("me",)),
        Candidate(text="   \n\t"),
        Candidate(text="", modality="image"),
        Candidate(text="stranger", scope_ids=("someone-else",)),
        Candidate(text="a fact", lane="facts"),
        Candidate(text="another fact that is somewhat longer than the first one", lane="facts"),
        Candidate(text="session note", lane="working_memory"),
        *corpus(30),
    ]
    result = recall(candidates, max_tokens=2000, reader=reader, lane_budgets={"derived": 12}, max_items=6)
    reasons = {e.rank: e.reason for e in result.trace}
    assert reasons[1] is Reason.DUPLICATE
    assert reasons[2] is Reason.EMPTY
    assert reasons[3] is Reason.NO_TEXT
    assert reasons[4] is Reason.UNREADABLE and result.trace[4].outcome is Outcome.WITHHELD
    assert reasons[6] is Reason.OVER_LANE_BUDGET
    assert reasons[7] is None  # the session lane goes on after derived is full
    assert result.report.items_withheld == 1
    assert Reason.OVER_ITEM_CAP.value in result.report.reasons
    assert_accounted(result, len(candidates))


def test_trace_keeps_lane_score_and_rank_but_the_block_does_not() -> None:
    """Lane names and scores are in the trace and never in the rendered block."""
    result = recall([Candidate(text="Sam prefers morning study blocks.", lane="profile", score=0.8731)])
    entry = result.trace[0]
    assert (entry.lane, entry.score, entry.rank) == ("profile", 0.8731, 0)
    block = result.to_markdown()
    assert "profile" not in block and "0.8731" not in block and "Derived memory" in block


def test_unreached_candidates_are_dropped_with_the_reason_that_ended_the_walk() -> None:
    """Candidates after the walk ended are in the trace as over_budget, unread."""
    result = recall(corpus(1000), max_tokens=200)
    assert result.trace.reached < 10
    last = result.trace[-1]
    assert last.reason is Reason.OVER_BUDGET and not last.reached and last.rank == 999
    assert_accounted(result, 1000)


def test_lane_provenance_labels() -> None:
    """Six lanes collapse onto three labels."""
    lanes = ["sources", "working_memory", "facts", "profile", "communities", "overview"]
    result = recall([Candidate(text=f"item {lane}", lane=lane) for lane in lanes])
    assert [e.label for e in result.evidence] == ["Source excerpt", "Recent session memory"] + ["Derived memory"] * 4
    assert [e.provenance.value for e in result.evidence] == ["source", "session"] + ["derived"] * 4


def test_reader_names_scopes_and_withholds_unknown_ones() -> None:
    """A reader renders its own id as private, others by name; unknown scopes are withheld."""
    reader = Reader(id="u-1", scopes={"org-9": Scope(name="book-club", description="Neighborhood book club, Kawasaki")})
    result = recall(
        [
            Candidate(text=PLAN, scope_ids=("u-1", "org-9")),
            Candidate(text="not yours", scope_ids=("org-2",)),
            Candidate(text="Sam prefers morning study blocks.", lane="facts", scope_ids=("u-1",)),
        ],
        reader=reader,
    )
    assert [e.scopes for e in result.evidence] == [("private", "book-club"), ("private",)]
    assert [s.name for s in result.shared_scopes] == ["book-club"]
    assert result.report.items_withheld == 1


def test_without_a_reader_scoped_items_are_withheld() -> None:
    """With no reader, an item that carries scopes is withheld (no_reader); unscoped ones show."""
    result = recall([Candidate(text="x", scope_ids=("team-a", "team-b")), Candidate(text="y")])
    assert [e.text for e in result.evidence] == ["y"]
    assert result.trace[0].reason == "no_reader" and result.trace[0].outcome == "withheld"
    assert result.report.items_withheld == 1


def test_the_open_reader_shows_scope_ids_as_given() -> None:
    """Reader.everyone() is the explicit choice to show every item, its scope ids as names."""
    result = recall([Candidate(text="x", scope_ids=("team-a", "team-b"))], reader=Reader.everyone())
    assert result.evidence[0].scopes == ("team-a", "team-b")
    assert "`team-a ∩ team-b`" in result.to_markdown()


def test_resource_uri_needs_both_ids_and_is_percent_encoded() -> None:
    """resource_uri is set only with both artifact ids, each percent-encoded."""
    result = recall(
        [
            Candidate(text="a", artifact_id="art/1", artifact_content_id="rev 2"),
            Candidate(text="b", artifact_id="art-only"),
        ],
        resource_uri_template="mem://{artifact_id}/{artifact_content_id}",
    )
    assert [e.resource_uri for e in result.evidence] == ["mem://art%2F1/rev%202", None]


def test_dedupe_can_be_turned_off() -> None:
    """dedupe=False keeps identical candidates; the same text in other scopes is not a duplicate."""
    same = [Candidate(text="x"), Candidate(text="x"), Candidate(text="x", scope_ids=("s",))]
    reader = Reader(id="s")
    assert len(recall(same, reader=reader).evidence) == 2
    assert len(recall(same, reader=reader, dedupe=False).evidence) == 3


def test_truncate_policy_marks_the_cut() -> None:
    """truncate cuts the first overflow to the room left and reports it."""
    result = recall(corpus(5, words=400), max_tokens=1500, policy="truncate")
    assert result.report.truncated and result.evidence[-1].truncated
    assert [e.truncated for e in result.trace if e.outcome is Outcome.SELECTED][-1]
    assert sum(e.truncated for e in result.trace) == 1
    assert result.evidence[-1].text.endswith("…")
    assert count_tokens(result.to_markdown()) <= 1500


def test_empty_result_renders_nothing() -> None:
    """No evidence renders as the empty string, not an empty scaffold."""
    result = recall([Candidate(text="   ")])
    assert result.to_markdown() == "" and result.report.tokens_used == 0


@pytest.mark.parametrize("spec", TOKENIZER_SPECS)
def test_a_budget_below_the_blocks_fixed_cost_is_refused_naming_the_minimum(spec: str) -> None:
    """max_tokens below header + label + mark is refused when the Packer is built, naming the least."""
    tokenizer = make_tokenizer(spec)
    least = Packer(tokenizer=tokenizer).least_tokens
    assert least > 1
    with pytest.raises(BudgetError, match=rf"max_tokens={least - 1} is below .* use max_tokens={least} or more"):
        Packer(max_tokens=least - 1, tokenizer=tokenizer)
    with pytest.raises(BudgetError, match=f"max_tokens={least} or more"):
        recall(corpus(3), max_tokens=least - 1, tokenizer=tokenizer)
    with pytest.raises(BudgetError, match=f"max_tokens={least} or more"):
        Packer(tokenizer=tokenizer).recall(corpus(3), max_tokens=least - 1)


def test_a_floor_that_cannot_apply_says_why() -> None:
    """A top match whose resource line alone is over the budget: nothing kept, and the report says why."""
    cited = Candidate(text=inspect.getdoc(json) or "", metadata={"source": "docs/" + "deep/" * 80 + "json.txt"})
    result = recall([cited], max_tokens=60)
    assert result.evidence == () and result.report.floor_failed
    assert "Nothing fitted, not even cut" in result.report.summary()
    assert not recall([cited], max_tokens=60, floor=False).report.floor_failed
    assert not recall([cited], max_tokens=400).report.floor_failed


@pytest.mark.parametrize("spec", TOKENIZER_SPECS)
@pytest.mark.parametrize("lane", ["sources", "working_memory", "facts"])
def test_at_the_least_budget_the_floor_keeps_the_top_match(spec: str, lane: str) -> None:
    """At exactly least_tokens, a long real page is kept, cut to one token and marked: never nothing."""
    tokenizer = make_tokenizer(spec)
    packer = Packer(max_tokens=Packer(tokenizer=tokenizer).least_tokens, tokenizer=tokenizer)
    page = Candidate(text="x" + (inspect.getdoc(json) or ""), lane=lane)
    result = packer.recall([page, *corpus(3)])
    assert result.report.items_selected == 1 and result.report.floor_applied
    assert result.evidence[0].text.endswith("…")
    assert tokenizer.count(result.to_markdown()) <= packer.max_tokens


def test_several_megabytes_at_the_head() -> None:
    """A multi-megabyte first candidate is cut by the floor (or dropped without it) within budget."""
    huge = Candidate(text="lorem ipsum dolor sit amet " * 200_000)
    assert recall([huge, *corpus(3)], max_tokens=500, floor=False).evidence == ()
    floored = recall([huge, *corpus(3)], max_tokens=500)
    assert floored.report.floor_applied and len(floored.evidence) == 1
    assert count_tokens(floored.to_markdown()) <= 500
    cut = recall([huge, *corpus(3)], max_tokens=500, policy="truncate")
    assert len(cut.evidence) == 1 and count_tokens(cut.to_markdown()) <= 500
    skipped = recall([huge, *corpus(3)], max_tokens=500, policy="skip")
    assert skipped.evidence and skipped.to_markdown() == recall(corpus(3), max_tokens=500).to_markdown()


def test_lane_budgets_reject_unknown_provenance() -> None:
    """lane_budgets keys must be lanes or provenances, and the error lists both."""
    with pytest.raises(LaneError, match="sources, working_memory, facts.*source, session, derived"):
        recall([], lane_budgets={"fact": 100})
    with pytest.raises(BudgetError, match="lane_budgets"):
        recall([], lane_budgets={"derived": -1})


def test_missing_template_file_is_an_error(tmp_path) -> None:
    """A template path that does not exist names the path."""
    with pytest.raises(TemplateError, match="no such file"):
        recall([], template=tmp_path / "nope.md.j2")


def test_custom_template_is_covered_by_the_budget() -> None:
    """A template passed to recall() is the one the budget is checked against."""
    template = "{% for item in evidence %}### {{ item.label }} ({{ loop.index }})\n{{ item.text }}\n\n{% endfor %}"
    result = recall(corpus(40), max_tokens=400, template=template)
    rendered = result.to_markdown()
    assert rendered.startswith("### Source excerpt (1)")
    assert count_tokens(rendered) <= 400


def test_repr_markdown_is_the_block() -> None:
    """Notebooks display the rendered block."""
    result = recall([Candidate(text="hello")])
    assert result._repr_markdown_() == result.to_markdown()


scoped = st.builds(
    lambda scope_ids, **fields: Candidate(**fields, **({"scope_ids": scope_ids} if scope_ids else {})),
    text=st.text(min_size=0, max_size=200),
    lane=st.sampled_from(["sources", "working_memory", "facts", "communities"]),
    scope_ids=st.lists(st.sampled_from(["me", "org-1", "org-2", "`odd` id"]), max_size=2).map(tuple),
    score=st.none() | st.floats(0, 1),
)  # no scope ids: the field left out (an empty list given is refused)


@pytest.mark.parametrize("spec", TOKENIZER_SPECS)
@pytest.mark.parametrize("policy", ["prefix", "skip", "truncate"])
@settings(max_examples=30, deadline=None)
@given(candidates=st.lists(scoped, max_size=15), budget=st.integers(1, 400), cap=st.none() | st.integers(1, 5))
def test_rendered_block_never_exceeds_the_budget(
    spec: str, policy: str, candidates: list[Candidate], budget: int, cap: int | None
) -> None:
    """Under every tokenizer and policy the block fits, the counts add up, and it is deterministic."""
    tokenizer = make_tokenizer(spec)
    reader = Reader(id="me", scopes={"org-1": Scope(name="one", description="first org")})
    kwargs = dict(max_tokens=budget, policy=policy, tokenizer=tokenizer, reader=reader, max_items=cap)
    if budget < Packer(tokenizer=tokenizer).least_tokens:  # below the block's fixed cost: refused
        with pytest.raises(BudgetError, match="is below the least that holds any evidence"):
            recall(candidates, **kwargs)  # type: ignore[arg-type]
        return
    result = recall(candidates, **kwargs)  # type: ignore[arg-type]
    rendered = result.to_markdown()
    assert tokenizer.count(rendered) <= budget
    assert result.report.tokens_used == tokenizer.count(rendered)
    assert cap is None or len(result.evidence) <= cap
    assert_accounted(result, len(candidates))
    again = recall(candidates, **kwargs)  # type: ignore[arg-type]
    assert again.to_markdown() == rendered and again.report == result.report
    kept = [candidates[rank] for rank in result.selected_ranks]
    if policy == "prefix":
        ranks = list(result.selected_ranks)
        assert ranks == sorted(ranks)
    assert [c.provenance for c in kept] == [e.provenance for e in result.evidence]


def test_join_budgets_the_joined_texts() -> None:
    """join= fits join(kept texts), for hosts that send texts rather than the block."""

    def join(texts):
        return "\n\n".join(texts)

    result = recall(corpus(30), join=join, max_tokens=700)
    joined = join([e.text for e in result.evidence])
    assert 0 < count_tokens(joined) <= 700 == result.report.max_tokens
    assert result.report.tokens_used == count_tokens(joined)
    assert_accounted(result, 30)


def test_enums_print_as_their_values() -> None:
    """Reasons and lanes format as their plain values in f-strings."""
    assert f"{Reason.OVER_BUDGET}/{Outcome.WITHHELD}" == "over_budget/withheld"


def test_a_cut_that_cannot_shrink_enough_takes_no_earlier_item_with_it() -> None:
    """When a template's block is over budget and the cut last item cannot be cut shorter, only
    that item is given back: the whole items before it stay."""
    tripled = "{% for item in evidence %}{{ item.text }} {{ item.text }} {{ item.text }}\n{% endfor %}"
    first = Candidate(text="Alice works at Initech in the payments team.")
    long = Candidate(text="The handbook says many things about expenses. " * 200)
    for budget in (40, 80, 150):
        result = recall([first, long], max_tokens=budget, policy="truncate", template=tripled)
        assert [e.text for e in result.evidence][:1] == [first.text], budget
        assert count_tokens(result.to_markdown()) <= budget == result.report.max_tokens
        assert result.report.items_selected + result.report.items_dropped == 2


def test_the_module_level_settings_cache_holds_under_threads() -> None:
    """Eight threads calling recall() with ever new settings, switching as often as Python lets
    them: the cache's eviction never races into a KeyError, and every result is its own."""
    import sys
    import threading

    errors: list[BaseException] = []
    candidates = [Candidate(text="Alice works at Initech. " * 20)]

    def caller(offset: int) -> None:
        try:
            for i in range(400):
                budget = 100 + offset * 1000 + i  # a new key each call: the cache evicts all along
                result = recall(candidates, max_tokens=budget, tokenizer="chars")
                assert result.report.max_tokens == budget
        except BaseException as exc:  # noqa: BLE001 - reported below, with its type
            errors.append(exc)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=caller, args=(n,)) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert errors == []


def test_scores_are_numbers_of_any_numeric_kind() -> None:
    """An int, a NumPy float or a Decimal (what a database driver returns) is a score, as a float."""
    from decimal import Decimal

    import numpy as np

    for value in (3, np.float32(0.5), np.int64(2), Decimal("0.25")):
        result = recall([Candidate(text="Alice works at Initech.", score=value)])
        assert result.trace[0].score == float(value) and type(result.trace[0].score) is float
