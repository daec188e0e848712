"""Say which extra to install when an adapter's host framework is missing.

Without this, ``import recallpack.adapters.langchain`` on a core-only install fails with a bare
``No module named 'langchain_core'``, which does not say that ``recallpack[langchain]`` is the fix.
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["require"]


def require(module: str, *, extra: str, feature: str) -> ModuleType:
    """Import ``module`` and return it, or raise ``ModuleNotFoundError`` naming the extra.

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
            f"{feature} needs {module}, which is not installed; install the {extra!r} extra: "
            f'pip install "recallpack[{extra}]" (from a checkout: pip install ".[{extra}]")',
            name=module,
        ) from exc
