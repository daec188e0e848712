"""What a LangChain user's tracing sees of a packing: the report as a custom event, the
retriever's LangSmith parameters, and the retriever run a ``recall`` opens as ``invoke`` does.

Each packing dispatches :data:`REPORT_EVENT` with ``RecallResult.to_event()`` (counts, reasons,
tokens, tokenizer, policy, the reached candidates' trace rows and cut spans, never an item's
text) into the run it belongs to, so ``astream_events`` shows it as ``on_custom_event`` and a
handler's ``on_custom_event`` receives it. The event is built only when some handler of that run
asks for custom events: one that implements ``on_custom_event`` and does not ignore them.
LangSmith's tracer (langchain-core 1.x) implements none, so a traced run with no other handler
builds nothing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackHandler,
    AsyncCallbackManager,
    AsyncCallbackManagerForRetrieverRun,
    BaseCallbackHandler,
    BaseCallbackManager,
    CallbackManager,
    CallbackManagerForRetrieverRun,
    Callbacks,
    adispatch_custom_event,
    dispatch_custom_event,
)
from langchain_core.retrievers import BaseRetriever, LangSmithRetrieverParams
from langchain_core.runnables.config import (
    RunnableConfig,
    ensure_config,
    get_async_callback_manager_for_config,
    get_callback_manager_for_config,
)

from recallpack.packing.results.result import RecallResult

__all__ = ["REPORT_EVENT", "report", "areport", "retriever_ls_params", "retriever_run", "aretriever_run"]

#: The name of the custom event each packing dispatches.
REPORT_EVENT = "recallpack_report"
#: The base classes' ``on_custom_event``, which do nothing: a handler that keeps one never asks.
_IGNORING = (BaseCallbackHandler.on_custom_event, AsyncCallbackHandler.on_custom_event)


def report(result: RecallResult, callbacks: Callbacks | None) -> RecallResult:
    """Dispatch ``result``'s event into the run ``callbacks`` belong to (a run manager's
    ``get_child()``), or, when they are None, the run this code runs in.

    ``dispatch_custom_event`` raises outside any run: there is nothing to report into then,
    and nothing is dispatched. When no handler asks for custom events (:func:`_asks`), nobody
    would see the event, and it is not built. Returns ``result``.
    """
    manager, config = _listeners(callbacks, get_callback_manager_for_config)
    if manager is not None:
        dispatch_custom_event(REPORT_EVENT, result.to_event(), config=config)
    return result


async def areport(result: RecallResult, callbacks: Callbacks | None) -> RecallResult:
    """:func:`report` for async runs, whose handlers are awaited."""
    manager, config = _listeners(callbacks, get_async_callback_manager_for_config)
    if manager is not None:
        await adispatch_custom_event(REPORT_EVENT, result.to_event(), config=config)
    return result


def _listeners(
    callbacks: Callbacks | None, manager_for: Callable[[RunnableConfig], BaseCallbackManager]
) -> tuple[BaseCallbackManager | None, RunnableConfig]:
    """The callback manager of the run to report into and its config, or None when there is no
    run or no handler asks for the event. A run manager's child is used as it is: configuring a
    manager (what dispatch_custom_event does) costs more than a packing's report is worth when
    nobody listens."""
    if isinstance(callbacks, BaseCallbackManager):
        manager, config = callbacks, RunnableConfig(callbacks=callbacks)
    else:
        config = ensure_config(RunnableConfig(callbacks=callbacks) if callbacks is not None else None)
        manager = manager_for(config)
    listening = manager.parent_run_id is not None and any(_asks(h) for h in manager.handlers)
    return (manager if listening else None), config


def _asks(handler: BaseCallbackHandler) -> bool:
    """Whether ``handler`` receives custom events and does something with them: LangChain skips
    one whose ``ignore_custom_event`` is true, and the base ``on_custom_event`` does nothing."""
    if getattr(handler, "ignore_custom_event", False):
        return False
    return getattr(type(handler), "on_custom_event", None) not in _IGNORING


def retriever_ls_params(retriever: Any, /, **kwargs: Any) -> LangSmithRetrieverParams:
    """``BudgetedRetriever._get_ls_params``: the upstream retriever's LangSmith parameters
    (``ls_vector_store_provider``, ``ls_embedding_provider``, ...), the budgeted retriever's
    name, and this call's budget and policy (``ls_max_tokens``, ``ls_policy``)."""
    upstream = retriever.retriever
    params: dict[str, Any] = dict(upstream._get_ls_params()) if isinstance(upstream, BaseRetriever) else {}
    params.update(BaseRetriever._get_ls_params(retriever))
    params["ls_max_tokens"] = kwargs.get("max_tokens", retriever.packer.max_tokens)
    params["ls_policy"] = kwargs.get("policy", retriever.packer.policy)
    return params  # type: ignore[return-value]  # LangSmith keeps ls_ keys it does not declare


def _configure(
    manager: type[CallbackManager] | type[AsyncCallbackManager],
    retriever: BaseRetriever,
    config: RunnableConfig | None,
    kwargs: dict[str, Any],
) -> tuple[Any, dict[str, Any]]:
    """The callback manager ``BaseRetriever.invoke`` configures for a call, and the arguments of
    its ``on_retriever_start``: a ``recall`` is traced as the same retriever run."""
    config = ensure_config(config)
    metadata = {**(config.get("metadata") or {}), **retriever._get_ls_params(**kwargs)}
    configured = manager.configure(
        config.get("callbacks"),
        None,
        verbose=kwargs.get("verbose", False),
        inheritable_tags=config.get("tags"),
        local_tags=retriever.tags,
        inheritable_metadata=metadata,
        local_metadata=retriever.metadata,
    )
    start = {"name": config.get("run_name") or retriever.get_name(), "run_id": kwargs.pop("run_id", None)}
    return configured, start


@contextmanager
def retriever_run(
    retriever: BaseRetriever, query: str, config: RunnableConfig | None, kwargs: dict[str, Any]
) -> Iterator[CallbackManagerForRetrieverRun]:
    """The retriever run of one call, opened as ``invoke`` opens it; an error ends it as one.
    The caller ends it with ``on_retriever_end(documents)``."""
    manager, start = _configure(CallbackManager, retriever, config, kwargs)
    run: CallbackManagerForRetrieverRun = manager.on_retriever_start(None, query, **start)
    try:
        yield run
    except Exception as exc:
        run.on_retriever_error(exc)
        raise


@asynccontextmanager
async def aretriever_run(
    retriever: BaseRetriever, query: str, config: RunnableConfig | None, kwargs: dict[str, Any]
) -> AsyncIterator[AsyncCallbackManagerForRetrieverRun]:
    """:func:`retriever_run` for ``ainvoke``'s run, whose handlers are awaited."""
    manager, start = _configure(AsyncCallbackManager, retriever, config, kwargs)
    run: AsyncCallbackManagerForRetrieverRun = await manager.on_retriever_start(None, query, **start)
    try:
        yield run
    except Exception as exc:
        await run.on_retriever_error(exc)
        raise
