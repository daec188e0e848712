"""The shipped vocabularies: verified before use, equal to tiktoken's, loaded once per process."""

from __future__ import annotations

import gzip
import shutil
import threading
import warnings
from pathlib import Path

import pytest
import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st

import recallpack.packing.encodings as shipped
import recallpack.packing.tokenizers as tk
from recallpack import RecallpackWarning, get_tokenizer, resolve_encoding
from recallpack.cli import main
from recallpack.packing.tokenizers.sources import cache_key

from .test_tokenizer import LLAMA_URLS, llama_cache_bytes

SHIPPED = "recallpack's shipped copy, SHA-256 verified"
NAMES = ("cl100k_base", "o200k_base")


@pytest.fixture
def fresh(tmp_path: Path):
    """An empty tiktoken cache and no encoding resolved yet; the fallback warning is armed."""
    cache = tmp_path / "tiktoken-cache"
    cache.mkdir()
    with tk.using_registry(tk.EncodingRegistry([tk.TiktokenCache(str(cache)), tk.ShippedCopies()])):
        yield cache


@pytest.fixture(scope="module")
def own() -> dict[str, tiktoken.Encoding]:
    """The encodings as tiktoken itself loads them, from llama-index-core's copy of the files."""
    import llama_index.core

    cache = Path(llama_index.core.__file__).parent / "_static" / "tiktoken_cache"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TIKTOKEN_CACHE_DIR", str(cache))
        return {name: tiktoken.get_encoding(name) for name in NAMES}


def shipped_only(url: str, expected_hash: str | None = None) -> dict[bytes, int]:
    """Read the shipped copy and nothing else, checked as the resolution checks it."""
    data = shipped.read_shipped(url)
    assert expected_hash is not None and shipped.sha256_matches(data, expected_hash)
    return shipped.parse_tiktoken_bpe(data, url)


@pytest.mark.parametrize("name", NAMES)
def test_shipped_encoding_is_tiktokens_encoding(fresh: Path, own, name: str) -> None:
    """With an empty cache the shipped copy serves, and it is the encoding tiktoken builds."""
    tokenizer = get_tokenizer(name)
    assert resolve_encoding(name).source == SHIPPED
    ours, theirs = tokenizer.encoding, own[name]
    assert ours is not theirs and ours.name == theirs.name
    assert ours._mergeable_ranks == theirs._mergeable_ranks
    assert ours._pat_str == theirs._pat_str and ours._special_tokens == theirs._special_tokens


@pytest.fixture(scope="module")
def built() -> dict[str, tiktoken.Encoding]:
    return {name: shipped.build_encoding(name, shipped_only) for name in NAMES}


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=100, deadline=None)
@given(text=st.text(max_size=300))
def test_shipped_counts_equal_tiktokens_on_any_text(own, built, name: str, text: str) -> None:
    """On random Unicode text the shipped encoding tokenizes exactly as tiktoken's own."""
    assert built[name].encode_ordinary(text) == own[name].encode_ordinary(text)


def test_o200k_harmony_is_built_from_the_shipped_o200k_file(fresh: Path) -> None:
    """An encoding whose file is shipped (o200k_harmony reads o200k_base's) resolves offline too."""
    resolution = resolve_encoding("o200k_harmony")
    assert resolution.exact and resolution.source == SHIPPED
    assert get_tokenizer("o200k_harmony").count("hello world") == get_tokenizer("o200k_base").count("hello world")


