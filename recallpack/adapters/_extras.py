"""A missing optional dependency, said as what to install."""

from __future__ import annotations

import importlib.util

__all__ = ["require"]


def require(module: str, *, extra: str, feature: str) -> None:
    """Raise an ImportError naming the extra to install when ``module`` cannot be imported."""
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise ImportError(
            f"{feature} needs {module}, which is not installed; "
            f'install recallpack with the "{extra}" extra: pip install "recallpack[{extra}]"'
        )
