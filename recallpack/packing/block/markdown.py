"""How one value is written in the evidence block's Markdown, whatever builds the block: a text
as indented lines (:func:`evidence_lines`), a name as a code span no backtick closes early
(:func:`code_span`), a description on one line (:func:`oneline`). The default block
(:mod:`recallpack.packing.block.render`) and a caller's template (:mod:`recallpack.packing.block.template`,
as the filters ``evidence_lines``, ``code`` and ``oneline``) write values the same way.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from recallpack.packing.reading.text import LINE_BREAKS

__all__ = ["evidence_lines", "code_span", "oneline", "FILTERS", "INDENT"]

INDENT = "    "
_LINE_BREAKS = frozenset(LINE_BREAKS)
_NEXT_LINE = "\n" + INDENT
#: The line breaks but "\n" (str.splitlines splits at each): those an ASCII text can hold, and all.
_OTHER_BREAKS = tuple(LINE_BREAKS.replace("\n", ""))
_ASCII_BREAKS = tuple(b for b in _OTHER_BREAKS if b.isascii())
_WHITESPACE_RUN = re.compile(r"\s+")
_BACKTICKS = re.compile(r"`+")


def evidence_lines(text: str) -> str:
    """Every line indented four spaces, continuations included, so content stays in its bullet.

    Every Unicode line break counts (what ``str.splitlines`` splits on: U+2028, U+0085, form
    feed and the rest, not only CR and LF), and each becomes a plain newline, so no consumer
    that splits lines its own way finds an unindented line.
    """
    # Most texts break lines with "\n" alone: then a replace, which copies the text once, does
    # what splitting into lines and joining them again does (the same str, in half the time).
    for other in _ASCII_BREAKS if text.isascii() else _OTHER_BREAKS:
        if other in text:
            break
    else:
        return INDENT + text.replace("\n", _NEXT_LINE)
    lines = text.splitlines()
    if not lines or text[-1] in _LINE_BREAKS:  # splitlines() drops the empty last line
        lines.append("")
    return INDENT + _NEXT_LINE.join(lines)


def code_span(value: str) -> str:
    """An inline code span that a backtick inside ``value`` cannot close early."""
    value = oneline(value)
    if "`" not in value:  # most labels, scopes and resource lines
        return f"`{value}`"
    fence = "`" * (max(len(run) for run in _BACKTICKS.findall(value)) + 1)
    return f"{fence} {value} {fence}"  # spaced, so a backtick at either end stays inside


def oneline(value: str) -> str:
    # A printable str has no whitespace but the ASCII space: without two in a row, nothing to join.
    if value.isprintable() and "  " not in value:
        return value.strip()
    return _WHITESPACE_RUN.sub(" ", value).strip()


#: The same three, by the names a template calls them (``{{ text | evidence_lines }}``).
FILTERS: Mapping[str, Callable[[str], str]] = {
    "evidence_lines": evidence_lines,
    "code": code_span,
    "oneline": oneline,
}
