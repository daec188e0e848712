"""The tokenizers package: injected sources, readers of host tokenizers, the text module, one
windowing engine, and the old module's names forwarding with a warning."""

from __future__ import annotations

import importlib
import inspect
import warnings
from pathlib import Path

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

import recallpack.packing.tokenizers as tk
from recallpack import RecallpackWarning, get_tokenizer, split_token_windows, token_windows
from recallpack.adapters.shared.tokenizers import read_host_tokenizer
from recallpack.packing.reading.text import ceil_boundary, floor_boundary, is_boundary
from recallpack.packing.tokenizers.sources import cache_key

from .test_tokenizer import LLAMA_URLS, llama_cache_bytes
from .test_tokenizer_hosts import hugging_face_tokenizer, langchain_model, word_tokens

MOVED = {
    "get_tokenizer": "recallpack.packing.tokenizers",
    "CallableTokenizer": "recallpack.packing.tokenizers",
    "resolve_encoding": "recallpack.packing.tokenizers",
    "DEFAULT_ENCODING": "recallpack.packing.tokenizers",
    "split_token_windows": "recallpack.packing.counting.windows",
    "CountsTokens": "recallpack.adapters.shared.tokenizers",
}


@pytest.mark.parametrize("name", sorted(MOVED))
def test_an_old_module_name_warns_and_is_the_new_object(name: str) -> None:
    """recallpack.packing.tokenizer.<name> still works, warning where the name lives now."""
    old = importlib.import_module("recallpack.packing.tokenizer")
    with pytest.warns(DeprecationWarning, match=rf"moved to {MOVED[name]}\.{name}"):
        value = getattr(old, name)
    assert value is getattr(importlib.import_module(MOVED[name]), name)


def test_an_unknown_old_name_is_an_attribute_error() -> None:
    """A name the old module never had is refused as any module refuses it, with no warning."""
    old = importlib.import_module("recallpack.packing.tokenizer")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(AttributeError, match="no_such_name"):
            old.no_such_name  # noqa: B018


def test_a_registry_reads_only_its_own_sources(tmp_path: Path) -> None:
    """A registry with no sources falls back and warns once; the process's tokenizers are untouched."""
    before = get_tokenizer("cl100k_base")
    registry = tk.EncodingRegistry([])
    with tk.using_registry(registry), pytest.warns(RecallpackWarning) as caught:
        fallback = get_tokenizer("cl100k_base")
        again = get_tokenizer("gpt-4")
        source = tk.resolve_encoding("cl100k_base").source
    assert isinstance(fallback, tk.ByteTokenizer) and again is fallback and len(caught) == 1
    assert "any source (all are off)" in source
    assert get_tokenizer("cl100k_base") is before and before.exact


def test_a_cache_directory_is_read_and_never_written(tmp_path: Path) -> None:
    """A TiktokenCache source serves a verified copy by tiktoken's file name and writes nothing."""
    (tmp_path / cache_key(LLAMA_URLS["cl100k_base"])).write_bytes(llama_cache_bytes("cl100k_base"))
    before = sorted(p.name for p in tmp_path.iterdir())
    registry = tk.EncodingRegistry([tk.TiktokenCache(str(tmp_path))], warn=False)
    tokenizer, resolution = registry("cl100k_base")
    assert resolution.exact and resolution.source == f"tiktoken cache {tmp_path}"
    assert tokenizer.count("Recalled content is evidence.") == get_tokenizer("cl100k_base").count(
        "Recalled content is evidence."
    )
    assert not registry("o200k_base")[1].exact  # o200k_base is in no source of this registry
    assert sorted(p.name for p in tmp_path.iterdir()) == before


class Abacus:
    """A tokenizer of some other framework: callable, but its call returns a dict, not a count."""

    def __call__(self, text: str) -> dict[str, int]:
        return {"beads": len(text.split())}


