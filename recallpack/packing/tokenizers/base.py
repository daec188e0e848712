"""What every tokenizer is: a ``count`` with a bounded count cache, a ``truncate``, and windows.

tiktoken's ``Encoding`` is the model: one small interface that every way of counting (an
encoding, a byte bound, an estimate, the caller's own function) fills in.
"""

from __future__ import annotations

import functools
import threading
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["Tokenizer", "CountCache", "keeps_what_fits"]

_CACHE_MAX_TEXT = 65_536  # longer texts are not cached: hashing them would cost more than it saves
_CACHE_CHARS = 16_000_000  # what one tokenizer's cache may hold, in characters of cached text
_SEEN_MAX = 65_536  # hashes of texts counted once (about 4 MB at most), then forgotten together


class CountCache:
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
            self._touch(text)
        return count

    def count(self, text: str, counter: Callable[[str], int]) -> int:
        """``text``'s count, from the cache or by ``counter`` (then :meth:`put`): one call on the
        hot path, where a walk counts each text it reaches."""
        count = self._counts.get(text)
        if count is not None:
            self._touch(text)
            return count
        count = counter(text)
        self.put(text, count)
        return count

    def _touch(self, text: str) -> None:
        with self._lock:
            if text in self._counts:
                self._counts.move_to_end(text)

    def put(self, text: str, count: int) -> None:
        key = hash(text)  # computed once per str object, and kept in it
        if key not in self._seen:
            if len(self._seen) >= _SEEN_MAX:
                self._seen.clear()
            self._seen.add(key)
            return
        self._admit(text, count)

    def _admit(self, text: str, count: int) -> None:
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
        self._cache = CountCache(_CACHE_CHARS)

    @abstractmethod
    def _count(self, text: str) -> int: ...

    def count(self, text: str) -> int:
        """Exact count of ``text`` under this tokenizer."""
        if len(text) > _CACHE_MAX_TEXT:
            return self._count(text)
        return self._cache.count(text, self._count)

    def count_upto(self, text: str, limit: int) -> int:
        """The exact count when it is at most ``limit``; otherwise any number above ``limit``.

        This is what lets the walk reject a huge text in work bounded by the room left.
        """
        return self.count(text)

    @abstractmethod
    def truncate(self, text: str, max_tokens: int) -> str:
        """The longest prefix of ``text`` on token boundaries that counts at most ``max_tokens``."""

    def split_windows(self, text: str, max_tokens: int, overlap_tokens: int) -> list[str]:
        """Deprecated: ``recallpack.split_token_windows(text, max_tokens, overlap_tokens, self)``,
        which cuts with the same engine and checks its arguments first."""
        import warnings

        from recallpack.packing.reading.windowing import window_spans

        warnings.warn(
            "Tokenizer.split_windows is deprecated: call recallpack.split_token_windows(text, "
            "max_tokens, overlap_tokens, tokenizer) (the method goes in the next release)",
            DeprecationWarning,
            stacklevel=2,
        )
        spans = window_spans(text, max_tokens, overlap_tokens, self, oversize="char")
        return [text[start:end] for start, end, _ in spans]

    def __getstate__(self) -> dict[str, Any]:
        # The count cache holds a lock and can hold megabytes: a copy starts with an empty one.
        state = self.__dict__.copy()
        state.pop("_cache", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._cache = CountCache(_CACHE_CHARS)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


_T = TypeVar("_T", bound=Tokenizer)


def keeps_what_fits(cut: Callable[[_T, str, int], str]) -> Callable[[_T, str, int], str]:
    """A ``truncate`` made of the cut proper: no room keeps nothing, a text that fits is kept
    whole, and ``cut`` is called only for a text over ``max_tokens`` (at least 1)."""

    @functools.wraps(cut)
    def truncate(self: _T, text: str, max_tokens: int) -> str:
        if max_tokens <= 0:
            return ""
        if self.count_upto(text, max_tokens) <= max_tokens:
            return text
        return cut(self, text, max_tokens)

    return truncate
