"""A missing host framework says which recallpack extra installs it."""

from __future__ import annotations

import importlib
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

import recallpack.adapters.shared.extras as extras
from recallpack.adapters.shared.extras import install_command, require


def block(monkeypatch: pytest.MonkeyPatch, package: str) -> None:
    """Make ``package`` and every submodule already imported look uninstalled."""
    for name in [n for n in sys.modules if n == package or n.startswith(package + ".")] or [package]:
        monkeypatch.setitem(sys.modules, name, None)


ADAPTERS = [
    ("recallpack.adapters.langchain", "langchain_core", "langchain"),
    ("recallpack.adapters.langchain.memory", "langchain_core", "langchain"),
    ("recallpack.adapters.llamaindex", "llama_index", "llamaindex"),
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
    assert "recallpack.adapters.llamaindex" in message and "recallpack[llamaindex] (the 'llamaindex' extra)" in message
    assert install_command("llamaindex") in message


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
    for name in [n for n in sys.modules if n == adapter or n.startswith(f"{adapter}.")]:
        monkeypatch.delitem(sys.modules, name)  # a package: its modules too, as on a fresh install
    with pytest.raises(ImportError, match=rf"'{extra}' extra\).*\[{extra}\]'$"):
        importlib.import_module(adapter)


def test_missing_parent_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """llama_index.core asked for, llama_index itself missing: still the extra's message."""
    monkeypatch.setitem(sys.modules, "llama_index", None)
    for name in [n for n in sys.modules if n.startswith("llama_index.")]:
        monkeypatch.delitem(sys.modules, name)
    with pytest.raises(ModuleNotFoundError, match=r"'llamaindex' extra\).*\[llamaindex\]'$"):
        require("llama_index.core", extra="llamaindex", feature="recallpack.adapters.llamaindex")


ROOT = Path(__file__).resolve().parents[1]


class _Origin:
    """A stand-in distribution whose direct_url.json (PEP 610) says how recallpack was installed."""

    def __init__(self, origin: dict[str, object] | None) -> None:
        self.origin = origin

    def read_text(self, name: str) -> str | None:
        return None if self.origin is None else json.dumps(self.origin)


def installed_as(monkeypatch: pytest.MonkeyPatch, origin: dict[str, object] | None) -> None:
    monkeypatch.setattr(extras.importlib.metadata, "distribution", lambda name: _Origin(origin))


def test_a_checkout_install_names_the_checkout(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Editable from a checkout: the command installs that checkout with the extra, editable."""
    installed_as(monkeypatch, {"url": ROOT.as_uri(), "dir_info": {"editable": True}})
    monkeypatch.chdir(tmp_path)
    assert install_command("langchain").endswith(f"-e {shlex.quote(f'{ROOT}[langchain]')}")
    monkeypatch.chdir(ROOT)
    assert install_command("langchain").endswith("-e '.[langchain]'")


def test_a_plain_install_from_a_checkout_stays_plain(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """pip install /path/to/checkout (not editable): the same, without -e."""
    installed_as(monkeypatch, {"url": ROOT.as_uri(), "dir_info": {}})
    monkeypatch.chdir(tmp_path)
    command = install_command("ray")
    assert command.endswith(f" {shlex.quote(f'{ROOT}[ray]')}") and " -e " not in command


def test_a_git_install_names_its_url(monkeypatch: pytest.MonkeyPatch) -> None:
    """Installed from git: the command is the same URL with the extra."""
    installed_as(monkeypatch, {"url": "file:///srv/recallpack", "vcs_info": {"vcs": "git", "commit_id": "abc"}})
    assert install_command("llamaindex").endswith("'recallpack[llamaindex] @ git+file:///srv/recallpack'")


def test_an_index_install_names_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    """Installed from a package index (no direct_url.json): recallpack[extra] by name."""
    installed_as(monkeypatch, {"url": "https://example.invalid/recallpack.whl", "archive_info": {}})
    assert install_command("langchain").endswith(" 'recallpack[langchain]'")


def test_the_command_uses_this_interpreter_and_its_installer(monkeypatch: pytest.MonkeyPatch) -> None:
    """With pip: this interpreter's pip; without (a make-built .venv): uv for this interpreter."""
    installed_as(monkeypatch, None)
    real = extras.importlib.util.find_spec
    monkeypatch.setattr(extras.importlib.util, "find_spec", lambda name: object() if name == "pip" else real(name))
    assert install_command("langchain").startswith(f"{shlex.quote(sys.executable)} -m pip install ")
    monkeypatch.setattr(extras.importlib.util, "find_spec", lambda name: None if name == "pip" else real(name))
    monkeypatch.setattr(extras.shutil, "which", lambda name, path=None: "/opt/bin/uv")
    assert install_command("langchain").startswith(f"/opt/bin/uv pip install --link-mode=copy --python {shlex.quote(sys.executable)} ")


def test_the_command_in_the_message_works_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The command a checkout user is told, run where they are, resolves (a dry run, offline)."""
    monkeypatch.chdir(tmp_path)
    command = install_command("langchain")
    if " -m pip " in command or command.startswith("pip "):
        pytest.skip("pip's dry run builds the checkout in isolation, which needs the index; uv's does not")
    done = subprocess.run(f"{command} --dry-run", shell=True, cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "UV_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr


def test_the_command_warns_of_nothing_after_the_stdlib_distutils() -> None:
    """Looking pip up after distutils was imported (stdlib_docs imports it) raises no warning."""
    code = "import distutils.core\nfrom recallpack.adapters.shared.extras import install_command\ninstall_command('mcp')"
    done = subprocess.run([sys.executable, "-W", "error", "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stderr == "", done.stderr
