"""What crosses the boundary: evidence, the report, and the trace behind it.

Who may read what (``Reader``, ``Scope``) is an input, not a result: :mod:`recallpack.packing.scopes`.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple, overload

from pydantic import BaseModel, ConfigDict, Field

from recallpack.packing import scopes
from recallpack.packing._compat import moved_names
from recallpack.packing.block.render import default_block
from recallpack.packing.candidate import Provenance, ValueEnum
from recallpack.packing.errors import TemplateError
from recallpack.packing.reading.text import inert_markdown
from recallpack.packing.results.report_html import report_html, trace_html

__all__ = [
    "Evidence",
    "Outcome",
    "Reason",
    "TraceEntry",
    "Trace",
    "PackReport",
    "RecallResult",
    "DEFAULT_RESOURCE_URI_TEMPLATE",
]

DEFAULT_RESOURCE_URI_TEMPLATE = "recallpack://artifacts/{artifact_id}/contents/{artifact_content_id}"
#: Trace fields that hold an item's text (or say nothing without it), left out of events.
_NO_TEXT = frozenset({"preview", "reached"})


class Evidence(BaseModel):
    """One kept item as a reader sees it. No lane, score or rank: those stay in the trace."""

    model_config = ConfigDict(frozen=True)

    provenance: Provenance
    label: str
    text: str
    scopes: tuple[str, ...] = ()
    resource_uri: str | None = None
    token_count: int = Field(default=0, description="Tokens this item adds to the rendered block.")
    truncated: bool = False
    duplicates: int = Field(
        default=0, description="Identical items (same text, same scopes) dropped in its favour."
    )
    citations: tuple[str, ...] = Field(
        default=(),
        description="When it stands for duplicates: every citation among them, its own first.",
    )


class Outcome(ValueEnum):
    SELECTED = "selected"
    DROPPED = "dropped"
    WITHHELD = "withheld"


class Reason(ValueEnum):
    """Why a candidate is not in the evidence."""

    OVER_BUDGET = "over_budget"
    OVER_ITEM_CAP = "over_item_cap"
    OVER_LANE_BUDGET = "over_lane_budget"
    DUPLICATE = "duplicate"
    UNREADABLE = "unreadable"
    NO_READER = "no_reader"
    MALFORMED_SCOPE = "malformed_scope"
    EMPTY = "empty"
    NO_TEXT = "no_text"
    #: ``passages``: a piece of the same document as a better-ranked candidate, shown inside that
    #: candidate's item (the trace's ``merged_into``), its shared text paid for once.
    MERGED = "merged"
    #: Never read: past how far the walk reads (``passages`` reads at most 64 documents, or 256
    #: characters a budget token), so nothing is known of whether it would have fitted.
    NOT_REACHED = "not_reached"


class TraceEntry(BaseModel):
    """One input candidate's fate, for developers: never rendered. A withheld candidate's entry
    holds its rank, outcome and reason only: no lane, score, cut or preview."""

    model_config = ConfigDict(frozen=True)

    rank: int
    outcome: Outcome
    reason: Reason | None = None
    lane: str | None = None
    score: float | None = None
    tokens: int | None = Field(default=None, description="What it cost, when the walk counted it.")
    reached: bool = Field(default=True, description="False for candidates after the walk ended.")
    truncated: bool = Field(default=False, description="Selected, but cut to fit (the floor or truncate).")
    cut: str | None = Field(
        default=None, description="How a truncated item was cut: 'head', 'focus' or 'passages'."
    )
    kept_spans: tuple[tuple[int, int], ...] = Field(
        default=(), description="Character ranges of the original text a cut kept."
    )
    preview: str = Field(
        default="", description="The first characters of the candidate's text; empty for a withheld one."
    )
    duplicate_of: int | None = Field(
        default=None, description="For a duplicate: the rank of the kept item it is identical to."
    )
    citation: str | None = Field(default=None, description="For a duplicate: where it came from.")
    merged_into: int | None = Field(
        default=None, description="The rank whose item shows this piece of its document (reason 'merged')."
    )


class TraceRecord(NamedTuple):
    """A reached candidate's TraceEntry as the walk records it: a plain tuple, made in a fraction
    of a TraceEntry's time, that becomes one only when someone reads the trace."""

    rank: int
    outcome: Outcome
    reason: Reason | None
    lane: str | None
    score: float | None
    tokens: int | None
    cut: str | None
    kept_spans: tuple[tuple[int, int], ...]
    preview: str
    duplicate_of: int | None = None
    citation: str | None = None
    merged_into: int | None = None

    def entry(self) -> TraceEntry:
        return TraceEntry(
            rank=self.rank, outcome=self.outcome, reason=self.reason,
            lane=None if self.lane is None else str(self.lane), score=self.score,
            tokens=self.tokens, truncated=self.cut is not None and self.merged_into is None,
            cut=self.cut, kept_spans=self.kept_spans, preview=self.preview, duplicate_of=self.duplicate_of,
            citation=self.citation, merged_into=self.merged_into,
        )


