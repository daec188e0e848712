"""Token counting that works offline, says which tokenizer counted, and never raises on text.

An encoding name resolves, in order, with no network for the encodings recallpack ships:

1. tiktoken's own cache (``TIKTOKEN_CACHE_DIR``, else ``DATA_GYM_CACHE_DIR``, else the temp dir);
2. the copies of cl100k_base and o200k_base shipped in ``recallpack.packing.encodings``;
3. for an encoding not shipped, tiktoken's normal loading (its plugins, or a download);
4. UTF-8 bytes, an upper bound for byte-level BPE, with exactly one warning per process.

Every file is checked against the SHA-256 tiktoken expects for it; a copy that fails is
reported in ``resolve_encoding(name).source`` and never used.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import numbers
import os
import tempfile
import threading
import warnings
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, Union

from recallpack.packing import encodings as shipped
from recallpack.packing.encodings import SourceUnavailable
from recallpack.packing.errors import (
    BudgetError,
    CandidateError,
    RecallpackError,
    RecallpackWarning,
    TokenizerError,
)

if TYPE_CHECKING:
    import tiktoken

__all__ = [
    "Tokenizer",
    "TiktokenTokenizer",
    "HeuristicTokenizer",
    "ByteTokenizer",
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
_SEEN_MAX = 65_536  # hashes of texts counted once (about 4 MB at most), then forgotten together


class _CountCache:
    """Least-recently-used counts, bounded by the characters of text it keeps alive (a bound
    on entries alone would let 65,536 long texts pin gigabytes).

    A text is admitted the second time it is counted: most texts a packer sees are counted
    once and never again, and keeping those would cost an insertion, an eviction and the text's
    memory each, for nothing. The first sight leaves only the text's hash behind.
    """

    def __init__(self, max_chars: int) -> None:
        self._counts: OrderedDict[str, int] = OrderedDict()
        self._chars = 0
        self._max_chars = max_chars
        self._seen: set[int] = set()
        self._lock = threading.Lock()

    # A lookup and a first sight take no lock: each is one operation on a built-in container,
    # atomic under the GIL, and they are the common cases. Reordering and insertion, which
    # take several steps, hold the lock.

    def get(self, text: str) -> int | None:
        count = self._counts.get(text)
        if count is not None:
            with self._lock:
                if text in self._counts:
                    self._counts.move_to_end(text)
        return count

    def put(self, text: str, count: int) -> None:
        key = hash(text)  # computed once per str object, and kept in it
        if key not in self._seen:
            if len(self._seen) >= _SEEN_MAX:
                self._seen.clear()
            self._seen.add(key)
            return
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
            self._seen.clear()
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
    #: True when counting calls code of the caller's (a function, a model, a subclass's own
    #: ``_count``), which recall_many keeps out of forked workers unless asked.
    runs_caller_code: bool = True

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

    def __getstate__(self) -> dict[str, Any]:
        # The count cache holds a lock and can hold megabytes: a copy starts with an empty one.
        state = self.__dict__.copy()
        state.pop("_cache", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._cache = _CountCache(_CACHE_CHARS)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


def _grapheme_floor(text: str, cut: int) -> int:
    """The largest grapheme-cluster boundary of ``text`` at or before ``cut``."""
    if cut <= 0 or cut >= len(text):
        return max(0, min(cut, len(text)))
    before, after = text[cut - 1], text[cut]
    if before < "\x7f" and after < "\x7f" and not (before == "\r" and after == "\n"):
        return cut  # between two ASCII characters other than CR LF there is always a boundary
    try:
        import regex
    except ImportError:  # pragma: no cover - tiktoken depends on regex
        return cut
    floor = 0
    # Boundaries depend on what precedes (a run of regional indicators pairs up from its start),
    # so clusters are read from the beginning; the prefix is about to be counted anyway.
    for match in regex.finditer(r"\X", text):
        if match.end() > cut:
            break
        floor = match.end()
    return floor


class HeuristicTokenizer(Tokenizer):
    """``ceil(len(text) / 4)``: cheap, deterministic, and only an estimate."""

    exact = False
    runs_caller_code = False

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


class ByteTokenizer(Tokenizer):
    """UTF-8 bytes: never fewer than the tokens of a byte-level BPE such as cl100k_base or
    o200k_base, whose every token covers at least one byte. The fallback when an encoding
    cannot be loaded, so a budget it passes still holds under the real encoding."""

    exact = False
    splits_at_line_starts = True  # bytes add up across any split
    runs_caller_code = False

    def __init__(self, encoding: str = DEFAULT_ENCODING) -> None:
        super().__init__()
        self.encoding_name = encoding
        self.name = f"bytes (upper bound for {encoding})"

    def _count(self, text: str) -> int:
        # surrogatepass: a lone surrogate takes 3 bytes, as the U+FFFD tiktoken replaces it with.
        return len(text.encode("utf-8", "surrogatepass"))

    def count(self, text: str) -> int:
        return self._count(text)

    def count_upto(self, text: str, limit: int) -> int:
        return limit + 1 if len(text) > limit else self._count(text)  # a char is >= 1 byte

    def truncate(self, text: str, max_tokens: int) -> str:
        if max_tokens <= 0:
            return ""
        if self.count_upto(text, max_tokens) <= max_tokens:
            return text
        head = text[:max_tokens]
        data = head.encode("utf-8", "surrogatepass")[:max_tokens]
        cut = len(data.decode("utf-8", "ignore"))  # drops a character cut in the middle
        # "ignore" also drops an encoded lone surrogate; back off until the bytes truly fit.
        while cut and self._count(head[:cut]) > max_tokens:
            cut -= 1
        return text[: _grapheme_floor(text, cut)]

    def _window_chars(self, max_tokens: int) -> int | None:
        return max_tokens


class CallableTokenizer(Tokenizer):
    """A callable ``str -> int`` (a count), or ``str -> list`` (tokens, as LlamaIndex's
    ``Settings.tokenizer`` returns; the count is their number). Truncation searches
    character prefixes with it and cuts only between grapheme clusters."""

    exact = True

    def __init__(self, fn: Callable[[str], Any], name: str | None = None) -> None:
        super().__init__()
        self._fn = fn
        self.name = name or f"callable:{_callable_name(fn)}"

    def _count(self, text: str) -> int:
        try:
            value = self._fn(text)
        except RecallpackError:
            raise
        except Exception as exc:  # the caller's code: say whose it was, keep what it raised
            raise TokenizerError(
                f"tokenizer {self.name} raised {type(exc).__name__} counting a text of "
                f"{len(text):,} characters: {exc}"
            ) from exc
        if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
            return len(value)
        if type(value).__module__ == "numpy" and getattr(value, "ndim", None) == 1:
            return len(value)  # token ids as a NumPy array
        if isinstance(value, numbers.Integral) and not isinstance(value, bool) and int(value) >= 0:
            return int(value)  # NumPy's integers too: a count, as np.sum or len gives it
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise TokenizerError(
                f"tokenizer {self.name} returned {value!r} for a text; a tokenizer callable "
                "must return a non-negative int or a list of tokens"
            )
        return value

    def truncate(self, text: str, max_tokens: int) -> str:
        if max_tokens <= 0:
            return ""
        if self.count(text) <= max_tokens:
            return text
        # Invariant: text[:fits] counts at most max_tokens (or is empty), text[:over] more.
        fits, over = 0, len(text)
        # Grow the probe from max_tokens chars first, so a small cut of a huge text counts
        # prefixes about as long as the cut, not halves of the whole text.
        probe = max_tokens
        while probe < over:
            if self._count(text[:probe]) <= max_tokens:
                fits, probe = probe, probe * 2
            else:
                over = probe
        while over - fits > 1:
            middle = (fits + over) // 2
            if self._count(text[:middle]) <= max_tokens:
                fits = middle
            else:
                over = middle
        cut = _grapheme_floor(text, fits)
        # A counter need not be monotonic: back off cluster by cluster until the cut fits.
        while cut and self.count(text[:cut]) > max_tokens:
            cut = _grapheme_floor(text, cut - 1)
        return text[:cut]


class TiktokenTokenizer(Tokenizer):
    """A tiktoken encoding. Special-token text such as ``<|endoftext|>`` counts as plain text."""

    exact = True
    runs_caller_code = False  # tiktoken's own encoder, whoever built the Encoding

    def __init__(self, encoding: tiktoken.Encoding, source: str = "", *, known: bool = False) -> None:
        super().__init__()
        self.encoding = encoding
        self.name = encoding.name
        self.source = source
        #: The encoding is one whose split pattern recallpack knows: it resolved the encoding
        #: itself, or tiktoken's registry built this very object. A name promises nothing: an
        #: Encoding a caller built can be called cl100k_base and split as it likes.
        self.known = known
        # Their split patterns end every piece at a newline and start none before a line's
        # first non-space character (tests/test_tokenizer.py checks it on random text).
        self.splits_at_line_starts = known and encoding.name in _LINE_START_SPLITTING
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

    def __reduce__(self) -> tuple[Any, ...]:
        # An encoding known by name is sent as its name and re-resolved on arrival, to that
        # process's shared instance, not as megabytes of ranks. An Encoding the caller built
        # travels whole: its name may promise nothing.
        if _is_resolved_encoding(self.encoding) or _is_tiktoken_registered(self.encoding):
            return (_shared_tiktoken, (self.encoding.name,))
        return (TiktokenTokenizer, (self.encoding, self.source))  # not known, there either


def is_known_encoding(encoding: object) -> bool:
    """Whether ``encoding`` is a tiktoken Encoding whose split pattern recallpack can vouch for:
    the very object it resolved, or the one tiktoken's registry built for that name. Never by
    its name alone: anyone can build an Encoding called cl100k_base."""
    return hasattr(encoding, "name") and (
        _is_resolved_encoding(encoding) or _is_tiktoken_registered(encoding)  # type: ignore[arg-type]
    )


def _is_resolved_encoding(encoding: tiktoken.Encoding) -> bool:
    shared = _resolved.peek(encoding.name)
    return isinstance(shared, TiktokenTokenizer) and shared.encoding is encoding


def _is_tiktoken_registered(encoding: tiktoken.Encoding) -> bool:
    """``tiktoken.get_encoding(name)`` returned this very object (tiktoken's own pickling test)."""
    try:
        from tiktoken import registry
    except ImportError:  # pragma: no cover
        return False
    return getattr(registry, "ENCODINGS", {}).get(encoding.name) is encoding


_PIECE_MARGIN = 64
_LINE_START_SPLITTING = frozenset({"cl100k_base", "o200k_base", "o200k_harmony"})


def _probe_chars(limit: int) -> int:
    return (limit + _PIECE_MARGIN) * 8


class CountsTokens(Protocol):
    """A LangChain language model, as far as counting goes."""

    def get_num_tokens(self, text: str) -> int: ...


class EncodesText(Protocol):
    """A Hugging Face ``tokenizers.Tokenizer`` or ``transformers`` tokenizer, or a tiktoken
    ``Encoding``, as far as counting goes."""

    def encode(self, text: str, /, *args: Any, **kwargs: Any) -> Any: ...


TokenizerSpec = Union[str, Tokenizer, CountsTokens, EncodesText, Callable[[str], Any], None]
"""An encoding or model name, ``"chars"``, a Tokenizer, a tiktoken ``Encoding``, a LangChain
language model, a Hugging Face tokenizer, a ``str -> int`` or ``str -> list`` callable, or None."""


# --- the user's own tokenizers, recognised by duck typing ---------------------------------------


class _EncodeCounter:
    """Counts with a Hugging Face tokenizer: ``tokenizers.Tokenizer.encode`` returns an object
    with ``.ids``, a ``transformers`` tokenizer's ``encode`` a list. Special tokens (BOS, CLS)
    are left out: they frame a whole prompt, not each piece of evidence in it."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer

    def __call__(self, text: str) -> int:
        encoded = self.tokenizer.encode(text, add_special_tokens=False)
        return len(getattr(encoded, "ids", encoded))


def _callable_name(fn: object) -> str:
    while isinstance(fn, functools.partial):
        fn = fn.func
    return getattr(fn, "__qualname__", None) or type(fn).__qualname__


def _hugging_face_name(tokenizer: Any) -> str:
    path = getattr(tokenizer, "name_or_path", None)  # transformers
    if isinstance(path, str) and path:
        return f"huggingface:{path}"
    model = getattr(tokenizer, "model", None)  # tokenizers.Tokenizer: WordLevel, BPE, Unigram ...
    kind = f"({type(model).__name__})" if model is not None else ""
    return f"huggingface:{type(tokenizer).__qualname__}{kind}"


def _langchain_name(model: Any) -> str:
    for attribute in ("model_name", "model"):
        value = getattr(model, attribute, None)
        if isinstance(value, str) and value:
            return f"langchain:{type(model).__name__}({value})"
    return f"langchain:{type(model).__name__}"


def _tiktoken_encoding_type() -> type[Any] | None:
    try:
        import tiktoken
    except ImportError:
        return None
    return tiktoken.Encoding


def _from_object(spec: object) -> Tokenizer | None:
    """A Tokenizer for a host object, or None when ``spec`` is none of the known kinds."""
    encoding_type = _tiktoken_encoding_type()
    if encoding_type is not None and isinstance(spec, encoding_type):
        if _is_resolved_encoding(spec):  # one of ours, handed back: share its tokenizer and cache
            return _resolved(spec.name)[0]
        # Trusted by identity, never by name: tiktoken's own object for the name, or no shortcut.
        known = is_known_encoding(spec)
        return TiktokenTokenizer(spec, source="a tiktoken Encoding given by the caller", known=known)
    # Before the generic callable: a transformers tokenizer is callable too, and returns a dict.
    get_num_tokens = getattr(spec, "get_num_tokens", None)
    if callable(get_num_tokens):  # a LangChain language model
        name = _langchain_name(spec)
        try:
            # Without a counter of its own LangChain falls back to GPT-2 from transformers:
            # better to say so now than in the middle of a retrieval.
            get_num_tokens("a")
        except ImportError as exc:
            raise TokenizerError(
                f"tokenizer={name} cannot count tokens here ({exc}); give the model "
                "custom_get_token_ids=..., or pass tokenizer= an encoding name or a callable"
            ) from None
        return CallableTokenizer(get_num_tokens, name=name)
    if callable(getattr(spec, "encode", None)):
        return CallableTokenizer(_EncodeCounter(spec), name=_hugging_face_name(spec))
    if callable(spec):
        return CallableTokenizer(spec)
    return None


# --- resolution of encoding names -----------------------------------------------------------------

_SHIPPED_LABEL = "recallpack's shipped copy, SHA-256 verified"
_fallback_warned = False


@dataclass(frozen=True)
class Resolution:
    """How one encoding name resolved: exactly (and from where) or by the fallback, and why."""

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
    """Where the vocabularies recallpack ships are; None turns that source off (tests do)."""
    return str(shipped.data_dir())


def _read_cached(directory: str, url: str) -> bytes:
    path = os.path.join(directory, _cache_key(url))
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError:
        raise SourceUnavailable(path) from None


class _FileSources:
    """Reads an encoding's files from the first source holding a copy that passes tiktoken's
    SHA-256 check, and remembers which source served it and which copies were refused."""

    def __init__(self) -> None:
        self.sources: list[tuple[str, Callable[[str], bytes]]] = []
        cache = _tiktoken_cache_dir()
        if cache is not None:
            self.sources.append((f"tiktoken cache {cache}", functools.partial(_read_cached, cache)))
        if _bundled_cache_dir() is not None:
            self.sources.append((_SHIPPED_LABEL, shipped.read_shipped))
        self.served: list[str] = []
        self.refused: list[str] = []

    def load(self, url: str, expected_hash: str | None = None) -> dict[bytes, int]:
        filename = url.rsplit("/", 1)[-1]
        for label, read in self.sources:
            try:
                data = read(url)
            except SourceUnavailable:
                continue
            except ValueError as exc:
                self.refused.append(f"{label}: {exc}")
                continue
            shipped_file = shipped.SHIPPED_FILES.get(url)
            expected = expected_hash or (shipped_file.sha256 if shipped_file else None)
            if expected is not None and not shipped.sha256_matches(data, expected):
                self.refused.append(
                    f"{label}: {filename} fails the SHA-256 check tiktoken expects, not used"
                )
                continue
            if label not in self.served:
                self.served.append(label)
            return shipped.parse_tiktoken_bpe(data, f"{label}/{filename}")
        raise SourceUnavailable(url)

    def describe_exact(self) -> str:
        return "; ".join([" and ".join(self.served), *self.refused])

    def describe_fallback(self, encoding: str) -> str:
        reasons = self.refused or [
            f"no copy of {encoding} in "
            + (" or ".join(label for label, _ in self.sources) or "any source (all are off)")
        ]
        return "; ".join([*reasons, f"counting {_bound_label(encoding)}"])


def _load(encoding: str) -> tuple[tiktoken.Encoding | None, Resolution]:
    try:
        import tiktoken
    except ImportError:
        return None, Resolution(encoding, False, "tiktoken is not installed")
    files = _FileSources()
    if encoding in shipped.ENCODING_FILES:
        try:
            built = shipped.build_encoding(encoding, files.load)
        except SourceUnavailable:
            pass
        except Exception as exc:  # noqa: BLE001  # a tiktoken whose constructors differ: go on
            files.refused.append(f"could not build {encoding} from its files ({exc!r})")
        else:
            return built, Resolution(encoding, True, files.describe_exact())
    if encoding not in shipped.shipped_encodings():
        try:
            # tiktoken's own loading: its cache again, its plugins, or a download.
            loaded = tiktoken.get_encoding(encoding)
            return loaded, Resolution(encoding, True, "tiktoken.get_encoding, tiktoken's own loading")
        except Exception as exc:  # noqa: BLE001  # offline, blocked, or a broken plugin
            files.refused.append(f"tiktoken could not load {encoding} ({type(exc).__name__})")
    return None, Resolution(encoding, False, files.describe_fallback(encoding))


def _bound_label(encoding: str) -> str:
    return f"UTF-8 bytes, an upper bound for {encoding}"


class _Registry:
    """One tokenizer per encoding per process, even when threads race to use it first
    (``functools.cache`` would run the load in each racing thread and keep only the last)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}
        self._done: dict[str, tuple[Tokenizer, Resolution]] = {}

    def __call__(self, encoding: str) -> tuple[Tokenizer, Resolution]:
        done = self._done.get(encoding)
        if done is not None:
            return done
        with self._lock:
            lock = self._locks.setdefault(encoding, threading.Lock())
        with lock:  # per encoding: cl100k_base and o200k_base may load at the same time
            done = self._done.get(encoding)
            if done is None:
                done = _build(encoding)
                self._done[encoding] = done
        return done

    def peek(self, encoding: str) -> Tokenizer | None:
        done = self._done.get(encoding)
        return done[0] if done is not None else None

    def cache_clear(self) -> None:
        with self._lock:
            self._done.clear()


