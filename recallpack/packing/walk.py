"""The walk: decide, in the order given, what fits the budget, and account for every candidate.

Candidates arrive in merit order. The walk never reorders: it only decides where to stop (or,
under ``skip``, what to pass over). It counts tokens only for the candidates it reaches, so its
work follows what it keeps, not what it was handed.

What an item costs depends on what the model is shown, and that is the one thing that differs
between hosts, so it is a small strategy object: :class:`BlockCost` (the rendered Markdown
block, header and labels included) or :class:`JoinedCost` (the kept texts joined, as a
LlamaIndex synthesizer shows them).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import quote

import regex

from recallpack.packing.candidate import Candidate, LaneKind, Provenance, clean_text, coerce_candidate
from recallpack.packing.errors import ConfigError, RecallpackError
from recallpack.packing.limits import Policy
from recallpack.packing.render import header_text, item_text
from recallpack.packing.result import Evidence, Outcome, Reason, TraceRecord
from recallpack.packing.scopes import PRIVATE, Reader, Scope
from recallpack.packing.tokenizers import Tokenizer

__all__ = ["Walk", "WalkSettings", "CostModel", "BlockCost", "JoinedCost", "CutResult", "Cutter"]

_PRECHECK_CHARS = 65_536
_PREVIEW_CHARS = 60
_SIZE_REASONS = (Reason.OVER_BUDGET, Reason.OVER_LANE_BUDGET)


class CutResult(Protocol):
    """What a cutter returns: the kept text (elisions marked), the ranges it kept, how."""

    @property
    def text(self) -> str: ...
    @property
    def spans(self) -> tuple[tuple[int, int], ...]: ...
    @property
    def kind(self) -> str: ...


#: ``cutter(text, max_tokens, measure)``: the best cut of ``text`` such that
#: ``measure(cut.text) <= max_tokens`` (``measure`` prices a text as its item renders it), or None.
Cutter = Callable[[str, int, Callable[[str], int]], "CutResult | None"]


@dataclass(frozen=True)
class WalkSettings:
    """The validated settings one walk runs with (the Packer makes them)."""

    max_tokens: int | None
    max_items: int | None
    policy: Policy
    floor: bool
    reader: Reader | None
    lane_budgets: Mapping[LaneKind | Provenance, int]
    dedupe: bool
    resource_uri_template: str
    citation_keys: tuple[str, ...]


@dataclass(slots=True)
class Kept:
    """One kept item: where it ranked, the candidate, the text kept (cut or whole), what it
    cost, its scopes and their names, its resource line, and the cut that made it fit (None
    when it fitted whole). Its Evidence is made only when a result asks for it: :func:`pack`
    never does."""

    rank: int
    candidate: Candidate
    text: str
    cost: int
    scopes: tuple[Scope, ...]
    names: tuple[str, ...]
    uri: str | None
    cut: CutResult | None
    made: Evidence | None = None
    #: The citations of identical items dropped in its favour (None: one had none).
    twins: list[str | None] | None = None

    @property
    def label(self) -> str:
        return self.candidate.provenance.label

    def evidence(self) -> Evidence:
        if self.made is None:
            twins = self.twins or []
            cited = dict.fromkeys(c for c in (self.uri, *twins) if c is not None)
            self.made = Evidence(
                provenance=self.candidate.provenance,
                label=self.label,
                text=self.text,
                scopes=self.names,
                resource_uri=self.uri,
                token_count=self.cost,
                truncated=self.cut is not None,
                duplicates=len(twins),
                citations=tuple(cited) if twins else (),
            )
        return self.made


class CostModel(Protocol):
    """What one kept item adds to what the model is shown, and the exact count of the whole."""

    renders_items: bool

    def header_delta(self, walk: Walk, scopes: tuple[Scope, ...]) -> int: ...
    def item(self, walk: Walk, c: Candidate, scopes: Sequence[str], text: str, uri: str | None,
             limit: int | None) -> int: ...
    def measure(self, walk: Walk) -> int: ...


class JoinedCost:
    """Each item costs its tokens plus one for the separator; the whole is ``join(texts)``."""

    renders_items = False  # an item's labels and resource line are not shown: no need to make them

    def __init__(self, tokenizer: Tokenizer, join: Callable[[Sequence[str]], str]) -> None:
        self.tok = tokenizer
        self.join = join
        # A join may say how one text appears in what it builds (escaped, say): pricing that
        # form makes the walk's sum close to the exact count, so little is given back after.
        self.shown: Callable[[str], str] | None = getattr(join, "item_view", None)

    def header_delta(self, walk: Walk, scopes: tuple[Scope, ...]) -> int:
        return 0

    def item(self, walk: Walk, c: Candidate, scopes: Sequence[str], text: str, uri: str | None,
             limit: int | None) -> int:
        shown = text if self.shown is None else self.shown(text)
        return self.tok.count_upto(shown, (1 << 62) if limit is None else limit) + 1

    def measure(self, walk: Walk) -> int:
        if self.join is newline_join:
            # The prefix walk's own rule: each text's tokens plus one for its newline, summed.
            # That sum is what it promises, so nothing is counted again.
            return sum(k.cost for k in walk.kept)
        if not walk.kept:
            return 0
        return self.tok.count(joined_by(self.join, [k.text for k in walk.kept]))


class BlockCost:
    """Each item costs what it adds to the rendered Markdown block, header growth included.

    Items are costed as the default template renders them; the Packer then counts the block it
    actually renders (whatever the template) and gives back until it fits.
    """

    renders_items = True

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tok = tokenizer
        self.header_cost = 0

    def header_delta(self, walk: Walk, scopes: tuple[Scope, ...]) -> int:
        new = [s for s in scopes if s.name != PRIVATE and s.name not in walk.scope_order]
        if walk.kept and not new:
            return 0
        merged = {**walk.scope_order, **{s.name: s for s in new if s.name not in walk.scope_order}}
        return self.header_of(merged.values()) - self.header_cost

    def header_of(self, scopes: Any) -> int:
        return self.tok.count(header_text([(s.name, s.description) for s in scopes]))

    def item(self, walk: Walk, c: Candidate, scopes: Sequence[str], text: str, uri: str | None,
             limit: int | None) -> int:
        limit = (1 << 62) if limit is None else limit
        # A text far longer than the room is rejected on its own, before it is indented
        # (copied): that keeps a huge text's cost bounded by the room, not by its length.
        if len(text) > _PRECHECK_CHARS and self.tok.count_upto(text, limit) > limit:
            return limit + 1
        # The newline that joins it to the next item is part of its cost.
        return self.tok.count_upto(item_text(c.provenance.label, scopes, text, uri) + "\n", limit)

    def measure(self, walk: Walk) -> int:
        if not walk.kept:
            return 0
        if self.tok.splits_at_line_starts:
            # The block is header + items joined by newlines, split only at line starts, so the
            # walk's own counts add up exactly; the last item has no newline after it. These
            # encodings' counts also add up before a space that starts a word, so only what
            # follows the last such space is counted again, with and without the newline.
            last = walk.kept[-1]
            text = item_text(last.label, last.names, last.text, last.uri)
            tail = text[_last_word_start(text) :]
            newline = self.tok.count(tail + "\n") - self.tok.count(tail)
            return self.header_cost + sum(k.cost for k in walk.kept) - newline
        return self.tok.count(walk.default_block())


class Ledger:
    """What one walk has decided so far: kept items, trace entries, reason tallies, lane use."""

    def __init__(self, candidates: Sequence[Any], settings: WalkSettings, cost: CostModel,
                 cutter: Cutter) -> None:
        self.candidates = candidates
        self.s = settings
        self.cost = cost
        self.cutter = cutter
        self.kept: list[Kept] = []
        self.entries: list[TraceRecord] = []
        self.tail_reason: Reason | None = None
        self.reasons: dict[str, int] = {}
        self.used = 0
        self.lane_used: dict[LaneKind | Provenance, int] = {}
        self.full: set[LaneKind | Provenance] = set()
        self.seen: dict[tuple[int, tuple[str, ...]], list[tuple[str, Kept]]] = {}
        self.scope_order: dict[str, Scope] = {}
        self.floor_applied = False
        self.dropped_sizes: dict[int, int] = {}  # rank -> characters, for drops by size

    def _rooms(self, c: Candidate, header: int) -> tuple[int | None, int | None]:
        room = None if self.s.max_tokens is None else self.s.max_tokens - self.used - header
        if not self.s.lane_budgets:
            return room, None
        lefts = [self._lane_left(k) for k in self._lane_keys(c)]
        return room, (min(lefts) if lefts else None)

    def _lane_keys(self, c: Candidate) -> list[LaneKind | Provenance]:
        budgets = self.s.lane_budgets
        return [k for k in (c.lane, c.provenance) if k in budgets] if budgets else []

    def _lane_left(self, key: LaneKind | Provenance) -> int:
        return self.s.lane_budgets[key] - self.lane_used.get(key, 0)

    def _scopes(self, c: Candidate) -> tuple[Scope, ...]:
        if not c.scope_ids:  # most items: nothing to resolve
            return ()
        if self.s.reader is not None:
            return self.s.reader.resolve(c.scope_ids)
        return tuple(Scope(name=s) for s in c.scope_ids)

    @staticmethod
    def _names(scopes: tuple[Scope, ...]) -> tuple[str, ...]:
        return tuple(s.name for s in scopes) if scopes else ()

    @staticmethod
    def _compared(c: Candidate) -> str:
        """What duplicates are found by: the item's own content (not a host's framing of it, such
        as a LlamaIndex node's metadata lines, and never its citation)."""
        return c.text if c.content is None else c.content

    @staticmethod
    def _dedupe_key(c: Candidate, text: str) -> tuple[int, tuple[str, ...]]:
        # By length, not by hash: hashing a 10 MB text reads all of it, while texts of another
        # length can never be equal, and equal lengths are compared in place, without a copy.
        # The scope ids as a set: the same ids in another order are the same readers, while any
        # other scopes are other readers, so those items are never merged.
        return len(text), (tuple(sorted(set(c.scope_ids))) if c.scope_ids else ())

    def _twin(self, c: Candidate) -> Kept | None:
        """The kept item identical to ``c`` (its content and scopes), if any."""
        text = self._compared(c)
        for seen, kept in self.seen.get(self._dedupe_key(c, text), ()):
            if seen == text:
                return kept
        return None

    def _uri(self, c: Candidate) -> str | None:
        # Made where it is priced; when items are not rendered, evidence() makes it for the kept.
        return resource_of(c, self.s) if self.cost.renders_items else None

    def _keep(self, rank: int, c: Candidate, scopes: tuple[Scope, ...], names: tuple[str, ...],
              text: str, cost: int, header: int, cut: CutResult | None, uri: str | None,
              replace: bool = False) -> None:
        for scope in scopes:
            if scope.name != PRIVATE:
                self.scope_order.setdefault(scope.name, scope)
        if header and isinstance(self.cost, BlockCost):
            self.cost.header_cost += header
        kept = Kept(rank, c, text, cost, scopes, names, uri, cut)
        self.kept.append(kept)
        self.used += cost + header
        if self.s.lane_budgets:
            for key in self._lane_keys(c):
                self.lane_used[key] = self.lane_used.get(key, 0) + cost
        if self.s.dedupe:
            compared = self._compared(c)
            self.seen.setdefault(self._dedupe_key(c, compared), []).append((compared, kept))
        entry = self._entry(rank, c, Outcome.SELECTED, None, cost, cut)
        if replace:
            self.entries[rank] = entry
        else:
            self.entries.append(entry)

    def _drop(self, rank: int, c: Candidate, reason: Reason, outcome: Outcome = Outcome.DROPPED,
              tokens: int | None = None) -> bool:
        if reason in _SIZE_REASONS:
            self.dropped_sizes[rank] = len(c.text)
        self._count_reason(reason, 1)
        self.entries.append(self._entry(rank, c, outcome, reason, tokens, None))
        return True

    def _drop_twin(self, rank: int, c: Candidate) -> bool:
        """Drop ``c`` as identical to a kept item, which then stands for it: its citation joins
        the kept item's, in the evidence and in this entry of the trace."""
        twin = self._twin(c)
        assert twin is not None
        citation = resource_of(c, self.s)
        twin.twins = [*(twin.twins or ()), citation]
        twin.made = None
        self._count_reason(Reason.DUPLICATE, 1)
        entry = self._entry(rank, c, Outcome.DROPPED, Reason.DUPLICATE, None, None)
        self.entries.append(entry._replace(duplicate_of=twin.rank, citation=citation))
        return True

    def _end(self, rank: int, c: Candidate, reason: Reason, tokens: int | None = None) -> bool:
        self._drop(rank, c, reason, tokens=tokens)
        self.tail_reason = reason
        return False

    def _count_reason(self, reason: Reason | None, delta: int) -> None:
        if reason is not None:
            self.reasons[reason.value] = self.reasons.get(reason.value, 0) + delta
            if not self.reasons[reason.value]:
                del self.reasons[reason.value]

    @staticmethod
    def _entry(rank: int, c: Candidate, outcome: Outcome, reason: Reason | None, tokens: int | None,
               cut: CutResult | None) -> TraceRecord:
        if outcome is Outcome.WITHHELD:
            # Whoever reads the trace may not read the item: its rank and why, nothing of it.
            return TraceRecord(rank, outcome, reason, None, None, None, None, (), "")
        if cut is None:
            return TraceRecord(rank, outcome, reason, c.lane, c.score, tokens, None, (),
                               c.text[:_PREVIEW_CHARS])
        return TraceRecord(rank, outcome, reason, c.lane, c.score, tokens, cut.kind, cut.spans,
                           c.text[:_PREVIEW_CHARS])

    def give_back_last(self) -> None:
        """Drop the last kept item after the block it ends came out over budget."""
        last = self.kept.pop()
        self.entries[last.rank] = self.entries[last.rank]._replace(
            outcome=Outcome.DROPPED, reason=Reason.OVER_BUDGET, cut=None, kept_spans=()
        )
        self._count_reason(Reason.OVER_BUDGET, 1)
        self.used -= last.cost
        self.scope_order = {}
        for kept in self.kept:
            for scope in kept.scopes:
                if scope.name != PRIVATE:
                    self.scope_order.setdefault(scope.name, scope)
        if isinstance(self.cost, BlockCost):
            header = self.cost.header_of(self.scope_order.values()) if self.kept else 0
            self.used += header - self.cost.header_cost
            self.cost.header_cost = header

    def evidence(self) -> list[Evidence]:
        if not self.cost.renders_items:
            for k in self.kept:
                if k.made is None:
                    k.uri = resource_of(k.candidate, self.s)
        return [k.evidence() for k in self.kept]

    def shared_scopes(self) -> list[Scope]:
        return list(self.scope_order.values())

    def default_block(self) -> str:
        """The kept items as the default template renders them."""
        return default_block(self.evidence(), self.shared_scopes())




