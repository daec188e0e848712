"""LangGraph section of ``python -m recallpack.bench``: what StoreRetriever adds to a store's search.

Over LangGraph stores of 2,000 memory items (paragraphs of the standard library's own source,
read offline, in 20 users' namespaces), each query is timed twice in the same run: the store's
own ``search(("users",), query=..., limit=k)``, and the same search with the adapter's
translation of each item into a Document (what StoreRetriever adds; the target is on this); then
``StoreRetriever.invoke``, which adds LangChain's retriever run (its callbacks and tracing
context, the same for any retriever) on top. The overhead is the median of the per-query
differences over the median search, so the machine's speed cancels out; the two sides alternate
which goes first. The stores: ``InMemoryStore`` with a vector index (hashing embeddings: the
search embeds the query and ranks every item), ``SqliteStore`` on a file, and ``InMemoryStore``
without an index (a scan that returns the first ``k`` items, under a microsecond each: held to
no target, since one LangChain Document costs more than that).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from recallpack.adapters.langgraph import StoreRetriever
from recallpack.adapters.langgraph.items import item_document
from recallpack.testing import HashingEmbeddings, source_paragraphs

__all__ = ["run"]

ITEMS = 2_000
USERS = 20
QUERIES = 30
K = 10
TARGET = 0.10


def _stores(stack: ExitStack, folder: Path) -> list[tuple[str, Any, bool]]:
    """The stores timed, each with whether the target holds it. The scan is held to none: its
    search costs less per item than one LangChain Document."""
    from langgraph.store.memory import InMemoryStore

    indexed = InMemoryStore(index={"dims": 256, "embed": HashingEmbeddings(), "fields": ["text"]})
    stores: list[tuple[str, Any, bool]] = [("InMemoryStore + index", indexed, True)]
    try:  # langgraph-checkpoint-sqlite comes with the dev extra, not the langgraph one
        from langgraph.store.sqlite import SqliteStore
    except ImportError:
        pass
    else:
        sqlite = stack.enter_context(SqliteStore.from_conn_string(str(folder / "memory.db")))
        sqlite.setup()
        stores.append(("SqliteStore (file)", sqlite, True))
    return [*stores, ("InMemoryStore", InMemoryStore(), False)]


Call = Callable[[str], object]


def _overhead(search: Call, other: Call, queries: list[str]) -> tuple[float, float]:
    """Seconds per query of ``search`` alone (the median) and of ``other`` (that plus the median
    of the per-query differences): each query is timed on both sides back to back, so what one
    query costs more than another, and a shared machine's drift, cancel out."""
    alone: list[float] = []
    added: list[float] = []
    for i, query in enumerate(queries):
        times = {}
        for side in (0, 1) if i % 2 else (1, 0):  # alternating which goes first
            t0 = time.perf_counter()
            (other if side else search)(query)
            times[side] = time.perf_counter() - t0
        alone.append(times[0])
        added.append(times[1] - times[0])
    return statistics.median(alone), statistics.median(alone) + statistics.median(added)


def run(items: int = ITEMS, queries: int = QUERIES, k: int = K) -> list[str]:
    """Printable lines: each store's search alone vs StoreRetriever.invoke, as a ratio in one run."""
    from langgraph.store.base import PutOp

    # Distinct texts: InMemoryStore's index refuses a batch holding one text twice (LangGraph 1.x).
    paragraphs = list(dict.fromkeys(text for _, _, text in source_paragraphs(2 * (items + queries), 8)))
    paragraphs = paragraphs[: items + queries]
    if len(paragraphs) < items + queries:
        return [f"langgraph: skipped, only {len(paragraphs)} stdlib paragraphs found"]
    asked = [" ".join(text.split()[:12]) for text in paragraphs[items:]]
    puts = [PutOp(("users", f"u{i % USERS}", "facts"), f"m{i}", {"text": text})
            for i, text in enumerate(paragraphs[:items])]  # fmt: skip
    lines = [f"langgraph: {items:,} memory items (stdlib paragraphs) in {USERS} users' namespaces; "
             f"{len(asked)} queries, k={k}"]  # fmt: skip
    with ExitStack() as stack:
        for name, store, held in _stores(stack, Path(stack.enter_context(tempfile.TemporaryDirectory()))):
            store.batch(puts)
            retriever = StoreRetriever(store=store, namespace=("users",), k=k)
            retriever.invoke("warm up")

            def search(query: str, store: Any = store) -> list[Any]:
                return list(store.search(("users",), query=query, limit=k))

            def translated(query: str, store: Any = store) -> list[Any]:
                return [item_document(item, "text", None, None) for item in search(query, store)]

            alone, adapted = _overhead(search, translated, asked)
            _, invoked = _overhead(search, retriever.invoke, asked)
            overhead = (adapted - alone) / alone
            verdict = ("ok" if overhead < TARGET else "MISS") if held else "info"
            per_item = 1e6 * (adapted - alone) / k
            lines.append(
                f"  {name:<22} search {1000 * alone:8.3f} ms; with the Documents {1000 * adapted:8.3f} ms: "
                f"{verdict:<4} {overhead:+.1%} (target < {TARGET:.0%}), {per_item:.1f} us an item; "
                f"StoreRetriever.invoke {1000 * invoked:8.3f} ms"
            )
    return lines


if __name__ == "__main__":
    print("\n".join(run()))
