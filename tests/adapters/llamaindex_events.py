"""What the LlamaIndex tests share: a handler on the root dispatcher that keeps recallpack's events."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events import BaseEvent

from recallpack.adapters.llamaindex import RecallPackedEvent


class Collect(BaseEventHandler):
    """A plain event handler on the root dispatcher, keeping recallpack's events."""

    events: list[RecallPackedEvent] = []

    @classmethod
    def class_name(cls) -> str:
        return "Collect"

    def handle(self, event: BaseEvent, **kwargs: Any) -> None:
        if isinstance(event, RecallPackedEvent):
            self.events.append(event)


@contextmanager
def collecting() -> Iterator[Collect]:
    """A Collect on the root dispatcher while the block runs (the ``handler`` fixture of
    tests/adapters/conftest.py)."""
    collect = Collect(events=[])
    root = get_dispatcher()
    root.add_event_handler(collect)
    try:
        yield collect
    finally:
        root.event_handlers.remove(collect)
