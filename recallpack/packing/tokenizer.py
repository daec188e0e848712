"""Token counting that works offline, says which tokenizer counted, and never raises on text.

Resolution of an encoding name, in order (seed 003, and no network ever):

1. tiktoken's own cache (``TIKTOKEN_CACHE_DIR``, else ``DATA_GYM_CACHE_DIR``, else the temp dir);
2. the copies of cl100k_base and o200k_base that llama-index-core ships, when it is installed,
   loaded with ``TIKTOKEN_CACHE_DIR`` pointed at them under a lock and restored afterwards;
3. the deterministic ``ceil(len / 4)`` heuristic, with exactly one warning per process.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import tempfile
import threading
import warnings
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Union

from recallpack.packing.errors import BudgetError, RecallpackWarning, TokenizerError

if TYPE_CHECKING:
    import tiktoken

__all__ = [
    "Tokenizer",
    "TiktokenTokenizer",
    "HeuristicTokenizer",
    "CallableTokenizer",
    "TokenizerSpec",
    "Resolution",
    "get_tokenizer",
    "resolve_encoding",
    "count_tokens",
    "truncate_to_tokens",
    "split_token_windows",
    "DEFAULT_ENCODING",
]

DEFAULT_ENCODING = "cl100k_base"
_CACHE_MAX_TEXT = 65_536  # longer texts are not cached: hashing them would cost more than it saves
_CACHE_CHARS = 16_000_000  # what one tokenizer's cache may hold, in characters of cached text


class _CountCache:
    """Least-recently-used counts, bounded by the characters of text it keeps alive (a bound
    on entries alone would let 65,536 long texts pin gigabytes)."""

    def __init__(self, max_chars: int) -> None:
        self._counts: OrderedDict[str, int] = OrderedDict()
        self._chars = 0
        self._max_chars = max_chars
        self._lock = threading.Lock()

    def get(self, text: str) -> int | None:
        with self._lock:
            count = self._counts.get(text)
            if count is not None:
                self._counts.move_to_end(text)
            return count

    def put(self, text: str, count: int) -> None:
        with self._lock:
            if text in self._counts:
                return
            self._counts[text] = count
            self._chars += len(text)
            while self._chars > self._max_chars:
                old, _ = self._counts.popitem(last=False)
                self._chars -= len(old)

    def clear(self) -> None:
        with self._lock:
            self._counts.clear()
            self._chars = 0

    def __len__(self) -> int:
        return len(self._counts)


class Tokenizer(ABC):
    """Counts tokens. Subclasses give ``name`` (reported as ``tokenizer_used``) and ``exact``."""

    name: str
    exact: bool
    #: True when a split right after a newline, before a character that is not whitespace,
    #: never changes the count: ``count(a + b) == count(a) + count(b)`` for such a split.
    #: recall() then adds up the counts of a block's items instead of counting it again.
    splits_at_line_starts: bool = False

    def __init__(self) -> None:
        self._cache = _CountCache(_CACHE_CHARS)

    @abstractmethod
    def _count(self, text: str) -> int: ...

    def count(self, text: str) -> int:
        """Exact count of ``text`` under this tokenizer."""
        if len(text) > _CACHE_MAX_TEXT:
            return self._count(text)
        count = self._cache.get(text)
        if count is None:
            count = self._count(text)
            self._cache.put(text, count)
        return count

    def count_upto(self, text: str, limit: int) -> int:
        """The exact count when it is at most ``limit``; otherwise any number above ``limit``.

        This is what lets the walk reject a huge text in work bounded by the room left.
        """
        return self.count(text)

    @abstractmethod
    def truncate(self, text: str, max_tokens: int) -> str:
        """The longest prefix of ``text`` on token boundaries that counts at most ``max_tokens``."""

    def split_windows(self, text: str, max_tokens: int, overlap_tokens: int) -> list[str]:
        """Consecutive windows of at most ``max_tokens``, each sharing ``overlap_tokens`` with
        the one before. Generic version for tokenizers without token offsets."""
        windows: list[str] = []
        start = 0
        span = self._window_chars(max_tokens)
        while start < len(text):
            rest = text[start:] if span is None else text[start : start + span]
            # A character that alone needs more than max_tokens still has to go somewhere.
            window = self.truncate(rest, max_tokens) or text[start : start + 1]
            windows.append(window)
            end = start + len(window)
            if end >= len(text):
                break
            back = self._suffix_chars(window, overlap_tokens) if overlap_tokens else 0
            start = max(end - back, start + 1)
        return windows

    def _window_chars(self, max_tokens: int) -> int | None:
        """An upper bound on the chars a window of ``max_tokens`` can hold, if one is known."""
        return None

    def _suffix_chars(self, text: str, tokens: int) -> int:
        """Length in chars of the longest suffix of ``text`` counting at most ``tokens``."""
        lo, hi = 0, len(text)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.count(text[len(text) - mid :]) <= tokens:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


class HeuristicTokenizer(Tokenizer):
    """``ceil(len(text) / 4)``: cheap, deterministic, and only an estimate."""

    exact = False

    def __init__(self, name: str = "chars") -> None:
        super().__init__()
        self.name = name

    def _count(self, text: str) -> int:
        return (len(text) + 3) // 4

    def count(self, text: str) -> int:
        return self._count(text)  # cheaper than a cache lookup, so never cached

    def truncate(self, text: str, max_tokens: int) -> str:
        return text[: max_tokens * 4]

    def split_windows(self, text: str, max_tokens: int, overlap_tokens: int) -> list[str]:
        size, step = max_tokens * 4, (max_tokens - overlap_tokens) * 4
        if len(text) <= size:
            return [text] if text else []
        starts = range(0, len(text) - overlap_tokens * 4, step)
        return [text[i : i + size] for i in starts]


class CallableTokenizer(Tokenizer):
    """Any ``str -> int`` function. Truncation searches character prefixes with it."""

    exact = True

    def __init__(self, fn: Callable[[str], int], name: str | None = None) -> None:
        super().__init__()
        self._fn = fn
        self.name = name or f"callable:{getattr(fn, '__qualname__', type(fn).__name__)}"

    def _count(self, text: str) -> int:
        value = self._fn(text)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise TokenizerError(
                f"tokenizer {self.name} returned {value!r} for a text; "
                "a tokenizer callable must return a non-negative int"
            )
        return value

    def truncate(self, text: str, max_tokens: int) -> str:
        if self.count(text) <= max_tokens:
            return text
        lo, hi = 0, len(text)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.count(text[:mid]) <= max_tokens:
                lo = mid
            else:
                hi = mid - 1
        return text[:lo]


class TiktokenTokenizer(Tokenizer):
    """A tiktoken encoding. Special-token text such as ``<|endoftext|>`` counts as plain text."""

    exact = True

    def __init__(self, encoding: tiktoken.Encoding, source: str = "") -> None:
        super().__init__()
        self.encoding = encoding
        self.name = encoding.name
        self.source = source
        # Their split patterns end every piece at a newline and start none before a line's
        # first non-space character (tests/test_tokenizer.py checks it on random text).
        self.splits_at_line_starts = encoding.name in _LINE_START_SPLITTING
        self._max_token_bytes: int | None = None

    @property
    def max_token_bytes(self) -> int:
        """The longest token in bytes: a text of more bytes than ``limit * this`` cannot fit."""
        if self._max_token_bytes is None:
            self._max_token_bytes = max(map(len, self.encoding.token_byte_values()))
        return self._max_token_bytes

    def _count(self, text: str) -> int:
        return len(self.encoding.encode_ordinary(text))

    def count_upto(self, text: str, limit: int) -> int:
        if len(text) <= _probe_chars(limit):
            return self.count(text)
        # Every char is at least one byte and no token holds more than max_token_bytes.
        if len(text) > limit * self.max_token_bytes:
            return limit + 1
        head = len(self.encoding.encode_ordinary(text[: _probe_chars(limit)]))
        # Only the last piece of a prefix can tokenize differently from the whole text,
        # so a prefix well past the limit settles it without reading the rest.
        if head > limit + _PIECE_MARGIN:
            return head
        return self.count(text)

    def truncate(self, text: str, max_tokens: int) -> str:
        if max_tokens <= 0:
            return ""
        if self.count_upto(text, max_tokens) <= max_tokens:
            return text
        tokens = self._head_tokens(text, max_tokens + _PIECE_MARGIN)
        keep = min(max_tokens, len(tokens))
        while keep > 0:
            head = self.encoding.decode_bytes(tokens[:keep])
            try:
                cut = head.decode("utf-8")
            except UnicodeDecodeError:  # the cut split a multi-byte character
                keep -= 1
                continue
            if text.startswith(cut) and self.count(cut) <= max_tokens:
                return cut
            keep -= 1
        return ""

    def _head_tokens(self, text: str, at_least: int) -> list[int]:
        """Tokens of a prefix of ``text`` long enough to hold ``at_least`` settled tokens."""
        chars = _probe_chars(at_least)
        while chars < len(text):
            tokens = self.encoding.encode_ordinary(text[:chars])
            if len(tokens) > at_least:
                return tokens
            chars *= 2
        return self.encoding.encode_ordinary(text)

    def _window_chars(self, max_tokens: int) -> int | None:
        return max_tokens * self.max_token_bytes


_PIECE_MARGIN = 64
_LINE_START_SPLITTING = frozenset({"cl100k_base", "o200k_base", "o200k_harmony"})


def _probe_chars(limit: int) -> int:
    return (limit + _PIECE_MARGIN) * 8


TokenizerSpec = Union[str, Tokenizer, Callable[[str], int], None]


# --- resolution -------------------------------------------------------------------------------

_BLOB = "https://openaipublic.blob.core.windows.net/encodings/"
# Where tiktoken itself fetches each file; its cache names files by the sha1 of these URLs.
_ENCODING_FILES: dict[str, tuple[str, ...]] = {
    "r50k_base": (_BLOB + "r50k_base.tiktoken",),
    "p50k_base": (_BLOB + "p50k_base.tiktoken",),
    "p50k_edit": (_BLOB + "p50k_base.tiktoken",),
    "cl100k_base": (_BLOB + "cl100k_base.tiktoken",),
    "o200k_base": (_BLOB + "o200k_base.tiktoken",),
    "o200k_harmony": (_BLOB + "o200k_base.tiktoken",),
}
_ENV_LOCK = threading.Lock()
_fallback_warned = False


@dataclass(frozen=True)
class Resolution:
    """How one encoding name resolved: exactly (and from where) or by the heuristic."""

    encoding: str
    exact: bool
    source: str


def _cache_key(url: str) -> str:
    return hashlib.sha1(url.encode()).hexdigest()


def _tiktoken_cache_dir() -> str | None:
    for var in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if var in os.environ:
            return os.environ[var] or None  # tiktoken treats "" as "no cache"
    return os.path.join(tempfile.gettempdir(), "data-gym-cache")


def _bundled_cache_dir() -> str | None:
    """llama-index-core's shipped tiktoken cache, found without importing llama_index.core."""
    # find_spec of the top-level namespace imports nothing; "llama_index.core" would import it.
    try:
        spec = importlib.util.find_spec("llama_index")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "core" / "_static" / "tiktoken_cache"
        if candidate.is_dir():
            return str(candidate)
    return None


