"""Fixtures the adapter tests share; each host's is imported only by the tests that use it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture
def handler() -> Iterator[Any]:
    """A handler on LlamaIndex's root dispatcher that keeps recallpack's events, for one test."""
    from tests.adapters.llamaindex_events import collecting

    with collecting() as collect:
        yield collect