def _build(encoding: str) -> tuple[Tokenizer, Resolution]:
    loaded, resolution = _load(encoding)
    if loaded is not None:
        return TiktokenTokenizer(loaded, resolution.source, known=True), resolution
    _warn_fallback(resolution)
    return ByteTokenizer(encoding), resolution


_resolved = _Registry()


def _shared_tiktoken(encoding: str) -> Tokenizer:
    """What an unpickled TiktokenTokenizer becomes: this process's own tokenizer for the name."""
    tokenizer, resolution = _resolved(encoding)
    if not tokenizer.exact:
        raise TokenizerError(
            f"a tokenizer counting {encoding} exactly was sent to a process where {encoding} "
            f"does not resolve exactly ({resolution.source}); run `recallpack doctor` there"
        )
    return tokenizer


def _warn_fallback(resolution: Resolution) -> None:
    global _fallback_warned
    if _fallback_warned:
        return
    _fallback_warned = True
    advice = fallback_advice(resolution.encoding)
    message = (
        f"{resolution.source}. Counts are an upper bound, so budgets still hold, but blocks "
        f"carry less than they could. {advice[0].upper()}{advice[1:]}; "
        "`recallpack doctor` shows what resolves."
    )
    logging.getLogger("recallpack").warning("%s", message)
    warnings.warn(f"recallpack: {message}", RecallpackWarning, stacklevel=5)


