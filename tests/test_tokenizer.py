"""Tokenizer: counting, exact truncation, windows, offline resolution and the fallback."""

from __future__ import annotations

import os
import threading
import warnings

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import recallpack.packing.encodings as shipped
import recallpack.packing.tokenizers as tk
from recallpack import (
    BudgetError,
    RecallpackWarning,
    TokenizerError,
    count_tokens,
    get_tokenizer,
    resolve_encoding,
    split_token_windows,
    truncate_to_tokens,
)
from recallpack.packing.tokenizers import EncodingRegistry, TiktokenCache, using_registry
from recallpack.packing.tokenizers.sources import cache_key

from .conftest import make_tokenizer

LLAMA_URLS = {name: shipped.ENCODING_FILES[name][0] for name in ("cl100k_base", "o200k_base")}


def llama_cache_bytes(name: str) -> bytes:
    """The copy llama-index-core ships (a dev dependency): an independent source of the file."""
    import llama_index.core

    directory = os.path.join(os.path.dirname(llama_index.core.__file__), "_static", "tiktoken_cache")
    with open(os.path.join(directory, cache_key(LLAMA_URLS[name])), "rb") as handle:
        return handle.read()

TEXTS = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",)), max_size=300
) | st.sampled_from(["日本語のテキストです。", "👩‍👩‍👧 emoji 🎉", "e\u0301te\u0301", "a\r\nb\rc\n", "<|endoftext|> x"])


def test_cl100k_resolves_exactly_offline() -> None:
    """cl100k_base and o200k_base resolve exactly here, with no network."""
    for name in ("cl100k_base", "o200k_base"):
        resolution = resolve_encoding(name)
        assert resolution.exact, resolution
        assert get_tokenizer(name).name == name


def test_model_name_maps_to_its_encoding() -> None:
    """A model name resolves to the encoding tiktoken maps it to."""
    assert get_tokenizer("gpt-4o").name == "o200k_base"
    assert get_tokenizer("gpt-4").name == "cl100k_base"


def test_special_token_text_counts_as_ordinary_text() -> None:
    """<|endoftext|> in content is counted as text and never raises."""
    tokenizer = get_tokenizer("cl100k_base")
    assert tokenizer.count("<|endoftext|>") > 1
    tokens = tokenizer.encoding.encode_ordinary("<|endoftext|> and more")
    assert truncate_to_tokens("<|endoftext|> and more", 3) == tokenizer.encoding.decode(tokens[:3])


def test_chars_heuristic_is_ceil_len_over_4() -> None:
    """The chars tokenizer counts ceil(len / 4)."""
    assert [count_tokens("x" * n, "chars") for n in (0, 1, 4, 5, 8)] == [0, 1, 1, 2, 2]


def test_callable_tokenizer_is_used_and_named() -> None:
    """A callable str -> int counts, and names itself in tokenizer_used."""
    tokenizer = get_tokenizer(lambda text: len(text.split()))
    assert tokenizer.count("one two three") == 3
    assert tokenizer.name.startswith("callable:")


def test_callable_returning_garbage_is_an_error() -> None:
    """A tokenizer callable that returns a non-int is reported, not trusted."""
    with pytest.raises(TokenizerError, match="non-negative int"):
        get_tokenizer(lambda text: "3").count("x")


def test_unknown_encoding_lists_known_ones() -> None:
    """An unknown encoding name is an error that lists the encodings that exist."""
    with pytest.raises(TokenizerError) as info:
        get_tokenizer("cl200k_base")
    assert "cl100k_base" in str(info.value) and "o200k_base" in str(info.value)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("spec", ["cl100k_base", "o200k_base", "chars", "words"])
