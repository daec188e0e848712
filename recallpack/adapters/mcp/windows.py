"""The windows of one file are one document: how the docs index of ``recallpack serve`` hands
what a search found to the core.

A search finds windows; the core is handed files. All the windows of one file that a call
takes become one candidate (:func:`file_candidate`), ranked where its best window ranked: its
runs of windows (those that overlap or touch, as one range of the file) in file order, each
pair of runs joined by the core's elision mark on a line of its own, so the text between them
is neither read nor paid for, and no file is shown twice. :func:`one_per_file` says which
windows a call takes: every file's best window, and the others best first while a budget's
worth of the best windows lasts.

The candidate cites the file and the ranges shown: the file's resource URI with ``spans=`` and
the ranges, in characters of the file's text after its front matter (what the file's own URI
reads back), such as ``recallpack://artifacts/notes.md/contents/0f3c...?spans=0-812,2410-3120``
(:func:`spans_uri`; like RFC 5147's ``char=`` ranges, several of them, in the query).
:func:`shown` is the text of such ranges, the same for the item and for ``resources/read``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from recallpack import Candidate, ConfigError
from recallpack.adapters.mcp.front_matter import FrontMatter
from recallpack.packing.candidate import Span
from recallpack.packing.counting.windows import Window
from recallpack.packing.reading.text import LINE_BREAKS
from recallpack.packing.reading.units import MARK, has_text, sentence_start

__all__ = [
    "VERSION_DIGITS", "MAX_SPANS", "version", "window_candidate", "one_per_file", "shown_cost", "runs",
    "shown", "spans_uri", "spans_template", "split_spans", "parse_spans", "file_candidate",
]

#: How many hex digits of a file's text hash name its version in its URI (64 bits).
VERSION_DIGITS = 16
#: The most ranges one URI may name: a read does work in proportion to what it names.
MAX_SPANS = 1024

Spans = Sequence[tuple[int, int]]


def version(window: Window) -> str:
    """The version of the file ``window`` was cut from, as its URI names it: one for all of its
    windows."""
    return window.parent_hash[:VERSION_DIGITS]


def window_candidate(name: str, front: FrontMatter, window: Window) -> Candidate:
    """One window of file ``name`` as a Candidate: its text, the file's scopes, the file's URI and
    the window's place in the file (its span, and its offsets in the metadata)."""
    body_start, scope_ids, scope_error = front
    scoped: dict[str, Any] = {"scope_ids": scope_ids} if scope_ids else {}  # absent: unscoped
    start, end = body_start + window.start, body_start + window.end
    return Candidate(
        text=window.text,
        **scoped,
        scope_error=scope_error,
        artifact_id=name,
        artifact_content_id=version(window),
        metadata={**window.metadata(), "source": name, "start_char": start, "end_char": end},
        span=Span(parent=f"file:{name}", start=start, end=end, source="the docs index"),
    )


def one_per_file(found: Sequence[tuple[str, Window]], room: int) -> dict[str, list[Window]]:
    """The windows a call takes of ``found`` (a search's ``(file, window)``, best first), by file,
    the files in the order of their best window: the best windows while they hold at most
    ``room`` tokens together (by :func:`shown_cost`), and past that each other file's best
    window. So a file is one item (never two), the windows it brings are those a budget's worth
    of the best would hold (what ``prefix`` would have shown of it), every file found is a
    candidate, and the work stays in proportion to the budget."""
    files: dict[str, list[Window]] = {}
    spent = 0
    for name, window in found:
        cost = shown_cost(window)
        if spent + cost <= room:
            files.setdefault(name, []).append(window)
            spent += cost
        elif name not in files:
            files[name] = [window]
    return files


def shown_cost(window: Window) -> int:
    """About what ``window`` costs in an item: its tokens, and a token a line for the indent every
    evidence line gets (an estimate for choosing, never a count: the packer counts the block)."""
    return window.token_count + window.text.count("\n")


def runs(text: str, windows: Sequence[Window]) -> list[tuple[int, int]]:
    """The ranges of ``text`` (the file's, after its front matter) that ``windows`` cover, in file
    order: windows that overlap or touch (or have only white space between them) are one range,
    without the white space at its ends (a window is cut at a token, often before a line break
    or an indent: a cost with nothing to read), nor the end of a sentence begun before it (a
    window can begin at the ". " after one: shown after the mark, it would read "….")."""
    out: list[tuple[int, int]] = []
    for window in sorted(windows, key=lambda w: w.start):
        if out and not has_text(text, out[-1][1], window.start):
            out[-1] = (out[-1][0], max(out[-1][1], window.end))
        else:
            out.append((window.start, window.end))
    trimmed = []
    for start, end in out:
        while start < end and text[start].isspace():
            start += 1
        start = sentence_start(text, start, end)
        while end > start and text[end - 1].isspace():
            end -= 1
        if start < end:
            trimmed.append((start, end))
    return trimmed


