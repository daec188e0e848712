"""The windowing engine: where each token window of a text ends, and where the next begins.

``windows.token_windows`` (and both hosts' splitters through it) and ``split_token_windows`` cut
with it. A window ends at the last grapheme boundary before the first character at which it
would overflow, a decision that reads only the text up to that character: that is what keeps
the windows before the last unchanged when text is appended. For cl100k_base and o200k_base the
text is encoded once and a window's count is summed from its words' counts.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from functools import lru_cache
from itertools import accumulate, repeat
from operator import add, sub
from typing import TYPE_CHECKING, Literal, Protocol

import regex

from recallpack.packing.reading.text import PREPEND, ceil_boundary, first_cluster_end, floor_boundary

if TYPE_CHECKING:
    import tiktoken

__all__ = ["TokenCounter", "Oversize", "window_spans"]

Oversize = Literal["cluster", "char"]

# Where cl100k_base and o200k_base split text so that the counts of the two sides add up: before
# a space that starts a word, and at the start of a line. A test checks it on random text.
_WORD_START = regex.compile(r" \p{L}")
_LINE_START = regex.compile(r"\n\S")
_BLOCK = 32
_ENCODE_CHARS = 1 << 16
_BREAKING_ENCODINGS = frozenset({"cl100k_base", "o200k_base", "o200k_harmony"})


class TokenCounter(Protocol):
    """What the engine asks of a tokenizer (any ``recallpack.packing.tokenizers.Tokenizer``): it
    imports none, so the tokenizers can cut with it too."""

    name: str
    splits_at_line_starts: bool

    def count(self, text: str) -> int: ...


class _EncodedTokenCounter(TokenCounter, Protocol):
    encoding: tiktoken.Encoding


def window_spans(
    text: str, max_tokens: int, overlap_tokens: int, tok: TokenCounter, *, oversize: Oversize = "cluster"
) -> list[tuple[int, int, int]]:
    """``(start, end, tokens)`` of each window of ``text``; the settings are already checked.

    ``oversize`` says what becomes of a grapheme cluster that alone counts over ``max_tokens``:
    ``"cluster"`` keeps it whole as a window of its own (token windows never split a cluster);
    ``"char"`` gives its first character a window and goes on (what ``split_token_windows``
    has always done, so that no window but a one-character one is over the limit)."""
    splitter = _Splitter.for_text(text, max_tokens, tok)
    splitter.split_clusters = oversize == "char"
    return splitter.spans(overlap_tokens)


class _Splitter:
    """Finds window ends for one text. The generic version asks the tokenizer for counts of
    prefixes, searching char positions; it assumes a count never drops as text grows."""

    split_clusters = False

    def __init__(self, text: str, max_tokens: int, tok: TokenCounter) -> None:
        self.text = text
        self.max = max_tokens
        self.tok = tok

    @staticmethod
    def for_text(text: str, max_tokens: int, tok: TokenCounter) -> _Splitter:
        import tiktoken

        # A tiktoken tokenizer whose split pattern recallpack vouches for (TiktokenTokenizer's
        # splits_at_line_starts), told by its shape: this module imports no tokenizer class.
        encoding = getattr(tok, "encoding", None)
        vouched = tok.splits_at_line_starts and isinstance(encoding, tiktoken.Encoding)
        if vouched and tok.name in _BREAKING_ENCODINGS:
            return _TiktokenSplitter(text, max_tokens, tok)  # type: ignore[arg-type]
        return _Splitter(text, max_tokens, tok)

    def count(self, start: int, end: int) -> int:
        return self.tok.count(self.text[start:end])

    def spans(self, overlap: int) -> list[tuple[int, int, int]]:
        n = len(self.text)
        if not n:
            return []
        spans: list[tuple[int, int, int]] = []
        window = self.window(0)
        while True:
            spans.append(window)
            start, end, _ = window
            if end >= n:
                return spans
            following = None
            if overlap:
                back = self.overlap_start(start, end, overlap)
                if start < back < end:
                    following = self.window(back)
                    # An overlap that would not get past this window's end (the next cluster is
                    # too large to join it) is given up, so the windows always move forward.
                    if following[1] <= end:
                        following = None
            window = following or self.window(end)

    def window(self, start: int) -> tuple[int, int, int]:
        """``(start, end, tokens)`` of the window that starts at ``start``."""
        over = self.first_overflow(start)
        if over is None:
            return start, len(self.text), self.window_count(start, len(self.text))
        return self.finish(start, over)

    def finish(self, start: int, over: int) -> tuple[int, int, int]:
        """End the window at the last cluster boundary before char position ``over``."""
        end = floor_boundary(self.text, over - 1, start)
        if end <= start:  # one cluster that alone is over max_tokens: a window of its own
            return self._oversize(start)
        tokens = self.window_count(start, end)
        while tokens > self.max:  # only where a count is not what the search assumed
            shorter = floor_boundary(self.text, end - 1, start)
            if shorter <= start:
                return self._oversize(start) if self.split_clusters else (start, end, tokens)
            end, tokens = shorter, self.window_count(start, shorter)
        return start, end, tokens

    def _oversize(self, start: int) -> tuple[int, int, int]:
        """The window of a cluster that alone is over max_tokens: the cluster, or its first char."""
        end = start + 1 if self.split_clusters else first_cluster_end(self.text, start)
        return start, end, self.window_count(start, end)

    def window_count(self, start: int, end: int) -> int:
        return self.count(start, end)

    def first_overflow(self, start: int) -> int | None:
        """The first char position ``c`` where ``text[start:c]`` counts over max_tokens, or None.

        Probes lengths by doubling, then bisects. For a count that never drops as text grows,
        the first overflow is the same position whichever positions are probed, so text
        appended after it cannot move it.
        """
        n, limit = len(self.text), self.max
        fits, step = start, max(1, limit)
        while True:
            probe = start + step
            if probe >= n:
                if self.count(start, n) <= limit:
                    return None
                probe = n
            if self.count(start, probe) > limit:
                break
            fits, step = probe, step * 2
        lo, hi = fits, probe  # text[start:lo] fits (or is empty), text[start:hi] does not
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self.count(start, mid) <= limit:
                lo = mid
            else:
                hi = mid
        return hi

    def overlap_start(self, start: int, end: int, overlap: int) -> int:
        """Where the longest suffix of ``text[start:end]`` of at most ``overlap`` tokens begins."""
        # The first position after start whose suffix fits (end itself, the empty suffix, if none).
        backs = range(start + 1, end)
        fits = bisect_left(backs, True, key=lambda back: self.count(back, end) <= overlap)
        return self.settle_overlap(start, start + 1 + fits, end, overlap)

    def settle_overlap(self, start: int, back: int, end: int, overlap: int) -> int:
        """Move ``back`` forward to a cluster boundary whose suffix really fits ``overlap``."""
        back = ceil_boundary(self.text, back, start)
        while back < end and self.count(back, end) > overlap:
            back = ceil_boundary(self.text, back + 1, start)
        return min(back, end)


class _TiktokenSplitter(_Splitter):
    """cl100k_base and o200k_base: the text is encoded once; counts add up across word and line
    starts (``_WORD_START``, ``_LINE_START``), so a window's count is the sum of its words'
    counts from that one encoding, and only the words where it fills up are counted again."""

    tok: _EncodedTokenCounter

    def __init__(self, text: str, max_tokens: int, tok: _EncodedTokenCounter) -> None:
        super().__init__(text, max_tokens, tok)
        self.encoding = tok.encoding
        self.lengths = _token_lengths(self.encoding)
        self.bytes_at = bytes_at = _ByteOffsets(text)
        breaks = [m.start() for m in _WORD_START.finditer(text)]
        line_starts = [m.start() + 1 for m in _LINE_START.finditer(text)]
        breaks += line_starts
        breaks.sort()
        if not text.isascii() and PREPEND.search(text):
            breaks = [b for b in breaks if text[b] != " " or not PREPEND.match(text, b - 1)]
        if breaks and breaks[0] == 0:
            del breaks[0]
        n = len(text)
        break_bytes = bytes_at.outside_runs(breaks)
        tokens_before = self._tokens_before(breaks, break_bytes)
        # The group of positions counted from break j ends just after break j + 1. need[j] is
        # what the window's count at break j would have to stay under for the whole group to
        # fit by its bytes, offset by tokens_before[j] so that one number serves every window.
        # A break's character is a space (one byte) unless it starts a line.
        ends = array("q", map(add, break_bytes, repeat(1)))
        del ends[:1]
        ends.append(bytes_at(n))
        if not text.isascii():
            for b in line_starts:
                j = bisect_left(breaks, b) - 1
                if j >= 0 and text[b] >= "\x80" and breaks[j + 1] == b:
                    ends[j] += len(text[b].encode("utf-8", "surrogatepass")) - 1
        # Arrays, not lists: a book has a million breaks, and ints in a list cost 36 bytes each.
        self.breaks = array("q", breaks)
        self.tokens_before = tokens_before
        self.need = array("q", map(add, map(sub, tokens_before, break_bytes), ends))
        self.need_blocks = array(
            "q", (max(self.need[k : k + _BLOCK]) for k in range(0, len(self.need), _BLOCK))
        )
        self._at: tuple[int, int, int] = (-1, 0, 0)  # (start, first break after it, count to it)

    def _tokens_before(self, breaks: list[int], break_bytes: list[int]) -> array[int]:
        """The tokens before each break. The counts add up at breaks, so the text is encoded in
        pieces of about ``_ENCODE_CHARS`` cut at breaks: the same tokens, without holding all
        of a long text's tokens at once."""
        text, n, lengths = self.text, len(self.text), self.lengths
        out: array[int] = array("q")
        total, start, start_bytes, j = 0, 0, 0, 0
        while start < n:
            k = bisect_left(breaks, start + _ENCODE_CHARS, j)
            end = breaks[k] if k < len(breaks) else n
            tokens = self.encoding.encode_ordinary(text[start:end])
            ends = list(accumulate(map(lengths.__getitem__, tokens)))
            inside = list(map(sub, break_bytes[j : k + 1], repeat(start_bytes)))
            try:  # a break is where a token ends
                ending_at = dict(zip(ends, range(1, len(ends) + 1)))
                out.extend(map(add, map(ending_at.__getitem__, inside), repeat(total)))
            except KeyError:  # not after all: count the tokens that end before it
                del out[j:]
                out.extend(total + bisect_right(ends, at) for at in inside)
            total += len(tokens)
            if k >= len(breaks):
                break
            start, start_bytes, j = end, break_bytes[k], k + 1
        return out

    def count(self, start: int, end: int) -> int:
        return len(self.encoding.encode_ordinary(self.text[start:end]))

    def first_overflow(self, start: int) -> int | None:
        """The window's count at a position ``c`` past break ``b`` (``c >= b + 2``) is its count
        at ``b`` plus the count of ``text[b:c]``. Each token holds at least a byte, so a group
        of positions whose bytes fit the room left is passed without counting anything."""
        n, limit, breaks = len(self.text), self.max, self.breaks
        first = bisect_right(breaks, start)
        # Positions up to just after a break still count from the base before it (at the break
        # itself the space may join a run of spaces before it).
        group_end = n if first == len(breaks) else breaks[first] + 1
        over = None
        if self.bytes_at(group_end) - self.bytes_at(start) > limit:
            over = self._scan(start, 0, start, group_end)
        # A group that overflows ends the window; the last group, when it does not, ends the text.
        if over is not None or group_end >= n:
            return over
        to_first = self.count(start, breaks[first])
        self._at = (start, first, to_first)
        offset = to_first - self.tokens_before[first]
        j = first
        while True:
            j = self._first_crowded(j, limit - offset)
            if j == len(breaks):
                return None
            base = breaks[j]
            group_end = n if j + 1 == len(breaks) else breaks[j + 1] + 1
            over = self._scan(base, offset + self.tokens_before[j], base + 1, group_end)
            if over is not None or group_end >= n:
                return over
            j += 1

    def _first_crowded(self, j: int, most: int) -> int:
        """The first group from ``j`` on whose bytes could overflow: ``need[j] > most``."""
        need, blocks, m = self.need, self.need_blocks, len(self.need)
        while j < m:
            if j % _BLOCK == 0 and blocks[j // _BLOCK] <= most:
                j += _BLOCK
                continue
            if need[j] > most:
                return j
            j += 1
        return m

    def window_count(self, start: int, end: int) -> int:
        """``count(start, end)`` from the counts already known up to the last break before it."""
        at_start, first, to_first = self._at
        j = bisect_right(self.breaks, end - 2) - 1
        if at_start != start or j < first:
            return self.count(start, end)
        return to_first + self.tokens_before[j] - self.tokens_before[first] + self.count(self.breaks[j], end)

    def _scan(self, base: int, at_base: int, done: int, group_end: int) -> int | None:
        """The first position in ``(done, group_end]`` over the limit, counting ``text[base:c]``
        at a few positions: after each count, the next ``room`` bytes are taken to fit."""
        text, limit = self.text, self.max
        pos = done + 1
        while pos <= group_end:
            used = at_base + self.count(base, pos)
            if used > limit:
                return pos
            room = limit - used
            ahead = text[pos : pos + room]
            if not self.bytes_at.ascii:
                ahead = ahead.encode("utf-8", "surrogatepass")[:room].decode("utf-8", "ignore")
            pos += len(ahead) + 1
        return None

    def overlap_start(self, start: int, end: int, overlap: int) -> int:
        """From the tokens of the window's tail: where its last ``overlap`` tokens begin."""
        tail = max(start, end - 16 * overlap - 64)  # enough characters for overlap tokens, nearly always
        tokens = self.encoding.encode_ordinary(self.text[tail:end])
        if len(tokens) <= overlap and tail > start:
            tail, tokens = start, self.encoding.encode_ordinary(self.text[start:end])
        if len(tokens) <= overlap:  # the whole window fits the overlap: from its next cluster on
            return self.settle_overlap(start, start + 1, end, overlap)
        head = sum(map(self.lengths.__getitem__, tokens[: len(tokens) - overlap]))
        raw = self.text[tail:end].encode("utf-8", "surrogatepass")
        while head < len(raw) and (raw[head] & 0xC0) == 0x80:  # a cut inside a character
            head += 1
        back = tail + len(raw[:head].decode("utf-8", "surrogatepass"))
        return self.settle_overlap(start, max(back, start + 1), end, overlap)


class _ByteOffsets:
    """UTF-8 offsets of char positions, found from the runs of non-ASCII characters only."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.ascii = text.isascii()
        self.run_starts: list[int] = []
        self.run_ends: list[int] = []
        self.extra_before: list[int] = []  # extra bytes of all runs before run i
        self.extra_total = 0
        if not self.ascii:
            extra = 0
            for match in _NON_ASCII.finditer(text):
                self.run_starts.append(match.start())
                self.run_ends.append(match.end())
                self.extra_before.append(extra)
                extra += len(match.group().encode("utf-8", "surrogatepass")) - len(match.group())
            self.extra_total = extra

    def outside_runs(self, positions: list[int]) -> list[int]:
        """Offsets of ``positions`` none of which falls strictly inside a non-ASCII run."""
        if self.ascii:
            return positions
        extra = [*self.extra_before, self.extra_total]
        return [c + extra[i] for c, i in zip(positions, map(bisect_right, repeat(self.run_ends), positions))]

    def __call__(self, c: int) -> int:
        if self.ascii:
            return c
        i = bisect_right(self.run_starts, c) - 1
        if i < 0:
            return c
        start, end = self.run_starts[i], self.run_ends[i]
        inside = self.text[start : min(c, end)]
        return c + self.extra_before[i] + len(inside.encode("utf-8", "surrogatepass")) - len(inside)


_NON_ASCII = regex.compile(r"[^\x00-\x7f]+")


@lru_cache(maxsize=8)
def _token_lengths(encoding: tiktoken.Encoding) -> list[int]:
    """Bytes per token id, so that token offsets need no decoding."""
    ranks: dict[bytes, int] | None = getattr(encoding, "_mergeable_ranks", None)
    if ranks is None:  # a tiktoken without the attribute: decode each id once
        return [len(encoding.decode_single_token_bytes(i)) for i in range(encoding.max_token_value + 1)]
    lengths = [0] * (max(ranks.values(), default=0) + 1)
    for token, rank in ranks.items():
        lengths[rank] = len(token)
    return lengths
