"""Token windows: they fit, cover the text, keep clusters whole, and keep their ids when text grows."""

from __future__ import annotations

import doctest
import hashlib
import subprocess
import sys
from unittest import mock

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from recallpack import BudgetError, Candidate, ConfigError, count_tokens, get_tokenizer, recall
from recallpack.packing.counting import windows as windows_module
from recallpack.packing.counting.windows import CHUNK_METADATA_KEYS, Window, chunk_size_for, token_windows
from recallpack.packing.reading import windowing
from recallpack.testing import stdlib_docs

from .conftest import TOKENIZER_SPECS, make_tokenizer

_PIECES = ["a", "b", "Z", "s", "'", " ", "  ", "\n", "\r\n", "\t", ".", ",", "1", "é", "e\u0301", "日本",
           "😀", "👩\u200d👩\u200d👧", "\U0001f1eb\U0001f1f7", "\u00a0", "\u0600x", "ß", " Indeed", " Inde",
           "<|endoftext|>", "ᄀ", "ᅡ"]  # fmt: skip
TEXTS = (
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=200)
    | st.lists(st.sampled_from(_PIECES), max_size=60).map("".join)
    | st.lists(
        st.sampled_from(["the ", "quick ", "brown\n", "fox. ", "Jumps", "over", " ", "日本語"]), max_size=80
    ).map("".join)
)
SIZES = st.integers(min_value=1, max_value=24)
_CLUSTER = regex.compile(r"\X")


def boundaries(text: str) -> set[int]:
    return {0} | {m.end() for m in _CLUSTER.finditer(text)}


def spans(windows: list[Window]) -> list[tuple[int, int, str, int, str, int]]:
    return [(w.start, w.end, w.text, w.chunk_index, w.chunk_id, w.token_count) for w in windows]


@settings(max_examples=60, deadline=None)
@given(spec=st.sampled_from(TOKENIZER_SPECS), text=TEXTS, size=SIZES, data=st.data())
def test_windows_fit_and_cover_the_text(spec: str, text: str, size: int, data: st.DataObject) -> None:
    """Each window counts at most max_tokens (or is one cluster), and the windows cover the text in order."""
    overlap = data.draw(st.integers(min_value=0, max_value=size - 1))
    tokenizer = make_tokenizer(spec)
    windows = token_windows(text, size, overlap, tokenizer)
    clusters = boundaries(text)
    assert bool(windows) == bool(text)
    for i, w in enumerate(windows):
        assert w.text == text[w.start : w.end] and w.start < w.end
        assert w.token_count == tokenizer.count(w.text)
        assert w.token_count <= size or _CLUSTER.fullmatch(w.text), (w, size)
        assert w.start in clusters and w.end in clusters
        assert (w.chunk_index, w.chunk_count) == (i, len(windows))
    if windows:
        assert windows[0].start == 0 and windows[-1].end == len(text)
    for before, after in zip(windows, windows[1:]):
        assert before.start < after.start <= before.end < after.end
        assert tokenizer.count(text[after.start : before.end]) <= overlap
    if not overlap:
        assert "".join(w.text for w in windows) == text


@settings(max_examples=80, deadline=None)
@given(spec=st.sampled_from(TOKENIZER_SPECS), text=TEXTS, more=TEXTS, size=SIZES, data=st.data())
def test_appending_keeps_every_window_before_the_last(
    spec: str, text: str, more: str, size: int, data: st.DataObject
) -> None:
    """Text appended to a document leaves its windows before the last one as they were, ids included."""
    overlap = data.draw(st.integers(min_value=0, max_value=size - 1))
    tokenizer = make_tokenizer(spec)
    before = token_windows(text, size, overlap, tokenizer)
    after = token_windows(text + more, size, overlap, tokenizer)
    kept = max(len(before) - 1, 0)
    assert spans(after[:kept]) == spans(before[:kept])


def reference_windows(text: str, size: int, spec: str) -> list[tuple[int, int]]:
    """The documented rule, by brute force: end at the last cluster boundary before the first
    character at which the window would count over max_tokens."""
    tokenizer = make_tokenizer(spec)
    clusters = sorted(boundaries(text))
    out, start = [], 0
    while start < len(text):
        over = next(
            (c for c in range(start + 1, len(text) + 1) if tokenizer.count(text[start:c]) > size), None
        )
        if over is None:
            out.append((start, len(text)))
            break
        end = max(b for b in clusters if b <= over - 1)
        if end <= start:
            end = min(b for b in clusters if b > start)
        out.append((start, end))
        start = end
    return out


@settings(max_examples=60, deadline=None)
@given(spec=st.sampled_from(TOKENIZER_SPECS), text=TEXTS, size=SIZES)
def test_windows_follow_the_documented_rule(spec: str, text: str, size: int) -> None:
    """The fast cut equals the rule computed by brute force: the last cluster boundary before the first overflow."""
    assert [
        (w.start, w.end) for w in token_windows(text, size, 0, make_tokenizer(spec))
    ] == reference_windows(text, size, spec)


