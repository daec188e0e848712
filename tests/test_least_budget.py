"""The least budget counts what the item really renders, and from it upward the floor holds: a
readable match is never answered with nothing, under every policy and tokenizer."""

from __future__ import annotations

import inspect
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recallpack import POLICIES, BudgetError, Candidate, Packer, Reader, Scope

from .conftest import TOKENIZER_SPECS, make_tokenizer
from .test_recall import assert_accounted

READER = Reader(id="me", scopes={"org-1": Scope(name="one", description="the first organisation, " * 3)})
PAGE = inspect.getdoc(json) or ""
WORDS = ["json", "encoder", "decode", "the", "Zoe", "İstanbul", "👩‍👩‍👧", "\n", ". ", "   ", "数据"]
texts = st.one_of(
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=200).map(" ".join),
    st.sampled_from([PAGE, "   \n\n  " + PAGE, "👩‍👩‍👧‍👦" * 4 + PAGE]),
)
candidates = st.builds(
    lambda text, lane, scopes, citation, artifact: Candidate(
        text=text, lane=lane, citation=citation,
        **({"scope_ids": scopes} if scopes else {}),
        **({"artifact_id": artifact, "artifact_content_id": "v2"} if artifact else {}),
    ),
    texts,
    st.sampled_from(["sources", "working_memory", "facts"]),
    st.sampled_from([(), ("me",), ("org-1",), ("me", "org-1"), ("org-9",)]),
    st.none() | st.sampled_from(["docs/json.md", "https://example.org/" + "deep/" * 12 + "page.html"]),
    st.none() | st.sampled_from(["a1", "artifact with spaces/and slashes"]),
)


@pytest.mark.parametrize("spec", TOKENIZER_SPECS)
@pytest.mark.parametrize("policy", POLICIES)
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(items=st.lists(candidates, min_size=1, max_size=5), extra=st.integers(0, 60),
       query=st.sampled_from(["json encoder", "Zoe", "数据 İstanbul"]))
def test_from_the_least_budget_up_a_readable_match_is_never_answered_with_nothing(
    spec: str, policy: str, items: list[Candidate], extra: int, query: str
) -> None:
    """Budgets from the top readable match's least upward: evidence kept, within max_tokens, all accounted."""
    tokenizer = make_tokenizer(spec)
    packer = Packer(tokenizer=tokenizer, policy=policy, reader=READER)
    leasts = [packer.least_tokens_for(c, query=query) for c in items]
    readable = [least for least in leasts if least is not None]
    if not readable:
        assert all(c.scope_ids == ("org-9",) or c.text.isspace() for c in items)
        return
    budget = readable[0] + extra
    assert readable[0] >= packer.least_tokens
    result = packer.recall(items, query=query, max_tokens=budget)
    assert result.evidence, "a readable match answered with nothing"
    assert tokenizer.count(result.to_markdown()) == result.report.tokens_used <= budget
    assert_accounted(result, len(items))
    if extra == 0:  # at exactly the least, the top match alone is kept
        alone = packer.recall([items[leasts.index(readable[0])]], query=query, max_tokens=budget)
        assert alone.report.items_selected == 1 and alone.report.tokens_used <= budget


@pytest.mark.parametrize("policy", POLICIES)
def test_the_least_counts_the_resource_line_citation_and_scopes_header(policy: str) -> None:
    """An item with an artifact URI, a citation or scopes needs more than the bare least; at it, it is kept."""
    packer = Packer(policy=policy, reader=READER)
    bare = packer.least_tokens_for(Candidate(text=PAGE), query="encoder")
    assert bare == packer.least_tokens
    for extra in ({"artifact_id": "a1", "artifact_content_id": "c1"}, {"citation": "docs/json.md"},
                  {"scope_ids": ["org-1"]}):
        item = Candidate(text=PAGE, **extra)
        least = packer.least_tokens_for(item, query="encoder")
        assert least is not None and least > bare
        assert packer.recall([item], query="encoder", max_tokens=least).report.items_selected == 1
        # One token less and the floor cannot hold it: it says so.
        below = packer.recall([item], query="encoder", max_tokens=least - 1).report
        assert below.items_selected == 0 and below.floor_failed


def test_the_least_is_none_for_what_can_never_be_shown() -> None:
    """Withheld, blank, or the floor off: there is no least."""
    packer = Packer(reader=READER)
    assert packer.least_tokens_for(Candidate(text=PAGE, scope_ids=["org-9"])) is None
    assert packer.least_tokens_for({"text": "  "}) is None
    assert Packer(floor=False).least_tokens_for(Candidate(text=PAGE)) is None


def test_below_the_least_the_public_error_says_the_least() -> None:
    """A max_tokens under the block's fixed least is refused, naming it."""
    least = Packer().least_tokens
    with pytest.raises(BudgetError, match=f"use max_tokens={least} or more"):
        Packer(max_tokens=least - 1)
