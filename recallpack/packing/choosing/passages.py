"""The ``passages`` policy: the budget goes to the passages that best answer the query, across
the candidates, instead of to the first candidates whole.

A prefix walk spends the budget on the first documents in rank order; when the answer is in the
third of ten 1,000-token chunks, it is gone. Here every candidate may be cut to its passages:

1. Every candidate the walk reaches is gated as in any walk: withheld by its scopes first (nothing
   else of a withheld item is read), then text and duplicates.
   Pieces of one document that overlap or touch (recorded offsets, or failing those an exact
   overlap of their texts) become one document, so their shared text is paid for once
   (:mod:`recallpack.packing.choosing.documents`). Offsets are someone else's hints: pieces whose texts
   differ where their offsets overlap stay separate documents, and the report's notes say so.
2. Each document's text is split into sentences and lines, and every unit is scored against the
   query, raw text, nothing tokenized (:mod:`recallpack.packing.choosing.scoring`: BM25 or ``embed``,
   raised by its neighbours, divided by its document's rank prior).
3. The best units are kept in that order, each with a little context around it (5% of the
   budget), until the room is full; then the kept passages widen, then the rest fills in rank
   order. Only units considered are counted, and the block is then counted exactly: what is
   over is given back (the last added first), what is still free is filled again
   (:mod:`recallpack.packing.choosing.selection`).
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

from recallpack.packing.block.render import MarkdownBlock, View
from recallpack.packing.candidate import Candidate
from recallpack.packing.choosing.cuts import Excerpt
from recallpack.packing.choosing.documents import Document, Piece, documents_of
from recallpack.packing.choosing.door import Door, PolicyView, Priced, keep_own
from recallpack.packing.choosing.embedding import EmbedFn
from recallpack.packing.choosing.ledger import Counted, Ledger
from recallpack.packing.choosing.scoring import NEIGHBOR_SHARE, RANK_PRIOR, UNIT_CHARS
from recallpack.packing.choosing.selection import CONTEXT_SHARE, Chooser, Selection, choose, fill_tail
from recallpack.packing.choosing.twins import compared_text, dedupe_key
from recallpack.packing.decisions import Drop, End, Merge
from recallpack.packing.reading.units import MARK, MAX_QUERY_TERMS, join_spans
from recallpack.packing.results.result import Outcome, Reason
from recallpack.packing.tokenizers.pieces import PieceCounts

__all__ = [
    "Passages",
    "PassagesChoice",
    "RANK_PRIOR",
    "CONTEXT_SHARE",
    "NEIGHBOR_SHARE",
    "UNIT_CHARS",
    "MAX_QUERY_TERMS",
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


# --- the policy --------------------------------------------------------------------------------


class Passages:
    """The ``passages`` policy: the budget spent on the passages that best answer the query,
    across every candidate the walk reaches."""

    summary = "with a query: the passages that best answer it, across every item"
    needs_query = True

    def choose(self, seen: PolicyView, query: str | None, embed: EmbedFn | None) -> Counted:
        """Choose, then correct the choice with the exact count of what the model is shown until
        it holds: give back what is over, fill what is still free; the last count and block."""
        # recallpack's own: it applies each decision through the ledger's door as it makes it.
        ledger = seen._ledger
        if not query:  # the walk hands passages only a call with a query
            raise seen._door.broken("the query", "passages needs the call's query")
        choice = PassagesChoice(ledger, query, embed)
        choice.run()
        view, max_tokens = ledger.view, ledger.settings.max_tokens
        used, block = view.measure(ledger, max_tokens)
        while choice.refit(used, max_tokens):
            used, block = view.measure(ledger, max_tokens)
        return used, block


class PassagesChoice:
    """One call's choice under ``passages``: :meth:`run` chooses and records it in the ledger,
    :meth:`refit` corrects it with an exact count of the block."""

    def __init__(self, ledger: Ledger, query: str, embed: EmbedFn | None) -> None:
        self.ledger = ledger
        self.door = Door(ledger)  # what records the choice: the ledger's one door, checked
        self.settings = ledger.settings
        self.query = query
        self.embed = embed
        self.gates: dict[int, tuple[Reason, Outcome]] = {}
        self.coerced: list[Candidate] = []
        self.documents: list[Document] = []
        self.selection: Selection | None = None
        self.item_costs: dict[tuple[int, str], int] = {}  # what a document's kept text costs
        self.extents: dict[int, int] = {}
        self.lead_of: dict[int, int] = {}  # each piece's document, by the piece's rank
        #: By a kept document's rank: the spans it was last shown with, and its text, cut, pieces'
        #: spans and cost then (a refit changes a document or two; the others are shown as before).
        self.shown: dict[int, tuple[tuple[tuple[int, int], ...] | None, str, Excerpt | None,
                                    tuple[tuple[int, int], ...] | None, int]] = {}

    @functools.cached_property
    def item_view(self) -> View:
        """What a chosen item is priced by: piece by piece when the default block's counts add
        up, so that a refit encodes only what changed in a document, not all of it again (made
        only when a choice is priced: a call whose documents all fit whole never needs it)."""
        view, tok = self.ledger.view, self.ledger.tok
        if isinstance(view, MarkdownBlock) and view.template is None and tok.splits_at_line_starts:
            return MarkdownBlock(PieceCounts(tok), None)
        return view

    # -- the run --------------------------------------------------------------------------------

    def run(self) -> None:
        ledger = self.ledger
        shown = self._reach()
        if not shown:
            self._materialize(whole=True)
            return
        self.documents, apart = documents_of(shown, ledger.resource, self.extents)
        self.lead_of = {piece.rank: d for d, doc in enumerate(self.documents) for piece in doc.pieces}
        if apart:
            ledger.note(apart_note(apart))
        max_tokens = self.settings.max_tokens
        if max_tokens is None:
            self._materialize(whole=True)
            return
        # More characters than the room could hold are not tried whole (the choice below keeps
        # everything anyway when it fits).
        chars = sum(len(doc.text) for doc in self.documents)
        if chars <= WHOLE_CHARS_PER_TOKEN * max_tokens and self._materialize(whole=True):
            return
        ledger.reset()
        header_estimate = ledger.view.header_delta(ledger, ())
        lane_keys = [ledger.lane_keys(doc.candidate) for doc in self.documents]
        chooser = Chooser(
            self.settings, ledger.tok, ledger.framing, lane_keys, header_estimate, ledger.reading
        )
        self.selection = choose(self.documents, self.query, self.embed, chooser)
        self._materialize()
        ledger.floor_if_empty()

    def _reach(self) -> list[tuple[int, Candidate]]:
        """Gate candidates in rank order, as far as the walk reads; the ones that can be shown."""
        ledger, s = self.ledger, self.settings
        limit = None if s.max_tokens is None else s.max_tokens * REACH_CHARS_PER_TOKEN
        shown: list[tuple[int, Candidate]] = []
        firsts: dict[tuple[int, tuple[str, ...]], list[tuple[str, int]]] = {}
        chars = 0
        for rank in range(len(ledger.candidates)):
            if len(shown) >= REACH_DOCUMENTS or (limit is not None and chars >= limit):
                break
            c = ledger.read(rank)
            self.coerced.append(c)
            gate = ledger.gate(c)
            if gate is None and s.dedupe:  # nothing is kept yet: duplicates of what was shown
                compared = compared_text(c)
                same = firsts.setdefault(dedupe_key(c, compared), [])
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

    def _materialize(self, whole: bool = False) -> bool:
        """Record the outcome of every candidate reached, keeping the chosen passages (or, with
        ``whole``, every document whole while the room lasts; False as soon as one does not fit,
        having counted no more than the room)."""
        ledger = self.ledger
        ledger.reset()
        lead_of = self.lead_of
        kept_spans: dict[int, list[tuple[int, int]] | None] = {}
        over = _stopped_by(None if whole else self.selection, self.settings.max_items)
        for rank in range(len(self.coerced)):
            gate = self.gates.get(rank)
            if gate is not None:
                # The door gates it again: a duplicate of a kept item joins its citations, one of
                # an item only shown is dropped as a duplicate, the others keep the gate's reason.
                self.door.apply(Drop(rank, Reason.DUPLICATE))
                continue
            d = lead_of[rank]
            doc = self.documents[d]
            if doc.lead.rank != rank:
                if d in kept_spans:
                    shown_spans = kept_spans[d] or [(0, len(doc.text))]
                    self.door.apply(Merge(rank, doc.lead.rank, doc.piece_spans(rank, shown_spans)))
                else:
                    self.door.apply(Drop(rank, over))
                continue
            spans: list[tuple[int, int]] | None = None
            if whole:
                if not self._keep_document(rank, doc, None, fit=True):
                    return False
            else:
                if self.selection is None or not self.selection.cuts[d].kept:
                    self.door.apply(Drop(rank, over))
                    continue
                spans = self.selection.kept_spans(d)
                if not self._keep_document(rank, doc, spans):
                    continue  # the door refused it (a lane's budget): its pieces are not merged into it
            kept_spans[d] = spans
        if len(self.coerced) < len(ledger.candidates):
            # The candidates past the reach are the tail, never read: with the item cap full, none
            # could have been kept anyway; else nothing is known of whether they would have fitted.
            self.door.apply(End(over if over is Reason.OVER_ITEM_CAP else Reason.NOT_REACHED))
        return True

    def _keep_document(
        self, rank: int, doc: Document, spans: list[tuple[int, int]] | None, fit: bool = False
    ) -> bool:
        """Keep ``doc`` (its ``spans``, or all of it); with ``fit``, only if it fits the room left."""
        ledger, c = self.ledger, doc.candidate
        scopes, names, uri = ledger.look(c)
        header = ledger.view.header_delta(ledger, scopes)
        if doc.clipped and fit:
            return False  # read in part: never whole
        key = None if spans is None else tuple(spans)
        if not fit and (last := self.shown.get(rank)) is not None and last[0] == key:
            _, text, cut, kept_spans, cost = last  # shown as the last time: nothing to work out again
        else:
            text = doc.text if spans is None else join_spans(doc.text, spans)
            if doc.clipped and not text.endswith(MARK):
                text += MARK  # the rest of it was never read
            merged = len(doc.pieces) > 1 or doc.clipped
            if fit:  # whole, within every cap, or not at all
                if self.settings.max_items is not None and len(ledger.kept) >= self.settings.max_items:
                    return False
                *_, limit = ledger.limits(c, header)
                cost = ledger.view.item(ledger, c, names, text, uri, limit)
                if limit is not None and cost > limit:
                    return False
                self.item_costs[doc.lead.rank, text] = cost  # exact: a choice that keeps it whole reuses it
            else:  # a refit changes a document or two: the others are not counted again
                cost = self.item_costs.get((doc.lead.rank, text), -1)
                if cost < 0:
                    cost = self.item_costs[doc.lead.rank, text] = self.item_view.item(
                        ledger, c, names, text, uri, None)
            whole = [(0, len(doc.text))]
            cut = None if spans is None and not merged else Excerpt(text, tuple(spans or whole), "passages")
            kept_spans = None if cut is None else doc.piece_spans(rank, spans or whole)
            if not fit:
                self.shown[rank] = (key, text, cut, kept_spans, cost)
        # Not yet over the total: a choice is corrected with the exact count (refit), and the walk's fit.
        priced = Priced(rank, cost, header, None, None, text, scopes, names, uri, cut, None, kept_spans,
                        provisional=not fit)
        return keep_own(self.door, rank, priced)

    def refit(self, used: int, max_tokens: int | None) -> bool:
        """Correct the choice with ``used``, the block's exact count: give back what is over,
        fill what the count says is still free (under one document, with the head of the unit
        after the best passage first). True when it changed something (count again)."""
        if self.selection is None or max_tokens is None:
            return False
        selection = self.selection
        if used > max_tokens and selection.under.drop_tail():
            self._materialize()
            return True
        exact = {k.rank: k.cost for k in self.ledger.kept}
        changed = selection.correct(used, max_tokens, exact, self.ledger.lane_used)
        if not changed and not fill_tail(selection, max_tokens - used):
            return False
        self._materialize()
        return True
