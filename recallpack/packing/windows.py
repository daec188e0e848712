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

import difflib
import hashlib
import uuid
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import accumulate, repeat
from operator import add, sub
from typing import TYPE_CHECKING, Any

import regex

from recallpack.packing.errors import BudgetError, ConfigError
from recallpack.packing.render import chunk_framing
from recallpack.packing.tokenizer import (
    TiktokenTokenizer,
    Tokenizer,
    TokenizerSpec,
    get_tokenizer,
)

if TYPE_CHECKING:
    import tiktoken

__all__ = [
    "Window",
    "token_windows",
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
_CLUSTER = regex.compile(r"\X")
_PREPEND = regex.compile(r"\p{Grapheme_Cluster_Break=Prepend}")
# Characters before which a cluster boundary always falls (unless a Prepend character precedes).
_PLAIN = regex.compile(r"[\x20-\x7e\p{Han}]")
# Where cl100k_base and o200k_base split text so that the counts of the two sides add up: before
# a space that starts a word, and at the start of a line. A test checks it on random text.
_WORD_START = regex.compile(r" \p{L}")
_LINE_START = regex.compile(r"\n\S")
_BLOCK = 32
_ENCODE_CHARS = 1 << 16
_BREAKING_ENCODINGS = frozenset({"cl100k_base", "o200k_base", "o200k_harmony"})


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
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise BudgetError(f"max_tokens={max_tokens!r} must be an int of at least 1 (tokens per window)")
    if isinstance(overlap_tokens, bool) or not isinstance(overlap_tokens, int) or overlap_tokens < 0:
        raise BudgetError(
            f"overlap_tokens={overlap_tokens!r} must be an int of at least 0 (0 means no overlap)"
        )
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
    hint = _HOST_NAMES.get(name) or next(iter(difflib.get_close_matches(name, valid, n=1)), None)
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
    spans = _Splitter.for_text(text, max_tokens, tok).spans(overlap_tokens)
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


# --- grapheme clusters -----------------------------------------------------------------------


def _plainly_boundary(text: str, p: int) -> bool:
    """True when ``p`` is certainly a cluster boundary, judged from the two characters around it."""
    if p <= 0 or p >= len(text):
        return True
    before = text[p - 1]
    if before == "\n" or (before == "\r" and text[p] != "\n"):
        return True
    return _PLAIN.match(text, p) is not None and _PREPEND.match(before) is None


def _floor_boundary(text: str, x: int, lo: int) -> int:
    """The last cluster boundary at or before ``x``, given that ``lo <= x`` is a boundary."""
    if _plainly_boundary(text, x):
        return x
    q = x - 1
    while q > lo and not _plainly_boundary(text, q):
        q -= 1
    last = q
    for match in _CLUSTER.finditer(text, q):
        if match.end() > x:
            break
        last = match.end()
    return last


def _ceil_boundary(text: str, x: int, lo: int) -> int:
    """The first cluster boundary at or after ``x``, given that ``lo <= x`` is a boundary."""
    floor = _floor_boundary(text, x, lo)
    if floor == x:
        return x
    match = _CLUSTER.match(text, floor)
    return match.end() if match else len(text)


def _first_cluster_end(text: str, start: int) -> int:
    match = _CLUSTER.match(text, start)
    return match.end() if match and match.end() > start else start + 1


# --- the cut ------------------------------------------------------------------------------------


class _Splitter:
    """Finds window ends for one text. The generic version asks the tokenizer for counts of
    prefixes, searching char positions; it assumes a count never drops as text grows."""

    def __init__(self, text: str, max_tokens: int, tok: Tokenizer) -> None:
        self.text = text
        self.max = max_tokens
        self.tok = tok

    @staticmethod
    def for_text(text: str, max_tokens: int, tok: Tokenizer) -> _Splitter:
        if isinstance(tok, TiktokenTokenizer) and tok.known and tok.name in _BREAKING_ENCODINGS:
            return _TiktokenSplitter(text, max_tokens, tok)
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
        end = _floor_boundary(self.text, over - 1, start)
        if end <= start:  # one cluster that alone is over max_tokens: a window of its own
            end = _first_cluster_end(self.text, start)
            return start, end, self.window_count(start, end)
        tokens = self.window_count(start, end)
        while tokens > self.max:  # only where a count is not what the search assumed
            shorter = _floor_boundary(self.text, end - 1, start)
            if shorter <= start:
                break
            end, tokens = shorter, self.window_count(start, shorter)
        return start, end, tokens

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
        lo, hi = start + 1, end  # text[hi:end] is empty and fits
        while lo < hi:
            mid = (lo + hi) // 2
            if self.count(mid, end) <= overlap:
                hi = mid
            else:
                lo = mid + 1
        return self.settle_overlap(start, hi, end, overlap)

    def settle_overlap(self, start: int, back: int, end: int, overlap: int) -> int:
        """Move ``back`` forward to a cluster boundary whose suffix really fits ``overlap``."""
        back = _ceil_boundary(self.text, back, start)
        while back < end and self.count(back, end) > overlap:
            back = _ceil_boundary(self.text, back + 1, start)
        return min(back, end)


class _TiktokenSplitter(_Splitter):
    """cl100k_base and o200k_base: the text is encoded once; counts add up across word and line
    starts (``_WORD_START``, ``_LINE_START``), so a window's count is the sum of its words'
    counts from that one encoding, and only the words where it fills up are counted again."""

    tok: TiktokenTokenizer

    def __init__(self, text: str, max_tokens: int, tok: TiktokenTokenizer) -> None:
        super().__init__(text, max_tokens, tok)
        self.encoding = tok.encoding
        self.lengths = _token_lengths(self.encoding)
        self.bytes_at = bytes_at = _ByteOffsets(text)
        breaks = [m.start() for m in _WORD_START.finditer(text)]
        line_starts = [m.start() + 1 for m in _LINE_START.finditer(text)]
        breaks += line_starts
        breaks.sort()
        if not text.isascii() and _PREPEND.search(text):
            breaks = [b for b in breaks if text[b] != " " or not _PREPEND.match(text, b - 1)]
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
        if self.bytes_at(group_end) - self.bytes_at(start) > limit:
            over = self._scan(start, 0, start, group_end)
            if over is not None:
                return over
        if group_end >= n:
            return None
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
            if over is not None:
                return over
            if group_end >= n:
                return None
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
        if len(tokens) <= overlap:
            return start + 1
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
    limit = _positive(max_tokens, "max_tokens")
    n = _positive(items, "items")
    lines = _positive(lines_per_chunk, "lines_per_chunk")
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


def _positive(value: object, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise BudgetError(f"{field}={value!r} must be an int of at least 1")
    return value