@settings(max_examples=60, deadline=None)
@given(text=TEXTS, limit=st.integers(min_value=0, max_value=40))
# The text's own tokens can hold the cut in more tokens than the cut alone takes (here 8 for 7).
@example(text="0\U00010000 \x850", limit=8)
def test_truncate_is_the_longest_fitting_prefix(spec: str, text: str, limit: int) -> None:
    """truncate_to_tokens returns a prefix that fits, and one more token would not fit."""
    tokenizer = make_tokenizer(spec)
    cut = tokenizer.truncate(text, limit)
    assert text.startswith(cut)
    assert tokenizer.count(cut) <= limit
    if cut != text and spec in ("cl100k_base", "o200k_base"):
        tokens = tokenizer.encoding.encode_ordinary(text)
        # The first prefix of the text's own tokens that is longer than the cut does not fit.
        for n in range(1, len(tokens) + 1):
            longer = tokenizer.encoding.decode_bytes(tokens[:n]).decode("utf-8", "replace")
            if len(longer) > len(cut) and text.startswith(longer):
                assert len(tokenizer.encoding.encode_ordinary(longer)) > limit
                break


def test_truncate_on_token_boundaries_matches_tiktoken() -> None:
    """The cut equals decoding the first n tokens of the whole text."""
    tokenizer = get_tokenizer("cl100k_base")
    text = "Recalled content is evidence, not instructions. " * 20
    tokens = tokenizer.encoding.encode_ordinary(text)
    assert truncate_to_tokens(text, 17) == tokenizer.encoding.decode(tokens[:17])


def test_truncate_never_splits_a_character() -> None:
    """A cut inside a multi-byte character backs off to the character before it."""
    for limit in range(0, 12):
        cut = truncate_to_tokens("🎉🎉🎉 日本語 👩‍👩‍👧", limit)
        assert "\ufffd" not in cut and count_tokens(cut) <= limit


def test_huge_text_counts_past_the_limit_without_reading_it_all() -> None:
    """count_upto on a multi-megabyte text answers 'over' and truncate still cuts exactly."""
    tokenizer = get_tokenizer("cl100k_base")
    huge = "word " * 2_000_000
    assert tokenizer.count_upto(huge, 100) > 100
    cut = tokenizer.truncate(huge, 100)
    assert tokenizer.count(cut) == 100 and huge.startswith(cut)


@pytest.mark.parametrize("spec", ["cl100k_base", "o200k_base", "chars", "words"])
@settings(max_examples=40, deadline=None)
@given(text=TEXTS, size=st.integers(2, 20), data=st.data())
def test_windows_fit_and_overlap(spec: str, text: str, size: int, data: st.DataObject) -> None:
    """Every window fits max_tokens, and together they cover the text in order."""
    overlap = data.draw(st.integers(0, size - 1))
    tokenizer = make_tokenizer(spec)
    windows = split_token_windows(text, size, overlap, tokenizer)
    for window in windows:
        assert tokenizer.count(window) <= size or len(window) == 1
    if overlap == 0:
        assert "".join(windows) == text
    if windows:
        assert text.startswith(windows[0]) and text.endswith(windows[-1])


def test_windows_share_overlap_tokens() -> None:
    """Each cl100k window begins with the last overlap_tokens of the one before."""
    tokenizer = get_tokenizer("cl100k_base")
    text = " ".join(f"w{i}" for i in range(200))
    windows = split_token_windows(text, 20, 5)
    assert len(windows) > 10
    for first, second in zip(windows, windows[1:]):
        shared = next(n for n in range(len(second), 0, -1) if first.endswith(second[:n]))
        assert tokenizer.count(first) <= 20
        assert 3 <= tokenizer.count(second[:shared]) <= 5


@pytest.mark.parametrize(("size", "overlap"), [(10, 10), (10, 11), (0, 0), (-3, 0), (10, -1)])
def test_window_arguments_are_validated(size: int, overlap: int) -> None:
    """overlap must be below max_tokens, and both must be sensible ints."""
    with pytest.raises(BudgetError, match="overlap_tokens|max_tokens"):
        split_token_windows("text", size, overlap)


@pytest.fixture
def no_sources(tmp_path):
    """Neither tiktoken's cache nor recallpack's shipped copies are there."""
    with using_registry(EncodingRegistry([TiktokenCache(str(tmp_path))])):
        yield