def fallback_advice(encoding: str) -> str:
    """What makes ``encoding`` count exactly here, for this encoding: a reinstall for the two
    recallpack ships, a prewarmed tiktoken cache for any other."""
    if encoding in shipped.shipped_encodings():
        return (
            f"recallpack ships {encoding}: reinstall recallpack (its copy is missing or damaged), "
            "or set TIKTOKEN_CACHE_DIR to a cache holding it"
        )
    return (
        f"prewarm a cache on a machine with network: TIKTOKEN_CACHE_DIR=/opt/tiktoken python -c "
        f"\"import tiktoken; tiktoken.get_encoding('{encoding}')\", then set "
        "TIKTOKEN_CACHE_DIR=/opt/tiktoken here"
    )


def _known_encodings() -> list[str]:
    try:
        import tiktoken

        return sorted(tiktoken.list_encoding_names())
    except ImportError:
        return sorted(shipped.ENCODING_FILES)


@functools.lru_cache(maxsize=256)
def _encoding_for(spec: str) -> str:
    if spec in shipped.ENCODING_FILES or spec in _known_encodings():
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


_CHARS = HeuristicTokenizer()


def _tokenizer_for_name(spec: str) -> Tokenizer:
    if spec in ("chars", "heuristic"):
        return _CHARS
    return _resolved(_encoding_for(spec))[0]


