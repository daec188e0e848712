"""Shared fixtures: the tokenizers every invariant is checked under."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator

import pytest

from recallpack import get_tokenizer
from recallpack.packing.choosing.policies import PackingPolicy, register_policy, unregister_policy
from recallpack.packing.tokenizers import CallableTokenizer


def words(text: str) -> int:
    """A deliberately different tokenizer: one token per word or punctuation mark."""
    return len(re.findall(r"\w+|[^\w\s]", text))


TOKENIZER_SPECS = ["cl100k_base", "o200k_base", "chars", "words"]


def make_tokenizer(spec: str):
    return CallableTokenizer(words, name="words") if spec == "words" else get_tokenizer(spec)


@pytest.fixture(params=TOKENIZER_SPECS)
def tokenizer(request: pytest.FixtureRequest):
    return make_tokenizer(request.param)


@contextlib.contextmanager
def policy_registered(name: str, policy: PackingPolicy) -> Iterator[str]:
    """A policy registered as ``name`` while the block runs, and taken back after it."""
    register_policy(name, policy)
    try:
        yield name
    finally:
        unregister_policy(name)
