"""LlamaIndex instrumentation: the event each packing emits, in the span of the call that packed."""

from __future__ import annotations

from typing import Any

import llama_index.core.instrumentation as instrument
from llama_index.core.bridge.pydantic import Field
from llama_index.core.instrumentation.event_handlers import BaseEventHandler, NullEventHandler
from llama_index.core.instrumentation.events import BaseEvent

from recallpack.packing.results.result import PackReport, RecallResult

__all__ = ["RecallPackedEvent", "packed"]

# The adapter's own dispatcher (one per name), so its events propagate to the root's handlers.
dispatcher = instrument.get_dispatcher("recallpack.adapters.llamaindex")  # type: ignore[attr-defined]


class RecallPackedEvent(BaseEvent):
    """Emitted once per packing, in the span of the call that packed (``span_id``), so an
    instrumentation handler (Arize Phoenix, or any ``BaseEventHandler`` added to the root
    dispatcher) sees which query was packed and what was kept, cut, dropped and withheld.

    ``data`` is ``RecallResult.to_event()``: the report, its summary and the reached
    candidates' trace rows, with no text of any item."""

    report: PackReport
    component: str
    query: str | None = None
    data: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def class_name(cls) -> str:
        return "RecallPackedEvent"


def packed(component: str, query: str | None, result: RecallResult) -> RecallResult:
    """Dispatch the RecallPackedEvent of one packing, in the caller's current span; ``result``
    back. The event, and its data, are built only when some handler listens: LlamaIndex's own
    ``NullEventHandler``, which the root dispatcher holds by default, does not."""
    if any(_listens(h) for d in _dispatchers() for h in d.event_handlers):
        data = result.to_event()
        dispatcher.event(RecallPackedEvent(report=result.report, component=component, query=query, data=data))
    return result


def _listens(handler: BaseEventHandler) -> bool:
    """Whether ``handler`` does anything with an event: a NullEventHandler's ``handle`` does not."""
    return getattr(type(handler), "handle", None) is not NullEventHandler.handle


def _dispatchers() -> list[Any]:
    """This module's dispatcher and those it propagates to (the root's handlers see its events)."""
    chain: list[Any] = []
    current: Any = dispatcher
    while current is not None:
        chain.append(current)
        current = current.parent if current.propagate else None
    return chain