def get_tokenizer(spec: TokenizerSpec = None) -> Tokenizer:
    """A tokenizer for ``spec``, which may be:

    - an encoding name (``"cl100k_base"``, ``"o200k_base"``) or a model name (``"gpt-4o"``);
      ``None`` means cl100k_base, and these instances are shared, count caches included;
    - ``"chars"``: ``ceil(len / 4)``, an explicit estimate;
    - a ``tiktoken.Encoding``; a LangChain language model (its ``get_num_tokens``);
      a Hugging Face ``tokenizers.Tokenizer`` or ``transformers`` tokenizer (its ``encode``,
      special tokens left out); a LlamaIndex-style callable ``str -> list`` (the list's length);
      any callable ``str -> int``.

    Its ``name`` is what results report as ``tokenizer_used``.

    >>> get_tokenizer("chars").count("four")
    1
    >>> get_tokenizer(str.split).count("one two three")
    3
    """
    if spec is None:
        return _tokenizer_for_name(DEFAULT_ENCODING)
    if isinstance(spec, Tokenizer):
        return spec
    if isinstance(spec, str):
        return _tokenizer_for_name(spec.strip())
    tokenizer = _from_object(spec)
    if tokenizer is not None:
        return tokenizer
    raise TokenizerError(
        f"tokenizer={spec!r} is not usable; pass an encoding name such as 'cl100k_base', "
        "a model name, 'chars', a Tokenizer, a tiktoken Encoding, a LangChain language model, "
        "a Hugging Face tokenizer, or a callable str -> int or str -> list"
    )


