"""What a walk decided: the record of every candidate it reached, and the result it makes.

The :class:`~recallpack.packing.walk.Walk` decides, candidate by candidate; the :class:`Ledger`
it is built on records each decision (kept, dropped or withheld, and why), keeps what is left of
each budget, and at the end makes the :class:`~recallpack.RecallResult` (or, for
:func:`~recallpack.pack`, the kept candidates). Nothing here decides what fits.
"""

from __future__ import annotations

import logging
import string
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import quote

from recallpack.packing.candidate import Candidate, LaneKind, Provenance, clean_text, item_scopes
from recallpack.packing.errors import ConfigError
from recallpack.packing.limits import Policy
from recallpack.packing.render import View
from recallpack.packing.result import (
    Evidence,
    Outcome,
    PackReport,
    Reason,
    RecallResult,
    Trace,
    TraceRecord,
)
from recallpack.packing.scopes import PRIVATE, Reader, Scope
from recallpack.packing.tokenizers import Tokenizer
from recallpack.packing.twins import KeptTexts, compared_text, dedupe_key
from recallpack.packing.validation import is_int

__all__ = [
    "Ledger", "Packed", "Kept", "WalkSettings", "CutResult", "resource_of", "citation_from", "log_result",
    "check_uri_template", "withheld",
]

#: Where recallpack logs: one DEBUG record per packing, a WARNING only for what the caller
#: should act on. recallpack/__init__.py gives it a NullHandler and nothing else.
logger = logging.getLogger("recallpack")
#: Under this share of the budget used while items were dropped for size, the caller is told.
_UNFILLED_SHARE = 0.5

_PREVIEW_CHARS = 60
_SIZE_REASONS = (Reason.OVER_BUDGET, Reason.OVER_LANE_BUDGET)
_WITHHELD = frozenset({Reason.UNREADABLE.value, Reason.NO_READER.value, Reason.MALFORMED_SCOPE.value})


class CutResult(Protocol):
    """What a cutter returns: the kept text (elisions marked), the ranges it kept, how."""

    @property
    def text(self) -> str: ...
    @property
    def spans(self) -> tuple[tuple[int, int], ...]: ...
    @property
    def kind(self) -> str: ...


@dataclass(frozen=True)
class WalkSettings:
    """The validated settings one walk runs with (the Packer's, resolved once; a call changes
    only its bounds)."""

    max_tokens: int | None
    max_items: int | None
    policy: Policy
    floor: bool
    reader: Reader | None
    lane_budgets: Mapping[LaneKind | Provenance, int]
    dedupe: bool
    resource_uri_template: str
    citation_keys: tuple[str, ...]
    language: str | None


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


