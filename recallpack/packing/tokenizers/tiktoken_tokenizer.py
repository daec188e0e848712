"""A tiktoken ``Encoding`` as a Tokenizer: exact counts, exact cuts, and bounds that stop early."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from recallpack.packing.tokenizers.base import Tokenizer, keeps_what_fits

if TYPE_CHECKING:
    import tiktoken

__all__ = ["TiktokenTokenizer", "LINE_START_SPLITTING"]

_PIECE_MARGIN = 64
LINE_START_SPLITTING = frozenset({"cl100k_base", "o200k_base", "o200k_harmony"})


def _probe_chars(limit: int) -> int:
    return (limit + _PIECE_MARGIN) * 8


class TiktokenTokenizer(Tokenizer):
    """A tiktoken encoding. Special-token text such as ``<|endoftext|>`` counts as plain text."""

    exact = True
    runs_caller_code = False  # tiktoken's own encoder, whoever built the Encoding

    def __init__(
        self,
        encoding: tiktoken.Encoding,
        source: str = "",
        *,
        known: bool = False,
        by_name: Callable[[str], Tokenizer] | None = None,
    ) -> None:
        super().__init__()
        self.encoding = encoding
        self.name = encoding.name
        self.source = source
        #: The encoding is one whose split pattern recallpack knows: it resolved the encoding
        #: itself, or tiktoken's registry built this very object. A name promises nothing: an
        #: Encoding a caller built can be called cl100k_base and split as it likes.
        self.known = known
        #: What turns the encoding's name back into a tokenizer in another process, when the
        #: resolver that vouched for it gave one (it knows where that process finds the files).
        self._by_name = by_name
        # Their split patterns end every piece at a newline and start none before a line's
        # first non-space character (tests/test_tokenizer.py checks it on random text).
        self.splits_at_line_starts = known and encoding.name in LINE_START_SPLITTING
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
        if len(text) <= (limit + _PIECE_MARGIN) * 8:  # _probe_chars(limit), inline: the walk's hot path
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

    @keeps_what_fits
    def truncate(self, text: str, max_tokens: int) -> str:
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

    def __reduce__(self) -> tuple[Any, ...]:
        # An encoding known by name is sent as its name and re-resolved on arrival, to that
        # process's shared instance, not as megabytes of ranks. An Encoding the caller built
        # travels whole: its name may promise nothing.
        if self._by_name is not None:
            return (self._by_name, (self.encoding.name,))
        return (TiktokenTokenizer, (self.encoding, self.source))  # not known, there either
