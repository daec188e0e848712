"""Real text that is on every machine: the standard library's module docstrings."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import sys
import sysconfig
import warnings
import zlib
from functools import lru_cache
from math import sqrt
from pathlib import Path

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


def source_paragraphs(limit: int, min_words: int = 8) -> list[tuple[str, int, str]]:
    """Up to ``limit`` ``(file name, position, paragraph)`` of the standard library's own source
    files, blank-line separated, in a fixed order: real, varied English and code, offline."""
    root = Path(sysconfig.get_paths()["stdlib"])
    out: list[tuple[str, int, str]] = []
    for path in sorted(root.glob("*.py")):
        try:
            text = path.read_text("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        for number, paragraph in enumerate(p.strip() for p in text.split("\n\n")):
            if len(paragraph.split()) >= min_words:
                out.append((path.name, number, paragraph))
                if len(out) == limit:
                    return out
    return out


_WORD = re.compile(r"[a-z0-9]+")


def hashed_bag_of_words(text: str, dim: int = 256) -> list[float]:
    """A lexical embedding: words hashed into ``dim`` signed buckets, L2-normalised.

    Real retrieval (texts sharing words are near), deterministic across processes (crc32, not
    ``hash()``), and no model to download. Both adapters' offline embeddings are this function.
    """
    vector = [0.0] * dim
    for word in _WORD.findall(text.lower()):
        code = zlib.crc32(word.encode())
        vector[code % dim] += 1.0 if (code >> 16) & 1 else -1.0
    norm = sqrt(sum(v * v for v in vector)) or 1.0
    return [v / norm for v in vector]
