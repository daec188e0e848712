"""LangGraph adapter: a LangChain retriever over a LangGraph long-term memory store.

:class:`StoreRetriever` searches any ``BaseStore`` (``InMemoryStore``, ``SqliteStore``,
``PostgresStore``, ...) under a namespace prefix and returns its items as Documents, each citing
its store item (``store://users/alice/facts#key``). It does no packing: wrap it in
:class:`~recallpack.adapters.langchain.BudgetedRetriever`, alone or one per lane
(``BudgetedRetriever.from_lanes({"facts": ..., "working_memory": ...})``), and the budget decides
how many items a recall shows instead of a fixed ``limit``. Needs the ``langgraph`` extra.

>>> from langgraph.store.memory import InMemoryStore
>>> store = InMemoryStore()
>>> store.put(("users", "alice", "facts"), "tea", {"text": "Alice drinks green tea."})
>>> docs = StoreRetriever(store=store, namespace=("users", "alice")).invoke("tea")
>>> docs[0].metadata["source"]
'store://users/alice/facts#tea'
"""

from recallpack.adapters.langgraph.retriever import (
    DEFAULT_K,
    StoreRetriever,
)

__all__ = ["StoreRetriever", "DEFAULT_K"]
