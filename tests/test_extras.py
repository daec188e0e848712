"""A missing host framework says which recallpack extra installs it."""

from __future__ import annotations

import importlib
import sys

import pytest

from recallpack.adapters._extras import require


def block(monkeypatch: pytest.MonkeyPatch, package: str) -> None:
    """Make ``package`` and every submodule already imported look uninstalled."""
    for name in [n for n in sys.modules if n == package or n.startswith(package + ".")] or [package]:
        monkeypatch.setitem(sys.modules, name, None)


ADAPTERS = [
    ("recallpack.adapters.langchain", "langchain_core", "langchain"),
    ("recallpack.adapters.langchain_memory", "langchain_core", "langchain"),
    ("recallpack.adapters.llamaindex", "llama_index", "llamaindex"),
    ("recallpack.adapters.mcp", "mcp", "mcp"),
    ("recallpack.adapters.mcp_docs", "bm25s", "mcp"),
    ("recallpack.adapters.mcp_sources", "anyio", "mcp"),
]


def test_present_module_is_returned() -> None:
    """require() returns the module itself when it is installed."""
    assert require("json", extra="x", feature="f") is importlib.import_module("json")


@pytest.mark.parametrize(("module", "blocked"), [("langchain_core", "langchain_core"), ("llama_index.core", "llama_index")])
def test_missing_module_names_the_extra(monkeypatch: pytest.MonkeyPatch, module: str, blocked: str) -> None:
    """A missing module (or its missing parent package) is an ImportError naming the pip command."""
    block(monkeypatch, blocked)
    with pytest.raises(ImportError) as caught:
        require(module, extra="llamaindex", feature="recallpack.adapters.llamaindex")
    message = str(caught.value)
    assert isinstance(caught.value, ModuleNotFoundError) and caught.value.name == module
    assert 'pip install "recallpack[llamaindex]"' in message and "recallpack.adapters.llamaindex" in message
    assert 'pip install ".[llamaindex]"' in message


def test_broken_install_keeps_its_own_error(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """An installed package that fails on a dependency of its own is not blamed on the extra."""
    (tmp_path / "hostlib_for_test.py").write_text("import no_such_dependency_for_test\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError) as caught:
        require("hostlib_for_test", extra="langchain", feature="f")
    assert caught.value.name == "no_such_dependency_for_test" and "recallpack[" not in str(caught.value)


@pytest.mark.parametrize(("adapter", "blocked", "extra"), ADAPTERS, ids=[a for a, _, _ in ADAPTERS])
def test_adapter_import_names_its_extra(monkeypatch: pytest.MonkeyPatch, adapter: str, blocked: str, extra: str) -> None:
    """Importing an adapter without its framework says to install recallpack[<extra>]."""
    block(monkeypatch, blocked)
    monkeypatch.delitem(sys.modules, adapter, raising=False)
    with pytest.raises(ImportError, match=rf"recallpack\[{extra}\]"):
        importlib.import_module(adapter)


def test_missing_parent_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """llama_index.core asked for, llama_index itself missing: still the extra's message."""
    monkeypatch.setitem(sys.modules, "llama_index", None)
    for name in [n for n in sys.modules if n.startswith("llama_index.")]:
        monkeypatch.delitem(sys.modules, name)
    with pytest.raises(ModuleNotFoundError, match=r"recallpack\[llamaindex\]"):
        require("llama_index.core", extra="llamaindex", feature="recallpack.adapters.llamaindex")
