"""``recallpack.adapters.langgraph.memory``: a ``create_agent`` agent's long-term memory from a
LangGraph store, per user, within one evidence allowance per model request.

:class:`StoreMemoryMiddleware` is :class:`~recallpack.adapters.langchain.memory.EvidenceAllowanceMiddleware`
(the same assembly: the recall tools' results within the allowance, markers for the rest) whose
automatic recall searches the agent's store for the request's user: its retriever is a
:class:`~recallpack.adapters.langchain.BudgetedRetriever` over
:class:`~recallpack.adapters.langgraph.StoreRetriever` lanes, whose ``{user_id}``-style namespaces
the agent's context fills per run, and ``reader=`` may be a function of the run's ``Runtime``, so
scoped items are shown only to their user. :func:`store_memory_tool` is the memory module's
search tool over the same retriever, read by the same reader. Needs the ``langgraph`` extra.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING, Any, Union

from recallpack.adapters.shared.extras import require

require("langgraph.store.base", extra="langgraph", feature=__name__)
require("langchain.agents", extra="langgraph", feature=__name__)

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.runtime import Runtime, get_runtime

from recallpack.adapters.langchain.memory import (
    DEFAULT_MARKER,
    DEFAULT_TOOL_NAME,
    EvidenceAllowanceMiddleware,
    memory_search_tool,
)
from recallpack.allowance import Allowance, ContextSource, Recaller, ReceiptKey, arecall_of
from recallpack.packing.errors import ConfigError
from recallpack.packing.results.result import RecallResult
from recallpack.packing.scopes import Reader

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from recallpack.adapters.langchain.assembly import AssembledMessages, AssemblyRules
    from recallpack.adapters.shared.components import RecallSettings

__all__ = ["StoreMemoryMiddleware", "store_memory_tool", "ReaderOf"]

#: Who reads a recall's evidence: a Reader, or a function of the LangGraph ``Runtime`` of the
#: run (its ``context``, ``store``) returning one: ``lambda runtime: Reader(id=runtime.context.user_id)``.
ReaderOf = Union[Reader, Callable[[Runtime[Any]], Union[Reader, None]], None]


def _check_reader(reader: object) -> None:
    if reader is not None and not isinstance(reader, Reader) and not callable(reader):
        raise ConfigError(
            f"reader={reader!r:.60} must be a Reader, a function of the run's Runtime returning one, or None",
            field="reader",
        )


def _reader_in(reader: ReaderOf, runtime: object) -> Reader | None:
    """The reader for one run: ``reader``, or what it returns for ``runtime``, checked."""
    if reader is None or isinstance(reader, Reader):
        return reader
    found = reader(runtime)  # type: ignore[arg-type]
    if found is not None and not isinstance(found, Reader):
        raise ConfigError(
            f"reader(runtime) returned {type(found).__name__}; it must return a Reader (or None)",
            field="reader",
        )
    return found


class _RunReader:
    """A Recaller that recalls through ``retriever`` with the reader of the run it is called in
    (what the search tool, called with no request, reads the user from)."""

    def __init__(self, retriever: Recaller, reader: ReaderOf) -> None:
        self.retriever, self.reader = retriever, reader

    def __getattr__(self, name: str) -> Any:  # its budget, tokenizer and Packer are the retriever's
        if name in ("retriever", "reader"):  # not set yet (a copy being made): no recursion
            raise AttributeError(name)
        return getattr(self.retriever, name)

    def _settings(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        try:
            runtime: Any = get_runtime()
        except RuntimeError:  # outside any runnable's run
            runtime = None
        if runtime is None:
            raise ConfigError(
                "reader= is a function of the run's Runtime, and this search runs in no graph; call "
                "the tool inside the agent (or a graph), or pass reader=Reader(...)",
                field="reader",
            )
        return {**kwargs, "reader": _reader_in(self.reader, runtime)}

    def recall(self, query: str, config: RunnableConfig | None = None, **kwargs: Any) -> RecallResult:
        return self.retriever.recall(query, config=config, **self._settings(kwargs))

    async def arecall(self, query: str, config: RunnableConfig | None = None, **kwargs: Any) -> RecallResult:
        return await arecall_of(self.retriever, query, {"config": config, **self._settings(kwargs)})


def store_memory_tool(retriever: Recaller, *, reader: ReaderOf = None, **kwargs: Any) -> BaseTool:
    """:func:`~recallpack.adapters.langchain.memory.memory_search_tool` over ``retriever`` (a
    ``BudgetedRetriever`` over ``StoreRetriever``s), each search read by ``reader``: a Reader, or
    a function of the run's LangGraph ``Runtime`` returning one, so a user's scoped items reach
    only that user's searches. ``kwargs`` are ``memory_search_tool``'s (name, allowance, ...)."""
    _check_reader(reader)
    if isinstance(reader, Reader):  # one reader for every search
        return memory_search_tool(retriever, reader=reader, **kwargs)
    if reader is None:
        return memory_search_tool(retriever, **kwargs)
    return memory_search_tool(_RunReader(retriever, reader), **kwargs)


if TYPE_CHECKING:

    class _Middleware(AgentMiddleware[AgentState[Any], Any, Any]):
        """EvidenceAllowanceMiddleware as type checkers should see this subclass: its bare
        AgentMiddleware base reads as context None (LangGraph's default for ContextT), which
        create_agent(context_schema=...) refuses; a per-user middleware takes any context."""

        rules: AssemblyRules
        recall_overrides: Mapping[str, Any]

        def __init__(
            self, allowance: Allowance | None = None, *, retriever: Recaller | None = None,
            tool_names: Collection[str | BaseTool] = ..., marker: str = ..., key: ReceiptKey | None = None,
            context: ContextSource = None, **recall_overrides: Unpack[RecallSettings],
        ) -> None: ...  # fmt: skip

        def _request(self, request: ModelRequest, view: AssembledMessages) -> Any: ...

else:
    _Middleware = EvidenceAllowanceMiddleware


class StoreMemoryMiddleware(_Middleware):
    """Recalls from the agent's store into every model request, within ``allowance``.

    ``create_agent(model, tools=[store_memory_tool(memory, reader=by_user)],
    middleware=[StoreMemoryMiddleware(memory, reader=by_user)], store=store, context_schema=...)``,
    where ``memory`` is a ``BudgetedRetriever`` over ``StoreRetriever``s and ``by_user`` is
    ``lambda runtime: Reader(id=runtime.context.user_id)``. Automatic recall for the turn's last
    human message takes what the search results left of the allowance; ``reader`` (a Reader, or
    a function of the request's ``Runtime``) reads it, so items scoped to one user
    (``StoreRetriever(scope_from=...)``) reach no other. Everything else is
    ``EvidenceAllowanceMiddleware``'s.
    """

    # reader= widens RecallSettings' reader to a function of the run, hence the overlap.
    def __init__(  # type: ignore[misc]
        self,
        retriever: Recaller,
        allowance: Allowance | None = None,
        *,
        reader: ReaderOf = None,
        tool_names: Collection[str | BaseTool] = (DEFAULT_TOOL_NAME,),
        marker: str = DEFAULT_MARKER,
        key: ReceiptKey | None = None,
        context: ContextSource = None,
        **recall_overrides: Unpack[RecallSettings],
    ) -> None:
        _check_reader(reader)
        super().__init__(
            allowance, retriever=retriever, tool_names=tool_names, marker=marker, key=key,
            context=context, **recall_overrides,
        )  # fmt: skip
        self.reader = reader

    def _overrides(self, request: ModelRequest) -> dict[str, Any]:
        """This request's recall settings, with the reader of its run."""
        if self.reader is None:
            return dict(self.recall_overrides)
        return {**self.recall_overrides, "reader": _reader_in(self.reader, request.runtime)}

    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], Any]) -> Any:
        view = self.rules.run(request.messages, self._overrides(request), None, request)
        return handler(self._request(request, view))

    async def awrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], Any]) -> Any:
        view = await self.rules.arun(request.messages, self._overrides(request), None, request)
        return await handler(self._request(request, view))
