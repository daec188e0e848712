"""The windows of one file are one document: how the docs index of ``recallpack serve`` hands
its windows to the core.

Every window cites its file, not itself: the file is its ``artifact_id`` and the file's version
(its text's hash) its ``artifact_content_id``, so all of a file's windows have the file's
resource URI, and each carries its place in the file as its ``span``. Windows of one file that
overlap or touch are then pieces of one document, which the ``passages`` policy merges as it
merges any host's chunks (their shared text shown and paid for once, as one item citing the
file); :func:`merged` hands the other policies, which do not merge, the same merge's result.
"""

from __future__ import annotations

from typing import Any

from recallpack import Candidate
from recallpack.adapters.mcp_front_matter import FrontMatter
from recallpack.packing.candidate import Span
from recallpack.packing.documents import documents_of
from recallpack.packing.windows import Window

__all__ = ["VERSION_DIGITS", "version", "window_candidate", "merged"]

#: How many hex digits of a file's text hash name its version in its URI (64 bits).
VERSION_DIGITS = 16


def version(window: Window) -> str:
    """The version of the file ``window`` was cut from, as its URI names it: one for all of its
    windows, so the core merges pieces that cite the same resource."""
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


def merged(candidates: list[Candidate]) -> list[Candidate]:
    """``candidates`` with the windows of one file that overlap or touch made one candidate, by
    the core's own merge (the one ``passages`` runs), for the policies that do not merge: the
    best-ranked window's place, the union of their text. Files never merge with each other (the
    file is in the key), nor does anything without a span."""
    found: Any = documents_of(list(enumerate(candidates)), lambda c: c.artifact_id, {})
    # The core's documents_of also returns the pieces it set apart (core-offsets, issue 34): a
    # window set apart is still a document of its own among the documents, which is all this needs.
    documents = found[0] if isinstance(found, tuple) else found
    out = []
    for doc in documents:
        lead = doc.candidate
        if len(doc.pieces) == 1 or lead.span is None:
            out.append(lead)
            continue
        start = min(p.start for p in doc.pieces)
        span = lead.span.model_copy(update={"start": start, "end": start + len(doc.text)})
        metadata = {**lead.metadata, "start_char": span.start, "end_char": span.end}
        out.append(lead.model_copy(update={"text": doc.text, "span": span, "metadata": metadata}))
    return out
