"""Deprecated: this module became the package :mod:`recallpack.packing.tokenizers`.

Its public names still import from here for one release, each with a DeprecationWarning naming
its new place; the protocols of the hosts' tokenizers moved to :mod:`recallpack.adapters.tokenizers`.
"""

from __future__ import annotations

from recallpack.packing.errors import moved_names

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


__getattr__ = moved_names(__name__, _MOVED, gone="module")