def corrupt_copy(tmp_path: Path, how: str) -> Path:
    """A copy of the package data with cl100k_base damaged."""
    data = tmp_path / "data"
    shutil.copytree(shipped.data_dir(), data, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    target = data / "cl100k_base.tiktoken.gz"
    if how == "one byte changed":
        content = bytearray(gzip.decompress(target.read_bytes()))
        content[1000] ^= 1
        target.write_bytes(gzip.compress(bytes(content)))
    else:  # truncated: not even valid gzip
        target.write_bytes(target.read_bytes()[:50_000])
    return data


@pytest.mark.parametrize("how", ["one byte changed", "truncated"])
def test_a_corrupted_shipped_file_is_reported_and_not_used(
    fresh: Path, tmp_path: Path, how: str
) -> None:
    """A damaged shipped file is refused, named in the resolution and the warning; counts stay bounds."""
    damaged = tk.ShippedCopies(corrupt_copy(tmp_path, how))
    with tk.using_registry(tk.EncodingRegistry([tk.TiktokenCache(str(fresh)), damaged])), \
            warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tokenizer = get_tokenizer("cl100k_base")
        resolution = resolve_encoding("cl100k_base")
        # The undamaged file next to it still serves.
        assert resolve_encoding("o200k_base").source == SHIPPED
    assert not resolution.exact and isinstance(tokenizer, tk.ByteTokenizer)
    assert resolution.source.startswith("recallpack's shipped copy, SHA-256 verified: ")
    assert ("fails the SHA-256 check" if how == "one byte changed" else "does not decompress") in resolution.source
    assert resolution.source.endswith("counting UTF-8 bytes, an upper bound for cl100k_base")
    assert [w.category for w in caught] == [RecallpackWarning]
    assert resolution.source in str(caught[0].message)


def test_a_corrupted_shipped_file_falls_to_the_next_source(
    fresh: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A damaged cache file is refused and the shipped copy serves, and the source says both."""
    (fresh / cache_key(LLAMA_URLS["cl100k_base"])).write_bytes(b"not a vocabulary\n")
    resolution = resolve_encoding("cl100k_base")
    assert resolution.exact
    assert resolution.source == (
        f"{SHIPPED}; tiktoken cache {fresh}: cl100k_base.tiktoken fails the SHA-256 check tiktoken expects, not used"
    )


def test_a_verified_cache_file_comes_first(fresh: Path) -> None:
    """tiktoken's own cache, when it holds a file that passes, serves before the shipped copy."""
    (fresh / cache_key(LLAMA_URLS["o200k_base"])).write_bytes(llama_cache_bytes("o200k_base"))
    assert resolve_encoding("o200k_base").source == f"tiktoken cache {fresh}"
    assert resolve_encoding("cl100k_base").source == SHIPPED


def test_a_disabled_tiktoken_cache_still_resolves_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """TIKTOKEN_CACHE_DIR='' (tiktoken's 'no cache') leaves the shipped copy as the source."""
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")
    with tk.using_registry(tk.EncodingRegistry()):  # the default sources, read from the environment now
        assert resolve_encoding("cl100k_base").source == SHIPPED


def test_doctor_names_the_source(fresh: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """recallpack doctor prints which source served each encoding."""
    assert main(["doctor", "--require-exact"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"cl100k_base: exact ({SHIPPED})",
        f"o200k_base: exact ({SHIPPED})",
    ]


def test_first_use_from_eight_threads_makes_one_instance(fresh: Path) -> None:
    """Eight threads that first-use an encoding at the same moment get one instance, loaded once."""
    loads: list[str] = []

    class Counting(tk.EncodingRegistry):
        def load(self, encoding: str):
            loads.append(encoding)
            return super().load(encoding)

    registry = Counting([tk.TiktokenCache(str(fresh)), tk.ShippedCopies()])
    start = threading.Barrier(8)
    got: list[object] = []

    def first_use() -> None:
        start.wait()
        with tk.using_registry(registry):
            got.append(get_tokenizer("o200k_base"))

    threads = [threading.Thread(target=first_use) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(got) == 8 and len({id(t) for t in got}) == 1
    assert loads == ["o200k_base"]


def test_each_definition_is_what_tiktokens_constructor_builds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every encoding recallpack builds has the pattern, special tokens, file and hash tiktoken's constructor has."""
    from tiktoken_ext import openai_public

    read: list[tuple[str, str | None]] = []
    ranks = {b"a": 0}

    def record(url: str, expected_hash: str | None = None) -> dict[bytes, int]:
        read.append((url, expected_hash))
        return ranks

    # Only here, in a test: the constructors' file reads are answered without the files.
    monkeypatch.setattr(openai_public, "load_tiktoken_bpe", record)
    constructors = openai_public.ENCODING_CONSTRUCTORS
    assert {"cl100k_base", "o200k_base"} <= constructors.keys()
    for name, spec in shipped.ENCODINGS.items():
        if name not in constructors:  # an older tiktoken, without o200k_harmony
            continue
        read.clear()
        theirs = constructors[name]()
        assert theirs == {
            "name": name,
            "pat_str": spec.pat_str,
            "mergeable_ranks": ranks,
            "special_tokens": spec.special_tokens,
            **({"explicit_n_vocab": spec.explicit_n_vocab} if spec.explicit_n_vocab is not None else {}),
        }, name
        assert read == [(spec.ranks_url, spec.ranks_sha256)], name
    assert shipped.shipped_encodings() == {"cl100k_base", "o200k_base", "o200k_harmony"}


def test_building_an_encoding_leaves_tiktoken_as_it_was(tmp_path: Path) -> None:
    """Building from the shipped copies changes no tiktoken module, registry or environment variable."""
    import os

    from tiktoken import load, registry
    from tiktoken_ext import openai_public

    def state() -> list[dict[str, object]]:
        # Containers copied one level down, so an encoding added to tiktoken's registry shows.
        modules = (tiktoken, load, registry, openai_public)
        return [{k: dict(v) if isinstance(v, dict) else v for k, v in vars(m).items()} for m in modules] + [
            dict(os.environ)
        ]

    before = state()
    with tk.using_registry(tk.EncodingRegistry([tk.TiktokenCache(str(tmp_path)), tk.ShippedCopies()])):
        for name in NAMES:
            assert get_tokenizer(name).exact
    assert state() == before
    assert list(tmp_path.iterdir()) == []  # and nothing was written to the cache it read
