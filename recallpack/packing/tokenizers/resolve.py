"""From what a caller names (an encoding, a model, ``"chars"``, an object) to a Tokenizer.

An encoding name resolves, in order, with no network for the encodings recallpack ships:

1. tiktoken's own cache (``TIKTOKEN_CACHE_DIR``, else ``DATA_GYM_CACHE_DIR``, else the temp dir);
2. the copies of cl100k_base and o200k_base shipped in ``recallpack.packing.encodings``;
3. for an encoding not shipped, tiktoken's normal loading (its plugins, or a download);
4. UTF-8 bytes, an upper bound for byte-level BPE, with exactly one warning per registry.

Every file is checked against the SHA-256 tiktoken expects for it; a copy that fails is
reported in ``resolve_encoding(name).source`` and never used. The sources are the registry's
(``EncodingRegistry(sources=...)``); ``using_registry`` makes one current for a block of code,
so a test says where files come from instead of patching module globals.

Objects a host framework makes (a LangChain model, a Hugging Face tokenizer) are recognised by
the hosts' readers, found in the core's host table (``recallpack.packing.hosts``) and imported
when such an object first comes: this module names no host's methods. A caller's own kind of
object can be taught with ``register_reader``.
"""

from __future__ import annotations

import functools
import logging
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Union

from recallpack.packing import encodings as shipped
from recallpack.packing.encodings import SourceUnavailable
from recallpack.packing.errors import BudgetError, CandidateError, RecallpackWarning, TokenizerError
from recallpack.packing.hosts import read_host
from recallpack.packing.tokenizers import simple
from recallpack.packing.tokenizers.base import Tokenizer
from recallpack.packing.tokenizers.sources import EncodingSource, FileReader, default_sources
from recallpack.packing.tokenizers.tiktoken_tokenizer import TiktokenTokenizer
from recallpack.packing.validation import is_int

if TYPE_CHECKING:
    import tiktoken

__all__ = [
    "EncodingRegistry",
    "Resolution",
    "TokenizerReader",
    "TokenizerSpec",
    "count_tokens",
    "encoding_registry",
    "fallback_advice",
    "get_tokenizer",
    "is_known_encoding",
    "load_encoding",
    "register_reader",
    "resolve_encoding",
    "shared_tiktoken",
    "truncate_to_tokens",
    "using_registry",
]

TokenizerSpec = Union[str, Tokenizer, Callable[[str], Any], object, None]
"""An encoding or model name, ``"chars"``, a Tokenizer, a tiktoken ``Encoding``, a ``str -> int``
or ``str -> list`` callable, a host's tokenizer an adapter reads (a LangChain language model, a
Hugging Face tokenizer), or None."""

#: Turns an object into a Tokenizer, or returns None when it is not of the reader's kind.
TokenizerReader = Callable[[object], Union[Tokenizer, None]]


@dataclass(frozen=True)
class Resolution:
    """How one encoding name resolved: exactly (and from where) or by the fallback, and why."""

    encoding: str
    exact: bool
    source: str


def load_encoding(
    encoding: str, sources: Sequence[EncodingSource]
) -> tuple[tiktoken.Encoding | None, Resolution]:
    """Build ``encoding`` from the first of ``sources`` whose copy passes the SHA-256 check, else
    (for an encoding recallpack does not ship) by tiktoken's own loading; None when neither can."""
    try:
        import tiktoken
    except ImportError:
        return None, Resolution(encoding, False, "tiktoken is not installed")
    files = FileReader(sources)
    if encoding in shipped.ENCODING_FILES:
        try:
            built = shipped.build_encoding(encoding, files.load)
        except SourceUnavailable:
            pass
        except Exception as exc:  # noqa: BLE001  # a tiktoken whose Encoding refuses the definition: go on
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


class EncodingRegistry:
    """One tokenizer per encoding, built from ``sources`` (``default_sources`` when not given,
    read at each first load), even when threads race to use it first (``functools.cache``
    would run the load in each racing thread and keep only the last). When an encoding falls
    back to the byte bound it warns once, unless ``warn`` is False."""

    def __init__(
        self,
        sources: Sequence[EncodingSource] | Callable[[], Sequence[EncodingSource]] = default_sources,
        *,
        warn: bool = True,
    ) -> None:
        self._sources = sources
        self._warn = warn
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
                done = self._build(encoding)
                self._done[encoding] = done
        return done

    def sources(self) -> tuple[EncodingSource, ...]:
        """Where this registry looks for files now."""
        return tuple(self._sources() if callable(self._sources) else self._sources)

    def load(self, encoding: str) -> tuple[tiktoken.Encoding | None, Resolution]:
        """Load ``encoding`` from this registry's sources, every time (nothing is kept)."""
        return load_encoding(encoding, self.sources())

    def _build(self, encoding: str) -> tuple[Tokenizer, Resolution]:
        loaded, resolution = self.load(encoding)
        if loaded is not None:
            tokenizer = TiktokenTokenizer(loaded, resolution.source, known=True, by_name=shared_tiktoken)
            return tokenizer, resolution
        if self._warn:
            self._warn = False
            _warn_fallback(resolution)
        return simple.ByteTokenizer(encoding), resolution

    def peek(self, encoding: str) -> Tokenizer | None:
        done = self._done.get(encoding)
        return done[0] if done is not None else None

    def cache_clear(self) -> None:
        with self._lock:
            self._done.clear()


