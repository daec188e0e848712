"""A griffe extension for the API reference: docstrings written for Python readers, as Markdown.

- A docstring's ``>>>`` examples become code blocks. In Markdown a line starting with ``>`` is a
  quote, so a doctest would render as nested quotes. Each run of ``>>>`` / ``...`` lines and the
  output lines after it (up to a blank line) is fenced as ``pycon`` instead.
- Sphinx roles (``:class:`~recallpack.Packer```) become cross-references when they name a
  ``recallpack`` path, so a renamed name fails the strict build, and code spans otherwise.

The docstrings themselves, which doctests run and IDEs show, are not changed on disk.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_PROMPT = re.compile(r"^(\s*)(>>>|\.\.\.)( |$)")
_ROLE = re.compile(r":(?:class|meth|func|data|attr|mod|exc|obj):`(~?)([\w.]+)`")


def link_roles(text: str) -> str:
    """Each Sphinx role as an autorefs link (an absolute ``recallpack.`` path) or a code span."""

    def replace(match: re.Match[str]) -> str:
        short, target = match.group(1), match.group(2)
        shown = target.rsplit(".", 1)[-1] if short else target
        return f"[`{shown}`][{target}]" if target.startswith("recallpack.") else f"`{shown}`"

    return _ROLE.sub(replace, text)


def fence_doctests(text: str) -> str:
    """``text`` with each doctest example wrapped in a ```` ```pycon ```` fence."""
    out: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        match = _PROMPT.match(lines[i])
        if not match or lines[i].lstrip().startswith("..."):
            out.append(lines[i])
            i += 1
            continue
        indent = match.group(1)
        out.append(f"{indent}```pycon")
        while i < len(lines) and lines[i].strip():
            out.append(lines[i])
            i += 1
        out.append(f"{indent}```")
    return "\n".join(out)


class DoctestBlocks(griffe.Extension):
    """Fence every docstring's doctests as griffe loads the package."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = link_roles(fence_doctests(obj.docstring.value))
