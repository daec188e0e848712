"""Real text that is on every machine: the standard library's module docstrings."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import sys
import warnings
from functools import lru_cache

# Modules that print, open windows, or change the process when imported.
_SKIP = {"antigravity", "this", "idlelib", "tkinter", "turtle", "turtledemo", "__main__", "__phello__"}


@lru_cache(maxsize=1)
def stdlib_docs() -> tuple[tuple[str, str], ...]:
    """``(module name, docstring)`` for every importable top-level stdlib module with one."""
    names = sorted(
        name
        for name in getattr(sys, "stdlib_module_names", ())
        if not name.startswith("_") and name not in _SKIP
    )
    if not names:  # Python < 3.10 has no stdlib_module_names; walk what is importable
        names = sorted(m.name for m in pkgutil.iter_modules() if not m.name.startswith("_"))
    docs = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in names:
            try:
                module = importlib.import_module(name)
            except Exception:  # noqa: BLE001 - platform-specific modules fail to import elsewhere
                continue
            doc = inspect.cleandoc(module.__doc__ or "")
            if len(doc) > 200:
                docs.append((name, doc))
    return tuple(docs)


def paragraphs(min_chars: int = 80) -> list[tuple[str, str]]:
    """``(module, paragraph)`` pairs: the docstrings split at blank lines."""
    out = []
    for name, doc in stdlib_docs():
        for block in doc.split("\n\n"):
            block = block.strip()
            if len(block) >= min_chars:
                out.append((name, block))
    return out
