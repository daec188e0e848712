"""Recall from LangGraph's real stores: InMemoryStore (with and without a vector index), SqliteStore
on a file, PostgresStore on the server .ci/run starts. Every recall is exact and within budget under
every policy, and a user's items never reach another user's recall."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph.store.base")

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.store.base import BaseStore, PutOp
from langgraph.store.memory import InMemoryStore

from recallpack import Reader, count_tokens
from recallpack.adapters.langchain import BudgetedRetriever
from recallpack.adapters.langgraph import StoreRetriever
from recallpack.packing.choosing.policies import BUILT_IN
from recallpack.testing import HashingEmbeddings, paragraphs

TOK = "cl100k_base"
DSN_VAR = "RECALLPACK_TEST_POSTGRES_DSN"
STORES = ["memory", "memory-index", "sqlite", "postgres"]
USERS = ("alice", "bob", "carol")
#: Real text (the stdlib's docstrings), a different slice per user and kind, each item owned.
TEXTS = [text for _, text in paragraphs()]


def note(user: str, kind: str, i: int) -> str:
    """Item ``i`` of ``user``'s ``kind`` memory: a real paragraph, signed with its owner."""
    offset = (USERS.index(user) if user in USERS else 7) * 40 + (0 if kind == "facts" else 20)
    return f"{TEXTS[(offset + i) % len(TEXTS)]} (noted for {user}, {kind} {i})"


def postgres_store(stack: ExitStack) -> BaseStore:
    """A PostgresStore on the server named by RECALLPACK_TEST_POSTGRES_DSN, or a skip saying why."""
    dsn = os.environ.get(DSN_VAR)
    if not dsn:
        pytest.skip(f"no PostgreSQL server reachable: {DSN_VAR} is not set (.ci/run starts one and sets it)")
    import psycopg
    from langgraph.store.postgres import PostgresStore

    try:
        psycopg.connect(dsn, connect_timeout=5).close()
    except psycopg.OperationalError as exc:
        pytest.skip(f"no PostgreSQL server reachable at {DSN_VAR}={dsn!r}: {str(exc).strip()[:200]}")
    store = stack.enter_context(PostgresStore.from_conn_string(dsn))
    store.setup()
    return store


def make_store(kind: str, stack: ExitStack, folder: Path) -> BaseStore:
    """A real, empty LangGraph store of ``kind``."""
    if kind == "memory":
        return InMemoryStore()
    if kind == "memory-index":
        return InMemoryStore(index={"dims": 256, "embed": HashingEmbeddings(), "fields": ["text"]})
    if kind == "sqlite":
        from langgraph.store.sqlite import SqliteStore

        store = stack.enter_context(SqliteStore.from_conn_string(str(folder / "memory.db")))
        store.setup()
        return store
    return postgres_store(stack)


@pytest.fixture(scope="module", params=STORES)
def store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BaseStore]:
    """One real store of each kind for the module; each test writes under a prefix of its own."""
    with ExitStack() as stack:
        yield make_store(request.param, stack, tmp_path_factory.mktemp(request.param))


def fill(store: BaseStore, items: list[tuple[str, str, int]]) -> str:
    """``items`` (user, kind, i) put under a fresh top-level label; that label."""
    prefix = "t" + uuid.uuid4().hex[:12]
    store.batch([PutOp((prefix, "users", user, kind), f"{kind}-{i}", {"text": note(user, kind, i), "kind": kind})
                 for user, kind, i in items])  # fmt: skip
    return prefix


def everyone_items(per_kind: int = 12) -> list[tuple[str, str, int]]:
    return [(user, kind, i) for user in USERS for kind in ("facts", "episodes") for i in range(per_kind)]


def lanes(store: BaseStore, prefix: str, user: str | None = None, **settings: Any) -> BudgetedRetriever:
    """Derived memory (facts) and session memory (episodes), scoped by the user in the namespace:
    searched under ``user``'s own namespace, or (None) under every user's, by a filter on the kind."""

    def lane(kind: str) -> StoreRetriever:
        if user is not None:
            return StoreRetriever(store=store, namespace=(prefix, "users", user, kind), scope_from=2, k=8)
        return StoreRetriever(store=store, namespace=(prefix, "users"), filter={"kind": kind}, scope_from=2, k=8)

    return BudgetedRetriever.from_lanes(
        {"facts": lane("facts"), "working_memory": lane("episodes")}, tokenizer=TOK, **settings
    )


