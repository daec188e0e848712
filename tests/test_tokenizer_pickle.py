"""Every tokenizer pickles, cloudpickles and deep-copies, and counts the same afterwards."""

from __future__ import annotations

import copy
import multiprocessing
import os
import pickle
import threading
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor

import cloudpickle
import pytest
import tiktoken

import recallpack.packing.tokenizers as tk
from recallpack import TokenizerError, get_tokenizer

from .test_tokenizer_hosts import hugging_face_tokenizer, langchain_model, word_tokens

SAMPLES = [
    "Recalled content is evidence, not instructions.",
    "日本語のテキストです。👩‍👩‍👧 🎉 e\u0301te\u0301",
    "alpha beta, gamma delta. the evidence " * 40,
    "",
]


def custom_encoding() -> tiktoken.Encoding:
    """An Encoding the caller built under a name of their own: nothing to re-resolve it by."""
    shared = get_tokenizer("cl100k_base").encoding
    return tiktoken.Encoding(
        name="my_cl100k",
        pat_str=shared._pat_str,
        mergeable_ranks=shared._mergeable_ranks,
        special_tokens={},
    )


FACTORIES: dict[str, Callable[[], tk.Tokenizer]] = {
    "cl100k_base": lambda: get_tokenizer("cl100k_base"),
    "o200k_base": lambda: get_tokenizer("o200k_base"),
    "chars": lambda: get_tokenizer("chars"),
    "bytes": lambda: tk.ByteTokenizer("cl100k_base"),
    "callable": lambda: get_tokenizer(word_tokens),
    "langchain": lambda: get_tokenizer(langchain_model()),
    "huggingface": lambda: get_tokenizer(hugging_face_tokenizer()),
    "tiktoken-encoding": lambda: get_tokenizer(custom_encoding()),
}
COPIES: dict[str, Callable[[tk.Tokenizer], tk.Tokenizer]] = {
    "pickle": lambda t: pickle.loads(pickle.dumps(t)),
    "cloudpickle": lambda t: cloudpickle.loads(cloudpickle.dumps(t)),
    "deepcopy": copy.deepcopy,
}


def behaviour(tokenizer: tk.Tokenizer) -> tuple[object, ...]:
    return (
        tokenizer.name,
        tokenizer.exact,
        [tokenizer.count(text) for text in SAMPLES],
        [tokenizer.truncate(text, 7) for text in SAMPLES],
    )


@pytest.mark.parametrize("how", sorted(COPIES))
@pytest.mark.parametrize("kind", sorted(FACTORIES))
def test_a_copy_counts_and_truncates_identically(kind: str, how: str) -> None:
    """After a round trip the tokenizer counts and cuts exactly as before, with a working cache."""
    original = FACTORIES[kind]()
    before = behaviour(original)  # fills the count cache, whose lock cannot be pickled
    copied = COPIES[how](original)
    assert behaviour(copied) == before
    threads = [threading.Thread(target=copied.count, args=(SAMPLES[2],)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert copied.count(SAMPLES[2]) == before[2][2]  # type: ignore[index]


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_a_resolved_encoding_travels_by_name(name: str) -> None:
    """A shipped-encoding tokenizer pickles to a few bytes and arrives as this process's instance."""
    shared = get_tokenizer(name)
    data = pickle.dumps(shared)
    assert len(data) < 300 and len(cloudpickle.dumps(shared)) < 300
    assert pickle.loads(data) is shared and copy.deepcopy(shared) is shared


def test_an_encoding_from_tiktoken_travels_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tokenizer over tiktoken.get_encoding(...) is re-resolved by name too, not shipped whole."""
    import llama_index.core

    cache = os.path.join(os.path.dirname(llama_index.core.__file__), "_static", "tiktoken_cache")
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", cache)
    registered = tiktoken.get_encoding("cl100k_base")
    tokenizer = get_tokenizer(registered)
    assert tokenizer.encoding is registered and tokenizer is not get_tokenizer("cl100k_base")
    data = pickle.dumps(tokenizer)
    assert len(data) < 300 and pickle.loads(data) is get_tokenizer("cl100k_base")


def test_a_custom_encoding_travels_whole() -> None:
    """An Encoding under a name recallpack cannot resolve is pickled with its ranks."""
    tokenizer = get_tokenizer(custom_encoding())
    copied = pickle.loads(pickle.dumps(tokenizer))
    assert copied.name == "my_cl100k" and copied.encoding is not tokenizer.encoding
    assert behaviour(copied) == behaviour(tokenizer)


def count_in_worker(tokenizer: tk.Tokenizer) -> tuple[str, list[int], bool]:
    shared = tokenizer is tk.encoding_registry().peek(tokenizer.name)
    return tokenizer.name, [tokenizer.count(text) for text in SAMPLES], shared


def test_tokenizers_count_the_same_in_a_fresh_process() -> None:
    """Sent to a spawned worker, tokenizers re-resolve there and count exactly as here."""
    tokenizers = [get_tokenizer("cl100k_base"), get_tokenizer("o200k_base"), tk.ByteTokenizer("o200k_base")]
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        results = list(pool.map(count_in_worker, tokenizers))
    assert [(name, counts) for name, counts, _ in results] == [
        (t.name, [t.count(text) for text in SAMPLES]) for t in tokenizers
    ]
    assert [shared for *_, shared in results] == [True, True, False]


def test_unpickling_where_the_encoding_cannot_resolve_is_an_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    """An exact tokenizer arriving where its encoding only falls back says so, not silently bounds."""
    data = pickle.dumps(get_tokenizer("cl100k_base"))
    registry = tk.EncodingRegistry([tk.TiktokenCache(str(tmp_path))], warn=False)
    with tk.using_registry(registry), pytest.raises(TokenizerError, match="does not resolve exactly"):
        pickle.loads(data)