def test_windows_of_real_text_fit_exactly() -> None:
    """On all the standard library's docstrings (long enough to be encoded in pieces), windows fit exactly and are full."""
    text = "\n\n".join(doc for _, doc in stdlib_docs())
    assert len(text) > 2 * windowing._ENCODE_CHARS
    for spec in ("cl100k_base", "o200k_base"):
        windows = token_windows(text, 200, 20, spec)
        assert all(w.token_count == count_tokens(w.text, spec) <= 200 for w in windows)
        # A window ends only where the next character would not fit, so they are nearly full.
        assert sum(w.token_count for w in windows[:-1]) / (len(windows) - 1) > 190


@settings(max_examples=60, deadline=None)
@given(spec=st.sampled_from(["cl100k_base", "o200k_base"]), text=TEXTS, size=SIZES)
def test_encoding_in_pieces_changes_nothing(spec: str, text: str, size: int) -> None:
    """A long text is encoded in pieces cut at word starts; tiny pieces give the very same windows."""
    whole = spans(token_windows(text, size, size // 3, spec))
    with mock.patch.object(windowing, "_ENCODE_CHARS", 3):
        assert spans(token_windows(text, size, size // 3, spec)) == whole


def test_overlap_repeats_the_tail_of_the_window_before() -> None:
    """With overlap_tokens, each window starts with (close to) the last overlap_tokens of the one before."""
    text = " ".join(f"word{i}" for i in range(2000))
    windows = token_windows(text, 50, 10)
    for before, after in zip(windows, windows[1:]):
        shared = text[after.start : before.end]
        assert before.text.endswith(shared) and after.text.startswith(shared)
        assert 7 <= count_tokens(shared) <= 10


def test_a_cluster_larger_than_the_window_is_kept_whole() -> None:
    """A grapheme cluster that alone is over max_tokens forms a window of its own, never split."""
    family = "👩\u200d👩\u200d👧\u200d👦"
    windows = token_windows(f"a{family}b", 1)
    assert [w.text for w in windows] == ["a", family, "b"]
    assert windows[1].token_count > 1


def test_ids_are_stable_across_processes() -> None:
    """The same text with the same settings gets the same chunk ids in a fresh interpreter."""
    text = "\n\n".join(doc for _, doc in stdlib_docs()[:5])
    code = (
        "import sys; from recallpack.packing.counting.windows import token_windows;"
        "print(' '.join(w.chunk_id for w in token_windows(sys.stdin.read(), 64, 8)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], input=text, capture_output=True, text=True, check=True, encoding="utf-8"
    ).stdout.split()
    assert out == [w.chunk_id for w in token_windows(text, 64, 8)]
    assert len(set(out)) == len(out)


def test_ids_depend_on_the_settings_and_the_hash_on_the_text() -> None:
    """Another size, overlap or tokenizer gives other ids; parent_hash is the SHA-256 of the whole text."""
    text = "one two three four five six seven eight nine ten " * 20
    base = token_windows(text, 16, 4)
    assert base[0].parent_hash == hashlib.sha256(text.encode()).hexdigest()
    for other in (
        token_windows(text, 17, 4),
        token_windows(text, 16, 3),
        token_windows(text, 16, 4, "o200k_base"),
    ):
        assert not {w.chunk_id for w in base} & {w.chunk_id for w in other}


def test_metadata_has_every_key() -> None:
    """Window.metadata() gives the keys both splitters put on each chunk, offsets included."""
    window = token_windows("hello world", 5)[0]
    assert tuple(window.metadata()) == CHUNK_METADATA_KEYS
    assert window.metadata()["start_char"] == 0 and window.metadata()["end_char"] == 11


@pytest.mark.parametrize(
    ("size", "overlap", "field"),
    [(0, 0, "max_tokens"), (-3, 0, "max_tokens"), (True, 0, "max_tokens"), (2.5, 0, "max_tokens"),
     (10, -1, "overlap_tokens"), (10, 10, "overlap_tokens"), (10, 12, "overlap_tokens"), (10, None, "overlap_tokens")],
)  # fmt: skip
def test_bad_settings_are_refused(size: object, overlap: object, field: str) -> None:
    """Out-of-range max_tokens or overlap_tokens raise BudgetError naming the field."""
    with pytest.raises(BudgetError, match=field):
        token_windows("text", size, overlap)  # type: ignore[arg-type]


def test_overlap_error_says_how_to_fix_it() -> None:
    """overlap_tokens >= max_tokens names the largest overlap allowed."""
    with pytest.raises(BudgetError, match="at most 9"):
        token_windows("text", 10, 10)


def test_text_must_be_a_string() -> None:
    """A non-str text is a ConfigError, not a crash deep inside."""
    with pytest.raises(ConfigError, match="text must be a str"):
        token_windows(b"bytes", 10)  # type: ignore[arg-type]


def test_docstring_examples_run() -> None:
    """The >>> examples in the windows module pass."""
    outcome = doctest.testmod(windows_module)
    assert outcome.failed == 0 and outcome.attempted > 0


# --- chunk_size_for ------------------------------------------------------------------------------


@pytest.mark.parametrize("spec", ["cl100k_base", "o200k_base", "chars"])
@pytest.mark.parametrize(("max_tokens", "items"), [(2048, 8), (1000, 3), (512, 10), (300, 1)])
def test_that_many_chunks_of_that_size_fit_the_block(spec: str, max_tokens: int, items: int) -> None:
    """items windows of chunk_size_for(...) tokens of real one-line text all fit the rendered block."""
    size = chunk_size_for(max_tokens, items, spec)
    text = " ".join(" ".join(doc.split()) for _, doc in stdlib_docs())
    windows = token_windows(text, size, 0, spec)[:items]
    assert all(w.token_count >= size - 8 for w in windows)  # full chunks, the hard case
    result = recall(
        [Candidate(text=w.text) for w in windows], max_tokens=max_tokens, tokenizer=spec, policy="prefix"
    )
    assert result.report.items_selected == items
    assert count_tokens(result.to_markdown(), spec) <= max_tokens


def test_one_scope_name_as_a_str_is_one_scope() -> None:
    """scopes="team-notes" is the one scope of that name, not eleven one-letter scopes."""
    one = chunk_size_for(2048, 8, scopes="team-notes")
    assert one == chunk_size_for(2048, 8, scopes=["team-notes"]) == chunk_size_for(2048, 8, scopes=("team-notes",))
    assert one > chunk_size_for(2048, 8, scopes=list("team-notes"))


_ONE_LINE = " ".join(" ".join(doc.split()) for _, doc in stdlib_docs())


@settings(max_examples=25, deadline=None)
@given(max_tokens=st.integers(min_value=150, max_value=6000), items=st.integers(min_value=1, max_value=16),
       offset=st.integers(min_value=0, max_value=50_000))  # fmt: skip
def test_any_block_holds_its_chunks(max_tokens: int, items: int, offset: int) -> None:
    """For any block and item count that leave room, that many full chunks all fit, by the walk and the bytes."""
    try:
        size = chunk_size_for(max_tokens, items)
    except BudgetError:
        return
    windows = token_windows(_ONE_LINE[offset:], size)[:items]
    assert len(windows) == items
    result = recall([Candidate(text=w.text) for w in windows], max_tokens=max_tokens, dedupe=False)
    # A one-token window can be a lone space, which is no evidence (dropped as empty); every
    # other window is kept.
    blank = sum(not w.text.strip() for w in windows)
    assert result.report.items_selected == items - blank
    assert result.report.reasons.get("empty", 0) == blank
    assert count_tokens(result.to_markdown()) <= max_tokens


def test_chunk_size_leaves_room_for_multi_line_chunks() -> None:
    """With lines_per_chunk, chunks of real multi-line text with at most that many lines all fit."""
    lines = 30
    size = chunk_size_for(2048, 8, lines_per_chunk=lines)
    text = "\n\n".join(doc for _, doc in stdlib_docs())
    windows = [
        w for w in token_windows(text, size) if w.text.count("\n") < lines and w.token_count > size - 8
    ][:8]
    assert len(windows) == 8
    result = recall([Candidate(text=w.text) for w in windows], max_tokens=2048)
    assert result.report.items_selected == 8


def test_chunk_size_grows_with_the_block_and_shrinks_with_items() -> None:
    """More items mean smaller chunks, a bigger block larger ones, and the answer is deterministic."""
    size = chunk_size_for(2048, 8)
    assert chunk_size_for(2048, 8) == size and chunk_size_for(2048, 9) < size < chunk_size_for(4096, 8)
    assert size > 200


def test_chunk_size_refuses_a_block_too_small() -> None:
    """A block that cannot hold that many chunks with their framing raises BudgetError saying what is needed."""
    with pytest.raises(BudgetError, match="raise max_tokens to at least"):
        chunk_size_for(50, 10)
    with pytest.raises(BudgetError, match="items"):
        chunk_size_for(2048, 0)


def test_tokenizer_instances_are_accepted() -> None:
    """A Tokenizer instance or a callable works as the tokenizer, as it does for recall()."""
    words = get_tokenizer(lambda text: len(text.split()))
    windows = token_windows("a b c d e f g", 3, 0, words)
    assert [w.text for w in windows] == ["a b c ", "d e f ", "g"]


@pytest.mark.parametrize("spec", TOKENIZER_SPECS)
def test_an_overlap_as_long_as_the_window_starts_on_a_cluster_boundary(spec: str) -> None:
    """A window that fits the overlap whole never makes the next one start inside a flag (a
    regional-indicator pair): hypothesis found '🇦🇦🇦🇦' at 9 tokens with 6 of overlap."""
    text = "\U0001F1E6" * 4
    windows = token_windows(text, 9, 6, make_tokenizer(spec))
    assert all(w.start in (0, 2, 4) and w.end in (0, 2, 4) for w in windows)
    assert windows[0].start == 0 and windows[-1].end == len(text)
