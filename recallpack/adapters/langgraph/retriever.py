"""LangGraph adapter: a LangChain retriever over a LangGraph long-term memory store.

Handed on by :mod:`recallpack.adapters.langgraph`, the public path, whose docstring introduces them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from recallpack.adapters.shared.extras import require

require("langgraph.store.base", extra="langgraph", feature=__name__)

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables.config import run_in_executor
from langgraph.store.base import BaseStore
from pydantic import BeforeValidator, Field, field_validator

from recallpack.adapters.langgraph.items import (
    ScopeFrom,
    TextOf,
    check_namespace,
    check_scope_from,
    check_text_field,
    filled_namespace,
    item_document,
    running_store,
)
from recallpack.packing.candidate import LaneKind, coerce_lane
from recallpack.packing.errors import ConfigError
from recallpack.packing.validation import CheckedModel, check_count, refuse_unknown

__all__ = ["StoreRetriever", "DEFAULT_K"]

#: LangGraph's own default ``limit`` for ``BaseStore.search``.
DEFAULT_K = 10
#: What one call takes besides the query: the depth BudgetedRetriever asks for, a filter, and
#: LangChain's own ``verbose`` (BaseRetriever.invoke passes it on).
_PER_CALL = ("k", "filter", "verbose")


class StoreRetriever(CheckedModel, BaseRetriever):
    """A retriever over a LangGraph ``BaseStore``: ``search(namespace, query=..., filter=...,
    limit=k)``, its items as Documents.

    Each Document's ``page_content`` is its value's text (``text_field``), and its metadata holds
    the item's ``namespace`` (a list), ``key``, ``created_at`` and ``updated_at`` (ISO 8601),
    ``score`` (the store's similarity, None for a store without a vector index), ``source`` (the
    citation a recall renders, ``store://users/alice/facts#key``), and, when set, ``lane`` and
    ``scope_ids``. Under :class:`~recallpack.adapters.langchain.BudgetedRetriever` the depth it
    is asked for (``fetch_k``, or what fills the budget) reaches it as ``k``; its own ``k`` is
    what it returns alone.

    The namespace may hold ``{fields}`` (``("users", "{user_id}", "facts")``), filled per call from
    the running graph's context or ``config["configurable"]``; ``store=None`` searches the running
    graph's store (``create_agent(..., store=...)``, ``graph.compile(store=...)``).
    """

    store: BaseStore | None = None
    """The store searched; None: the store of the graph the call runs in."""
    namespace: Annotated[tuple[str, ...], BeforeValidator(check_namespace)]
    """The namespace prefix searched, such as ``("users", "{user_id}")``; items in every
    namespace under it are found."""
    text_field: Annotated[TextOf, BeforeValidator(check_text_field)] = "text"
    """The key of an item's value that holds its text, or a function of the value returning it."""
    filter: dict[str, Any] | None = None
    """What the store's ``filter=`` takes: values an item's must match (``{"kind": "fact"}``)."""
    k: int = Field(default=DEFAULT_K, ge=1, strict=True)
    """How many items a search returns alone (LangGraph's ``limit``)."""
    scope_from: Annotated[ScopeFrom | None, BeforeValidator(check_scope_from)] = None
    """An item's scope ids from its namespace: an index (``1``: the user id of
    ``("users", uid, ...)``) or a function of the namespace; None: items are unscoped. A recall
    then shows an item only to a ``Reader`` of that scope (``Reader(id=uid)``)."""
    lane: LaneKind | None = None
    """The lane of every Document (``facts``: derived memory, ``working_memory``: session
    memory), read by a BudgetedRetriever over this one alone; its ``from_lanes`` sets its own."""

    @classmethod
    def _precheck(cls, data: dict[str, Any]) -> None:
        refuse_unknown(cls.__name__, data, cls.model_fields)

    @field_validator("store", mode="before")
    @classmethod
    def _a_store(cls, value: object) -> object:
        if value is not None and not isinstance(value, BaseStore):
            raise ConfigError(
                f"store={value!r:.60} must be a LangGraph BaseStore (InMemoryStore, SqliteStore, "
                "PostgresStore, ...), or None for the store of the running graph",
                field="store",
            )
        return value

    @field_validator("lane", mode="before")
    @classmethod
    def _a_lane(cls, value: object) -> object:
        return None if value is None else coerce_lane(value)

    # -- calls ----------------------------------------------------------------------------------

    def _get_relevant_documents(
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,
        k: int | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        store, namespace, search = self._search(query, k, kwargs)
        return self._documents(store.search(namespace, **search))

    async def _aget_relevant_documents(
        self,
        query: str,
        *,
        run_manager: AsyncCallbackManagerForRetrieverRun,
        k: int | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        store, namespace, search = self._search(query, k, kwargs)
        try:
            found = await store.asearch(namespace, **search)
        except NotImplementedError:
            # A sync-only store (SqliteStore; AsyncSqliteStore is its async twin): its search in
            # the loop's executor, as PostgresStore does itself, so the loop is never blocked.
            found = await run_in_executor(None, lambda: store.search(namespace, **search))
        return self._documents(found)

    def _search(
        self, query: object, k: int | None, kwargs: Mapping[str, Any]
    ) -> tuple[BaseStore, tuple[str, ...], dict[str, Any]]:
        """The store, the namespace filled for this call, and ``search``'s keywords, all checked
        before the store is called."""
        refuse_unknown(type(self).__name__, kwargs, _PER_CALL)
        if not isinstance(query, str):
            raise ConfigError(f"the query must be a str, got {type(query).__name__}", field="query")
        limit = self.k if k is None else check_count(k, "k", 1, ConfigError, why=" (items a search returns)")
        filter_ = kwargs.get("filter", self.filter)
        if filter_ is not None and not isinstance(filter_, dict):
            raise ConfigError(f"filter={filter_!r:.60} must be a dict or None", field="filter")
        store = self.store if self.store is not None else running_store()
        if store is None:
            raise ConfigError(
                "store=None searches the running graph's store, and this call runs in no graph with "
                "a store; pass store=... or compile the graph (or create_agent) with store=...",
                field="store",
            )
        namespace = filled_namespace(self.namespace)
        return store, namespace, {"query": query or None, "filter": filter_, "limit": limit}

    def _documents(self, items: list[Any]) -> list[Document]:
        lane = None if self.lane is None else self.lane.value
        return [item_document(item, self.text_field, self.scope_from, lane) for item in items]
