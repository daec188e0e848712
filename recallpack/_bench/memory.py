"""Agent memory: does the answer survive a recall from a LangGraph store, and at what cost?

MemoryBank's English conversations (15 users, 10 days each, one store item per exchange) go into
a LangGraph ``InMemoryStore`` with a vector index, each user under ``("users", name)``. Each of
its probing questions is asked of that user's namespace by each method, at three budgets:

- ``search k=3/5/10``: LangGraph's own ``store.search(namespace, query=..., limit=k)``, the items'
  texts joined as an agent puts them in its prompt; the budget does not change what it returns;
- ``prefix`` and ``passages``: ``recallpack.recall`` over a larger fetch (``limit=30``) with the
  budget, the rendered block counted whole (its header and labels too).

An answer is kept when one of its gold spans is in what the model is shown (SQuAD's
normalization). Tokens are cl100k_base. The retriever, the data and the budgets are fixed
before any method runs; nothing here is tuned to them.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from statistics import mean
from typing import Any

from recallpack._bench.quality import answered, normalize
from recallpack.packing.candidate import Candidate
from recallpack.packing.packer import recall
from recallpack.packing.results.result import RecallResult
from recallpack.packing.tokenizers import Tokenizer, get_tokenizer
from recallpack.testing import hashed_bag_of_words

__all__ = ["run", "DATA", "BUDGETS", "LIMITS", "FETCH", "Question", "load", "evaluate", "Cell"]

DATA = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "memorybank-en.json.gz"
BUDGETS = (256, 512, 1024)
LIMITS = (3, 5, 10)
#: How many items the packing methods fetch from the store before packing to the budget.
FETCH = 30
POLICIES = ("prefix", "passages")
DIMS = 256


@dataclass(frozen=True)
class Question:
    user: str
    text: str
    answers: tuple[str, ...]  # normalized


@dataclass
class Cell:
    """One method at one budget: for each question, whether the answer was kept and the tokens."""

    kept: list[bool] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)

    def add(self, kept: bool, tokens: int) -> None:
        self.kept.append(kept)
        self.tokens.append(tokens)

    def kept_within(self, budget: int) -> int:
        """Answers kept by a result that is itself within ``budget``."""
        return sum(k and t <= budget for k, t in zip(self.kept, self.tokens, strict=True))

    def over(self, budget: int) -> int:
        return sum(t > budget for t in self.tokens)

    @property
    def mean_tokens(self) -> float:
        return mean(self.tokens) if self.tokens else 0.0


#: Each user's days, each day's exchanges ({"user": ..., "assistant": ...}).
Conversations = dict[str, dict[str, list[dict[str, str]]]]


def load(path: Path = DATA) -> tuple[Conversations, list[Question]]:
    """Every user's days of exchanges, and the annotated questions."""
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        data = json.load(handle)
    questions = [Question(q["user"], q["question"], tuple(normalize(a) for a in q["answers"]))
                 for q in data["questions"]]  # fmt: skip
    return data["users"], questions


def _embed(texts: Sequence[str]) -> list[list[float]]:
    return [hashed_bag_of_words(text, DIMS) for text in texts]


def store_of(memory: Conversations) -> Any:
    """A LangGraph InMemoryStore holding each exchange as one item, a namespace per user."""
    from langgraph.store.memory import InMemoryStore

    store = InMemoryStore(index={"dims": DIMS, "embed": _embed, "fields": ["text"]})
    for user, days in memory.items():
        for day, exchanges in days.items():
            for i, turn in enumerate(exchanges):
                text = f"User: {turn['user']}\nAssistant: {turn['assistant']}"
                store.put(("users", user), f"{day}/{i}", {"text": text, "day": day})
    return store


def _candidates(items: Sequence[Any]) -> list[Candidate]:
    """Store items as candidates, in the store's order, each citing its namespace and key."""
    return [
        Candidate(text=item.value["text"], score=item.score, citation="/".join([*item.namespace, item.key]))
        for item in items
    ]



def evaluate(store: Any, questions: Sequence[Question], tok: Tokenizer,
             budgets: Sequence[int] = BUDGETS) -> dict[tuple[str, int], Cell]:  # fmt: skip
    """Every method at every budget over ``questions``: (method name, budget) -> Cell."""
    cells: dict[tuple[str, int], Cell] = {}
    for question in questions:
        namespace = ("users", question.user)
        fetched = _candidates(store.search(namespace, query=question.text, limit=FETCH))
        for k in LIMITS:
            items = store.search(namespace, query=question.text, limit=k)
            shown = "\n\n".join(item.value["text"] for item in items)
            # passages given, for this question, exactly the tokens search(limit=k) used
            same = recall(fetched, query=question.text, max_tokens=tok.count(shown), policy="passages")
            for budget in budgets:  # the same results at every budget: a limit knows no budget
                cells.setdefault((f"search k={k}", budget), Cell()).add(
                    answered(shown, question.answers), tok.count(shown)
                )
                cells.setdefault((f"passages @k={k}", budget), Cell()).add(
                    answered(_evidence(same), question.answers), same.report.tokens_used
                )
        for policy in POLICIES:
            for budget in budgets:
                result = recall(fetched, query=question.text, max_tokens=budget, policy=policy)
                cells.setdefault((policy, budget), Cell()).add(
                    answered(_evidence(result), question.answers), result.report.tokens_used
                )
    return cells


