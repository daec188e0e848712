"""Deprecated: this module became the package :mod:`recallpack.packing.tokenizers`.

Its public names still import from here for one release, each with a DeprecationWarning naming
its new place; the protocols of the hosts' tokenizers moved to :mod:`recallpack.adapters.tokenizers`.
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any

_MOVED = {
    **dict.fromkeys(
        [
            "Tokenizer", "TiktokenTokenizer", "HeuristicTokenizer", "ByteTokenizer", "CallableTokenizer",
            "TokenizerSpec", "Resolution", "get_tokenizer", "resolve_encoding", "count_tokens",
            "truncate_to_tokens", "DEFAULT_ENCODING", "fallback_advice",
            "is_known_encoding",
        ],
        "recallpack.packing.tokenizers",
    ),
    "split_token_windows": "recallpack.packing.windows",
    "CountsTokens": "recallpack.adapters.tokenizers",
    "EncodesText": "recallpack.adapters.tokenizers",
}  # fmt: skip


def __getattr__(name: str) -> Any:
    place = _MOVED.get(name)
    if place is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(
        f"recallpack.packing.tokenizer.{name} moved to {place}.{name}; import it from there "
        "(the old module goes in the next release)",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(importlib.import_module(place), name)