def _has_files(directory: str | None, encoding: str) -> bool:
    if directory is None or encoding not in _ENCODING_FILES:
        return False
    return all(
        os.path.exists(os.path.join(directory, _cache_key(url))) for url in _ENCODING_FILES[encoding]
    )


def _load_from(directory: str, encoding: str) -> tiktoken.Encoding:
    import tiktoken

    with _ENV_LOCK:
        saved = os.environ.get("TIKTOKEN_CACHE_DIR")
        os.environ["TIKTOKEN_CACHE_DIR"] = directory
        try:
            return tiktoken.get_encoding(encoding)
        finally:
            if saved is None:
                del os.environ["TIKTOKEN_CACHE_DIR"]
            else:
                os.environ["TIKTOKEN_CACHE_DIR"] = saved


def _load(encoding: str) -> tuple[tiktoken.Encoding | None, Resolution]:
    try:
        import tiktoken  # noqa: F401
    except ImportError:
        return None, Resolution(encoding, False, "tiktoken is not installed")
    own = _tiktoken_cache_dir()
    if _has_files(own, encoding):
        assert own is not None
        try:
            return _load_from(own, encoding), Resolution(encoding, True, f"tiktoken cache {own}")
        except Exception:  # a corrupt cache file: try the next source  # noqa: BLE001
            pass
    bundled = _bundled_cache_dir()
    if _has_files(bundled, encoding):
        assert bundled is not None
        try:
            return _load_from(bundled, encoding), Resolution(
                encoding, True, f"llama-index-core bundled cache {bundled}"
            )
        except Exception:  # noqa: BLE001
            pass
    where = own or "(tiktoken cache disabled)"
    return None, Resolution(
        encoding,
        False,
        f"no cached {encoding} in {where}"
        + ("" if bundled else " and llama-index-core is not installed")
        + "; counting with the chars heuristic",
    )


