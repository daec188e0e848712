"""Constants and limits (their checks are in :mod:`recallpack.packing.validation`).

A leaf: it imports nothing of recallpack, so every other module may import it without forming
a cycle.
"""

from __future__ import annotations

__all__ = [
    "DEFAULT_MAX_TOKENS", "MAX_TOKENS_CEILING", "ELLIPSIS",
    "FETCH_CHUNK_TOKENS", "FETCH_DEPTH_CAP", "fetch_depth",
]

DEFAULT_MAX_TOKENS = 2048
#: A caller may raise its budget up to here; past it only by raising the ceiling too, so one
#: request cannot swallow a whole context window by accident.
MAX_TOKENS_CEILING = 16384
#: Marks text that was cut out of an item.
ELLIPSIS = "…"
#: The adapters ask an upstream that says its depth for max_tokens / this many candidates: a
#: short retrieved chunk (a paragraph, a fact), so that chunks of that size or longer fill the
#: budget; longer ones stop the walk early, which is cheap, since it reads only what it keeps.
FETCH_CHUNK_TOKENS = 50
#: ... and never more than this many: past it a budget is filled by longer chunks, or not at all.
FETCH_DEPTH_CAP = 100


def fetch_depth(max_tokens: int, max_items: int | None = None, own: int | None = None) -> int:
    """How many candidates to ask an upstream for, so that its results can fill ``max_tokens``:
    ``ceil(max_tokens / 50)``, at most twice ``max_items`` when there is a cap (room for
    duplicates and withheld items), at most 100, and never fewer than the upstream's ``own``.

    >>> fetch_depth(2000), fetch_depth(2000, own=4), fetch_depth(2000, max_items=3), fetch_depth(100, own=4)
    (40, 40, 6, 4)
    """
    wanted = min(-(-max_tokens // FETCH_CHUNK_TOKENS), FETCH_DEPTH_CAP)
    if max_items is not None:
        wanted = min(wanted, 2 * max_items)
    return max(wanted, own or 1)