class Walk(Ledger):
    """One walk over the candidates: call :meth:`run`, then read ``kept`` and ``entries``."""

    def run(self) -> None:
        for rank in range(len(self.candidates)):
            if not self._step(rank, coerce_candidate(self.candidates[rank], rank)):
                break
        if not self.kept and self.s.floor:
            # The top readable match first; a later one only if an earlier cannot be cut at all
            # (its lane has no room), so merit order still decides.
            for rank in list(self.dropped_sizes):
                if self._floor(rank):
                    break

    def _gate(self, c: Candidate) -> tuple[Reason, Outcome] | None:
        """Why ``c`` cannot be shown at all, whatever the room; None when it can."""
        if c.modality != "text":
            return Reason.NO_TEXT, Outcome.DROPPED
        if not c.text or c.text.isspace():  # isspace() scans without copying the text
            return Reason.EMPTY, Outcome.DROPPED
        if c.scope_error is not None:
            return Reason.MALFORMED_SCOPE, Outcome.WITHHELD
        if self.s.reader is None:
            if c.scope_ids:
                return Reason.NO_READER, Outcome.WITHHELD
        elif not self.s.reader.can_read(c.scope_ids):
            return Reason.UNREADABLE, Outcome.WITHHELD
        if self.s.dedupe and self.seen and self._twin(c) is not None:
            return Reason.DUPLICATE, Outcome.DROPPED
        if self.full and any(key in self.full for key in self._lane_keys(c)):
            return Reason.OVER_LANE_BUDGET, Outcome.DROPPED
        return None

    def _step(self, rank: int, c: Candidate) -> bool:
        """Decide candidate ``rank``; False ends the walk (everything after it is the tail)."""
        gate = self._gate(c)
        if gate is not None:
            if gate[0] is Reason.DUPLICATE:
                return self._drop_twin(rank, c)
            return self._drop(rank, c, gate[0], gate[1])
        if self.s.max_items is not None and len(self.kept) >= self.s.max_items:
            return self._end(rank, c, Reason.OVER_ITEM_CAP)
        scopes = self._scopes(c)
        header = self.cost.header_delta(self, scopes)
        room, lane_room = self._rooms(c, header)
        limit = room if lane_room is None else (lane_room if room is None else min(room, lane_room))
        uri, names = self._uri(c), self._names(scopes)
        cost = self.cost.item(self, c, names, c.text, uri, limit)
        fits_global = room is None or cost <= room
        if fits_global and (lane_room is None or cost <= lane_room):
            self._keep(rank, c, scopes, names, c.text, cost, header, None, uri)
            return True
        if fits_global:  # only a lane's own budget is spent; the other lanes go on
            self.full.update(k for k in self._lane_keys(c) if self._lane_left(k) < cost)
            return self._drop(rank, c, Reason.OVER_LANE_BUDGET, tokens=cost)
        assert room is not None
        if self.s.policy == "skip":
            self._drop(rank, c, Reason.OVER_BUDGET, tokens=cost)
            if room > 0:
                return True
            self.tail_reason = Reason.OVER_BUDGET  # nothing more can fit: stop looking
            return False
        # A cut is made to the global room only; an item its own lane cannot hold is not cut.
        cuttable = self.s.policy == "truncate" and room > 0 and (lane_room is None or lane_room >= room)
        if cuttable and self._keep_cut(rank, c, scopes, header, room):
            self.tail_reason = Reason.OVER_BUDGET
            return False
        return self._end(rank, c, Reason.OVER_BUDGET, tokens=cost)

    def _floor(self, rank: int) -> bool:
        """Nothing fitted whole: keep the match at ``rank``, cut to the room it has."""
        c = coerce_candidate(self.candidates[rank], rank)
        scopes = self._scopes(c)
        header = self.cost.header_delta(self, scopes)
        room, lane_room = self._rooms(c, header)
        limit = room if lane_room is None else (lane_room if room is None else min(room, lane_room))
        if limit is None or limit <= 0:
            return False
        old = self.entries[rank]
        self._count_reason(old.reason, -1)
        if self._keep_cut(rank, c, scopes, header, limit, replace=True):
            self.floor_applied = True
            del self.dropped_sizes[rank]
            return True
        self._count_reason(old.reason, 1)
        return False

    def _keep_cut(self, rank: int, c: Candidate, scopes: tuple[Scope, ...], header: int, room: int,
                  replace: bool = False) -> bool:
        names, uri = self._names(scopes), self._uri(c)

        def measure(text: str) -> int:  # what the cut text costs rendered in its item
            return self.cost.item(self, c, names, text, uri, room)

        cut = self.cutter(c.text, room, measure)
        if cut is None:
            return False
        cost = measure(cut.text)
        if cost > room:  # a cutter's promise, checked: the budget never rests on it alone
            return False
        self._keep(rank, c, scopes, names, cut.text, cost, header, cut, uri, replace=replace)
        return True

    def recut_last(self, excess: int) -> bool:
        """Cut the last kept item (already a cut) ``excess`` tokens shorter; False if it cannot be."""
        last = self.kept[-1]
        if last.cut is None:
            return False
        self.give_back_last()
        self._count_reason(Reason.OVER_BUDGET, -1)
        c = last.candidate
        scopes = self._scopes(c)
        header = self.cost.header_delta(self, scopes)
        room = last.cost - excess
        if room > 0 and self._keep_cut(last.rank, c, scopes, header, room, replace=True):
            self.kept[-1].twins = last.twins  # it still stands for the same duplicates
            return True
        self._count_reason(Reason.OVER_BUDGET, 1)
        return False