class Trace(Sequence[TraceEntry]):
    """Every input candidate's TraceEntry, in input order.

    Candidates after the walk ended were never looked at (that is what keeps the packer's work
    in proportion to what it keeps); their entries are made on access, with the reason that
    ended the walk, and carry no lane, score or preview. The trace holds its own compact
    records, never the caller's candidates, so nothing dropped stays alive through a result;
    a record becomes a TraceEntry when it is read.
    """

    def __init__(
        self, entries: Sequence[TraceEntry | TraceRecord], total: int, tail_reason: Reason | None
    ) -> None:
        self._entries = tuple(entries)
        self._total = total
        self._tail_reason = tail_reason

    def __len__(self) -> int:
        return self._total

    @overload
    def __getitem__(self, index: int) -> TraceEntry: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[TraceEntry]: ...
    def __getitem__(self, index: int | slice) -> TraceEntry | Sequence[TraceEntry]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("trace index out of range")
        if index < len(self._entries):
            return _as_entry(self._entries[index])
        return self._unreached(index)

    def __iter__(self) -> Iterator[TraceEntry]:
        for record in self._entries:
            yield _as_entry(record)
        for index in range(len(self._entries), len(self)):
            yield self._unreached(index)

    def __reduce__(self) -> tuple[Any, ...]:
        return (Trace, (self._entries, self._total, self._tail_reason))

    def _unreached(self, index: int) -> TraceEntry:
        return TraceEntry(rank=index, outcome=Outcome.DROPPED, reason=self._tail_reason, reached=False)

    @property
    def reached(self) -> int:
        """How many candidates the walk looked at."""
        return len(self._entries)

    def rows(self) -> list[dict[str, Any]]:
        """Plain dicts, one per candidate: ready for ``pandas.DataFrame`` or a table."""
        return [entry.model_dump(mode="json") for entry in self]

    def __repr__(self) -> str:
        return f"<Trace {len(self)} candidates, {self.reached} reached>"

    def _repr_html_(self) -> str:
        return trace_html(self)


def _as_entry(record: TraceEntry | TraceRecord) -> TraceEntry:
    return record if isinstance(record, TraceEntry) else record.entry()


