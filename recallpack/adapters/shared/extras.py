"""Say which extra to install when an adapter's host framework is missing.

Without this, ``import recallpack.adapters.langchain`` on a core-only install fails with a bare
``No module named 'langchain_core'``, which does not say that ``recallpack[langchain]`` is the fix,
nor that from a checkout (recallpack is not on PyPI yet) the command that works names the
checkout, not the package.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import json
import os
import shlex
import shutil
import sys
import warnings
from pathlib import Path
from types import ModuleType
from urllib.parse import unquote, urlparse

__all__ = ["require", "install_command"]


def require(module: str, *, extra: str, feature: str) -> ModuleType:
    """Import ``module`` and return it, or raise ``ModuleNotFoundError`` naming the extra and
    the exact command that installs it here (:func:`install_command`).

    ``feature`` is what needs it (an adapter's module name), ``extra`` the recallpack extra
    that installs it. Only a missing ``module`` (or a missing parent package of it) is
    re-phrased: an installed framework that fails to import for another reason, such as one
    of its own dependencies missing, raises its own error unchanged.

    >>> require("json", extra="none", feature="a doctest").__name__
    'json'
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        missing = exc.name or ""
        if not (missing and (module == missing or module.startswith(missing + "."))):
            raise
        raise ModuleNotFoundError(
            f"{feature} needs {module}, which is not installed; install recallpack[{extra}] (the "
            f"{extra!r} extra) into this interpreter: {install_command(extra)}",
            name=module,
        ) from exc


def install_command(extra: str) -> str:
    """The command that installs ``recallpack[extra]`` into this interpreter, the way recallpack
    itself was installed: editable from its checkout (``-e "/path/to/checkout[extra]"``, or
    ``-e ".[extra]"`` from inside it), from a git URL, or by name. Through this interpreter's
    pip, or uv when the environment has no pip (a ``make``-built ``.venv``).
    """
    target = _requirement(extra)
    with warnings.catch_warnings():
        # Looking pip up wakes setuptools' distutils shim, which warns when the stdlib's
        # distutils was imported before: nothing the user of this message can act on.
        warnings.simplefilter("ignore")
        has_pip = importlib.util.find_spec("pip") is not None
    if has_pip:
        return f"{shlex.quote(sys.executable)} -m pip install {target}"
    uv = shutil.which("uv", path=os.path.dirname(sys.executable)) or shutil.which("uv")
    if uv is not None:
        python = shlex.quote(sys.executable)
        return f"{shlex.quote(uv)} pip install --link-mode=copy --python {python} {target}"
    return f"pip install {target}"


def _requirement(extra: str) -> str:
    """What pip is given: the checkout (editable or not), the VCS URL, or the name."""
    try:
        found = importlib.metadata.distribution("recallpack").read_text("direct_url.json")
        origin = json.loads(found) if found else {}
    except (importlib.metadata.PackageNotFoundError, ValueError):
        origin = {}
    url = str(origin.get("url", ""))
    if "vcs_info" in origin:
        return shlex.quote(f"recallpack[{extra}] @ {origin['vcs_info'].get('vcs', 'git')}+{url}")
    if url.startswith("file://") or not origin:
        root = Path(unquote(urlparse(url).path)) if url else Path(__file__).resolve().parents[2]
        if (root / "pyproject.toml").is_file():
            editable = not origin or bool(origin.get("dir_info", {}).get("editable"))
            place = "." if root == Path.cwd().resolve() else str(root)
            return ("-e " if editable else "") + shlex.quote(f"{place}[{extra}]")
    return shlex.quote(f"recallpack[{extra}]")
