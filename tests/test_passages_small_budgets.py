"""``passages`` under one document: when the budget is smaller than the top document, the choice
keeps fewer, longer passages (grown back to their sentence's start), and the room the exact count
leaves goes to the head of the best passage's next unit, as ``prefix``'s focus cut keeps the head
of a sentence it cannot hold whole. Real text: XQuAD's English paragraphs (``benchmarks/data``)."""

from __future__ import annotations

import gzip
import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from recallpack import Candidate, count_tokens, recall

XQUAD = Path(__file__).resolve().parents[1] / "benchmarks" / "data" / "xquad-12-languages-dev-12-articles.json.gz"


@cache
def english() -> list[dict[str, Any]]:
    with gzip.open(XQUAD, "rt", encoding="utf-8") as handle:
        articles: list[dict[str, Any]] = json.load(handle)["languages"]["en"]
    return articles


def asked(question: str) -> tuple[list[Candidate], tuple[str, ...]]:
    """The article's paragraphs, the one that answers ``question`` first (as a retriever ranks
    it), and the question's answers."""
    for article in english():
        paragraphs = [p["text"] for p in article["paragraphs"]]
        for n, paragraph in enumerate(article["paragraphs"]):
            for qa in paragraph["qas"]:
                if qa["question"] == question:
                    ranked = paragraphs[n:] + paragraphs[:n]
                    candidates = [Candidate(text=t, metadata={"source": article["title"]}) for t in ranked]
                    return candidates, tuple(qa["answers"])
    raise AssertionError(f"no such question in XQuAD's English: {question!r}")


# Questions whose answer the top paragraph holds, at budgets a quarter to two fifths of a mean
# paragraph (169 tokens): prefix keeps each answer; passages, before it kept one passage grown
# to the room, kept pieces that stopped short of it ("The Panthers defense gave up just…").
CASES = [
    ("How many points did the Panthers defense surrender?", 42),
    ("Who did the Broncos beat in the divisional game?", 68),
    ("Which two governing bodies have legislative veto power?", 68),
    ("How many households has kids under the age of 18 living in them?", 68),
]


@pytest.mark.parametrize(("question", "budget"), CASES)
def test_under_one_paragraph_passages_keeps_the_answer_prefix_keeps(question: str, budget: int) -> None:
    """A budget under the top paragraph: passages keeps the answer, as prefix does."""
    candidates, answers = asked(question)
    assert count_tokens(candidates[0].text) > budget  # the top paragraph does not fit whole
    shown = {}
    for policy in ("prefix", "passages"):
        result = recall(candidates, query=question, max_tokens=budget, policy=policy)
        assert result.report.tokens_used == count_tokens(result.to_markdown()) <= budget
        shown[policy] = " ".join(item.text for item in result.evidence)
    assert any(answer in shown["prefix"] for answer in answers)
    assert any(answer in shown["passages"] for answer in answers), shown["passages"]


@pytest.mark.parametrize(("question", "budget"), CASES)
def test_under_one_paragraph_passages_fills_the_room(question: str, budget: int) -> None:
    """What the exact count leaves under one paragraph goes to the best passage's next words:
    the block ends within a few tokens of the budget, never over it."""
    candidates, _ = asked(question)
    result = recall(candidates, query=question, max_tokens=budget, policy="passages")
    assert budget - 3 <= result.report.tokens_used <= budget