_WORD_START = regex.compile(r" \p{L}")
_TAIL_SEARCH = 256


def _last_word_start(text: str) -> int:
    """Where the last space that starts a word is, near the end of ``text`` (0: none there)."""
    start = max(0, len(text) - _TAIL_SEARCH)
    last = 0
    for match in _WORD_START.finditer(text, start):
        last = match.start()
    return last


def joined_by(join: Callable[[Sequence[str]], str], texts: Sequence[str]) -> str:
    """``join(texts)``, the str the model is shown; what the caller's join raises is the cause
    of a ConfigError, and anything but a str is refused."""
    try:
        joined = join(texts)
    except RecallpackError:
        raise
    except Exception as exc:  # the caller's join: keep what it raised
        raise ConfigError(f"join raised {type(exc).__name__} joining {len(texts)} texts: {exc}") from exc
    if not isinstance(joined, str):
        raise ConfigError(f"join returned {type(joined).__name__}; it must return the str the model is shown")
    return joined


def newline_join(texts: Sequence[str]) -> str:
    """The texts one per line: with it, JoinedCost is the plain prefix walk of :func:`pack`."""
    return "\n".join(texts)


def resource_of(c: Candidate, settings: WalkSettings) -> str | None:
    """The resource line of ``c``: its artifact URI, else its citation, else the metadata's."""
    if c.artifact_id and c.artifact_content_id:
        return settings.resource_uri_template.format(
            artifact_id=quote(c.artifact_id, safe=""),
            artifact_content_id=quote(c.artifact_content_id, safe=""),
        )
    if c.citation:
        return c.citation
    return citation_from(c.metadata, settings.citation_keys)


def default_block(evidence: Sequence[Evidence], shared_scopes: Sequence[Scope]) -> str:
    """``evidence`` as the default template renders it (a test pins that the two agree)."""
    if not evidence:
        return ""
    items = [item_text(e.label, e.scopes, e.text, e.resource_uri) for e in evidence]
    return header_text([(s.name, s.description) for s in shared_scopes]) + "\n".join(items)


def citation_from(metadata: Mapping[str, Any], keys: Sequence[str]) -> str | None:
    """Where a host's loader says an item came from: the first of ``keys`` it recorded, with its
    page when it has one (``page_label`` as the document prints it, else ``page`` counted from 0).
    """
    for key in keys:
        value = metadata.get(key)
        if isinstance(value, str) and value.strip():
            return clean_text(value.strip() + _page_of(metadata))
    return None


def _page_of(metadata: Mapping[str, Any]) -> str:
    label = metadata.get("page_label")
    if isinstance(label, (str, int)) and not isinstance(label, bool) and str(label).strip():
        return f", page {str(label).strip()}"
    page = metadata.get("page")
    if isinstance(page, int) and not isinstance(page, bool) and page >= 0:
        return f", page {page + 1}"
    return ""
