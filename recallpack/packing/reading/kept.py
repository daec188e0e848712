"""Kept ranges of a text written out: each range in order, with the mark "…" where text was dropped.

The focus cut and the passages policy choose units of a text (:mod:`recallpack.packing.reading.units`)
and show them with this; a text joined from pieces by lines that are the mark alone (as the docs
server joins a file's ranges) says each elision once.

>>> join_spans("One. Two!\\n    code = 1\\nThree", [(0, 4), (23, 28)])
'One.…Three'
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from recallpack.packing.limits import ELLIPSIS

__all__ = ["MARK", "has_text", "join_spans"]

MARK = ELLIPSIS  # the walk's mark for text cut out of an item, one definition
_NONSPACE = re.compile(r"\S")


def has_text(text: str, start: int, end: int) -> bool:
    """Whether ``text[start:end]`` holds anything but whitespace (without copying it)."""
    return start < end and _NONSPACE.search(text, start, end) is not None


def join_spans(text: str, spans: Sequence[tuple[int, int]]) -> str:
    """The kept ranges in order, with the mark wherever non-whitespace text was dropped, but
    beside a line that is the mark alone (a text joined from pieces by it, as a file's ranges
    are): that line already says something was left out there, and a range that is only such a
    line is one elision with what was dropped around it."""
    parts: list[str] = []
    previous = 0
    for start, end in spans:
        kept = text[start:end]
        if len(kept) <= _MARK_LINE_READ and kept.strip() == MARK:
            continue  # a lone mark line kept: it is part of the elision around it, said once
        dropped = has_text(text, previous, start)
        if dropped and parts and _ends_in_mark_line(parts[-1]) and _starts_with_mark_line(kept):
            # Two mark lines of the text, with what lay between them dropped: one elision, said once.
            kept = kept[kept.index("\n", kept.index(MARK)) :]
        if dropped and not _mark_line(parts, kept):
            parts.append(MARK)
        parts.append(kept)
        previous = end
    if has_text(text, previous, len(text)) and not _mark_line(parts, ""):
        parts.append(MARK)
    return "".join(parts)


def _mark_line(parts: Sequence[str], following: str) -> bool:
    """Whether the last kept line before an elision, or the first after it, is the mark alone."""
    # Only the ends are read: a kept part may be long, and a line that is the mark alone is short.
    before = parts[-1][-_MARK_LINE_READ:].rstrip() if parts else ""
    after = following[:_MARK_LINE_READ].lstrip()
    last_line, first_line = before[before.rfind("\n") + 1 :], after.split("\n", 1)[0]
    return last_line.strip() == MARK or first_line.strip() == MARK


def _ends_in_mark_line(part: str) -> bool:
    tail = part[-_MARK_LINE_READ:].rstrip()
    return tail[tail.rfind("\n") + 1 :].strip() == MARK


def _starts_with_mark_line(part: str) -> bool:
    """Whether ``part``'s first line that is not blank is the mark alone, with more lines after it."""
    head = part[:_MARK_LINE_READ].lstrip()
    return head.split("\n", 1)[0].strip() == MARK and "\n" in head


_MARK_LINE_READ = 64
