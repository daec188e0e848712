"""The tokenizers that need no vocabulary: an estimate, a byte bound, and the caller's function."""

from __future__ import annotations

import functools
import numbers
from collections.abc import Callable, Sequence
from typing import Any

from recallpack.packing.errors import RecallpackError, TokenizerError
from recallpack.packing.reading.text import floor_boundary
from recallpack.packing.tokenizers.base import Tokenizer, keeps_what_fits

__all__ = ["HeuristicTokenizer", "ByteTokenizer", "CallableTokenizer", "callable_name", "DEFAULT_ENCODING"]

DEFAULT_ENCODING = "cl100k_base"


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

    @keeps_what_fits
    def truncate(self, text: str, max_tokens: int) -> str:
        head = text[:max_tokens]
        data = head.encode("utf-8", "surrogatepass")[:max_tokens]
        cut = len(data.decode("utf-8", "ignore"))  # drops a character cut in the middle
        # "ignore" also drops an encoded lone surrogate; back off until the bytes truly fit.
        while cut and self._count(head[:cut]) > max_tokens:
            cut -= 1
        return text[: floor_boundary(text, cut)]


class CallableTokenizer(Tokenizer):
    """A callable ``str -> int`` (a count), or ``str -> list`` (tokens, as LlamaIndex's
    ``Settings.tokenizer`` returns; the count is their number). Truncation searches
    character prefixes with it and cuts only between grapheme clusters."""

    exact = True

    def __init__(self, fn: Callable[[str], Any], name: str | None = None) -> None:
        super().__init__()
        self._fn = fn
        self.name = name or f"callable:{callable_name(fn)}"

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
        # Every int is an Integral: what is left is a bool, a negative count or not a count.
        raise TokenizerError(
            f"tokenizer {self.name} returned {value!r} for a text; a tokenizer callable "
            "must return a non-negative int or a list of tokens",
            field="tokenizer",
        )

    @keeps_what_fits
    def truncate(self, text: str, max_tokens: int) -> str:
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
        cut = floor_boundary(text, fits)
        # A counter need not be monotonic: back off cluster by cluster until the cut fits.
        while cut and self.count(text[:cut]) > max_tokens:
            cut = floor_boundary(text, cut - 1)
        return text[:cut]


def callable_name(fn: object) -> str:
    """What a callable is called in ``tokenizer_used``: its qualified name, through partials."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    return getattr(fn, "__qualname__", None) or type(fn).__qualname__