def test_fallback_is_the_byte_bound_with_one_warning(no_sources: None) -> None:
    """With no copy anywhere, counting falls back to UTF-8 bytes, labelled, and warns exactly once."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = get_tokenizer("cl100k_base")
        second = get_tokenizer("o200k_base")
        assert first.count("abcdefgh") == 8 and second.count("日本") == 6
    assert [w.category for w in caught] == [RecallpackWarning]
    assert "upper bound" in str(caught[0].message)
    assert first.name == "bytes (upper bound for cl100k_base)" and not first.exact
    resolution = resolve_encoding("cl100k_base")
    assert not resolution.exact and "upper bound" in resolution.source


def test_tiktoken_cache_dir_is_honoured(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """A TIKTOKEN_CACHE_DIR holding the encoding's file is the first source used."""
    (tmp_path / cache_key(LLAMA_URLS["cl100k_base"])).write_bytes(llama_cache_bytes("cl100k_base"))
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    with using_registry(EncodingRegistry()):  # the default sources, read from the environment now
        assert resolve_encoding("cl100k_base").source == f"tiktoken cache {tmp_path}"
        assert resolve_encoding("o200k_base").source == "recallpack's shipped copy, SHA-256 verified"


def test_loading_leaves_the_environment_alone(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """Loading from the shipped copies, from four threads at once, never touches os.environ."""
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    before = dict(os.environ)
    registry = EncodingRegistry()
    results: list[str] = []
    seen: list[dict[str, str]] = []

    def load() -> None:
        with using_registry(registry):
            results.append(resolve_encoding("o200k_base").source)
        seen.append(dict(os.environ))

    threads = [threading.Thread(target=load) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert dict(os.environ) == before and all(env == before for env in seen)
    assert results == ["recallpack's shipped copy, SHA-256 verified"] * 4


PIECES = st.sampled_from(
    list("ab -*`'\n\r\t 。日é1.,;:!?()[]{}#>|\u00a0\u0301") + ["'s", "'ll", "  ", "\n\n", "- **", "🎉", "    "]
)


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
@settings(max_examples=400, deadline=None)
@given(head=st.lists(PIECES, max_size=30).map("".join), tail=st.lists(PIECES, min_size=1, max_size=30).map("".join))
def test_counts_add_across_a_line_start(name: str, head: str, tail: str) -> None:
    """Where splits_at_line_starts holds, a split after a newline, before a non-space, adds exactly."""
    tokenizer = get_tokenizer(name)
    assert tokenizer.splits_at_line_starts
    head += "\n"
    if tail[0].isspace():
        tail = "-" + tail
    assert tokenizer.count(head + tail) == tokenizer.count(head) + tokenizer.count(tail)


def test_heuristic_and_callables_do_not_claim_additivity() -> None:
    """ceil(len/4) and arbitrary callables are counted whole, never summed."""
    assert not get_tokenizer("chars").splits_at_line_starts
    assert not get_tokenizer(len).splits_at_line_starts


#: Split patterns a caller may give an Encoding it names after a shipped one: pairs of
#: characters, anything up to a space, whole lines (pieces that span a line start).
FORGED_PATTERNS = [r"(?s)..?", r"\S+\s*|\s+", r"[^\n]*\n?"]


def forged(name: str, pattern: str) -> object:
    """A caller-built tiktoken Encoding under a shipped encoding's name, with another pattern."""
    import tiktoken

    ranks = get_tokenizer(name).encoding._mergeable_ranks  # type: ignore[attr-defined]
    return tiktoken.Encoding(name=name, pat_str=pattern, mergeable_ranks=ranks, special_tokens={})


@pytest.mark.parametrize("pattern", FORGED_PATTERNS)
@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_an_encoding_is_trusted_by_identity_not_by_name(name: str, pattern: str) -> None:
    """An Encoding the caller built and named cl100k_base gets no additivity shortcut: every
    report is the exact count of its block, and every block fits, however the pattern splits."""
    from recallpack import Candidate, Packer, recall

    encoding = forged(name, pattern)
    tokenizer = get_tokenizer(encoding)  # type: ignore[arg-type]
    assert not tokenizer.splits_at_line_starts and get_tokenizer(name).splits_at_line_starts
    texts = [f"Item {i}: " + "word " * (i % 7) + "x" * (i % 3) + "\n- not a label" * (i % 2) for i in range(30)]
    least = Packer(tokenizer=encoding).least_tokens  # a pattern that splits finely needs more than 40
    for budget in range(max(40, least), 420, 3):
        result = recall([Candidate(text=t) for t in texts], max_tokens=budget, tokenizer=encoding)
        exact = tokenizer.count(result.to_markdown())
        assert result.report.tokens_used == exact <= budget, (budget, result.report.tokens_used, exact)


@pytest.mark.parametrize("pattern", FORGED_PATTERNS)
def test_token_windows_of_a_forged_encoding_fit(pattern: str) -> None:
    """Token windows counted with a caller's Encoding named cl100k_base each fit by its own count."""
    from recallpack import token_windows

    encoding = forged("cl100k_base", pattern)
    text = "\n".join(f"Line {i} of a document: " + "alpha beta gamma " * (i % 9) for i in range(200))
    tokenizer = get_tokenizer(encoding)  # type: ignore[arg-type]
    for window in token_windows(text, 37, 5, encoding):  # type: ignore[arg-type]
        assert tokenizer.count(window.text) <= 37


def test_a_forged_encoding_is_still_unknown_after_pickling() -> None:
    """A copy of a caller's Encoding travels whole and earns no trust on the way."""
    import pickle

    copied = pickle.loads(pickle.dumps(get_tokenizer(forged("cl100k_base", FORGED_PATTERNS[0]))))  # type: ignore[arg-type]
    assert not copied.splits_at_line_starts
    assert pickle.loads(pickle.dumps(get_tokenizer("cl100k_base"))).splits_at_line_starts


def test_count_cache_is_bounded_by_characters(monkeypatch: pytest.MonkeyPatch) -> None:
    """The count cache evicts the least recently used texts once it holds too many characters."""
    monkeypatch.setattr(tk.base, "_CACHE_CHARS", 1_000)
    tokenizer = tk.CallableTokenizer(len, name="len")
    texts = [f"{i:03d}" + "x" * 97 for i in range(30)]  # 100 chars each: ten fit
    for text in texts:
        assert tokenizer.count(text) == 100
        assert tokenizer.count(text) == 100  # the second count admits it
    assert len(tokenizer._cache) == 10
    tokenizer.count(texts[-10])  # touched: now the most recent
    tokenizer.count("y" * 100)
    tokenizer.count("y" * 100)
    assert tokenizer._cache.get(texts[-10]) == 100 and tokenizer._cache.get(texts[-9]) is None


def test_a_text_counted_once_is_not_kept() -> None:
    """The cache admits a text on its second count: one-off texts pin no memory, repeated
    ones are counted once more and then never again."""
    calls: list[str] = []

    def counting(text: str) -> int:
        calls.append(text)
        return len(text)

    tokenizer = tk.CallableTokenizer(counting, name="counting")
    once = [f"one-off {i}" for i in range(1_000)]
    for text in once:
        tokenizer.count(text)
    assert len(tokenizer._cache) == 0
    for _ in range(5):
        assert tokenizer.count("again and again") == len("again and again")
    assert calls.count("again and again") == 2 and len(tokenizer._cache) == 1


@pytest.mark.parametrize(
    "fn",
    [
        lambda text: __import__("numpy").int64(len(text.split())),
        lambda text: __import__("numpy").arange(len(text.split())),
        lambda text: list(range(len(text.split()))),
    ],
    ids=["numpy-count", "numpy-token-ids", "token-ids"],
)
def test_a_tokenizer_may_answer_with_numpy(fn: object) -> None:
    """A callable's count may be NumPy's integer, its tokens a NumPy array: counted as given."""
    tokenizer = get_tokenizer(fn)  # type: ignore[arg-type]
    assert tokenizer.count("one two three") == 3 and type(tokenizer.count("a b")) is int
