"""Automatic recall within what an assembly left of the allowance.

:func:`recall_remaining` calls any retriever with ``recall(query, **overrides) ->
RecallResult`` (an adapter's ``BudgetedRetriever``) with its budget lowered to what is left;
the helpers it is made of are public for adapters that call a retriever themselves.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from recallpack.packing.allowance import Allowance, Remaining, as_remaining
from recallpack.packing.errors import ConfigError
from recallpack.packing.results.result import RecallResult

__all__ = [
    "Recaller",
    "as_recaller",
    "capped_overrides",
    "arecall_of",
    "recall_remaining",
    "arecall_remaining",
]


class Recaller(Protocol):
    """Anything that recalls for a query: an adapter's retriever (``BudgetedRetriever``), or any
    object with ``recall(query, **overrides) -> RecallResult`` (and, optionally, ``arecall``)."""

    def recall(self, query: str, **kwargs: Any) -> RecallResult: ...


def as_recaller(retriever: object) -> Recaller:
    """``retriever`` when it has ``recall(query, ...)``, else a ConfigError naming the adapter
    to wrap it in."""
    if not callable(getattr(retriever, "recall", None)):
        raise ConfigError(
            f"retriever={type(retriever).__name__} has no recall(query) -> RecallResult; wrap it in "
            "a recallpack adapter (recallpack.adapters.langchain.BudgetedRetriever for LangChain)"
        )
    return retriever  # type: ignore[return-value]


def capped_overrides(retriever: object, overrides: dict[str, Any], room: Remaining) -> dict[str, Any]:
    """``overrides`` with max_tokens/max_items lowered to ``room`` where the retriever's own
    (or the overridden) values are larger. ``k`` is LangChain's name for max_items."""
    if "k" in overrides:
        overrides["max_items"] = overrides.pop("k")
    for field, room_left in (("max_tokens", room.tokens), ("max_items", room.items)):
        own = overrides.get(field, getattr(retriever, field, None))
        overrides[field] = room_left if own is None else min(own, room_left)
    return overrides


async def arecall_of(retriever: Recaller, query: str, kwargs: Mapping[str, Any]) -> RecallResult:
    """``retriever.arecall(query, **kwargs)``, or its ``recall`` when it has no async one."""
    arecall = getattr(retriever, "arecall", None)
    if arecall is None:
        return retriever.recall(query, **kwargs)
    result: RecallResult = await arecall(query, **kwargs)
    return result


def _room(retriever: object, query: object, remaining: object) -> Remaining | None:
    as_recaller(retriever)
    if not isinstance(query, str):
        raise ConfigError(f"query={query!r} must be a str")
    room = as_remaining(remaining)  # type: ignore[arg-type]
    # Below what one item needs (the block's header and label), nothing found could be shown.
    # Read off the retriever's Packer by name: this module does not import the packer, which
    # takes an Allowance (a Packer's least_tokens is an int; anything else counts as 1).
    least = getattr(getattr(retriever, "packer", None), "least_tokens", 1)
    least = least if isinstance(least, int) else 1
    return None if room.exhausted or room.tokens < least else room


def recall_remaining(
    retriever: Recaller | None, query: str, remaining: Remaining | Allowance, **overrides: Any
) -> RecallResult | None:
    """Automatic recall for ``query`` within the retriever's own budget and ``remaining``.

    ``None`` when the allowance has nothing left: the retriever is not even called, since
    nothing it found could be shown.
    """
    room = _room(retriever, query, remaining)
    if room is None or retriever is None:
        return None
    return retriever.recall(query, **capped_overrides(retriever, dict(overrides), room))


async def arecall_remaining(
    retriever: Recaller | None, query: str, remaining: Remaining | Allowance, **overrides: Any
) -> RecallResult | None:
    """:func:`recall_remaining` through the retriever's ``arecall`` when it has one."""
    room = _room(retriever, query, remaining)
    if room is None or retriever is None:
        return None
    return await arecall_of(retriever, query, capped_overrides(retriever, dict(overrides), room))