class PackReport(BaseModel):
    """The diagnostics of one packing: selected + dropped + withheld == candidates, always."""

    model_config = ConfigDict(frozen=True)

    max_tokens: int | None
    tokens_used: int
    candidates: int
    items_selected: int
    items_dropped: int
    items_withheld: int
    tokenizer_used: str
    policy: str
    truncated: bool = False
    reasons: dict[str, int] = Field(default_factory=dict)
    floor_applied: bool = Field(
        default=False, description="Nothing fitted whole, so the top readable match was kept, cut to fit."
    )
    cut: str | None = Field(
        default=None, description="How the cut items were cut: 'head', 'focus' or 'passages'."
    )
    largest_dropped_chars: int = Field(
        default=0, description="Characters in the largest candidate the walk reached and dropped for size."
    )
    items_cut: int = Field(default=0, description="Kept items that were cut to fit (each marked \"…\").")
    floor_failed: bool = Field(
        default=False,
        description="The floor was on, but not even a cut of the top match fitted: its own label, "
        "scopes and resource line (or what an allowance left) take more than the budget.",
    )
    fetch_depth: int | None = Field(
        default=None, description="How many candidates the adapter asked its upstream for (None: not known)."
    )
    notes: tuple[str, ...] = Field(
        default=(), description="What the caller should know about how this packing ran, in words."
    )
    fetch_knob: str | None = Field(
        default=None,
        description="The host setting that decides how many candidates arrive (an adapter names it).",
    )

    @property
    def ran_dry(self) -> bool:
        """The budget was left mostly unused (under half) because the candidates ran out, not
        because of the budget or a cap: more candidates would have been packed."""
        stopped = ("over_budget", "over_item_cap", "over_lane_budget", "not_reached")
        return (
            self.fetch_knob is not None
            and self.max_tokens is not None
            and 2 * self.tokens_used < self.max_tokens
            and not any(self.reasons.get(reason) for reason in stopped)
        )

    @property
    def did_not_fit(self) -> int:
        """Candidates the walk read and did not keep because they did not fit the budget or
        their lane's."""
        return self.reasons.get("over_budget", 0) + self.reasons.get("over_lane_budget", 0)

    @property
    def not_reached(self) -> int:
        """Candidates the walk never read (``reasons["not_reached"]``): past its reach."""
        return self.reasons.get("not_reached", 0)

    @property
    def over_budget(self) -> int:
        """Deprecated: :attr:`did_not_fit`, plus, for one release, the candidates the walk never
        reached (:attr:`not_reached`), which it counted before they had a reason of their own."""
        if self.not_reached:
            warnings.warn(
                "PackReport.over_budget counts the candidates the walk never read too, and will stop "
                "counting them in the next release; read did_not_fit (what did not fit) and "
                "not_reached (what was never read) instead",
                DeprecationWarning,
                stacklevel=2,
            )
        return self.did_not_fit + self.not_reached

    def _repr_html_(self) -> str:
        return report_html(self)

    def summary(self) -> str:
        """What was kept of what (and how many of those were cut), in how many tokens of the
        budget, and in words why the rest was not.

        >>> PackReport(max_tokens=300, tokens_used=298, candidates=3, items_selected=2,
        ...            items_dropped=1, items_withheld=0, tokenizer_used="cl100k_base",
        ...            policy="truncate", truncated=True, items_cut=1, cut="head",
        ...            reasons={"over_budget": 1}).summary()
        'kept 2 of 3 (1 cut) in 298/300 tokens (cl100k_base, truncate); not kept: 1 over_budget'
        """
        why = ", ".join(f"{count} {reason}" for reason, count in sorted(self.reasons.items()))
        budget = f"/{self.max_tokens}" if self.max_tokens is not None else ""
        # A report made before items_cut existed (or by hand) still says that one item was cut.
        cut = self.items_cut or int(self.truncated)
        line = (
            f"kept {self.items_selected} of {self.candidates}" + (f" ({cut} cut)" if cut else "")
            + f" in {self.tokens_used}{budget} tokens ({self.tokenizer_used}, {self.policy})"
            + (f"; not kept: {why}" if why else "")
        )
        if self.floor_applied:
            line += (
                f". No match fitted whole, so the top one was kept, cut to fit ({self.cut} cut)"
            )
        if self.floor_failed:
            line += (
                ". Nothing fitted, not even cut: the top match's label, scopes and resource line "
                "take more than the budget (Packer.least_tokens_for(candidate) says the least that keeps it)"
            )
        if self.largest_dropped_chars:
            line += f". The largest item dropped for size has {self.largest_dropped_chars:,} characters"
        if self.not_reached:
            line += (
                f". {self.not_reached} {'match was' if self.not_reached == 1 else 'matches were'} never "
                "read, past how far the walk reads: to reach them, pass fewer, larger candidates or "
                "pre-filter them (a larger max_tokens reads more characters, not more documents)"
            )
        if self.ran_dry:
            line += ". " + self._ran_dry_note()
        for note in self.notes:
            line += f". {note[0].upper()}{note[1:]}"
        return line

    def _ran_dry_note(self) -> str:
        asked, knob = self.fetch_depth, self.fetch_knob
        if asked is None:  # a postprocessor: it packs what it is handed
            return (
                f"The budget is mostly unused: only {self.candidates} candidates arrived, and this "
                f"step cannot fetch more; raise {knob} on the retriever before it"
            )
        if self.candidates < asked:
            return (
                f"The budget is mostly unused: the upstream had only {self.candidates} matches of the "
                f"{asked} asked for ({knob}={asked}); there is no more to pack"
            )
        return (
            f"The budget is mostly unused: the upstream ran dry at the {asked} candidates asked "
            f"for; raise {knob} to fetch more"
        )


