"""An agent's long-term memory in a LangGraph store, recalled into one budget, offline.

Two users talked to an assistant over several sessions. After each session the assistant kept
what it learned as *facts* (derived memory: short statements it extracted) and the session
itself as an *episode* (session memory: what was said), in LangGraph's ``InMemoryStore`` under
``("users", user_id, "facts")`` and ``("users", user_id, "episodes")``. A new question is then
answered from memory: ``BudgetedRetriever.from_lanes`` asks both namespaces through
``StoreRetriever`` and packs what fits ``--max-tokens`` into one evidence block, each item
labelled *Derived memory* or *Recent session memory*, citing its store item, and shown only
to the user whose namespace holds it (``scope_from=1`` reads the user id as the item's scope;
the reader is the user asking).

    python examples/agent_memory.py --max-tokens 220
"""

from __future__ import annotations

import argparse

from langgraph.store.memory import InMemoryStore

from recallpack import Reader, count_tokens
from recallpack.adapters.langchain import BudgetedRetriever
from recallpack.adapters.langgraph import StoreRetriever
from recallpack.testing import HashingEmbeddings

#: Per user, per session: (date, what was said, what the assistant kept as facts).
SESSIONS = {
    "alice": [
        ("2026-10-04",
         "Alice: I'm planning a week in Kyoto in April. I don't eat meat, and I'm allergic to peanuts. "
         "Assistant: Noted. Kyoto has many shojin ryori temple restaurants that suit a vegetarian diet.",
         ["Alice is vegetarian.", "Alice is allergic to peanuts.", "Alice plans a week in Kyoto in April."]),
        ("2026-10-19",
         "Alice: Book me somewhere quiet near Arashiyama, under 150 euros a night. "
         "Assistant: I shortlisted two ryokan near the bamboo grove, both under your limit.",
         ["Alice wants quiet lodging near Arashiyama.", "Alice's lodging budget is 150 euros a night."]),
        ("2026-11-02",
         "Alice: My sister Emma joins for the last three days; she uses a wheelchair. "
         "Assistant: I will look for step-free rooms and accessible temple routes for those days.",
         ["Alice's sister Emma joins for the last three days.", "Emma uses a wheelchair."]),
    ],
    "bob": [
        ("2026-10-11",
         "Bob: I want to run the Lisbon half marathon in March; my best time is 1:52. "
         "Assistant: A 12-week plan with two quality sessions a week fits that goal.",
         ["Bob trains for the Lisbon half marathon in March.", "Bob's best half marathon time is 1:52."]),
        ("2026-10-25",
         "Bob: My left knee hurts after long runs, and I'm allergic to ibuprofen. "
         "Assistant: Cut the long run by a third this week and see a physiotherapist if it persists.",
         ["Bob's left knee hurts after long runs.", "Bob is allergic to ibuprofen."]),
    ],
}
QUESTIONS = {
    "alice": "Which restaurants and rooms should I book for the Kyoto trip, given allergies?",
    "bob": "Can I take something for the knee pain before the long run, given allergies?",
}


def remember(store: InMemoryStore) -> None:
    """Write each session's facts and its episode where an agent would have put them."""
    for user, sessions in SESSIONS.items():
        for n, (date, said, facts) in enumerate(sessions, start=1):
            store.put(("users", user, "episodes"), f"session-{n}", {"text": f"Session of {date}: {said}", "kind": "episode"})
            for i, fact in enumerate(facts, start=1):
                store.put(("users", user, "facts"), f"s{n}-fact-{i}", {"text": fact, "kind": "fact", "session": date})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-tokens", type=int, default=220, help="the evidence budget per recall")
    args = parser.parse_args()

    # A vector index (offline hashing embeddings here) lets the store rank items by the question.
    store = InMemoryStore(index={"dims": 256, "embed": HashingEmbeddings(), "fields": ["text"]})
    remember(store)
    # One retriever per kind of memory (a filter on the value's kind), over every user's
    # namespace: scope_from=1 makes the user id of ("users", user_id, ...) each item's scope, so a
    # recall shows a reader their own items only. (Under create_agent, a namespace such as
    # ("users", "{user_id}", "facts") searches the run's user's alone: see docs/agent-memory.md.)
    memory = BudgetedRetriever.from_lanes(
        {
            "facts": StoreRetriever(store=store, namespace=("users",), filter={"kind": "fact"}, scope_from=1),
            "working_memory": StoreRetriever(store=store, namespace=("users",), filter={"kind": "episode"},
                                             scope_from=1),
        },
        max_tokens=args.max_tokens,
        fetch_k=40,  # every user's items are fetched, and another user's withheld: ask deep enough
        tokenizer="cl100k_base",
    )
    for user, question in QUESTIONS.items():
        result = memory.recall(question, reader=Reader(id=user))
        block = result.to_markdown()
        print(f"== {user} asks: {question}\n")
        print(block)
        labels = sorted({e.label for e in result.evidence})
        print(f"-- {result.report.tokens_used} of {args.max_tokens} tokens (the block counts "
              f"{count_tokens(block, 'cl100k_base')}); kept {len(result.evidence)} items ({', '.join(labels)}); "
              f"withheld {result.report.items_withheld} of other users\n")  # fmt: skip
        assert result.report.tokens_used == count_tokens(block, "cl100k_base") <= args.max_tokens
        other = next(name for name in SESSIONS if name != user)
        assert f"/users/{other}/" not in block, "another user's memory reached this recall"


if __name__ == "__main__":
    main()
