"""The passages choice (packing/choosing/selection.py) and the growth it shares with the focus cut
(packing/choosing/focus.py): which units of which documents are kept, within what bounds.

The choice keeps no more than its room estimate allows, and the exact count of the block then
holds the budget; the item cap bounds the documents it opens, a lane's budget the units in it;
documents stay in rank order and passages in text order, "…" at every elision. A passage grows
around its seed as :meth:`Focus.grow` grows it (:class:`Growth` names each unit, the caller keeps
it or not) and stops at its goal. Real text nobody here wrote (SQuAD, XQuAD: ``benchmarks/data/``)
and the standard library's docstrings.
"""

from __future__ import annotations

import functools
import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from recallpack import Candidate, Packer, get_tokenizer
from recallpack.packing.candidate import LaneKind, Provenance
from recallpack.packing.choosing.documents import documents_of
from recallpack.packing.choosing.focus import Focus, Growth
from recallpack.packing.choosing.ledger import WalkSettings
from recallpack.packing.choosing.selection import Chooser, Selection, choose
from recallpack.packing.reading.units import MARK, split_units
from recallpack.packing.results.result import DEFAULT_RESOURCE_URI_TEMPLATE, RecallResult
from recallpack.testing import paragraphs
from tests.test_same_bytes import _articles

#: Languages in five scripts: SQuAD's English, and XQUAD's Russian, Chinese, Arabic and Thai.
LANGUAGES = ("squad", "ru", "zh", "ar", "th")
TOK = get_tokenizer("cl100k_base")


@functools.cache
def _corpus() -> dict[str, list[dict[str, Any]]]:
    articles = _articles()
    return {language: articles[language] for language in LANGUAGES}


def _ranked(language: str, a: int, q: int) -> tuple[list[Candidate], str]:
    """One article's paragraphs, then the next article's first five, rotated so the answer's is
    not always first (as tests/test_same_bytes.py ranks them), and one of the questions."""
    articles = _corpus()[language]
    article, after = articles[a % len(articles)], articles[(a + 1) % len(articles)]
    texts = [(article["title"], p["text"]) for p in article["paragraphs"]]
    texts += [(after["title"], p["text"]) for p in after["paragraphs"]][:5]
    questions = [qa["question"] for p in article["paragraphs"] for qa in p["qas"]]
    shift = q % len(texts)
    ranked = texts[shift:] + texts[:shift]
    candidates = [
        Candidate(text=text, lane=LaneKind.FACTS if n % 3 == 1 else LaneKind.SOURCES, metadata={"source": f"{title}#{n}"})
        for n, (title, text) in enumerate(ranked)
    ]
    return candidates, questions[q % len(questions)]


def _shown_in_order(result: RecallResult, candidates: list[Candidate]) -> None:
    """Documents in rank order; each kept text is its kept ranges in text order, with the mark
    wherever text between them (or before the first, after the last) was left out."""
    ranks = list(result.selected_ranks)
    assert ranks == sorted(ranks) and len(set(ranks)) == len(ranks)
    for rank, evidence in zip(ranks, result.evidence):
        original, entry = candidates[rank].text, result.trace[rank]
        spans = list(entry.kept_spans) or [(0, len(original))]
        assert evidence.truncated == bool(entry.kept_spans)
        assert all(s < e for s, e in spans)
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:])), "passages in text order"
        at, previous = 0, 0
        for start, end in spans:
            if original[previous:start].strip():
                assert evidence.text.startswith(MARK, at), f"no mark where {start - previous} chars were left out"
                at += len(MARK)
            assert evidence.text.startswith(original[start:end], at)
            at, previous = at + end - start, end
        if original[previous:].strip():
            assert evidence.text.startswith(MARK, at)
            at += len(MARK)
        assert at == len(evidence.text)


@settings(max_examples=100, deadline=None)
@given(
    language=st.sampled_from(LANGUAGES),
    a=st.integers(min_value=0, max_value=11),
    q=st.integers(min_value=0, max_value=30),
    budget=st.integers(min_value=64, max_value=2500),
    max_items=st.none() | st.integers(min_value=1, max_value=6),
)
def test_the_budget_and_the_item_cap_hold_and_passages_stay_in_order(
    language: str, a: int, q: int, budget: int, max_items: int | None
) -> None:
    """Real documents in five scripts, any budget and cap: the exact count of the block is within
    the budget and is what the report says, at most max_items documents are kept, documents in
    rank order, passages in text order with "…" at every elision."""
    candidates, question = _ranked(language, a, q)
    packer = Packer(max_tokens=budget, max_items=max_items, policy="passages")
    result = packer.recall(candidates, query=question)
    report = result.report
    assert report.policy == "passages" and report.items_selected >= 1
    assert packer.tokenizer_used.count(result.to_markdown()) == report.tokens_used <= budget
    assert max_items is None or report.items_selected <= max_items
    assert report.items_selected + report.items_dropped == len(candidates)
    _shown_in_order(result, candidates)


