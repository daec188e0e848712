"""A core-only install counts cl100k_base and o200k_base exactly: no extras, no cache, no network.

The fresh virtual environment gets recallpack from a wheel built from this tree (so the
package data really ships) and only the core dependencies' packages, linked from the test
environment rather than downloaded: nothing from llama-index-core, whose copies of the
vocabularies are exactly what must not be needed. Set RECALLPACK_SKIP_VENV_TESTS=1 to skip
where a virtual environment cannot be made.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest
import tiktoken
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.test_install import installer

ROOT = Path(__file__).resolve().parent.parent
# The import names of the core dependencies (pydantic, jinja2, tiktoken) and theirs.
CORE_PACKAGES = [
    "pydantic", "pydantic_core", "annotated_types", "typing_extensions.py", "typing_inspection",
    "jinja2", "markupsafe", "tiktoken", "tiktoken_ext", "regex", "requests", "urllib3", "idna",
    "certifi", "charset_normalizer",
]
CHECK = """
import json, sys, warnings
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as caught:
    import recallpack
    from recallpack import count_tokens, resolve_encoding
    texts = json.load(sys.stdin)
    out = {name: [count_tokens(text, name) for text in texts] for name in ("cl100k_base", "o200k_base")}
    out["sources"] = [resolve_encoding(name).source for name in ("cl100k_base", "o200k_base")]
try:
    import llama_index  # noqa: F401
    out["llama_index"] = True
except ImportError:
    out["llama_index"] = False
out["warnings"] = [str(w.message) for w in caught]
out["recallpack"] = recallpack.__file__
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def core_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv holding recallpack's wheel and the core dependencies only."""
    if os.environ.get("RECALLPACK_SKIP_VENV_TESTS"):
        pytest.skip("RECALLPACK_SKIP_VENV_TESTS is set")
    base = tmp_path_factory.mktemp("core-install")
    source = base / "source"  # a copy, so the build leaves no build/ or egg-info in the tree
    shutil.copytree(ROOT / "recallpack", source / "recallpack", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    try:
        venv.create(base / "venv", with_pip=False)
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"cannot create a virtual environment here: {exc}")
    python = base / "venv" / "bin" / "python"
    # The wheel is built with this environment's setuptools (PEP 517, no download), then put in
    # with this environment's pip, or the uv that make puts in a .venv it creates without pip.
    build = "import sys; from setuptools import build_meta; print(build_meta.build_wheel(sys.argv[1]))"
    (base / "wheel").mkdir()
    name = subprocess.run(
        [sys.executable, "-c", build, str(base / "wheel")], cwd=source, capture_output=True, text=True, check=True
    ).stdout.strip().splitlines()[-1]
    command = installer(python)
    if command is None:
        pytest.skip("neither pip nor uv is available to install with")
    subprocess.run([*command, "--no-deps", str(base / "wheel" / name)], check=True, timeout=600)
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], capture_output=True, text=True, check=True).stdout.strip())
    here = Path(tiktoken.__file__).resolve().parent.parent
    deps = base / "core-deps"
    deps.mkdir()
    for name in CORE_PACKAGES:
        (deps / name).symlink_to(here / name)
    (site / "core-deps.pth").write_text(str(deps) + "\n")
    return python


@pytest.fixture(scope="module")
def own() -> dict[str, tiktoken.Encoding]:
    """tiktoken's own encodings, loaded by tiktoken from llama-index-core's copies of the files."""
    import llama_index.core

    cache = Path(llama_index.core.__file__).parent / "_static" / "tiktoken_cache"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TIKTOKEN_CACHE_DIR", str(cache))
        return {name: tiktoken.get_encoding(name) for name in ("cl100k_base", "o200k_base")}


def run_core(python: Path, texts: list[str], cache: Path) -> dict[str, object]:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "TIKTOKEN_CACHE_DIR": str(cache),  # empty
        # Any attempt to download fails at once instead of reaching the internet.
        "HTTP_PROXY": "http://127.0.0.1:9",
        "HTTPS_PROXY": "http://127.0.0.1:9",
        "NO_PROXY": "",
    }
    done = subprocess.run(
        [str(python), "-c", CHECK], input=json.dumps(texts), capture_output=True, text=True, env=env,
        cwd=cache, timeout=60,
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr
    result: dict[str, object] = json.loads(done.stdout)
    return result


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(st.text(max_size=200), min_size=20, max_size=40))
def test_core_install_counts_exactly_offline(core_python: Path, own, tmp_path: Path, texts: list[str]) -> None:
    """Fresh venv, core dependencies only, empty TIKTOKEN_CACHE_DIR: counts equal tiktoken's, no warning."""
    cache = tmp_path / "empty-cache"
    cache.mkdir(exist_ok=True)
    texts = [*texts, "日本語のテキストです。👩‍👩‍👧 🎉", "<|endoftext|> is text here"]
    result = run_core(core_python, texts, cache)
    assert result["llama_index"] is False and "core-install" in str(result["recallpack"])
    assert result["warnings"] == []
    assert result["sources"] == ["recallpack's shipped copy, SHA-256 verified"] * 2
    for name in ("cl100k_base", "o200k_base"):
        assert result[name] == [len(own[name].encode_ordinary(text)) for text in texts]
    assert list(cache.iterdir()) == []  # nothing was written to (or fetched into) the cache
