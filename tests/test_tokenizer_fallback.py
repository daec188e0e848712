"""The fallback when no encoding can be loaded: UTF-8 bytes, which never under-count."""

from __future__ import annotations

import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import recallpack.packing.tokenizers as tk
from recallpack import Candidate, Packer, get_tokenizer, recall, split_token_windows

ANY_TEXT = st.text(max_size=400) | st.sampled_from(
    ["日本語のテキストです。" * 20, "👩‍👩‍👧🎉" * 30, "\ud800 lone surrogate \udfff", "a\r\n" * 50]
)


@pytest.fixture
def fallback(tmp_path):
    """No tiktoken cache, no shipped copies: cl100k_base falls back (warning silenced)."""
    registry = tk.EncodingRegistry([tk.TiktokenCache(str(tmp_path))], warn=False)
    with tk.using_registry(registry), warnings.catch_warnings():
        warnings.simplefilter("error")  # the warning was already given: no second one
        yield get_tokenizer("cl100k_base")


# Resolved once at import, before any test swaps the sources out.
REAL = tk.TiktokenTokenizer(tk.EncodingRegistry().load("cl100k_base")[0])  # type: ignore[arg-type]
REAL_O200K = tk.TiktokenTokenizer(tk.EncodingRegistry().load("o200k_base")[0])  # type: ignore[arg-type]


def test_fallback_is_labelled_as_a_bound(fallback: tk.Tokenizer) -> None:
    """tokenizer_used says the counts are an upper bound for the encoding asked for."""
    assert isinstance(fallback, tk.ByteTokenizer) and not fallback.exact
    assert fallback.name == "bytes (upper bound for cl100k_base)"
    assert tk.resolve_encoding("gpt-4o").source.endswith("counting UTF-8 bytes, an upper bound for o200k_base")


@settings(max_examples=100, deadline=None)
@given(text=ANY_TEXT)
def test_bytes_never_under_count(text: str) -> None:
    """For any text, the byte count is at least the real cl100k_base and o200k_base counts."""
    bound = tk.ByteTokenizer("cl100k_base")
    assert bound.count(text) >= REAL.count(text)
    assert bound.count(text) >= REAL_O200K.count(text)


@settings(max_examples=60, deadline=None)
@given(text=ANY_TEXT, limit=st.integers(0, 200))
def test_byte_truncation_fits_the_real_encoding(text: str, limit: int) -> None:
    """A fallback cut fits its limit in bytes, hence in real tokens, and is a prefix."""
    bound = tk.ByteTokenizer("cl100k_base")
    cut = bound.truncate(text, limit)
    assert text.startswith(cut)
    assert REAL.count(cut) <= bound.count(cut) <= limit
    assert bound.count_upto(text, limit) <= limit or cut != text


@settings(max_examples=40, deadline=None)
@given(text=ANY_TEXT, size=st.integers(4, 60), data=st.data())
def test_byte_windows_fit_the_real_encoding(text: str, size: int, data: st.DataObject) -> None:
    """Fallback windows each fit max_tokens by the real encoding, and cover the text in order."""
    overlap = data.draw(st.integers(0, size - 1))
    windows = split_token_windows(text, size, overlap, tk.ByteTokenizer("cl100k_base"))
    for window in windows:
        assert REAL.count(window) <= size or len(window) == 1
    if overlap == 0:
        assert "".join(windows) == text


@settings(max_examples=30, deadline=None)
@given(texts=st.lists(ANY_TEXT, min_size=1, max_size=6), room=st.integers(0, 540))
def test_a_fallback_block_never_exceeds_the_budget_in_real_tokens(texts: list[str], room: int) -> None:
    """Packed by the fallback, the rendered block fits max_tokens by the real cl100k count."""
    fallback = tk.ByteTokenizer("cl100k_base")
    budget = Packer(tokenizer=fallback).least_tokens + room
    result = recall([Candidate(text=t) for t in texts if t.strip()] or [Candidate(text="x")],
                    max_tokens=budget, tokenizer=fallback)
    assert REAL.count(result.to_markdown()) <= result.report.tokens_used <= budget


def test_chars_stays_an_explicit_estimate() -> None:
    """'chars' is still ceil(len/4), not exact, and says so by its name."""
    chars = get_tokenizer("chars")
    assert chars.name == "chars" and not chars.exact and chars.count("日本語のテ") == 2