@cache
def _resolved(encoding: str) -> tuple[Tokenizer, Resolution]:
    loaded, resolution = _load(encoding)
    if loaded is not None:
        return TiktokenTokenizer(loaded, resolution.source), resolution
    _warn_fallback(resolution)
    return HeuristicTokenizer(f"chars (fallback for {encoding})"), resolution


def _warn_fallback(resolution: Resolution) -> None:
    global _fallback_warned
    if _fallback_warned:
        return
    _fallback_warned = True
    warnings.warn(
        f"recallpack: {resolution.source}. Token counts are estimates. "
        "Set TIKTOKEN_CACHE_DIR to a prewarmed cache or install llama-index-core; "
        "`recallpack doctor` shows what resolves.",
        RecallpackWarning,
        stacklevel=4,
    )


def _known_encodings() -> list[str]:
    try:
        import tiktoken

        return sorted(tiktoken.list_encoding_names())
    except ImportError:
        return sorted(_ENCODING_FILES)


def _encoding_for(spec: str) -> str:
    if spec in _ENCODING_FILES or spec in _known_encodings():
        return spec
    try:
        import tiktoken

        return tiktoken.encoding_name_for_model(spec)
    except (ImportError, KeyError):
        raise TokenizerError(
            f"tokenizer={spec!r} is not an encoding or a model name tiktoken knows; use one of "
            f"{', '.join(_known_encodings())}, a model name such as 'gpt-4o', 'chars', "
            "or a callable str -> int"
        ) from None