def _evidence(result: RecallResult) -> str:
    return "\n\n".join(item.text for item in result.evidence)


def table(cells: dict[tuple[str, int], Cell], budgets: Sequence[int], asked: int) -> list[str]:
    """A row per method and budget; then passages at each limit's own tokens (no budget)."""
    lines = [f"  {'budget':>6}  {'method':<14} {'answer kept':>12} {'within budget':>14} "
             f"{'tokens (mean)':>14} {'over budget':>12}"]  # fmt: skip
    for budget in budgets:
        for name in [*(f"search k={k}" for k in LIMITS), *POLICIES]:
            cell = cells[name, budget]
            kept, within = sum(cell.kept), cell.kept_within(budget)
            lines.append(
                f"  {budget:>6}  {name:<14} {kept:>3}/{asked} {kept / asked:>4.0%} {within:>10}/{asked} "
                f"{cell.mean_tokens:>14.0f} {cell.over(budget):>9}/{asked}"
            )
    lines.append("  at the same tokens, question by question (passages given what search k used):")
    for k in LIMITS:
        theirs, ours = cells[f"search k={k}", budgets[0]], cells[f"passages @k={k}", budgets[0]]
        lines.append(
            f"  {'':>6}  search k={k:<5} {sum(theirs.kept):>3}/{asked} {sum(theirs.kept) / asked:>4.0%} "
            f"in {theirs.mean_tokens:.0f} tokens; passages {sum(ours.kept)}/{asked} "
            f"{sum(ours.kept) / asked:.0%} in {ours.mean_tokens:.0f}"
        )
    return lines


def best_limit(cells: dict[tuple[str, int], Cell], budget: int) -> str:
    """The fixed ``limit=k`` that keeps the most answers with results within ``budget`` (the
    fewer tokens on a tie)."""

    def merit(name: str) -> tuple[int, float]:
        return cells[name, budget].kept_within(budget), -cells[name, budget].mean_tokens

    return max((f"search k={k}" for k in LIMITS), key=merit)


def targets(cells: dict[tuple[str, int], Cell], budgets: Sequence[int]) -> list[str]:
    """At each budget, against the fixed limit that keeps the most answers within it: ``passages``
    with the budget keeps at least as many; and ``passages`` given, question by question, the
    very tokens that limit used keeps at least as many as it does (over budget or not), at fewer
    or equal tokens. Both sides measured, neither adjusted."""
    lines = []
    for budget in budgets:
        name = best_limit(cells, budget)
        best, ours = cells[name, budget], cells["passages", budget]
        kept, theirs = sum(ours.kept), best.kept_within(budget)
        verdict = "ok  " if kept >= theirs else "MISS"
        lines.append(
            f"  {verdict} at {budget}: passages keeps {kept} answers (never over, {ours.mean_tokens:.0f} "
            f"tokens); the best fixed limit, {name}, keeps {theirs} within the budget"
        )
        same = cells[f"passages @k={name.rpartition('=')[2]}", budget]
        fewer = all(t <= u for t, u in zip(same.tokens, best.tokens, strict=True))
        verdict = "ok  " if sum(same.kept) >= sum(best.kept) and fewer else "MISS"
        lines.append(
            f"  {verdict} at {name}'s own tokens, question by question: passages keeps "
            f"{sum(same.kept)} answers in {same.mean_tokens:.0f} tokens, {name} {sum(best.kept)} in "
            f"{best.mean_tokens:.0f}{'' if fewer else ' (passages used more tokens on some question)'}"
        )
    return lines


def run(users: int | None = None, budgets: Sequence[int] = BUDGETS) -> list[str]:
    """The memory section's lines; ``users``: only the first so many users' questions (a slice
    for tests), their memories still each in its own namespace."""
    if not DATA.exists():
        return [f"memory: skipped ({DATA} is not there: run from a checkout of recallpack)"]
    memory, questions = load()
    memory = dict(list(memory.items())[:users]) if users is not None else memory
    try:
        store = store_of(memory)
    except ImportError as exc:
        return [f"memory: skipped ({exc}; pip install -e '.[dev]')"]
    asked = [q for q in questions if q.user in memory]
    exchanges = sum(len(e) for days in memory.values() for e in days.values())
    tok = get_tokenizer("cl100k_base")
    cells = evaluate(store, asked, tok, budgets)
    lines = [
        f"memory: is the answer in what an agent recalls? {len(asked)} MemoryBank questions (MIT) of "
        f"{len(memory)} users, {exchanges} exchanges over 10 days, one "
        f"LangGraph InMemoryStore namespace per user (hashing-embedding index), cl100k_base",
        *table(cells, budgets, len(asked)),
        "targets:",
        *targets(cells, budgets),
    ]
    return lines