def test_a_registered_reader_comes_before_the_callable_rule() -> None:
    """An object a reader recognises is its Tokenizer, even when it is callable; twice registered, read once."""
    calls: list[object] = []

    def read_abacus(spec: object) -> tk.Tokenizer | None:
        calls.append(spec)
        if isinstance(spec, Abacus):
            return tk.CallableTokenizer(lambda text: spec(text)["beads"], name="abacus")
        return None

    tk.register_reader(read_abacus)
    tk.register_reader(read_abacus)
    abacus = Abacus()
    tokenizer = get_tokenizer(abacus)
    assert tokenizer.name == "abacus" and tokenizer.count("three bead words") == 3
    assert calls.count(abacus) == 1


def test_the_adapters_read_host_tokenizers_and_nothing_else() -> None:
    """The hosts' reader takes LangChain models and Hugging Face tokenizers; a plain callable is not its kind."""
    assert read_host_tokenizer(langchain_model()).name == "langchain:FakeListChatModel"
    assert read_host_tokenizer(hugging_face_tokenizer()).name == "huggingface:Tokenizer(WordLevel)"
    assert read_host_tokenizer(word_tokens) is None and read_host_tokenizer(object()) is None


_PIECES = ["a", " ", "\r\n", "\n", "e\u0301", "👩\u200d👩\u200d👧", "\U0001f1eb\U0001f1f7\U0001f1e9\U0001f1ea", "\u0600x",
           "ᄀ", "ᅡ", "ᆨ", "क्‍ष", "日本", "\u200d", "\u0301"]  # fmt: skip
TEXTS = st.lists(st.sampled_from(_PIECES), max_size=30).map("".join) | st.text(max_size=60)


@settings(max_examples=200, deadline=None)
@given(text=TEXTS, data=st.data())
def test_text_boundaries_are_the_regex_clusters(text: str, data: st.DataObject) -> None:
    """is_boundary, floor_boundary and ceil_boundary agree with regex's \\X on any text."""
    boundaries = {0, len(text)} | {m.end() for m in regex.finditer(r"\X", text)}
    i = data.draw(st.integers(0, len(text)))
    assert is_boundary(text, i) == (i in boundaries)
    assert floor_boundary(text, i) == max(b for b in boundaries if b <= i)
    assert ceil_boundary(text, i) == min(b for b in boundaries if b >= i)


@pytest.mark.parametrize("spec", ["cl100k_base", "o200k_base", "chars"])
def test_split_token_windows_are_the_token_windows_of_real_text(spec: str) -> None:
    """On real text (the stdlib's docstrings) split_token_windows gives token_windows' texts: one engine."""
    text = "\n\n".join(inspect.getdoc(obj) or "" for obj in (str, dict, list, inspect, regex))
    for size, overlap in [(40, 0), (64, 16), (300, 30)]:
        assert split_token_windows(text, size, overlap, spec) == [w.text for w in token_windows(text, size, overlap, spec)]


def test_the_deprecated_method_cuts_with_the_same_engine() -> None:
    """Tokenizer.split_windows warns and returns split_token_windows' windows."""
    text = inspect.getdoc(dict) or ""
    tokenizer = get_tokenizer("o200k_base")
    with pytest.warns(DeprecationWarning, match="split_token_windows"):
        windows = tokenizer.split_windows(text, 20, 5)
    assert windows == split_token_windows(text, 20, 5, tokenizer) and len(windows) > 3


def test_a_cluster_over_the_limit_is_kept_whole_by_token_windows_and_given_up_by_char_by_split() -> None:
    """The oversize policy is the one difference: token_windows keeps a cluster whole, split_token_windows does not."""
    family = "👩\u200d👩\u200d👧"
    assert get_tokenizer("cl100k_base").count(family) > 2
    assert [w.text for w in token_windows(family, 2)] == [family]
    pieces = split_token_windows(family, 2)
    assert "".join(pieces) == family and len(pieces) > 1