def _check_limit(value: object, field: str, *, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise BudgetError(f"{field}={value!r} must be an int >= {minimum}")
    if value < minimum:
        raise BudgetError(f"{field}={value!r} must be an int >= {minimum}")
    return value


def _check_text(value: object) -> str:
    # A non-str would fail deep in the encoder (or count its repr) instead of naming the mistake.
    if not isinstance(value, str):
        raise CandidateError(f"text={value!r:.60} must be a str, got {type(value).__name__}")
    return value


def count_tokens(text: str, tokenizer: TokenizerSpec = None) -> int:
    """Tokens in ``text``."""
    return get_tokenizer(tokenizer).count(_check_text(text))


def truncate_to_tokens(text: str, max_tokens: int, tokenizer: TokenizerSpec = None) -> str:
    """The longest prefix of ``text`` on token boundaries that counts at most ``max_tokens``."""
    _check_limit(max_tokens, "max_tokens", minimum=0)
    return get_tokenizer(tokenizer).truncate(_check_text(text), max_tokens)


def split_token_windows(
    text: str, max_tokens: int, overlap_tokens: int = 0, tokenizer: TokenizerSpec = None
) -> list[str]:
    """Split ``text`` into windows of at most ``max_tokens``, consecutive windows sharing
    ``overlap_tokens`` (token-window chunking; :func:`recallpack.token_windows` gives each window
    its offsets, count and a stable id)."""
    _check_limit(max_tokens, "max_tokens")
    _check_limit(overlap_tokens, "overlap_tokens", minimum=0)
    if overlap_tokens >= max_tokens:
        raise BudgetError(
            f"overlap_tokens={overlap_tokens} must be less than max_tokens={max_tokens}"
        )
    return get_tokenizer(tokenizer).split_windows(_check_text(text), max_tokens, overlap_tokens)
