"""What crosses the boundary: evidence, scopes, the report, and the trace behind it."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, overload

from pydantic import BaseModel, ConfigDict, Field

from recallpack.packing.candidate import Candidate, LaneKind, Provenance, ValueEnum
from recallpack.packing.render import TemplateSpec, load_template, render

if TYPE_CHECKING:
    from recallpack.packing.tokenizer import TokenizerSpec

__all__ = [
    "Scope",
    "Reader",
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
PRIVATE = "private"


class Scope(BaseModel):
    """Whose memory an item is: a name the reader knows it by, and what that means."""

    model_config = ConfigDict(frozen=True)

    name: str
    description: str = ""


class Reader(BaseModel):
    """Who reads the evidence: their own id (rendered as scope ``private``) and the other scope
    ids they may read, each mapped to its Scope. Anything else is withheld.

    >>> reader = Reader(id="u-7", scopes={"org-1": Scope(name="book-club")})
    >>> reader.scope_names(("u-7", "org-1"))
    ('private', 'book-club')
    """

    model_config = ConfigDict(frozen=True)

    id: str | None = None
    scopes: Mapping[str, Scope] = Field(default_factory=dict)

    def scope_for(self, scope_id: str) -> Scope | None:
        if scope_id == self.id:
            return Scope(name=PRIVATE)
        return self.scopes.get(scope_id)

    def can_read(self, scope_ids: Sequence[str]) -> bool:
        return all(scope_id == self.id or scope_id in self.scopes for scope_id in scope_ids)

    def scope_names(self, scope_ids: Sequence[str]) -> tuple[str, ...]:
        return tuple(self.resolve(scope_ids)[i].name for i in range(len(scope_ids)))

    def resolve(self, scope_ids: Sequence[str]) -> tuple[Scope, ...]:
        scopes = []
        for scope_id in scope_ids:
            scope = self.scope_for(scope_id)
            scopes.append(scope if scope is not None else Scope(name=scope_id))
        return tuple(scopes)


class Evidence(BaseModel):
    """One kept item as a reader sees it. No lane, score or rank: those stay in the trace."""

    model_config = ConfigDict(frozen=True)

    provenance: Provenance
    label: str
    text: str
    scopes: tuple[str, ...] = ()
    resource_uri: str | None = None
    token_count: int = Field(0, description="Tokens this item adds to the rendered block.")
    truncated: bool = False


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
    EMPTY = "empty"
    NO_TEXT = "no_text"


class TraceEntry(BaseModel):
    """One input candidate's fate, for developers: never rendered."""

    model_config = ConfigDict(frozen=True)

    rank: int
    outcome: Outcome
    reason: Reason | None = None
    lane: str | None = None
    score: float | None = None
    tokens: int | None = Field(None, description="What it cost, when the walk counted it.")
    reached: bool = Field(True, description="False for candidates after the walk ended.")
    truncated: bool = Field(False, description="Selected, but cut to fit (policy truncate).")


class Trace(Sequence[TraceEntry]):
    """Every input candidate's TraceEntry, in input order.

    Candidates after the walk ended were never looked at (that is what keeps the packer's work
    in proportion to what it keeps); their entries are made on access, with the reason that
    ended the walk.
    """

    def __init__(
        self,
        entries: Sequence[TraceEntry],
        candidates: Sequence[object],
        tail_reason: Reason | None,
    ) -> None:
        self._entries = tuple(entries)
        self._candidates = candidates
        self._tail_reason = tail_reason

    def __len__(self) -> int:
        return len(self._candidates)

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
            return self._entries[index]
        return self._unreached(index)

    def __iter__(self) -> Iterator[TraceEntry]:
        yield from self._entries
        for index in range(len(self._entries), len(self)):
            yield self._unreached(index)

    def _unreached(self, index: int) -> TraceEntry:
        raw = self._candidates[index]
        if isinstance(raw, Candidate):
            lane: object = raw.lane
            score: object = raw.score
        elif isinstance(raw, Mapping):
            lane, score = raw.get("lane"), raw.get("score")
        else:
            lane = score = None
        return TraceEntry(
            rank=index,
            outcome=Outcome.DROPPED,
            reason=self._tail_reason,
            lane=lane.value if isinstance(lane, LaneKind) else (str(lane) if lane else None),
            score=score if isinstance(score, (int, float)) and not isinstance(score, bool) else None,
            reached=False,
        )

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
        from recallpack.packing.report_html import trace_html

        return trace_html(self)


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

    def _repr_html_(self) -> str:
        from recallpack.packing.report_html import report_html

        return report_html(self)

    def summary(self) -> str:
        """One line: what was kept of what, in how many tokens."""
        why = ", ".join(f"{count} {reason}" for reason, count in sorted(self.reasons.items()))
        budget = f"/{self.max_tokens}" if self.max_tokens is not None else ""
        return (
            f"kept {self.items_selected} of {self.candidates} in {self.tokens_used}{budget} tokens "
            f"({self.tokenizer_used}, {self.policy})" + (f"; not kept: {why}" if why else "")
        )


class RecallResult:
    """The evidence a caller sees, the report, and the trace of every candidate."""

    def __init__(
        self,
        evidence: Sequence[Evidence],
        shared_scopes: Sequence[Scope],
        report: PackReport,
        trace: Trace,
        *,
        template: TemplateSpec = None,
    ) -> None:
        self.evidence: tuple[Evidence, ...] = tuple(evidence)
        self.shared_scopes: tuple[Scope, ...] = tuple(shared_scopes)
        self.report = report
        self.trace = trace
        self._template = template

    @classmethod
    def from_candidates(
        cls,
        candidates: Sequence[Candidate | Mapping[str, Any]],
        reader: Reader | None = None,
        *,
        tokenizer: TokenizerSpec = None,
        resource_uri_template: str = DEFAULT_RESOURCE_URI_TEMPLATE,
    ) -> RecallResult:
        """Everything readable, in order, with no budget (seed 000's boundary)."""
        from recallpack.packing.budget import build_result

        return build_result(
            candidates,
            max_tokens=None,
            tokenizer=tokenizer,
            reader=reader,
            resource_uri_template=resource_uri_template,
        )

    @property
    def selected_ranks(self) -> tuple[int, ...]:
        """Input positions of the kept candidates, in the order of ``evidence``."""
        return tuple(e.rank for e in self.trace[: self.trace.reached] if e.outcome is Outcome.SELECTED)

    def to_markdown(self, template: TemplateSpec = None) -> str:
        """The evidence block; ``""`` when nothing was kept."""
        chosen = load_template(template if template is not None else self._template)
        return render(
            chosen,
            [e.model_dump() for e in self.evidence],
            [s.model_dump() for s in self.shared_scopes],
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "evidence": [e.model_dump(mode="json") for e in self.evidence],
            "shared_scopes": [s.model_dump(mode="json") for s in self.shared_scopes],
            "report": self.report.model_dump(mode="json"),
        }

    def _repr_markdown_(self) -> str:
        return self.to_markdown() or "*(no evidence)*"

    def __len__(self) -> int:
        return len(self.evidence)

    def __repr__(self) -> str:
        return f"<RecallResult {self.report.summary()}>"