def shown(text: str, spans: Spans) -> str:
    """The ``spans`` of ``text`` (in order, apart), joined by the elision mark on a line of its
    own, and with it last where the text goes on after the last range (an item cut before its
    file ends says so, never ending mid-line as if that were all): what an item of those ranges
    shows, and what their URI reads back. A file's first range needs no mark before it: a
    window's text after the header of its file reads as an excerpt, and at the least budget a
    line more would leave no room for the evidence."""
    if not spans:
        return ""
    parts: list[str] = []
    for start, end in spans:
        if parts:
            before = "" if parts[-1][-1:] in LINE_BREAKS else "\n"
            after = "" if text[start:start + 1] in LINE_BREAKS else "\n"
            parts.append(f"{before}{MARK}{after}")
        parts.append(text[start:end])
    if has_text(text, spans[-1][1], len(text)):
        parts.append("" if parts[-1][-1:] in LINE_BREAKS else "\n")
        parts.append(MARK)
    return "".join(parts)


_SPANS_KEY = "spans="


def spans_uri(file_uri: str, spans: Spans) -> str:
    """``file_uri`` naming ``spans`` of the file: ``?spans=START-END,...`` (``&`` when the URI has
    a query already), before any fragment."""
    base, hash_, fragment = file_uri.partition("#")
    join = "&" if "?" in base else "?"
    named = ",".join(f"{start}-{end}" for start, end in spans)
    return f"{base}{join}{_SPANS_KEY}{named}{hash_}{fragment}"


def spans_template(file_template: str) -> str:
    """The RFC 6570 template of :func:`spans_uri`'s URIs for a file URI template: ``spans`` is a
    list of ``START-END`` strings, which the template's ``{?spans}`` joins with commas."""
    base, hash_, fragment = file_template.partition("#")
    return f"{base}{{{'&' if '?' in base else '?'}spans}}{hash_}{fragment}"


_SPANS_PARAM = re.compile(r"[?&]spans=([^&#]*)(?=#|$)")


def split_spans(uri: str) -> tuple[str, str | None]:
    """``(the file's URI, the spans named)`` of a URI :func:`spans_uri` made; ``(uri, None)`` when
    it names no spans (the spans are not read here: :func:`parse_spans` does, for a file)."""
    found = list(_SPANS_PARAM.finditer(uri))
    if not found:
        return uri, None
    last = found[-1]  # the spans end the query: a template's own query comes before them
    return uri[: last.start()] + uri[last.end():], last.group(1)


_RANGE = re.compile(r"(\d{1,10})-(\d{1,10})")


def parse_spans(named: str, length: int) -> list[tuple[int, int]]:
    """The ranges ``named`` (``START-END,...``) of a text of ``length`` characters, or a
    ConfigError saying what is wrong: each range non-empty and within the text, in order and
    apart (a gap between any two), at most :data:`MAX_SPANS` of them."""
    usage = (f"; name ranges of the file's text (0 to {length} characters) as spans=START-END, "
             "several in order, apart, separated by commas")
    parts = named.split(",")
    if len(parts) > MAX_SPANS:
        raise ConfigError(f"spans names {len(parts):,} ranges, over the limit of {MAX_SPANS:,}" + usage,
                          field="spans")
    spans: list[tuple[int, int]] = []
    for part in parts:
        match = _RANGE.fullmatch(part)
        if match is None:
            raise ConfigError(f"spans has {part[:40]!r}, which is not START-END" + usage, field="spans")
        start, end = int(match[1]), int(match[2])
        if not start < end <= length:
            raise ConfigError(f"span {start}-{end} is empty or past the end of the text" + usage,
                              field="spans")
        if spans and start <= spans[-1][1]:
            raise ConfigError(f"span {start}-{end} is not after the span before it, apart from it" + usage,
                              field="spans")
        spans.append((start, end))
    return spans


def file_candidate(
    name: str, front: FrontMatter, body: str, windows: Sequence[Window], file_uri: str
) -> Candidate:
    """The windows of file ``name`` (a search's, of its text ``body`` after its front matter) as
    one candidate: its runs :func:`shown`, the file's scopes, cited as those ranges of the file."""
    _, scope_ids, scope_error = front
    scoped: dict[str, Any] = {"scope_ids": scope_ids} if scope_ids else {}  # absent: unscoped
    spans = runs(body, windows)
    return Candidate(
        text=shown(body, spans),
        **scoped,
        scope_error=scope_error,
        citation=spans_uri(file_uri, spans),
        metadata={"source": name, "spans": [list(span) for span in spans],
                  "chunk_ids": [w.chunk_id for w in windows]},
    )
