"""A price from ``PolicyView.price``: the door keeps an item at the price it made itself, just now,
for that rank and text, and works out again any other (made up, stale, or of another text)."""

from __future__ import annotations

from collections.abc import Iterator

from hypothesis import given, settings
from hypothesis import strategies as st

from recallpack import Candidate, recall
from recallpack.packing.choosing.cuts import Excerpt
from recallpack.packing.choosing.door import PolicyView, Priced
from recallpack.packing.choosing.embedding import EmbedFn
from recallpack.packing.decisions import Decision, End, Keep
from recallpack.packing.results.result import Outcome, Reason
from tests.conftest import policy_registered

WORDS = ("harbour", "ledger", "pumpkin", "gravel", "orchid", "tunnel", "violin", "meadow")


class PricedPrefix:
    """The prefix walk written as any registered policy writes it: priced with the view, kept at
    that price while it fits."""

    summary = "prefix, through view.price"
    needs_query = False

    def choose(self, view: PolicyView, query: str | None, embed: EmbedFn | None) -> Iterator[Decision]:
        for rank in range(len(view)):
            priced = view.price(rank)
            if priced is None:
                yield Keep(rank)  # the gate's reason is recorded, whatever is asked
            elif view.items_left == 0:
                yield End(Reason.OVER_ITEM_CAP, rank)
            elif priced.room is None or priced.cost <= priced.room:
                yield Keep(rank, priced=priced)
            else:
                yield End(Reason.OVER_BUDGET, rank, priced.cost)


class Lying:
    """Hands the door a price it made up (or one of another moment, or another text)."""

    summary = "hands the door prices it did not make"
    needs_query = False

    def __init__(self, how: str) -> None:
        self.how = how

    def choose(self, view: PolicyView, query: str | None, embed: EmbedFn | None) -> Iterator[Decision]:
        if self.how == "forged":  # the real price, one token: a copy, not the door's own
            real = view.price(0)
            assert real is not None
            yield Keep(0, priced=real._replace(cost=1))
        elif self.how == "stale":  # candidate 1 priced before its identical twin 0 was kept
            later = view.price(1)
            yield Keep(0)
            yield Keep(1, priced=later)
        else:  # a price of the whole text handed with an excerpt
            whole = view.price(0)
            yield Keep(0, excerpt=Excerpt("harbour…", ((0, 7),), "head"), priced=whole)


def _texts(lengths: list[int]) -> list[Candidate]:
    return [
        Candidate(text=" ".join(WORDS[(i + w) % len(WORDS)] for w in range(n)) + f" item {i}.")
        for i, n in enumerate(lengths)
    ]


@settings(max_examples=40, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 120), min_size=1, max_size=12),
    max_tokens=st.integers(40, 600),
    max_items=st.one_of(st.none(), st.integers(1, 6)),
)
def test_a_registered_policy_keeping_at_the_views_prices_packs_as_prefix(
    lengths: list[int], max_tokens: int, max_items: int | None
) -> None:
    """Kept at view.price's prices, a policy packs what the built-in prefix packs, item for item."""
    candidates = _texts(lengths)
    with policy_registered("priced_prefix", PricedPrefix()):
        mine = recall(candidates, max_tokens=max_tokens, max_items=max_items, policy="priced_prefix", floor=False)
    built_in = recall(candidates, max_tokens=max_tokens, max_items=max_items, policy="prefix", floor=False)
    assert mine.to_markdown() == built_in.to_markdown()
    assert mine.report.tokens_used == built_in.report.tokens_used
    assert [(e.outcome, e.reason, e.tokens) for e in mine.trace] == [
        (e.outcome, e.reason, e.tokens) for e in built_in.trace
    ]


def test_a_made_up_price_is_worked_out_again_and_the_budget_holds() -> None:
    """A copy of the door's price saying one token is not trusted: the item is dropped at its cost."""
    long = _texts([400])
    with policy_registered("forged_price", Lying("forged")):
        result = recall(long, max_tokens=120, policy="forged_price", floor=False)
    entry = result.trace[0]
    assert result.report.items_selected == 0
    assert entry.reason is Reason.OVER_BUDGET and entry.tokens is not None and entry.tokens > 120


def test_a_price_made_before_its_twin_was_kept_does_not_let_the_duplicate_in() -> None:
    """A price of candidate 1 made before its identical twin 0 was kept: gated again, a duplicate."""
    twins = [Candidate(text="The harbour opens at nine."), Candidate(text="The harbour opens at nine.")]
    with policy_registered("stale_price", Lying("stale")):
        result = recall(twins, max_tokens=500, policy="stale_price")
    assert result.report.items_selected == 1
    assert result.trace[1].outcome is Outcome.DROPPED and result.trace[1].reason is Reason.DUPLICATE


def test_a_price_of_the_whole_text_handed_with_an_excerpt_keeps_the_excerpt() -> None:
    """Keep(excerpt=..., priced=<the whole text's price>) keeps the excerpt, priced as itself."""
    with policy_registered("other_text_price", Lying("excerpt")):
        result = recall(_texts([60]), max_tokens=500, policy="other_text_price")
    assert [e.text for e in result.evidence] == ["harbour…"]
    whole = recall(_texts([60]), max_tokens=500)
    assert result.trace[0].tokens is not None and whole.trace[0].tokens is not None
    assert result.trace[0].tokens < whole.trace[0].tokens


def test_a_price_is_none_for_a_candidate_the_gate_stops() -> None:
    """view.price of a blank candidate is None: nothing of it is priced."""
    seen: list[Priced | None] = []

    class Looks:
        summary, needs_query = "looks", False

        def choose(self, view: PolicyView, query: str | None, embed: EmbedFn | None) -> list[Decision]:
            seen.extend(view.price(rank) for rank in range(len(view)))
            return [Keep(rank) for rank in range(len(view))]

    with policy_registered("looks_at_prices", Looks()):
        recall([Candidate(text="   "), Candidate(text="The harbour opens at nine.")], max_tokens=200,
               policy="looks_at_prices")
    assert seen[0] is None and seen[1] is not None and seen[1].rank == 1 and seen[1].cost > 0