class RecallResult:
    """The evidence a caller sees, the rendered block, the report, and the trace of every candidate.

    The block is rendered once, by the packer, and those exact bytes were measured: what
    ``to_markdown()`` returns is what fits the budget (and what a receipt binds to).
    """

    def __init__(
        self,
        evidence: Sequence[Evidence],
        shared_scopes: Sequence[scopes.Scope],
        report: PackReport,
        trace: Trace,
        *,
        markdown: str | Callable[[], str],
        selected_ranks: Sequence[int] = (),
    ) -> None:
        self.evidence: tuple[Evidence, ...] = tuple(evidence)
        self.shared_scopes: tuple[scopes.Scope, ...] = tuple(shared_scopes)
        self.report = report
        self.trace = trace
        self._markdown = markdown
        self._selected_ranks = tuple(selected_ranks)

    def with_fetch(self, depth: int | None, knob: str) -> RecallResult:
        """This result, its report saying how many candidates the upstream was asked for
        (``depth``; None: not known) and which host setting asks (``knob``), so that a budget
        left unused for want of candidates names the fix. What an adapter calls."""
        noted = copy.copy(self)
        noted.report = self.report.model_copy(update={"fetch_depth": depth, "fetch_knob": knob})
        return noted

    @property
    def selected_ranks(self) -> tuple[int, ...]:
        """Input positions of the kept candidates, in the order of ``evidence``."""
        return self._selected_ranks

    def to_markdown(self, template: object = None) -> str:
        """The evidence block that was measured; ``""`` when nothing was kept.

        A different template would give different bytes that nobody counted, so it is refused:
        pack again with ``template=`` to get a block in another shape.
        """
        if template is not None:
            raise TemplateError(
                "to_markdown(template=...) would return a block nobody measured; pack again "
                "with recall(..., template=...) (or Packer(template=...)) instead"
            )
        if callable(self._markdown):
            self._markdown = self._markdown()
        return self._markdown

    def to_dict(self) -> dict[str, Any]:
        return {
            "evidence": [e.model_dump(mode="json") for e in self.evidence],
            "shared_scopes": [s.model_dump(mode="json") for s in self.shared_scopes],
            "report": self.report.model_dump(mode="json"),
        }

    def to_event(self) -> dict[str, Any]:
        """What tracing and logging carry about this packing: the report, its summary, and the
        trace row of each candidate the walk reached (outcome, reason, lane, score, tokens, cut
        spans), with no text of any item, kept or not. The candidates the walk never reached
        are one count and the reason that ended it. JSON-ready.
        """
        trace = self.trace
        reached = [
            {key: value for key, value in entry.model_dump(mode="json").items() if key not in _NO_TEXT}
            for entry in trace[: trace.reached]
        ]
        return {
            "report": self.report.model_dump(mode="json"),
            "summary": self.report.summary(),
            "trace": reached,
            "unreached": len(trace) - trace.reached,
        }

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_markdown"] = self.to_markdown()  # a pickle carries bytes, not a closure
        return state

    def _repr_markdown_(self) -> str:
        """The evidence as a notebook shows it: the default block's shape, with every text that
        came from a document or a setting escaped, so it renders as text (no heading, bullet,
        image, link or HTML of its own). ``to_markdown()`` is what the model reads."""
        if not self.evidence:
            return "*(no evidence)*"
        return default_block(self.evidence, self.shared_scopes, escape=inert_markdown)

    def __len__(self) -> int:
        return len(self.evidence)

    def __repr__(self) -> str:
        return f"<RecallResult {self.report.summary()}>"


#: Reader and Scope moved to :mod:`recallpack.packing.scopes`: from here they still work for one
#: release, with a DeprecationWarning naming the new home (see :mod:`recallpack.packing._compat`).
__getattr__ = moved_names(__name__)