def resolve_encoding(spec: str) -> Resolution:
    """Say how ``spec`` (an encoding or model name) resolves here, without counting anything."""
    return _resolved(_encoding_for(spec))[1]


@lru_cache(maxsize=64)
def _tokenizer_for_name(spec: str) -> Tokenizer:
    if spec in ("chars", "heuristic"):
        return HeuristicTokenizer()
    return _resolved(_encoding_for(spec))[0]


def get_tokenizer(spec: TokenizerSpec = None) -> Tokenizer:
    """A tokenizer for an encoding name, a model name, ``"chars"``, or a callable ``str -> int``.

    ``None`` means cl100k_base. Instances are shared, so their count caches are too.

    >>> get_tokenizer("chars").count("four")
    1
    """
    if spec is None:
        return _tokenizer_for_name(DEFAULT_ENCODING)
    if isinstance(spec, Tokenizer):
        return spec
    if isinstance(spec, str):
        return _tokenizer_for_name(spec.strip())
    if callable(spec):
        return CallableTokenizer(spec)
    raise TokenizerError(
        f"tokenizer={spec!r} is not usable; pass an encoding name such as 'cl100k_base', "
        "a model name, 'chars', a Tokenizer, or a callable str -> int"
    )


def _check_limit(value: object, field: str, *, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise BudgetError(f"{field}={value!r} must be an int >= {minimum}")
    if value < minimum:
        raise BudgetError(f"{field}={value!r} must be an int >= {minimum}")
    return value


def count_tokens(text: str, tokenizer: TokenizerSpec = None) -> int:
    """Tokens in ``text``."""
    return get_tokenizer(tokenizer).count(text)


def truncate_to_tokens(text: str, max_tokens: int, tokenizer: TokenizerSpec = None) -> str:
    """The longest prefix of ``text`` on token boundaries that counts at most ``max_tokens``."""
    _check_limit(max_tokens, "max_tokens", minimum=0)
    return get_tokenizer(tokenizer).truncate(text, max_tokens)


def split_token_windows(
    text: str, max_tokens: int, overlap_tokens: int = 0, tokenizer: TokenizerSpec = None
) -> list[str]:
    """Split ``text`` into windows of at most ``max_tokens``, consecutive windows sharing
    ``overlap_tokens`` (seed 003's token-window chunking)."""
    _check_limit(max_tokens, "max_tokens")
    _check_limit(overlap_tokens, "overlap_tokens", minimum=0)
    if overlap_tokens >= max_tokens:
        raise BudgetError(
            f"overlap_tokens={overlap_tokens} must be less than max_tokens={max_tokens}"
        )
    return get_tokenizer(tokenizer).split_windows(text, max_tokens, overlap_tokens)