_PROCESS_REGISTRY = EncodingRegistry()
_current: ContextVar[EncodingRegistry] = ContextVar("recallpack_encoding_registry", default=_PROCESS_REGISTRY)


def encoding_registry() -> EncodingRegistry:
    """The registry encoding names resolve through here: the process's, unless one is in use."""
    return _current.get()


@contextmanager
def using_registry(registry: EncodingRegistry) -> Iterator[EncodingRegistry]:
    """Resolve encoding names through ``registry`` inside the block (this thread and the tasks
    it starts), for example one whose sources are a test's own directory."""
    token = _current.set(registry)
    try:
        yield registry
    finally:
        _current.reset(token)


def shared_tiktoken(encoding: str) -> Tokenizer:
    """What an unpickled TiktokenTokenizer becomes: this process's own tokenizer for the name."""
    tokenizer, resolution = encoding_registry()(encoding)
    if not tokenizer.exact:
        raise TokenizerError(
            f"a tokenizer counting {encoding} exactly was sent to a process where {encoding} "
            f"does not resolve exactly ({resolution.source}); run `recallpack doctor` there"
        )
    return tokenizer


def _warn_fallback(resolution: Resolution) -> None:
    advice = fallback_advice(resolution.encoding)
    message = (
        f"{resolution.source}. Counts are an upper bound, so budgets still hold, but blocks "
        f"carry less than they could. {advice[0].upper()}{advice[1:]}; "
        "`recallpack doctor` shows what resolves."
    )
    logging.getLogger("recallpack").warning("%s", message)
    warnings.warn(f"recallpack: {message}", RecallpackWarning, stacklevel=4)


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


def is_known_encoding(encoding: object) -> bool:
    """Whether ``encoding`` is a tiktoken Encoding whose split pattern recallpack can vouch for:
    the very object it resolved, or the one tiktoken's registry built for that name. Never by
    its name alone: anyone can build an Encoding called cl100k_base."""
    name = getattr(encoding, "name", None)
    if not isinstance(name, str):
        return False
    shared = encoding_registry().peek(name)
    if isinstance(shared, TiktokenTokenizer) and shared.encoding is encoding:
        return True
    try:
        from tiktoken import registry
    except ImportError:  # pragma: no cover
        return False
    # tiktoken.get_encoding(name) returned this very object (tiktoken's own pickling test).
    return getattr(registry, "ENCODINGS", {}).get(name) is encoding


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
            "or a callable str -> int",
            field="tokenizer",
        ) from None


def resolve_encoding(spec: str) -> Resolution:
    """Say how ``spec`` (an encoding or model name) resolves here, without counting anything."""
    return encoding_registry()(_encoding_for(spec))[1]


_CHARS = simple.HeuristicTokenizer()
_readers: list[TokenizerReader] = []


def register_reader(reader: TokenizerReader) -> None:
    """Let ``get_tokenizer`` take the objects ``reader`` recognises (tried in the order
    registered, after tiktoken Encodings and the hosts' readers, before plain callables).
    Registering a reader twice keeps one."""
    if reader not in _readers:
        _readers.append(reader)


def _tiktoken_encoding_type() -> type[Any] | None:
    try:
        import tiktoken
    except ImportError:
        return None
    return tiktoken.Encoding


def _from_object(spec: object) -> Tokenizer | None:
    """A Tokenizer for an object, or None when ``spec`` is none of the known kinds."""
    encoding_type = _tiktoken_encoding_type()
    if encoding_type is not None and isinstance(spec, encoding_type):
        shared = encoding_registry().peek(spec.name)
        if isinstance(shared, TiktokenTokenizer) and shared.encoding is spec:
            return shared  # one of ours, handed back: share its tokenizer and cache
        # Trusted by identity, never by name: tiktoken's own object for the name, or no shortcut.
        known = is_known_encoding(spec)
        return TiktokenTokenizer(
            spec,
            source="a tiktoken Encoding given by the caller",
            known=known,
            by_name=shared_tiktoken if known else None,
        )
    # Before the generic callable: a host's tokenizer may be callable and return something else.
    found: Tokenizer | None = read_host("tokenizer", spec)
    if found is not None:
        return found
    for reader in _readers:
        tokenizer = reader(spec)
        if tokenizer is not None:
            return tokenizer
    if callable(spec):
        return simple.CallableTokenizer(spec)
    return None


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
        spec = simple.DEFAULT_ENCODING
    if isinstance(spec, Tokenizer):
        return spec
    if isinstance(spec, str):
        name = spec.strip()
        if name in ("chars", "heuristic"):
            return _CHARS
        return encoding_registry()(_encoding_for(name))[0]
    tokenizer = _from_object(spec)
    if tokenizer is not None:
        return tokenizer
    raise TokenizerError(
        f"tokenizer={spec!r} is not usable; pass an encoding name such as 'cl100k_base', "
        "a model name, 'chars', a Tokenizer, a tiktoken Encoding, a LangChain language model, "
        "a Hugging Face tokenizer, or a callable str -> int or str -> list",
        field="tokenizer",
    )


def _check_limit(value: object, field: str, *, minimum: int = 1) -> int:
    if not is_int(value, minimum):
        raise BudgetError(f"{field}={value!r} must be an int >= {minimum}", field=field)
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
