"""The memory bench section on a slice of MemoryBank: it runs through a real LangGraph store, and
its numbers are sane (packing never over its budget, a limit's results nested, one user's items
only in that user's recall)."""

from __future__ import annotations

import functools
import gzip
import json
from collections.abc import Iterator
from typing import Any

import pytest

from recallpack import bench
from recallpack._bench import memory
from recallpack.packing.tokenizers import get_tokenizer

pytest.importorskip("langgraph")

USERS = 3
#: The store, the questions asked of it, and every method's cells.
Sliced = tuple[Any, list[memory.Question], dict[tuple[str, int], memory.Cell]]


@pytest.fixture(scope="module")
def sliced() -> Iterator[Sliced]:
    data, questions = memory.load()
    kept = dict(list(data.items())[:USERS])
    store = memory.store_of(kept)
    asked = [q for q in questions if q.user in kept]
    yield store, asked, memory.evaluate(store, asked, get_tokenizer("cl100k_base"))


def test_the_shipped_data_is_what_the_readme_says() -> None:
    """15 users over 10 days, 98 annotated questions and 2 left out, every answer verbatim in its days."""
    with gzip.open(memory.DATA, "rt", encoding="utf-8") as handle:
        raw = json.load(handle)
    users, questions = memory.load()
    assert len(users) == 15 and all(len(days) == 10 for days in users.values())
    assert len(questions) == 98 and len(raw["left_out"]) == 2 and {q.user for q in questions} == set(users)
    for question in raw["questions"]:
        said = "\n".join(f"{t['user']}\n{t['assistant']}" for day in question["days"] for t in users[question["user"]][day])
        assert all(answer in said for answer in question["answers"]), question["question"]


def test_packing_is_never_over_its_budget_and_a_limit_is_never_cut(sliced: Sliced) -> None:
    """prefix and passages stay within every budget; search(limit=k) ignores it, and goes over."""
    _, asked, cells = sliced
    for budget in memory.BUDGETS:
        for policy in memory.POLICIES:
            cell = cells[policy, budget]
            assert len(cell.tokens) == len(asked) and max(cell.tokens) <= budget
        assert cells["search k=10", budget].tokens == cells["search k=10", memory.BUDGETS[0]].tokens
    assert cells["search k=10", memory.BUDGETS[0]].over(memory.BUDGETS[0]) > 0


def test_a_larger_limit_returns_more_and_keeps_at_least_as_much(sliced: Sliced) -> None:
    """search k=3 ⊂ k=5 ⊂ k=10 question by question: more tokens, never fewer answers."""
    _, _, cells = sliced
    budget = memory.BUDGETS[0]
    small, middle, large = (cells[f"search k={k}", budget] for k in memory.LIMITS)
    assert all(a <= b <= c for a, b, c in zip(small.tokens, middle.tokens, large.tokens, strict=True))
    assert all(not a or b for a, b in zip(small.kept, large.kept, strict=True))


def test_passages_at_a_limits_own_tokens_uses_no_more(sliced: Sliced) -> None:
    """Given what search(limit=k) used, passages uses that many tokens or fewer, question by question."""
    _, _, cells = sliced
    for k in memory.LIMITS:
        theirs, ours = cells[f"search k={k}", 256], cells[f"passages @k={k}", 256]
        assert all(t <= u for t, u in zip(ours.tokens, theirs.tokens, strict=True))


def test_a_users_recall_reads_only_that_users_namespace(sliced: Sliced) -> None:
    """Each question is searched in its user's namespace, and every item found is that user's."""
    store, asked, _ = sliced
    for question in asked[:10]:
        found = store.search(("users", question.user), query=question.text, limit=memory.FETCH)
        assert found and {item.namespace for item in found} == {("users", question.user)}


def test_the_section_runs_from_the_bench_command(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """python -m recallpack.bench --memory prints the section; --check fails exactly when a target is missed."""
    lines = memory.run(users=2)
    monkeypatch.setattr(memory, "run", functools.partial(memory.run, users=2))
    code = bench.main(["--memory", "--check"])
    assert capsys.readouterr().out.splitlines() == lines
    assert lines[0].startswith("memory:") and "targets:" in lines
    assert code == (1 if any("MISS" in line for line in lines) else 0)
