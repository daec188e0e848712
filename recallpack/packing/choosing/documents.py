"""Candidates as pieces of their documents: pieces of one parent that overlap or touch become one
document, so the text they share is paid for once (the ``passages`` policy's step 1).

Where a piece sits is read from what the hosts record (recallpack's own windows, LangChain's
``start_index``, LlamaIndex's character offsets, all as a candidate's ``span``); failing those,
an exact overlap of two texts (a splitter's overlap: the end of one is the start of the next).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from recallpack.packing.candidate import Candidate, Span

__all__ = ["Piece", "Document", "documents_of", "exact_overlaps", "OVERLAP_PROBE", "OVERLAP_CANDIDATES"]

#: The exact-overlap fallback recognises a piece by its first characters, among the first
#: candidates that recorded no offsets.
OVERLAP_PROBE = 64
OVERLAP_CANDIDATES = 16


@dataclass(slots=True)
class Piece:
    """A candidate as a piece of its document: ``head`` is where the span's characters begin in its
    text (what comes before is its own header), ``start``/``end`` where they sit in the parent."""

    rank: int
    candidate: Candidate
    head: int
    start: int
    end: int

    @property
    def header(self) -> str:
        return self.candidate.text[: self.head]


class Document:
    """One item to be: a candidate, or pieces of one parent that overlap or touch, as one text.

    ``text`` is the best-ranked piece's header and the pieces' union; ``regions`` says, per
    piece, which ranges of it are which ranges of the piece's own text."""

    def __init__(self, pieces: list[Piece], extent: int | None = None) -> None:
        self.pieces = pieces if len(pieces) == 1 else sorted(pieces, key=lambda p: p.rank)
        self.lead = lead = self.pieces[0]
        #: rank -> [(start in text, end in text, start in the piece's own text)]
        self.regions: dict[int, list[tuple[int, int, int]]] = {}
        #: Only the first ``extent`` characters of a text past the walk's reach are read: the rest
        #: is never chosen, and an item cut there ends with the mark.
        self.clipped = extent is not None and extent < len(lead.candidate.text)
        if len(pieces) == 1:
            self.text = lead.candidate.text[:extent] if self.clipped else lead.candidate.text
            self.regions[lead.rank] = [(0, len(self.text), 0)]
            return
        ordered = sorted(pieces, key=lambda p: (p.start, p.rank))
        base = ordered[0].start
        header = lead.header
        text = header
        for piece in ordered:  # documents_of made sure the pieces agree where they overlap
            content = piece.candidate.text[piece.head :]
            at = len(header) + piece.start - base
            shared = min(len(text) - at, len(content))
            if len(content) > shared:
                text += content[max(shared, 0) :]
            self.regions[piece.rank] = [(at, at + len(content), piece.head)]
        if header:
            self.regions[lead.rank].insert(0, (0, len(header), 0))
        self.text = text

    @property
    def candidate(self) -> Candidate:
        return self.lead.candidate

    def piece_spans(self, rank: int, spans: Sequence[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
        """``spans`` of the document's text, as ranges of piece ``rank``'s own text."""
        out: list[tuple[int, int]] = []
        for start, end, own in self.regions[rank]:
            shift = own - start
            out.extend(
                (max(s, start) + shift, min(e, end) + shift) for s, e in spans if s < end and e > start
            )
        return tuple(out)


def documents_of(
    shown: Sequence[tuple[int, Candidate]], uri_of: Callable[[Candidate], str | None],
    extents: dict[int, int],
) -> tuple[list[Document], list[Piece]]:
    """The shown candidates as documents, in rank order, and the pieces set apart.

    Pieces of one parent that overlap or touch are one document (same lane, scopes, header and
    resource line, or they stay apart), when their texts agree where their offsets overlap.
    Offsets come from someone else's loader, and are only hints: a piece whose text differs
    there (a CSV row's ``start_index`` counts from its own row; a source ingested twice; two
    versions of one ``ref_doc_id``) is a document of its own, and is among the pieces set apart,
    never an error. A candidate read only in part (``extents``) is a document of its own."""
    whole = [(r, c) for r, c in shown if r not in extents]
    spans: dict[int, Span] = {r: c.span for r, c in whole if c.span is not None}
    # Texts that recorded no offsets are compared only with those they could be one document
    # with (the same lane, scopes and resource line): far fewer searches than every pair.
    kin: dict[tuple[Any, ...], list[tuple[int, Candidate]]] = {}
    for r, c in whole:
        if c.span is None:
            kin.setdefault((c.lane, c.scope_ids, uri_of(c)), []).append((r, c))
    for unplaced in kin.values():
        if len(unplaced) > 1:
            spans.update(exact_overlaps(unplaced))
    groups: dict[tuple[Any, ...], list[Piece]] = {}
    singles: list[Document] = []
    for rank, c in shown:
        span = spans.get(rank)
        if span is None:
            singles.append(Document([Piece(rank, c, 0, 0, len(c.text))], extents.get(rank)))
            continue
        head = len(c.text) - (span.end - span.start)
        key = (span.parent, c.lane, c.scope_ids, c.text[:head], uri_of(c))
        groups.setdefault(key, []).append(Piece(rank, c, head, span.start, span.end))
    documents = singles
    apart: list[Piece] = []
    for pieces in groups.values():
        pieces.sort(key=lambda p: (p.start, p.rank))
        runs: list[_Run] = []  # the runs this piece could still overlap or touch
        for piece in pieces:
            if any(run.reach < piece.start for run in runs):
                documents.extend(Document(run.pieces) for run in runs if run.reach < piece.start)
                runs = [run for run in runs if run.reach >= piece.start]
            home = next((run for run in runs if run.agrees(piece)), None)
            if home is not None:
                home.add(piece)
                continue
            if runs:  # it overlaps pieces whose texts differ from its own there
                apart.append(piece)
            runs.append(_Run(piece))
        documents.extend(Document(run.pieces) for run in runs)
    documents.sort(key=lambda d: d.lead.rank)
    return documents, apart


class _Run:
    """Pieces of one parent that overlap or touch and agree where they overlap: one document to
    be. ``content`` is their union, from ``base`` (the first piece's start) to ``reach``."""

    __slots__ = ("pieces", "base", "reach", "content")

    def __init__(self, piece: Piece) -> None:
        self.pieces = [piece]
        self.base, self.reach = piece.start, piece.end
        self.content = piece.candidate.text[piece.head :]

    def _shared(self, piece: Piece) -> int:
        return min(self.reach - piece.start, piece.end - piece.start)

    def agrees(self, piece: Piece) -> bool:
        """Whether ``piece``'s text is the run's where their offsets overlap (touching: always)."""
        shared = self._shared(piece)
        text = piece.candidate.text
        at = piece.start - self.base
        return shared <= 0 or self.content.startswith(text[piece.head : piece.head + shared], at)

    def add(self, piece: Piece) -> None:
        shared = max(self._shared(piece), 0)
        if piece.end > self.reach:
            self.content += piece.candidate.text[piece.head + shared :]
            self.reach = piece.end
        self.pieces.append(piece)


def exact_overlaps(items: Sequence[tuple[int, Candidate]]) -> dict[int, Span]:
    """Spans for candidates that overlap another exactly (a splitter's overlap: the end of one
    is the start of the next) when nothing recorded where they sit. Among the first
    OVERLAP_CANDIDATES of them, the second half of each text is searched for the start of each
    other: a few hundred substring searches at most."""
    items = [(r, c) for r, c in items[:OVERLAP_CANDIDATES] if len(c.text) >= 2 * OVERLAP_PROBE]
    if len(items) < 2:
        return {}
    by_rank = dict(items)
    follows: dict[int, tuple[int, int]] = {}  # rank -> (the rank it continues, at what offset)
    for other, b in items:
        head = b.text[:OVERLAP_PROBE]
        for rank, a in items:
            if rank == other:
                continue
            at = a.text.find(head, len(a.text) // 2)
            if at < 0:
                continue
            tail = a.text[at:]
            if len(b.text) > len(tail) and b.text.startswith(tail):
                follows[other] = (rank, at)
                break
    if not follows:
        return {}
    placed: dict[int, tuple[str, int]] = {}

    def place(rank: int, seen: frozenset[int] = frozenset()) -> tuple[str, int]:
        if rank in placed:
            return placed[rank]
        before = follows.get(rank)
        if before is None or before[0] in seen:
            placed[rank] = (f"overlap:{rank}", 0)
        else:
            parent, start = place(before[0], seen | {rank})
            placed[rank] = (parent, start + before[1])
        return placed[rank]

    spans = {}
    for rank in {*follows, *(r for r, _ in follows.values())}:
        parent, start = place(rank)
        spans[rank] = Span(parent=parent, start=start, end=start + len(by_rank[rank].text), source="overlap")
    return spans
