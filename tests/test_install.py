"""Installing from a checkout works the ways the README shows, and carries the type information.

The installs run offline: the fresh virtual environment sees this one's packages (through a
``.pth`` file) for recallpack's dependencies, and recallpack itself is built from the checkout
with ``--no-deps --no-build-isolation``. What is checked is what a user of the installed copy
gets: the package, its data files, its console script, and its types.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import shutil
import site
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
USER_CODE = '''\
from recallpack import Candidate, recall

result = recall([Candidate(text="Alice moved to Berlin.")], max_tokens=100)
reveal_type(result)
tokens: str = result.report.tokens_used  # wrong on purpose: mypy must know it is an int
'''


def clean_env() -> dict[str, str]:
    """The environment of a user's own project: no PYTHONPATH pointing at this checkout."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MYPYPATH")}


def installed_through_import_hook() -> bool:
    """True when recallpack is an editable install that only an import hook can find."""
    try:
        dist = importlib.metadata.distribution("recallpack")
    except importlib.metadata.PackageNotFoundError:
        return False
    direct = json.loads(dist.read_text("direct_url.json") or "{}")
    hook = any(str(f).endswith("_finder.py") and "__editable__" in str(f) for f in dist.files or [])
    return bool(direct.get("dir_info", {}).get("editable")) and hook


def test_user_project_type_checks_against_recallpack(tmp_path: Path) -> None:
    """mypy, in a project outside the checkout, sees recallpack's real types (not Any)."""
    pytest.importorskip("mypy")
    if installed_through_import_hook():
        pytest.skip(
            "recallpack is installed in editable mode through an import hook, which mypy cannot "
            "follow; make installs it in strict mode (rm -rf .venv && make test)"
        )
    (tmp_path / "user.py").write_text(USER_CODE)
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental", "--cache-dir", os.devnull, "user.py"],
        cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=300,
    )
    assert "Cannot find implementation or library stub" not in done.stdout, done.stdout
    assert 'Revealed type is "recallpack.' in done.stdout and 'RecallResult"' in done.stdout, done.stdout
    assert 'expression has type "int", variable has type "str"' in done.stdout, done.stdout


def installer(python: Path) -> list[str] | None:
    """An offline install command into ``python``'s environment: this environment's pip, or the
    uv that make put beside it (a .venv made with uv has no pip)."""
    if importlib.util.find_spec("pip") is not None:
        return [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-index"]
    uv = shutil.which("uv") or str(Path(sys.executable).with_name("uv"))
    if Path(uv).exists():
        return [uv, "pip", "install", "--python", str(python), "--offline", "--link-mode=copy"]
    return None


def fresh_venv(path: Path) -> Path:
    """A new virtual environment that sees this one's packages, but has no recallpack of its own."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, timeout=120)
    python = path / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()
    ours = {sysconfig.get_paths()["purelib"], *site.getsitepackages()}
    Path(purelib, "_parent_env.pth").write_text("\n".join(sorted(ours)) + "\n")
    return python


@pytest.mark.parametrize(
    "requirement",
    [f"{ROOT}[langchain]", f"recallpack[langchain] @ git+file://{ROOT}"],
    ids=["pip install .[langchain]", "recallpack[langchain] @ git+file://checkout"],
)
def test_install_from_a_checkout(tmp_path: Path, requirement: str) -> None:
    """The README's install commands give a working copy: package, data, script, types, adapter."""
    if "git+" in requirement and (shutil.which("git") is None or not (ROOT / ".git").exists()):
        pytest.skip("installing from git needs git and a git checkout")
    python = fresh_venv(tmp_path / "venv")
    command = installer(python)
    if command is None:
        pytest.skip("neither pip nor uv is available to install with")
    # A build from a directory writes recallpack.egg-info and build/ into it; those would then
    # shadow the installed distribution's metadata for every later test run in this checkout.
    litter = [p for p in (ROOT / "recallpack.egg-info", ROOT / "build") if not p.exists()]
    try:
        done = subprocess.run(
            [*command, "--no-deps", "--no-build-isolation", requirement],
            cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=600,
        )
    finally:
        for path in litter:
            shutil.rmtree(path, ignore_errors=True)
    assert done.returncode == 0, done.stdout + done.stderr

    script = (
        "import pathlib, recallpack, recallpack.adapters.langchain\n"
        "package = pathlib.Path(recallpack.__file__).parent\n"
        "print(package)\n"
        "print((package / 'py.typed').exists())\n"
    )
    checked = subprocess.run(
        [str(python), "-c", script], cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=120
    )
    assert checked.returncode == 0, checked.stderr
    package, typed = checked.stdout.split()
    assert Path(package).is_relative_to(tmp_path / "venv") and typed == "True"

    packed = subprocess.run(
        [str(tmp_path / "venv" / "bin" / "recallpack"), "pack", "--max-tokens", "100"],
        input='{"text": "Alice moved to Berlin.", "lane": "facts"}\n',
        cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=120,
    )
    assert packed.returncode == 0 and "Derived memory" in packed.stdout, packed.stderr