@settings(max_examples=60, deadline=None)
@given(
    language=st.sampled_from(LANGUAGES),
    a=st.integers(min_value=0, max_value=11),
    facts=st.integers(min_value=20, max_value=400),
    sources=st.integers(min_value=20, max_value=800),
)
def test_a_lanes_budget_holds_for_the_passages_kept_in_it(language: str, a: int, facts: int, sources: int) -> None:
    """Lane budgets under passages: the kept items of each lane cost at most its budget, the
    whole within max_tokens."""
    candidates, question = _ranked(language, a, 0)
    result = Packer(max_tokens=1500, policy="passages", lane_budgets={"facts": facts, "sources": sources}).recall(
        candidates, query=question
    )
    spent = {LaneKind.FACTS: 0, LaneKind.SOURCES: 0}
    for rank, evidence in zip(result.selected_ranks, result.evidence):
        spent[candidates[rank].lane] += evidence.token_count
    assert spent[LaneKind.FACTS] <= facts and spent[LaneKind.SOURCES] <= sources
    assert result.report.tokens_used <= 1500
    _shown_in_order(result, candidates)


# --- the choice itself: within its room estimate ------------------------------------------------


def _settings(max_tokens: int, max_items: int | None, lanes: dict[LaneKind | Provenance, int]) -> WalkSettings:
    return WalkSettings(
        max_tokens=max_tokens, max_items=max_items, policy="passages", floor=True, reader=None,
        lane_budgets=lanes, dedupe=True, resource_uri_template=DEFAULT_RESOURCE_URI_TEMPLATE,
        citation_keys=("source",), language="auto",
    )


FRAMING = 9  # what the test's items' framing costs (a label and a resource line, about)
HEADER = 14


def _choice(
    language: str, a: int, q: int, budget: int, max_items: int | None, lanes: dict[LaneKind | Provenance, int]
) -> Selection:
    candidates, question = _ranked(language, a, q)
    documents, apart = documents_of(list(enumerate(candidates)), lambda c: None, {})
    assert not apart
    s = _settings(budget, max_items, lanes)
    lane_keys: list[list[LaneKind | Provenance]] = [
        [doc.candidate.lane] if doc.candidate.lane in lanes else [] for doc in documents
    ]
    return choose(documents, question, None, Chooser(s, TOK, lambda c: FRAMING, lane_keys, HEADER, None))


@settings(max_examples=100, deadline=None)
@given(
    language=st.sampled_from(LANGUAGES),
    a=st.integers(min_value=0, max_value=11),
    q=st.integers(min_value=0, max_value=30),
    budget=st.integers(min_value=40, max_value=3000),
    max_items=st.none() | st.integers(min_value=1, max_value=5),
    facts=st.none() | st.integers(min_value=1, max_value=300),
)
def test_the_choice_keeps_no_more_than_its_room_estimate_allows(
    language: str, a: int, q: int, budget: int, max_items: int | None, facts: int | None
) -> None:
    """What the choice estimates it keeps (the header, each opened document's framing and kept
    units) is within its room, at most max_items documents are opened, and each lane's share is
    within its budget."""
    lanes: dict[LaneKind | Provenance, int] = {} if facts is None else {LaneKind.FACTS: facts}
    selection = _choice(language, a, q, budget, max_items, lanes)
    assert selection.room <= budget
    opened = [d for d, cut in enumerate(selection.cuts) if cut.kept]
    estimate = HEADER + sum(selection.cuts[d].total + FRAMING for d in opened)
    assert selection.used == estimate <= max(selection.room, HEADER)
    assert selection.opened == len(opened)
    assert max_items is None or len(opened) <= max_items
    for d in opened:  # the running total is the estimate of what is kept, not a drift from it
        cut = selection.cuts[d]
        assert cut.total == cut.estimate(sorted(cut.kept))
    if facts is not None:
        in_facts = [d for d in opened if selection.documents[d].candidate.lane is LaneKind.FACTS]
        assert sum(selection.cuts[d].total + FRAMING for d in in_facts) <= facts


