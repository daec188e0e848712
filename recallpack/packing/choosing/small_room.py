"""What the ``passages`` choice does differently when the room is smaller than the top document.

Under one document, ``prefix`` keeps a focus cut of the top document
(:func:`recallpack.packing.choosing.cuts.cut_focus`): one passage, grown from the start of its best
sentence, and the head of a sentence it cannot hold whole. The choice
(:mod:`recallpack.packing.choosing.selection`) then keeps fewer, longer passages in the same way: each best
unit grows back to its sentence's start (a unit may be a piece of a long sentence, and what the
question asks for is often the sentence's subject, before the words it matched) and on to
:data:`SMALL_ROOM_GOAL` of the room before the next is taken; and the room the exact count leaves
goes to the head of the unit after the best passage, cut to fit, before anything fills in rank
order. Over a room that holds the top document nothing here is used: those packings are as before.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator, Sequence

from recallpack.packing.choosing.focus import Focus
from recallpack.packing.reading.units import has_text, is_stray, split_units, strip_end
from recallpack.packing.tokenizers import Tokenizer

__all__ = ["SMALL_ROOM_GOAL", "SmallRoom"]

#: Under one document, each best unit grows to this share of the room before the next is taken
#: (5% over a larger room): one passage of a few sentences answers more often than several cut to
#: a phrase each. A focus cut grows its first to a third of the room; half did better under one
#: paragraph in the small-budgets section of the bench, in all 13 of its languages.
SMALL_ROOM_GOAL = 0.5


class SmallRoom:
    """One choice's state under one document: where its documents' sentences start, and the head
    of a unit added after the best passage (:attr:`tail`)."""

    def __init__(self, tok: Tokenizer, sentences: dict[int, list[int]] | None = None) -> None:
        self.tok = tok
        #: (document, where the best passage ended, where it ends with the head), once set.
        self.tail: tuple[int, int, int] | None = None
        self.tried = False  # the head was tried once: the choice may fill in rank order now
        self._sentences: dict[int, list[int]] = {} if sentences is None else dict(sentences)

    def sentence_start(self, d: int, cut: Focus, u: int) -> int:
        """Where the sentence that unit ``u`` of document ``d`` (cut ``cut``) is part of starts."""
        starts = self._sentences.get(d)
        if starts is None:
            whole = len(cut.text) + 1  # sentences and lines, none split for its length
            starts = self._sentences[d] = split_units(cut.text, whole, whole, None)[0]
        at = bisect_right(starts, cut.starts[u]) - 1
        return cut.starts[u] if at < 0 else starts[at]

    def before(self, d: int, cut: Focus, seed: int) -> Iterator[int]:
        """The units before ``seed`` back to its sentence's start, nearest first."""
        first = self.sentence_start(d, cut, seed)
        unit = seed - 1
        while unit >= 0 and cut.starts[unit] >= first:
            yield unit
            unit -= 1

    def head_after(self, seeds: Sequence[tuple[int, int]], cuts: Sequence[Focus], free: int) -> bool:
        """Set :attr:`tail` to the head of the unit after the best passage that has one, cut to
        ``free`` tokens less one for the join; False when none has or no text fits."""
        for d, u in seeds:
            cut = cuts[d]
            if u not in cut.kept:
                continue
            last = cut.runs().run(u)[1]
            if last + 1 > cut.last_unit or last + 1 in cut.kept:
                continue
            text, start = cut.text, cut.ends[last]
            head = self.tok.truncate(text[start : cut.ends[last + 1]], free - 1)
            end = strip_end(text, start, start + len(head))
            if not has_text(text, start, end) or is_stray(text, start, end):
                return False
            self.tail = (d, start, end)
            return True
        return False

    def spans(self, d: int, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """Document ``d``'s kept ranges with the head after the best passage, when it is there."""
        if self.tail is None or self.tail[0] != d:
            return spans
        _, old, new = self.tail
        return [(start, new if end == old else end) for start, end in spans]

    def drop_tail(self) -> bool:
        """Give back the head (the exact count put it over); False when there is none."""
        if self.tail is None:
            return False
        self.tail = None
        return True
