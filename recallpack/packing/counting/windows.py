"""Token windows: a text cut into chunks of at most ``max_tokens``, each with a stable id.

Seed 003's token-window chunking, made safe to index incrementally:

* every window counts at most ``max_tokens`` by the tokenizer that will count it later, unless
  one grapheme cluster alone is larger (it then forms a window by itself);
* a window never ends inside a grapheme cluster (an emoji, a letter and its accents);
* appending text to a document leaves every window before its last one unchanged (its index,
  offsets, text and id), so re-indexing a growing document rewrites only its tail;
* ``chunk_id`` depends on the window's own text, start offset and index and on the settings,
  so the same text split the same way gets the same ids in any process.

The second point is what makes the third possible: a window ends at the last cluster boundary
before the first character at which it would overflow, and that decision reads only the text up
to that character, never what follows it.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from recallpack.packing.block.render import chunk_framing
from recallpack.packing.errors import BudgetError, CandidateError, ConfigError
from recallpack.packing.reading.windowing import window_spans
from recallpack.packing.tokenizers import (
    Tokenizer,
    TokenizerSpec,
    get_tokenizer,
)
from recallpack.packing.validation import check_count, did_you_mean

if TYPE_CHECKING:
    pass

__all__ = [
    "Window",
    "token_windows",
    "split_token_windows",
    "chunk_size_for",
    "check_window_settings",
    "refuse_unknown_settings",
    "WindowSplitting",
    "CHUNK_METADATA_KEYS",
    "DEFAULT_WINDOW_TOKENS",
    "DEFAULT_OVERLAP_TOKENS",
]

#: Seed 003's chunking defaults, shared by both hosts' splitters.
DEFAULT_WINDOW_TOKENS = 800
DEFAULT_OVERLAP_TOKENS = 80

#: The metadata keys every chunk carries in both hosts' splitters.
CHUNK_METADATA_KEYS = (
    "chunk_index",
    "chunk_count",
    "parent_hash",
    "chunk_id",
    "start_char",
    "end_char",
    "token_count",
)

# Fixed forever: changing it would change every chunk id ever issued.
_ID_NAMESPACE = uuid.UUID("6f0d3c1e-2b7a-5e8f-9a41-7c2d5b8e0f13")


@dataclass(frozen=True)
class Window:
    """One chunk of a text: ``text == parent[start:end]``, with its count and identity."""

    text: str
    start: int
    end: int
    chunk_index: int
    chunk_count: int
    token_count: int
    parent_hash: str
    chunk_id: str

    def metadata(self) -> dict[str, Any]:
        """The chunk's metadata as both hosts' splitters record it (``CHUNK_METADATA_KEYS``)."""
        return {
            "chunk_index": self.chunk_index,
            "chunk_count": self.chunk_count,
            "parent_hash": self.parent_hash,
            "chunk_id": self.chunk_id,
            "start_char": self.start,
            "end_char": self.end,
            "token_count": self.token_count,
        }


def check_window_settings(max_tokens: object, overlap_tokens: object) -> tuple[int, int]:
    max_tokens = check_count(max_tokens, "max_tokens", 1, why=" (tokens per window)")
    overlap_tokens = check_count(overlap_tokens, "overlap_tokens", 0, why=" (0 means no overlap)")
    if overlap_tokens >= max_tokens:
        raise BudgetError(
            f"overlap_tokens={overlap_tokens} must be less than max_tokens={max_tokens}; "
            f"lower overlap_tokens to at most {max_tokens - 1} or raise max_tokens"
        )
    return max_tokens, overlap_tokens


def refuse_unknown_settings(owner: str, unknown: Mapping[str, object], valid: Sequence[str]) -> None:
    """A ConfigError for keywords ``owner`` does not take, naming the closest valid one."""
    if not unknown:
        return
    name = next(iter(unknown))
    hint = _HOST_NAMES.get(name) or did_you_mean(name, valid)
    suggestion = f"; did you mean {hint}?" if hint else f"; valid settings: {', '.join(valid)}"
    raise ConfigError(f"{owner} got an unknown setting {name}={unknown[name]!r}{suggestion}")


# What the hosts' own splitters call these settings.
_HOST_NAMES = {"chunk_size": "max_tokens", "chunk_overlap": "overlap_tokens", "length_function": "tokenizer"}


class WindowSplitting:
    """What both hosts' splitters do with their ``max_tokens`` and ``overlap_tokens``: the
    windows of a text, their texts, and the name of the tokenizer that counts them. A host's
    class gives ``window_tokenizer()`` (how it holds its tokenizer is its own business)."""

    if TYPE_CHECKING:
        max_tokens: int
        overlap_tokens: int

    def window_tokenizer(self) -> Tokenizer:
        raise NotImplementedError

    @property
    def tokenizer_used(self) -> str:
        """The name of the tokenizer that counts every chunk."""
        return self.window_tokenizer().name

    def split_windows(self, text: str) -> list[Window]:
        """The windows of ``text``, with their offsets, counts and ids."""
        return token_windows(text, self.max_tokens, self.overlap_tokens, self.window_tokenizer())

    def split_text(self, text: str) -> list[str]:
        return [window.text for window in self.split_windows(text)]


def token_windows(
    text: str, max_tokens: int, overlap_tokens: int = 0, tokenizer: TokenizerSpec = None
) -> list[Window]:
    """Cut ``text`` into windows of at most ``max_tokens``, each starting with about the last
    ``overlap_tokens`` of the window before it.

    ``tokenizer`` is anything :func:`recallpack.get_tokenizer` takes (``None`` is cl100k_base).
    Windows before the last stay the same when text is appended for every tiktoken encoding
    and for any counter whose count never drops as text grows (``"chars"``, word counts).

    >>> [w.text for w in token_windows("one two three four five", 2, tokenizer="chars")]
    ['one two ', 'three fo', 'ur five']
    >>> token_windows("", 10)
    []
    """
    if not isinstance(text, str):
        raise ConfigError(f"text must be a str, got {type(text).__name__}")
    max_tokens, overlap_tokens = check_window_settings(max_tokens, overlap_tokens)
    tok = get_tokenizer(tokenizer)
    spans = window_spans(text, max_tokens, overlap_tokens, tok)
    parent_hash = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    settings = f"{tok.name}\x1f{max_tokens}\x1f{overlap_tokens}"
    count = len(spans)
    return [
        Window(
            text=text[start:end],
            start=start,
            end=end,
            chunk_index=index,
            chunk_count=count,
            token_count=tokens,
            parent_hash=parent_hash,
            chunk_id=str(uuid.uuid5(_ID_NAMESPACE, f"{settings}\x1f{index}\x1f{start}\x1f{text[start:end]}")),
        )
        for index, (start, end, tokens) in enumerate(spans)
    ]


def split_token_windows(
    text: str, max_tokens: int, overlap_tokens: int = 0, tokenizer: TokenizerSpec = None
) -> list[str]:
    """Split ``text`` into windows of at most ``max_tokens``, consecutive windows sharing
    ``overlap_tokens`` (token-window chunking; :func:`recallpack.token_windows` gives each window
    its offsets, count and a stable id). The same windows as ``token_windows``, except that a
    grapheme cluster counting over ``max_tokens`` on its own is given up character by character.

    >>> split_token_windows("one two three four five", 2, tokenizer="chars")
    ['one two ', 'three fo', 'ur five']
    """
    max_tokens, overlap_tokens = check_window_settings(max_tokens, overlap_tokens)
    tok = get_tokenizer(tokenizer)
    if not isinstance(text, str):  # before any counting: the encoder would fail deep inside
        raise CandidateError(f"text={text!r:.60} must be a str, got {type(text).__name__}")
    spans = window_spans(text, max_tokens, overlap_tokens, tok, oversize="char")
    return [text[start:end] for start, end, _ in spans]


# --- sizing chunks for a block ------------------------------------------------------------------


def chunk_size_for(
    max_tokens: int,
    items: int,
    tokenizer: TokenizerSpec = None,
    *,
    lines_per_chunk: int = 1,
    label: str = "Source excerpt",
    scopes: Sequence[str] = (),
    resource_uri: str | None = None,
) -> int:
    """The largest chunk size (in tokens) such that ``items`` chunks of that size, rendered as
    recallpack's default evidence block, fit ``max_tokens``.

    Each chunk's framing is its label line, the indentation of each of its lines, its resource
    line and the newline that joins it to the next; the block adds its header once. The framing
    is counted with one token of slack per line, so the sum is an upper bound. Chunks with more
    than ``lines_per_chunk`` lines cost one indentation more per extra line: pass the most lines
    a chunk of yours can have (prose split by tokens: about one line per 10-20 tokens).

    >>> chunk_size_for(2048, 8) > 200
    True
    """
    limit = check_count(max_tokens, "max_tokens", 1)
    n = check_count(items, "items", 1)
    lines = check_count(lines_per_chunk, "lines_per_chunk", 1)
    scopes = _scope_names(scopes)
    if not isinstance(label, str) or not label.strip():
        raise ConfigError(f"label={label!r:.60} must be a non-empty str, such as 'Source excerpt'")
    if resource_uri is not None and not isinstance(resource_uri, str):
        raise ConfigError(f"resource_uri={resource_uri!r:.60} must be a str or None")
    tok = get_tokenizer(tokenizer)
    header, framing = chunk_framing(tok, label, scopes, resource_uri, lines)
    size = (limit - header) // n - framing
    if size < 1:
        need = header + n * (framing + 1)
        raise BudgetError(
            f"max_tokens={limit} cannot hold {n} chunks with their framing ({framing} tokens each "
            f"plus a {header}-token header); raise max_tokens to at least {need} or lower items"
        )
    return size


def _scope_names(value: object) -> tuple[str, ...]:
    """The scope names an item shows: one name (a str), or a list or tuple of them."""
    if isinstance(value, str):
        value = (value,)  # one name, not a sequence of letters
    if not isinstance(value, (list, tuple)) or not all(isinstance(s, str) and s.strip() for s in value):
        raise ConfigError(
            f"scopes={value!r:.60} must be a list of non-empty scope names (or one name as a str)"
        )
    return tuple(value)
