"""policy="passages" under an item cap (max_items, or LangChain's k): the capped items say so."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recallpack import Candidate, recall
from recallpack.testing import stdlib_docs

from .test_recall import assert_accounted

DOCS = [Candidate(text=text[:600], citation=name) for name, text in stdlib_docs()[:8]]
QUESTION = "parse json files"


@settings(max_examples=30, deadline=None)
@given(cap=st.integers(1, 7), budget=st.integers(300, 4000))
def test_documents_past_the_cap_are_over_item_cap_not_over_budget(cap: int, budget: int) -> None:
    """With room for more, every document the cap keeps out is over_item_cap; none is over_budget."""
    uncapped = recall(DOCS, max_tokens=budget, policy="passages", query=QUESTION)
    result = recall(DOCS, max_tokens=budget, max_items=cap, policy="passages", query=QUESTION)
    assert_accounted(result, len(DOCS))
    assert len(result.evidence) <= cap
    if uncapped.report.items_selected > cap:  # the cap, not the budget, is what stops it
        assert len(result.evidence) == cap
        assert result.report.reasons.get("over_item_cap", 0) == len(DOCS) - cap
        assert "over_budget" not in result.report.reasons


def test_a_capped_call_gives_no_warning_to_split_documents(caplog: pytest.LogCaptureFixture) -> None:
    """The fix for a cap is not splitting documents: no WARNING says so."""
    with caplog.at_level(logging.DEBUG, logger="recallpack"):
        result = recall(DOCS, max_tokens=4000, max_items=2, policy="passages", query=QUESTION)
    assert result.report.reasons == {"over_item_cap": len(DOCS) - 2}
    assert result.report.largest_dropped_chars == 0
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_langchain_k_under_the_default_policy_reports_the_cap(caplog: pytest.LogCaptureFixture) -> None:
    """BudgetedRetriever(k=2) over a real BM25 retriever: the rest are over_item_cap, without a WARNING."""
    pytest.importorskip("langchain_community")
    from langchain_community.retrievers import BM25Retriever
    from langchain_core.documents import Document

    from recallpack.adapters import langchain as lc

    docs = [Document(page_content=c.text, metadata={"source": c.citation}) for c in DOCS]
    retriever = lc.BudgetedRetriever(retriever=BM25Retriever.from_documents(docs, k=len(docs)), k=2,
                                     max_tokens=4000)
    with caplog.at_level(logging.DEBUG, logger="recallpack"):
        result = retriever.recall(QUESTION)
    assert result.report.policy == "passages" and len(result.evidence) == 2
    assert result.report.reasons == {"over_item_cap": result.report.candidates - 2}
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
