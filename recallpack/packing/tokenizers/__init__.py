"""Counting tokens, along tiktoken's own seams.

- ``base``: the ``Tokenizer`` interface and its bounded count cache;
- ``tiktoken_tokenizer``: a tiktoken ``Encoding`` as a Tokenizer;
- ``simple``: the heuristic estimate, the UTF-8 byte bound, and the caller's callable;
- ``sources``: where an encoding's files come from (tiktoken's cache, the shipped copies);
- ``resolve``: names and objects to Tokenizers, one per encoding per registry;
- ``pieces``: a text counted as its pieces' sum, each encoded once (a walk that counts again).
"""

from recallpack.packing.tokenizers.base import Tokenizer
from recallpack.packing.tokenizers.resolve import (
    EncodingRegistry,
    Resolution,
    TokenizerReader,
    TokenizerSpec,
    count_tokens,
    encoding_registry,
    fallback_advice,
    get_tokenizer,
    is_known_encoding,
    register_reader,
    resolve_encoding,
    truncate_to_tokens,
    using_registry,
)
from recallpack.packing.tokenizers.simple import (
    DEFAULT_ENCODING,
    ByteTokenizer,
    CallableTokenizer,
    HeuristicTokenizer,
)
from recallpack.packing.tokenizers.sources import (
    EncodingSource,
    ShippedCopies,
    TiktokenCache,
    default_sources,
)
from recallpack.packing.tokenizers.tiktoken_tokenizer import TiktokenTokenizer

__all__ = [
    "DEFAULT_ENCODING", "ByteTokenizer", "CallableTokenizer", "EncodingRegistry", "EncodingSource",
    "HeuristicTokenizer", "Resolution", "ShippedCopies", "TiktokenCache",
    "TiktokenTokenizer", "Tokenizer", "TokenizerReader", "TokenizerSpec", "count_tokens",
    "default_sources", "encoding_registry", "fallback_advice", "get_tokenizer", "is_known_encoding",
    "register_reader", "resolve_encoding", "truncate_to_tokens", "using_registry",
]
