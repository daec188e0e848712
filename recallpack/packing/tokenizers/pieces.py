"""Counting a text as the sum of its pieces' counts, each piece encoded once.

A walk that corrects its choice with an exact count (the ``passages`` policy) counts a changed
item again, and most of that item is text it counted a moment before: a passage grew by a
sentence, or one more passage joined the document. With cl100k and o200k (the encodings with
``splits_at_line_starts``), a space right after a sentence's end (``.``, ``!``, ``?`` or the
elision mark) always starts a piece of the split pattern, and the punctuation before it always
ends one, whatever follows: a text's count is the sum of its parts' counts cut there.
:class:`PieceCounts` cuts at such spaces, every :data:`PIECE_CHARS` characters or more, and
remembers what each piece counted, so a text counted again encodes only the pieces that changed.
"""

from __future__ import annotations

import functools
import re

from recallpack.packing.errors import ConfigError
from recallpack.packing.tokenizers.base import Tokenizer

__all__ = ["PieceCounts", "PIECE_CHARS", "additive_cuts"]

#: A piece is at least this long: shorter ones would cost more in calls than they save.
PIECE_CHARS = 400
# A sentence's end before a space: the punctuation ends a piece of the split pattern (it takes
# no whitespace after it) and the space starts the next one.
_CUT = re.compile(r"[.!?\u2026](?= )")


def additive_cuts(text: str, every: int = PIECE_CHARS) -> list[int]:
    """Where :class:`PieceCounts` cuts ``text``: at spaces right after a sentence's end, each at
    least ``every`` characters after the one before (one search per cut)."""
    cuts: list[int] = []
    at = every
    while (match := _CUT.search(text, at)) is not None:
        cuts.append(match.end())
        at = match.end() + every
    return cuts


class PieceCounts(Tokenizer):
    """``tokenizer``'s exact counts, taken piece by piece and remembered for as long as this
    object lives (one walk): made for a text counted again after a small change."""

    splits_at_line_starts = True  # the sums are the inner tokenizer's exact counts

    def __init__(self, tokenizer: Tokenizer) -> None:
        if not tokenizer.splits_at_line_starts:
            raise ConfigError(
                f"{tokenizer.name}: its counts are not known to add up at a sentence's end; count it whole"
            )
        super().__init__()
        self.inner, self.name, self.runs_caller_code = tokenizer, tokenizer.name, tokenizer.runs_caller_code
        self._piece = functools.cache(tokenizer.count)

    def _count(self, text: str) -> int:
        bounds = [0, *additive_cuts(text), len(text)]
        return sum(self._piece(text[a:b]) for a, b in zip(bounds, bounds[1:]))

    def count(self, text: str) -> int:
        return self._count(text)  # the pieces are remembered; the whole need not be

    def count_upto(self, text: str, limit: int) -> int:
        return self._count(text)

    def truncate(self, text: str, max_tokens: int) -> str:
        return self.inner.truncate(text, max_tokens)