def test_giving_back_frees_what_was_added_last_first() -> None:
    """Selection.give_back drops the last added units first, and what it frees comes off the
    estimate exactly (the room then holds what is left)."""
    selection = _choice("squad", 2, 0, 800, None, {})
    order = list(selection.order)
    assert len(order) > 4
    before = selection.used
    assert selection.give_back(60)
    kept_order = selection.order
    assert kept_order == order[: len(kept_order)] and len(kept_order) < len(order)
    opened = [d for d, cut in enumerate(selection.cuts) if cut.kept]
    assert selection.used == HEADER + sum(selection.cuts[d].total + FRAMING for d in opened) <= before - 60


# --- growth: the same units as Focus.grow, and it stops at the goal -------------------------------


def _texts() -> list[str]:
    """Long real texts: English docstrings, and XQUAD articles in four other scripts."""
    english = [text for _, text in paragraphs() if len(text) > 1500][:6]
    others = ["\n\n".join(p["text"] for p in _corpus()[lang][0]["paragraphs"][:4]) for lang in LANGUAGES[1:]]
    return english + others


def _focus(text: str, room: int, rate: float | None) -> Focus:
    starts, ends = split_units(text, 200)
    return Focus(text, starts, ends, room, TOK, tokens_per_char=rate)


@settings(max_examples=150, deadline=None)
@given(
    t=st.integers(min_value=0, max_value=9),
    seed_at=st.floats(min_value=0, max_value=1, exclude_max=True),
    goal=st.integers(min_value=1, max_value=600) | st.just(float("inf")),
    room=st.integers(min_value=30, max_value=900),
    rate=st.none() | st.floats(min_value=0.1, max_value=1.5),
    score_seed=st.integers(min_value=0, max_value=2**16),
)
def test_growth_driven_by_hand_keeps_exactly_what_focus_grow_keeps_and_stops_at_the_goal(
    t: int, seed_at: float, goal: float, room: int, rate: float | None, score_seed: int
) -> None:
    """Growth named unit by unit, kept by Focus.try_add, grows the same units in the same order
    as Focus.grow; the run is one run around the seed, and it stops as soon as it costs the
    goal (or neither side fits)."""
    texts = _texts()
    text = texts[t % len(texts)]
    by_grow, by_hand = _focus(text, room, rate), _focus(text, room, rate)
    units = len(by_grow.starts)
    seed = int(seed_at * units)
    rng = random.Random(score_seed)
    scores = {u: rng.random() for u in range(units) if rng.random() < 0.5}
    if not (by_grow.try_add(seed) and by_hand.try_add(seed)):
        return  # the seed alone is over the room: nothing grows
    by_grow.grow(seed, scores, goal)
    growth = Growth(by_hand, seed, scores, goal)
    named: list[int] = []
    while (unit := growth.next()) is not None:
        named.append(unit)
        growth.tried(by_hand.try_add(unit))
    assert by_hand.order == by_grow.order and by_hand.kept == by_grow.kept
    assert by_hand.total == by_grow.total <= room
    kept = sorted(by_hand.kept)
    assert kept == list(range(kept[0], kept[-1] + 1)) and seed in kept, "one run around the seed"
    assert set(named) >= set(kept) - {seed}
    tokens = sum(by_hand.unit_cost(u) for u in kept)
    if len(kept) > 1:  # it stopped at the goal: without the unit added last, it was short of it
        assert tokens - by_hand.unit_cost(by_hand.order[-1]) < goal
    if tokens < goal:  # short of the goal: neither side could take its next unit
        lo, hi = kept[0], kept[-1]
        for side in (lo - 1, hi + 1):
            if 0 <= side < units:
                assert by_hand.total + by_hand.added_cost(side) > room or by_hand.unit_cost(side) > room


def test_growth_takes_the_better_scoring_side_first() -> None:
    """With room for one more unit, the neighbour with the higher score is the one kept."""
    text = _texts()[0]
    for better in (-1, 1):
        focus = _focus(text, 10_000, None)
        seed = len(focus.starts) // 2
        focus.try_add(seed)
        goal = focus.unit_cost(seed) + 1  # one more unit reaches it
        focus.grow(seed, {seed + better: 1.0, seed - better: 0.5}, goal)
        assert sorted(focus.kept) == sorted({seed, seed + better})