@dataclass(eq=False, repr=False)  # a walk is one object: compared and hashed by identity
class Ledger:
    """What one walk has decided so far, and what is left: kept items, trace entries, reason
    tallies, lane use, the header's cost. It records decisions and makes the result of them;
    the deciding is the Walk's."""

    candidates: Sequence[Any]
    s: WalkSettings
    view: View
    tok: Tokenizer
    #: Said in the report (the Walk's builder sets it: a policy that packed as another).
    notes: tuple[str, ...] = field(default=(), init=False)

    def __post_init__(self) -> None:
        self.resources: dict[int, tuple[Candidate, str | None]] = {}
        self._reset()

    def _reset(self) -> None:
        """No decision made yet (a walk that chooses again, as ``passages`` does, starts here)."""
        self.header_cost = 0
        self.kept: list[Kept] = []
        self.entries: list[TraceRecord] = []
        self.tail_reason: Reason | None = None
        self.reasons: dict[str, int] = {}
        self.used = 0
        self.lane_used: dict[LaneKind | Provenance, int] = {}
        self.full: set[LaneKind | Provenance] = set()
        self.seen: KeptTexts[Kept] = KeptTexts()
        self.scope_order: dict[str, Scope] = {}
        self.floor_applied = False
        self.dropped_sizes: dict[int, int] = {}  # rank -> characters, for drops by size

    def _rooms(self, c: Candidate, header: int) -> tuple[int | None, int | None]:
        room = None if self.s.max_tokens is None else self.s.max_tokens - self.used - header
        if not self.s.lane_budgets:
            return room, None
        lefts = [self._lane_left(k) for k in self._lane_keys(c)]
        return room, (min(lefts) if lefts else None)

    def _limits(self, c: Candidate, header: int) -> tuple[int | None, int | None, int | None]:
        """:meth:`_rooms`, and the tighter of the two (None: no bound): what ``c`` is priced within."""
        room, lane_room = self._rooms(c, header)
        if lane_room is None:
            return room, None, room
        return room, lane_room, lane_room if room is None else min(room, lane_room)

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

    _compared = staticmethod(compared_text)
    _dedupe_key = staticmethod(dedupe_key)

    def _twin(self, c: Candidate) -> Kept | None:
        """The kept item identical to ``c`` (its content and scopes), if any."""
        return self.seen.find(c)

    def _uri(self, c: Candidate) -> str | None:
        # Made where it is priced; when items are not rendered, evidence() makes it for the kept.
        return self.resource(c) if self.view.renders_items else None

    def resource(self, c: Candidate) -> str | None:
        """The resource line of ``c`` (:func:`resource_of`), worked out once per walk: the
        passages walk also tells pieces of documents apart by it."""
        found = self.resources.get(id(c))
        if found is None:  # held with its candidate, so that no other one can take its id
            found = self.resources[id(c)] = (c, resource_of(c, self.s))
        return found[1]

    def _keep(self, rank: int, c: Candidate, scopes: tuple[Scope, ...], names: tuple[str, ...],
              text: str, cost: int, header: int, cut: CutResult | None, uri: str | None,
              replace: bool = False) -> None:
        for scope in scopes:
            if scope.name != PRIVATE:
                self.scope_order.setdefault(scope.name, scope)
        self.header_cost += header
        kept = Kept(rank, c, text, cost, scopes, names, uri, cut)
        self.kept.append(kept)
        self.used += cost + header
        if self.s.lane_budgets:
            for key in self._lane_keys(c):
                self.lane_used[key] = self.lane_used.get(key, 0) + cost
        if self.s.dedupe:
            self.seen.add(c, kept)
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
        # Appended in place: a copy per duplicate made n identical candidates cost O(n^2).
        if twin.twins is None:
            twin.twins = []
        twin.twins.append(citation)
        twin.made = None
        self._count_reason(Reason.DUPLICATE, 1)
        # _entry's record of a drop, made at once with its twin and citation (a duplicate is
        # dropped once per copy: a million copies are a million of these).
        self.entries.append(TraceRecord(
            rank, Outcome.DROPPED, Reason.DUPLICATE, c.lane, c.score, None, None, (),
            c.text[:_PREVIEW_CHARS], twin.rank, citation,
        ))
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
        header = self.view.header(self.scope_order.values()) if self.kept else 0
        self.used += header - self.header_cost
        self.header_cost = header

    def evidence(self) -> list[Evidence]:
        if not self.view.renders_items:
            for k in self.kept:
                if k.made is None:
                    k.uri = resource_of(k.candidate, self.s)
        return [k.evidence() for k in self.kept]

    def shared_scopes(self) -> list[Scope]:
        return list(self.scope_order.values())


@dataclass(frozen=True)
class Packed:
    """What a fitted walk returns: its ledger, the exact count of what the model is shown, and
    the block it counted (None when the model is shown the joined texts)."""

    walk: Ledger
    tokens_used: int
    block: str | None

    def kept_candidates(self) -> list[Candidate]:
        """The kept candidates themselves (a cut one with its cut text), in order: no evidence,
        trace entries or report are made for them."""
        return [
            k.candidate if k.cut is None else k.candidate.model_copy(update={"text": k.text})
            for k in self.walk.kept
        ]

    def log_kept(self) -> None:
        """The DEBUG record of a :func:`~recallpack.pack`: what it kept of how many."""
        if logger.isEnabledFor(logging.DEBUG):
            kept, reached, listed = len(self.walk.kept), len(self.walk.entries), len(self.walk.candidates)
            logger.debug("pack: kept %d of %d candidates (%d reached)", kept, listed, reached)

    def result(self) -> RecallResult:
        """The RecallResult: the evidence, its report and trace, and the block."""
        w = self.walk
        reasons = dict(w.reasons)
        tail = len(w.candidates) - len(w.entries)
        if tail:
            assert w.tail_reason is not None
            reasons[w.tail_reason.value] = reasons.get(w.tail_reason.value, 0) + tail
        withheld = sum(count for reason, count in reasons.items() if reason in _WITHHELD)
        cut_kinds = [k.cut.kind for k in w.kept if k.cut is not None]
        report = PackReport(
            max_tokens=w.s.max_tokens,
            tokens_used=self.tokens_used,
            candidates=len(w.candidates),
            items_selected=len(w.kept),
            items_dropped=len(w.candidates) - len(w.kept) - withheld,
            items_withheld=withheld,
            tokenizer_used=w.tok.name,
            policy=w.s.policy,
            truncated=bool(cut_kinds),
            items_cut=len(cut_kinds),
            reasons=reasons,
            floor_applied=w.floor_applied and bool(w.kept),
            cut=cut_kinds[0] if cut_kinds else None,
            largest_dropped_chars=max(w.dropped_sizes.values(), default=0),
            notes=w.notes,
            floor_failed=w.s.floor and not w.kept and bool(w.dropped_sizes),
        )
        evidence, scopes = w.evidence(), w.shared_scopes()
        # With a join the model is shown the joined texts; the block is rendered only if someone
        # asks, from the kept evidence alone (the closure must not keep the caller's candidates alive).
        view, max_tokens = w.view, w.s.max_tokens
        markdown: str | Callable[[], str] = (
            (lambda: view.block(evidence, scopes, max_tokens)) if self.block is None else self.block
        )
        return RecallResult(
            evidence,
            scopes,
            report,
            Trace(w.entries, len(w.candidates), w.tail_reason),
            markdown=markdown,
            selected_ranks=[k.rank for k in w.kept],
        )