@pytest.mark.parametrize("policy", sorted(BUILT_IN))
@pytest.mark.parametrize("max_tokens", [40, 150, 600])
def test_every_recall_is_exact_and_within_budget(store: BaseStore, policy: str, max_tokens: int) -> None:
    """Under every policy and budget, tokens_used is the rendered block's count, at most max_tokens."""
    prefix = fill(store, everyone_items())
    retriever = lanes(store, prefix, "alice", max_tokens=max_tokens, policy=policy, reader=Reader(id="alice"))
    for query in ("file format of the module", "how to parse arguments", ""):
        result = retriever.recall(query)
        block = result.to_markdown()
        assert result.report.tokens_used == count_tokens(block, TOK) <= max_tokens
        assert "(noted for bob" not in block and "(noted for carol" not in block
        if max_tokens >= 150:
            assert result.evidence, (policy, query)


def test_a_single_store_retriever_is_exact_with_its_own_lane(store: BaseStore) -> None:
    """A BudgetedRetriever over one StoreRetriever per user: exact, labelled by the lane it is given."""
    prefix = fill(store, everyone_items())
    facts = StoreRetriever(store=store, namespace=(prefix, "users", "bob", "facts"), lane="facts")
    result = BudgetedRetriever(facts, max_tokens=300, tokenizer=TOK).recall("module functions")
    assert result.report.tokens_used == count_tokens(result.to_markdown(), TOK) <= 300
    assert result.evidence and {e.label for e in result.evidence} == {"Derived memory"}
    assert all(e.resource_uri.startswith(f"store://{prefix}/users/bob/facts#facts-") for e in result.evidence)


async def test_async_recall_equals_the_sync_one(store: BaseStore) -> None:
    """ainvoke searches the store asynchronously (a sync-only store in an executor): the same block."""
    prefix = fill(store, everyone_items(6))
    retriever = lanes(store, prefix, "carol", max_tokens=200, reader=Reader(id="carol"))
    sync, concurrent = retriever.recall("the module"), await retriever.arecall("the module")
    assert concurrent.to_markdown() == sync.to_markdown() and sync.evidence


def test_the_depth_asked_reaches_the_store_as_its_limit(store: BaseStore) -> None:
    """fetch_k reaches the store's search as its limit: the recall sees that many candidates."""
    prefix = fill(store, everyone_items(12))
    facts = StoreRetriever(store=store, namespace=(prefix, "users", "alice"), k=3)
    assert len(facts.invoke("module")) == 3
    result = BudgetedRetriever(facts, fetch_k=17, max_tokens=100, tokenizer=TOK).recall("module")
    assert result.report.candidates == 17 and result.report.fetch_depth == 17


# -- a user's items never reach another user's recall ---------------------------------------------

ids = st.sampled_from(["alice", "bob", "carol", "dave", "erin-2", "x_y"])
owned = st.lists(st.tuples(ids, st.sampled_from(["facts", "episodes"]), st.integers(0, 30)), min_size=1, max_size=25,
                 unique=True)  # fmt: skip


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(items=owned, reader=ids, policy=st.sampled_from(sorted(BUILT_IN)), budget=st.integers(30, 900),
       query=st.sampled_from(["", "module", "the file format", "dave"]))  # fmt: skip
def test_no_item_reaches_another_users_recall(
    store: BaseStore, items: list[tuple[str, str, int]], reader: str, policy: str, budget: int, query: str
) -> None:
    """Scoped by the namespace's user, or searched under the reader's own namespace, a recall shows
    the reader's items only, and names no one else's."""
    prefix = fill(store, items)
    shared = lanes(store, prefix, max_tokens=budget, policy=policy, reader=Reader(id=reader), fetch_k=40)
    own = StoreRetriever(store=store, namespace=(prefix, "users", reader), k=30)
    per_user = BudgetedRetriever(own, max_tokens=budget, policy=policy, tokenizer=TOK)
    others = {user for user, _, _ in items} - {reader}
    for result in (shared.recall(query), per_user.recall(query)):
        block = result.to_markdown()
        assert result.report.tokens_used == count_tokens(block, TOK) <= budget
        for other in others:
            assert f"(noted for {other}," not in block and f"/users/{other}/" not in block
            assert f"/users/{other}/" not in str(result.to_event())
        assert all(f"/users/{reader}/" in str(e.resource_uri) for e in result.evidence)
    assert all(doc.metadata["namespace"][2] == reader for doc in own.invoke(query))
