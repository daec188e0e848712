"""The ``passages`` policy: the budget goes to the passages that best answer the query, across
the candidates, instead of to the first candidates whole.

A prefix walk spends the budget on the first documents in rank order; when the answer is in the
third of ten 1,000-token chunks, it is gone. Here every candidate may be cut to its passages:

1. Every candidate the walk reaches is gated as in any walk: withheld by its scopes first (nothing
   else of a withheld item is read), then text and duplicates.
   Pieces of one document that overlap or touch (recorded offsets, or failing those an exact
   overlap of their texts) become one document, so their shared text is paid for once
   (:mod:`recallpack.packing.documents`). Offsets are someone else's hints: pieces whose texts
   differ where their offsets overlap stay separate documents, and the report's notes say so.
2. Each document's text is split into sentences and lines, and every unit is scored against the
   query, raw text, nothing tokenized (:mod:`recallpack.packing.scoring`: BM25 or ``embed``,
   raised by its neighbours, divided by its document's rank prior).
3. The best units are kept in that order, each with a little context around it (5% of the
   budget), until the room is full; then the kept passages widen, then the rest fills in rank
   order. Only units considered are counted, and the block is then counted exactly: what is
   over is given back (the last added first), what is still free is filled again
   (:mod:`recallpack.packing.selection`).
4. Documents stay in rank order, passages in text order, every elision is marked "…", and each
   kept document keeps its label, scopes and citation. A document none of whose passages made
   the cut is dropped ``over_budget``; a piece shown in a better-ranked piece's item is
   ``merged`` (its trace entry says into which).

When everything reached fits whole (it is tried when it has at most five characters a budget
token, as prose does), nothing is cut: the result is the prefix walk's. Without a query there
is nothing to score, and the Packer packs as ``prefix`` and says so.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from recallpack.packing.candidate import Candidate, Provenance
from recallpack.packing.cuts import Cut
from recallpack.packing.documents import Document, Piece, documents_of
from recallpack.packing.render import MarkdownBlock, View
from recallpack.packing.result import Outcome, Reason
from recallpack.packing.scopes import Scope
from recallpack.packing.scoring import NEIGHBOR_SHARE, RANK_PRIOR, UNIT_CHARS
from recallpack.packing.selection import CONTEXT_SHARE, Chooser, Selection, choose
from recallpack.packing.tally import WalkSettings
from recallpack.packing.tokenizers.pieces import PieceCounts
from recallpack.packing.units import MARK, MAX_QUERY_TERMS, join_spans, query_terms
from recallpack.packing.walk import Plan, Walk

__all__ = [
    "PassagesWalk", "RANK_PRIOR", "CONTEXT_SHARE", "NEIGHBOR_SHARE", "UNIT_CHARS", "MAX_QUERY_TERMS",
    "query_terms",
]

#: How far the walk reads: at most this many documents, and this many characters per budget token.
REACH_DOCUMENTS = 64
REACH_CHARS_PER_TOKEN = 256
#: Everything reached is first tried whole when it has at most this many characters per budget
#: token. Prose counts four to five characters a token (cl100k, o200k): a try past five nearly
#: always fails, having counted the room for nothing (of 503 tries over SQuAD paragraphs at
#: 1024, the 4 that fitted had at most 4.86).
WHOLE_CHARS_PER_TOKEN = 5
#: A report's note names at most this many candidates set apart from their document.
APART_NAMED = 8


def apart_note(apart: Sequence[Piece]) -> str:
    """What the report says of pieces whose offsets put them inside another piece of their
    document although their texts differ there: which, where the offsets were read, what was done."""
    ranks = ", ".join(str(p.rank) for p in apart[:APART_NAMED])
    more = f" and {len(apart) - APART_NAMED} more" if len(apart) > APART_NAMED else ""
    fields = sorted({p.candidate.span.source for p in apart if p.candidate.span is not None})
    where = f" ({', '.join(fields)})" if fields else ""
    which = f"candidate{'s' if len(apart) > 1 else ''} {ranks}{more}"
    return (
        f"offsets{where} put {which} inside another piece of their document, "
        "but their texts differ there: each was packed as a document of its own"
    )


def _stopped_by(selection: Selection | None, max_items: int | None) -> Reason:
    """Why a document the choice did not keep is dropped: the item cap (``max_items``, or ``k``)
    when the choice holds as many documents as it allows, so no room could have let it in; else
    the budget."""
    full = selection is not None and max_items is not None and selection.opened >= max_items
    return Reason.OVER_ITEM_CAP if full else Reason.OVER_BUDGET


# --- the walk ---------------------------------------------------------------------------------


class PassagesWalk(Walk):
    """The walk of the ``passages`` policy: :meth:`run` chooses, :meth:`refit` corrects it with
    the exact count of the block, the Packer's measure."""

    def __init__(self, plan: Plan, candidates: Sequence[Any], settings: WalkSettings,
                 query: str | None) -> None:
        super().__init__(plan, candidates, settings, query)
        assert query, "the passages walk is built only for a call with a query"
        self.query: str = query
        self.gates: dict[int, tuple[Reason, Outcome]] = {}
        self.coerced: list[Candidate] = []
        self.documents: list[Document] = []
        self.selection: Selection | None = None
        self.header_estimate = 0
        self.item_costs: dict[tuple[int, str], int] = {}  # what a document's kept text costs
        self.looks: dict[int, tuple[tuple[Scope, ...], tuple[str, ...], str | None]] = {}
        self.frames: dict[tuple[Provenance, tuple[str, ...], str | None], int] = {}

    @functools.cached_property
    def item_view(self) -> View:
        """What a chosen item is priced by: piece by piece when the default block's counts add
        up, so that a refit encodes only what changed in a document, not all of it again (made
        only when a choice is priced: a call whose documents all fit whole never needs it)."""
        view = self.view
        if isinstance(view, MarkdownBlock) and view.template is None and self.tok.splits_at_line_starts:
            return MarkdownBlock(PieceCounts(self.tok), None)
        return view

    # -- what the cost model says ---------------------------------------------------------------

    def look(self, c: Candidate) -> tuple[tuple[Scope, ...], tuple[str, ...], str | None]:
        """A document's scopes, their names and its resource line: worked out once per call."""
        key = id(c)
        found = self.looks.get(key)
        if found is None:
            scopes = self._scopes(c)
            found = self.looks[key] = (scopes, self._names(scopes), self._uri(c))
        return found

    def framing(self, c: Candidate) -> int:
        """What an item adds to the block around its text (label, resource line, joins)."""
        _, names, uri = self.look(c)
        key = (c.provenance, names, uri)  # what the framing is made of: documents often share it
        cost = self.frames.get(key)
        if cost is None:
            cost = self.frames[key] = self.view.item(self, c, names, "", uri, None)
        return cost

    # -- the run --------------------------------------------------------------------------------

    def run(self) -> None:
        shown = self._reach()
        if not shown:
            self._materialize(whole=True)
            return
        self.documents, apart = documents_of(shown, self.resource, self.extents)
        if apart:
            self.notes = (*self.notes, apart_note(apart))
        if self.s.max_tokens is None:
            self._materialize(whole=True)
            return
        # More characters than the room could hold are not tried whole (the choice below keeps
        # everything anyway when it fits).
        chars = sum(len(doc.text) for doc in self.documents)
        if chars <= WHOLE_CHARS_PER_TOKEN * self.s.max_tokens and self._fits_whole():
            return
        self._reset()
        self.header_estimate = self.view.header_delta(self, ())
        lane_keys = [self._lane_keys(doc.candidate) for doc in self.documents]
        chooser = Chooser(self.s, self.tok, self.framing, lane_keys, self.header_estimate)
        self.selection = choose(self.documents, self.query, self.embed, chooser)
        self._materialize()
        self._floor_if_empty()

    def _reach(self) -> list[tuple[int, Candidate]]:
        """Gate candidates in rank order, as far as the walk reads; the ones that can be shown."""
        limit = None if self.s.max_tokens is None else self.s.max_tokens * REACH_CHARS_PER_TOKEN
        shown: list[tuple[int, Candidate]] = []
        firsts: dict[tuple[int, tuple[str, ...]], list[tuple[str, int]]] = {}
        chars = 0
        self.extents: dict[int, int] = {}
        for rank in range(len(self.candidates)):
            if len(shown) >= REACH_DOCUMENTS or (limit is not None and chars >= limit):
                break
            c = self._read(rank)
            self.coerced.append(c)
            gate = self._gate(c)
            if gate is None and self.s.dedupe:  # nothing is kept yet: duplicates of what was shown
                compared = self._compared(c)
                same = firsts.setdefault(self._dedupe_key(c, compared), [])
                if any(text == compared for text, _ in same):
                    gate = (Reason.DUPLICATE, Outcome.DROPPED)
                else:  # a text once: each copy of another text would be compared with every copy
                    same.append((compared, rank))
            if gate is not None:
                self.gates[rank] = gate
                continue
            shown.append((rank, c))
            if limit is not None and chars + len(c.text) > limit:
                self.extents[rank] = limit - chars  # a text longer than what is left is read in part
            chars += len(c.text)
        return shown

    def _fits_whole(self) -> bool:
        """Keep every document whole if that fits: then nothing is cut. False as soon as one does
        not fit, having counted no more than the room."""
        return self._materialize(whole=True)

    def _materialize(self, whole: bool = False) -> bool:
        """Record the outcome of every candidate reached, keeping the chosen passages (or, with
        ``whole``, every document whole while the room lasts)."""
        self._reset()
        lead_of: dict[int, int] = {}
        for d, doc in enumerate(self.documents):
            for piece in doc.pieces:
                lead_of[piece.rank] = d
        kept_spans: dict[int, list[tuple[int, int]] | None] = {}
        over = _stopped_by(None if whole else self.selection, self.s.max_items)
        for rank in range(len(self.coerced)):
            c = self.coerced[rank]
            gate = self.gates.get(rank)
            if gate is not None:
                if gate[0] is Reason.DUPLICATE and self._twin(c) is not None:
                    self._drop_twin(rank, c)  # the kept twin stands for it, citation and all
                else:
                    self._drop(rank, c, gate[0], gate[1])
                continue
            d = lead_of[rank]
            doc = self.documents[d]
            if doc.lead.rank != rank:
                if d in kept_spans:
                    self._merged(rank, c, doc, kept_spans[d] or [(0, len(doc.text))])
                else:
                    self._drop(rank, c, over)
                continue
            spans: list[tuple[int, int]] | None = None
            if whole:
                if not self._keep_document(rank, doc, None, fit=True):
                    return False
            else:
                assert self.selection is not None
                if not self.selection.cuts[d].kept:
                    self._drop(rank, c, over)
                    continue
                spans = self.selection.kept_spans(d)
                self._keep_document(rank, doc, spans)
            kept_spans[d] = spans
        if len(self.coerced) < len(self.candidates):
            self.tail_reason = over
        return True

    def _keep_document(self, rank: int, doc: Document, spans: list[tuple[int, int]] | None,
                       fit: bool = False) -> bool:
        """Keep ``doc`` (its ``spans``, or all of it); with ``fit``, only if it fits the room left."""
        c = doc.candidate
        scopes, names, uri = self.look(c)
        header = self.view.header_delta(self, scopes)
        if doc.clipped and fit:
            return False  # read in part: never whole
        text = doc.text if spans is None else join_spans(doc.text, spans)
        if doc.clipped and not text.endswith(MARK):
            text += MARK  # the rest of it was never read
        merged = len(doc.pieces) > 1 or doc.clipped
        if fit:  # whole, within every cap, or not at all
            if self.s.max_items is not None and len(self.kept) >= self.s.max_items:
                return False
            *_, limit = self._limits(c, header)
            cost = self.view.item(self, c, names, text, uri, limit)
            if limit is not None and cost > limit:
                return False
            self.item_costs[doc.lead.rank, text] = cost  # exact: a choice that keeps it whole reuses it
        else:  # a refit changes a document or two: the others are not counted again
            key = (doc.lead.rank, text)
            cost = self.item_costs.get(key, -1)
            if cost < 0:
                cost = self.item_costs[key] = self.item_view.item(self, c, names, text, uri, None)
        whole = [(0, len(doc.text))]
        cut = None if spans is None and not merged else Cut(text, tuple(spans or whole), "passages")
        self._keep(rank, c, scopes, names, text, cost, header, cut, uri)
        if cut is not None:
            self.entries[-1] = self.entries[-1]._replace(kept_spans=doc.piece_spans(rank, spans or whole))
        return True

    def _merged(self, rank: int, c: Candidate, doc: Document, spans: list[tuple[int, int]]) -> None:
        self._count_reason(Reason.MERGED, 1)
        record = self._entry(rank, c, Outcome.DROPPED, Reason.MERGED, None, None)
        self.entries.append(record._replace(
            cut="passages", kept_spans=doc.piece_spans(rank, spans), merged_into=doc.lead.rank
        ))

    def refit(self, used: int, max_tokens: int | None) -> bool:
        """Correct the choice with ``used``, the block's exact count: give back what is over,
        fill what the count says is still free. True when it changed something (count again)."""
        if self.selection is None or max_tokens is None:
            return False
        exact = {k.rank: k.cost for k in self.kept}
        if not self.selection.correct(used, max_tokens, exact, self.lane_used):
            return False
        self._materialize()
        return True