def withheld(item: object, reader: Reader | None) -> Reason | None:
    """Why ``item`` (a Candidate, or a mapping of its fields) is withheld from ``reader``, read
    from its scope fields alone; None when the reader may read it. Fail closed: malformed scope
    fields withhold it, and so do any scopes when there is no reader."""
    scope_ids = item_scopes(item)
    if scope_ids is None:
        return Reason.MALFORMED_SCOPE
    if not scope_ids:
        return None
    if reader is None:
        return Reason.NO_READER
    return None if reader.can_read(scope_ids) else Reason.UNREADABLE


def log_result(result: RecallResult) -> None:
    """One DEBUG record per packing (counts, reasons, kept ranks; the whole event, text-free, in
    ``record.recallpack``), and a WARNING when the budget went largely unused because items
    did not fit. Both are checked before anything is formatted: logging off costs two lookups."""
    report = result.report
    if logger.isEnabledFor(logging.DEBUG):
        logger.debug(
            "recall: kept %d, dropped %d, withheld %d of %d candidates in %d/%s tokens (%s, %s); "
            "reasons: %s; kept ranks: %s",
            report.items_selected, report.items_dropped, report.items_withheld, report.candidates,
            report.tokens_used, report.max_tokens, report.tokenizer_used, report.policy,
            ", ".join(f"{n} {r}" for r, n in sorted(report.reasons.items())) or "none",
            list(result.selected_ranks), extra={"recallpack": result.to_event()},
        )
    budget = report.max_tokens
    if (
        budget and report.largest_dropped_chars and report.tokens_used < budget * _UNFILLED_SHARE
        and logger.isEnabledFor(logging.WARNING)
    ):
        fix = (
            "policy='skip' passes over an item that does not fit and policy='truncate' cuts it; "
            if report.policy == "prefix" else ""
        )
        logger.warning(
            "recall used %d of %d tokens (%s), and candidates that did not fit: %d (the largest "
            "reached has %s characters); %ssplit long documents with split_token_windows so their "
            "chunks fit",
            report.tokens_used, budget, report.policy, report.over_budget,
            f"{report.largest_dropped_chars:,}", fix,
        )


_URI_FIELDS = frozenset({"artifact_id", "artifact_content_id"})


def check_uri_template(template: str) -> None:
    """``resource_uri_template`` can be filled by :func:`resource_of`, or a ConfigError says why."""
    # Plain fields only: a format spec ("{artifact_id:>100000000}") would pad every item's
    # resource line to any size, and "{artifact_id.__class__}" reaches past the value.
    try:
        parsed = [(name, spec, conv) for _, name, spec, conv in string.Formatter().parse(template)]
        plain = all(n is None or (n in _URI_FIELDS and not (spec or conv)) for n, spec, conv in parsed)
        problem = "" if plain else "a field that is not plain {artifact_id} or {artifact_content_id}"
    except ValueError as exc:  # an unmatched brace
        problem = str(exc)
    if problem:
        raise ConfigError(
            f"resource_uri_template={template!r:.80} cannot be filled ({problem}); "
            "use {artifact_id} and {artifact_content_id} as its only fields, with no format spec"
        )


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
    if (isinstance(label, str) or is_int(label)) and str(label).strip():
        return f", page {str(label).strip()}"
    page = metadata.get("page")
    if is_int(page, 0):
        return f", page {page + 1}"
    return ""
