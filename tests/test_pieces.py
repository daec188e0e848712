"""Counting in pieces (recallpack.packing.tokenizers.pieces): exact, and each piece encoded once."""

from __future__ import annotations

import argparse
import inspect
import json
import threading
import unittest

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recallpack import Candidate, ConfigError, Packer
from recallpack.packing.tokenizers import TiktokenTokenizer, get_tokenizer
from recallpack.packing.tokenizers.pieces import PieceCounts, additive_cuts

NAMES = ["cl100k_base", "o200k_base"]

#: Characters and runs that split patterns treat apart: sentence ends, the elision mark, spaces
#: and line breaks of every kind, digits, marks that combine, CJK, emoji, contractions.
PIECES = st.sampled_from(
    list("ab -*`'\n\r\t 。日é1.,;:!?…()[]{}#>|\u00a0\u0301\u2028") + ["'s", "'ll", "  ", "\n\n", ". ", "… ", "🎉", "    ", "!!"]
)


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=500, deadline=None)
@given(text=st.lists(PIECES, max_size=80).map("".join), every=st.integers(1, 12))
def test_pieces_add_up_to_the_whole(name: str, text: str, every: int) -> None:
    """Cut wherever additive_cuts says, the pieces' counts sum to the whole text's count."""
    tokenizer = get_tokenizer(name)
    cuts = [0, *additive_cuts(text, every), len(text)]
    assert cuts == sorted(cuts) and all(b - a >= every for a, b in zip(cuts[1:-2], cuts[2:-1]))
    assert sum(tokenizer.count(text[a:b]) for a, b in zip(cuts, cuts[1:])) == tokenizer.count(text)


@pytest.mark.parametrize("name", NAMES)
def test_pieces_add_up_on_real_prose(name: str) -> None:
    """On the stdlib's own documentation, cut at every sentence end, the counts add up."""
    tokenizer = get_tokenizer(name)
    for module in (json, argparse, threading.Thread, unittest):
        text = inspect.getdoc(module) or ""
        cuts = [0, *additive_cuts(text, 1), len(text)]
        assert len(cuts) > 2, module.__name__
        assert sum(tokenizer.count(text[a:b]) for a, b in zip(cuts, cuts[1:])) == tokenizer.count(text)
        pieces = PieceCounts(tokenizer)
        assert pieces.count(text) == tokenizer.count(text)


def test_a_text_counted_again_encodes_only_what_changed() -> None:
    """A second count of a text that grew at its end encodes the changed piece, not the rest."""
    tokenizer = get_tokenizer("cl100k_base")
    text = (inspect.getdoc(json) or "") + " " + (inspect.getdoc(argparse) or "")
    grown = text + " One more sentence. And another."
    exact = tokenizer.count(text), tokenizer.count(grown)
    own = TiktokenTokenizer(tokenizer.encoding, known=True)  # not the shared one: it is spied on
    seen: list[str] = []
    real = own.count
    own.count = lambda text: (seen.append(text), real(text))[1]  # type: ignore[method-assign]
    pieces = PieceCounts(own)
    assert pieces.count(text) == exact[0]
    assert "".join(seen) == text and len(seen) > 2
    seen.clear()
    assert pieces.count(grown) == exact[1]
    assert grown.endswith("".join(seen)) and 0 < sum(map(len, seen)) < len(text) / 2


def test_an_estimate_cannot_be_counted_in_pieces() -> None:
    """A tokenizer whose counts are not known to add up is refused, with the fix."""
    with pytest.raises(ConfigError, match="count it whole"):
        PieceCounts(get_tokenizer("chars"))


@pytest.mark.parametrize("name", NAMES)
def test_passages_counts_in_pieces_exactly(name: str) -> None:
    """The passages policy prices items in pieces, and its report is the exact count of its block."""
    texts = [p for p in (inspect.getdoc(inspect) or "").split("\n\n") if p.strip()]
    candidates = [Candidate(text=" ".join(texts[i : i + 6])) for i in range(0, len(texts), 6)]
    tokenizer = get_tokenizer(name)
    for budget in (120, 300, 700):
        result = Packer(max_tokens=budget, policy="passages", tokenizer=name).recall(
            candidates, query="signature of a callable and its parameters"
        )
        assert result.report.tokens_used == tokenizer.count(result.to_markdown()) <= budget


@pytest.mark.parametrize("pattern", [r"(?s)..?", r"[^\n]*\n?"])
def test_an_encoding_forged_under_a_known_name_is_never_summed_in_pieces(pattern: str) -> None:
    """A caller's Encoding named cl100k_base that splits its own way gets no piecewise pricing:
    the passages policy's report is still the exact count of its block under that encoding."""
    import tiktoken

    ranks = get_tokenizer("cl100k_base").encoding._mergeable_ranks  # type: ignore[attr-defined]
    forged = tiktoken.Encoding(name="cl100k_base", pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
    tokenizer = get_tokenizer(forged)  # type: ignore[arg-type]
    assert not tokenizer.splits_at_line_starts
    texts = [inspect.getdoc(m) or "" for m in (json, argparse, unittest)]
    candidates = [Candidate(text=t) for t in texts]
    for budget in (150, 400):
        result = Packer(max_tokens=budget, policy="passages", tokenizer=forged).recall(
            candidates, query="parse command line arguments"
        )
        assert result.report.tokens_used == tokenizer.count(result.to_markdown()) <= budget
