"""The walk: cut candidates, in the order given, at the budget (seed 000), and account for all.

Candidates arrive in merit order. The walk never reorders: it only decides where to stop.
It counts tokens only for the candidates it reaches, so its work follows what it keeps.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import quote

from recallpack.packing.candidate import Candidate, Provenance, coerce_candidate
from recallpack.packing.errors import BudgetError, LaneError
from recallpack.packing.limits import (
    DEFAULT_MAX_TOKENS,
    ELLIPSIS,
    MAX_TOKENS_CEILING,
    POLICIES,
    Allowance,
    Policy,
    Remaining,
    as_remaining,
    check_max_items,
    check_max_tokens,
    check_policy,
)
from recallpack.packing.render import (
    TemplateSpec,
    header_text,
    item_text,
    load_template,
    render,
)
from recallpack.packing.result import (
    DEFAULT_RESOURCE_URI_TEMPLATE,
    PRIVATE,
    Evidence,
    Outcome,
    PackReport,
    Reader,
    Reason,
    RecallResult,
    Scope,
    Trace,
    TraceEntry,
)
from recallpack.packing.tokenizer import Tokenizer, TokenizerSpec, get_tokenizer

__all__ = [
    "pack",
    "recall",
    "recall_joined",
    "build_result",
    "Policy",
    "POLICIES",
    "DEFAULT_MAX_TOKENS",
    "MAX_TOKENS_CEILING",
    "check_max_tokens",
    "check_max_items",
    "check_policy",
    "check_lane_budgets",
]

_PRECHECK_CHARS = 65_536


def check_lane_budgets(value: Mapping[Any, int] | None) -> dict[Provenance, int]:
    if not value:
        return {}
    budgets: dict[Provenance, int] = {}
    for key, budget in value.items():
        try:
            provenance = Provenance(key.value if isinstance(key, Provenance) else str(key))
        except ValueError:
            known = ", ".join(p.value for p in Provenance)
            raise LaneError(
                f"lane_budgets has key {key!r}, which is not a provenance; use one of: {known}"
            ) from None
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < 0:
            raise BudgetError(f"lane_budgets[{key!r}]={budget!r} must be an int of at least 0")
        budgets[provenance] = budget
    return budgets


def pack(
    candidates: Iterable[Candidate | Mapping[str, Any]],
    max_tokens: int = DEFAULT_MAX_TOKENS,
    *,
    tokenizer: TokenizerSpec = None,
    policy: Policy = "prefix",
    max_items: int | None = None,
    max_tokens_ceiling: int = MAX_TOKENS_CEILING,
) -> list[Candidate]:
    """The longest run of ``candidates`` (in order) whose tokens, plus one newline each, fit.

    >>> texts = ["a" * 2448, "b" * 1720, "c" * 3520, "d" * 760, "e" * 160]  # 612/430/880/190/40
    >>> [c.text[0] for c in pack([Candidate(text=t) for t in texts], 2048, tokenizer="chars")]
    ['a', 'b', 'c']
    """
    walk = _Walk(
        candidates,
        max_tokens=check_max_tokens(max_tokens, max_tokens_ceiling),
        max_items=check_max_items(max_items),
        policy=check_policy(policy),
        tokenizer=get_tokenizer(tokenizer),
        reader=None,
        lane_budgets={},
        dedupe=False,
        rendered=False,
        resource_uri_template=DEFAULT_RESOURCE_URI_TEMPLATE,
    )
    walk.run()
    return [kept.candidate for kept in walk.kept]


def recall(
    candidates: Iterable[Candidate | Mapping[str, Any]],
    *,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    max_items: int | None = None,
    policy: Policy = "prefix",
    tokenizer: TokenizerSpec = None,
    reader: Reader | None = None,
    lane_budgets: Mapping[Provenance | str, int] | None = None,
    dedupe: bool = True,
    template: TemplateSpec = None,
    resource_uri_template: str = DEFAULT_RESOURCE_URI_TEMPLATE,
    max_tokens_ceiling: int = MAX_TOKENS_CEILING,
    allowance: Allowance | Remaining | None = None,
) -> RecallResult:
    """Pack ``candidates`` into evidence whose rendered block fits ``max_tokens``.

    The budget covers the rendered Markdown, header and labels included, counted with the same
    tokenizer; ``lane_budgets`` caps tokens per provenance (a full provenance takes no more);
    ``dedupe`` drops a candidate whose text and scopes equal a kept one. ``allowance`` (an
    Allowance, or the Remaining an assembly left) caps the block further, so automatic recall
    takes only what the request's shared evidence allowance has left.

    >>> result = recall([Candidate(text="Alice works at Initech.")], max_tokens=64)
    >>> result.report.items_selected, result.report.tokens_used <= 64
    (1, True)
    """
    return build_result(
        candidates,
        max_tokens=check_max_tokens(max_tokens, max_tokens_ceiling),
        max_items=max_items,
        policy=policy,
        tokenizer=tokenizer,
        reader=reader,
        lane_budgets=lane_budgets,
        dedupe=dedupe,
        template=template,
        resource_uri_template=resource_uri_template,
        allowance=allowance,
    )


def build_result(
    candidates: Iterable[Candidate | Mapping[str, Any]],
    *,
    max_tokens: int | None,
    max_items: int | None = None,
    policy: Policy = "prefix",
    tokenizer: TokenizerSpec = None,
    reader: Reader | None = None,
    lane_budgets: Mapping[Provenance | str, int] | None = None,
    dedupe: bool = True,
    template: TemplateSpec = None,
    resource_uri_template: str = DEFAULT_RESOURCE_URI_TEMPLATE,
    allowance: Allowance | Remaining | None = None,
    join: Callable[[Sequence[str]], str] | None = None,
) -> RecallResult:
    """recall() after its budget is validated; ``max_tokens=None`` keeps everything readable.

    With ``join``, the budget covers ``join(kept texts)`` instead of the Markdown block.
    """
    compiled = load_template(template)  # a missing template fails before any work
    if reader is not None and not isinstance(reader, Reader):
        raise BudgetError(f"reader={reader!r} must be a recallpack.Reader or None")
    tok = get_tokenizer(tokenizer)
    items_cap = check_max_items(max_items)
    if allowance is not None:
        # Both bounds hold at once. What is left may be zero, which no caller may pass as its
        # own budget, so it goes to the walk directly: nothing fits and each drop says why.
        left = as_remaining(allowance)
        max_tokens = left.tokens if max_tokens is None else min(max_tokens, left.tokens)
        items_cap = left.items if items_cap is None else min(items_cap, left.items)
    walk = _Walk(
        candidates,
        max_tokens=max_tokens,
        max_items=items_cap,
        policy=check_policy(policy),
        tokenizer=tok,
        reader=reader,
        lane_budgets=check_lane_budgets(lane_budgets),
        dedupe=dedupe,
        rendered=join is None,
        resource_uri_template=resource_uri_template,
    )
    walk.run()

    def measure() -> int:
        evidence = walk.evidence()
        if not evidence:
            return 0
        if join is not None:
            return tok.count(join([e.text for e in evidence]))
        if template is None and tok.splits_at_line_starts:
            # The default block is header + items joined by newlines, split only at line starts,
            # so the walk's own counts add up to the block's exactly: only the last item, which
            # has no newline after it, is counted again.
            return walk.header_cost + sum(k.cost for k in walk.kept[:-1]) + tok.count(walk.item_of(-1))
        scopes = [s.model_dump() for s in walk.shared_scopes()]
        return tok.count(render(compiled, [e.model_dump() for e in evidence], scopes))

    used = measure()
    # The per-item counts are nearly always exact or high; this makes the bound a guarantee,
    # whatever the template or join, by giving back the last items until the whole fits.
    while max_tokens is not None and used > max_tokens and walk.kept:
        walk.give_back_last()
        used = measure()
    return walk.result(walk.evidence(), walk.shared_scopes(), used, template=template)


def recall_joined(
    candidates: Iterable[Candidate | Mapping[str, Any]],
    *,
    join: Callable[[Sequence[str]], str] = "\n".join,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    max_items: int | None = None,
    policy: Policy = "prefix",
    tokenizer: TokenizerSpec = None,
    reader: Reader | None = None,
    lane_budgets: Mapping[Provenance | str, int] | None = None,
    dedupe: bool = True,
    resource_uri_template: str = DEFAULT_RESOURCE_URI_TEMPLATE,
    max_tokens_ceiling: int = MAX_TOKENS_CEILING,
) -> RecallResult:
    """recall() for hosts that show the model the kept texts themselves, joined, not the block.

    Each candidate costs its tokens plus one for its separator (seed 000's walk); then
    ``join(kept texts)`` (what the host will actually send, such as LlamaIndex's synthesizer
    context) is counted whole and the last items are given back until it fits ``max_tokens``.
    The result's ``to_markdown()`` still renders, but that block is not what was budgeted.

    >>> result = recall_joined([Candidate(text="one"), Candidate(text="two")], join=" | ".join, max_tokens=3)
    >>> [e.text for e in result.evidence], result.report.tokens_used
    (['one'], 1)
    """
    return build_result(
        candidates,
        max_tokens=check_max_tokens(max_tokens, max_tokens_ceiling),
        max_items=max_items,
        policy=policy,
        tokenizer=tokenizer,
        reader=reader,
        lane_budgets=lane_budgets,
        dedupe=dedupe,
        resource_uri_template=resource_uri_template,
        join=join,
    )


class _Kept:
    __slots__ = ("rank", "candidate", "evidence", "cost", "scopes")

    def __init__(
        self, rank: int, candidate: Candidate, evidence: Evidence, cost: int, scopes: tuple[Scope, ...]
    ) -> None:
        self.rank = rank
        self.candidate = candidate
        self.evidence = evidence
        self.cost = cost
        self.scopes = scopes


class _Walk:
    """One walk over the candidates. ``rendered`` walks cost each item as the default template
    renders it (header included); otherwise each costs its tokens plus one newline (seed 000)."""

    def __init__(
        self,
        candidates: Iterable[Candidate | Mapping[str, Any]],
        *,
        max_tokens: int | None,
        max_items: int | None,
        policy: Policy,
        tokenizer: Tokenizer,
        reader: Reader | None,
        lane_budgets: dict[Provenance, int],
        dedupe: bool,
        rendered: bool,
        resource_uri_template: str,
    ) -> None:
        # A list or tuple is used as is: copying 100,000 references is work the walk need not do.
        self.candidates: Sequence[Any] = (
            candidates if isinstance(candidates, Sequence) else list(candidates)
        )
        self.max_tokens = max_tokens
        self.max_items = max_items
        self.policy = policy
        self.tok = tokenizer
        self.reader = reader
        self.lane_budgets = lane_budgets
        self.dedupe = dedupe
        self.rendered = rendered
        self.uri_template = resource_uri_template
        self.kept: list[_Kept] = []
        self.entries: list[TraceEntry] = []
        self.tail_reason: Reason | None = None
        self.used = 0
        self.header_cost = 0
        self.lane_used: dict[Provenance, int] = {}
        self.full: set[Provenance] = set()
        self.seen: set[tuple[str, tuple[str, ...]]] = set()
        self.longest_kept = 0
        self.scope_order: dict[str, Scope] = {}
        self.truncated = False

    # -- the walk -------------------------------------------------------------------------------

    def run(self) -> None:
        for rank in range(len(self.candidates)):
            if not self._step(rank, coerce_candidate(self.candidates[rank], rank)):
                return

    def _step(self, rank: int, c: Candidate) -> bool:
        """Decide candidate ``rank``; False ends the walk (everything after it is the tail)."""
        if c.modality != "text":
            return self._drop(rank, c, Reason.NO_TEXT)
        if not c.text.strip():
            return self._drop(rank, c, Reason.EMPTY)
        if self.reader is not None and not self.reader.can_read(c.scope_ids):
            return self._drop(rank, c, Reason.UNREADABLE, Outcome.WITHHELD)
        # A text longer than every kept one cannot equal one, and need not be hashed.
        key = (c.text, c.scope_ids)
        if self.dedupe and len(c.text) <= self.longest_kept and key in self.seen:
            return self._drop(rank, c, Reason.DUPLICATE)
        provenance = c.provenance
        if provenance in self.full:
            return self._drop(rank, c, Reason.OVER_LANE_BUDGET)
        if self.max_items is not None and len(self.kept) >= self.max_items:
            return self._end(rank, c, Reason.OVER_ITEM_CAP)

        if self.reader is not None:
            scopes = self.reader.resolve(c.scope_ids)
        else:
            scopes = tuple(Scope(name=s) for s in c.scope_ids)
        header_delta = self._header_delta(scopes)
        room = None if self.max_tokens is None else self.max_tokens - self.used - header_delta
        lane_room = None
        if provenance in self.lane_budgets:
            lane_room = self.lane_budgets[provenance] - self.lane_used.get(provenance, 0)
        limit = room if lane_room is None else (lane_room if room is None else min(room, lane_room))

        cost = self._cost(c, scopes, c.text, limit)
        fits_global = room is None or cost <= room
        if fits_global and (lane_room is None or cost <= lane_room):
            self._keep(rank, c, scopes, c.text, cost, header_delta)
            return True
        if fits_global:  # only the provenance's own budget is full; the others go on
            self.full.add(provenance)
            return self._drop(rank, c, Reason.OVER_LANE_BUDGET, tokens=cost)
        assert room is not None
        if self.policy == "skip":
            self._drop(rank, c, Reason.OVER_BUDGET, tokens=cost)
            if room > 0:
                return True
            self.tail_reason = Reason.OVER_BUDGET  # nothing more can fit: stop looking
            return False
        # A cut is made to the global room only; an item its own lane cannot hold is not cut.
        if self.policy == "truncate" and room > 0 and (lane_room is None or lane_room >= room):
            cut, cut_cost = self._truncate(c, scopes, room)
            if cut is not None:
                self.truncated = True
                self._keep(rank, c, scopes, cut, cut_cost, header_delta, truncated=True)
                self.tail_reason = Reason.OVER_BUDGET
                return False
        return self._end(rank, c, Reason.OVER_BUDGET, tokens=cost)

    def _cost(self, c: Candidate, scopes: tuple[Scope, ...], text: str, limit: int | None) -> int:
        """What ``text`` adds, exactly when it is at most ``limit``; past it, any larger number.

        A rendered item is counted as the default template renders it (label line, indented
        lines, resource line); build_result then verifies the whole block, whatever template.
        """
        if limit is None:
            limit = 1 << 62
        if not self.rendered:
            return self.tok.count_upto(text, limit) + 1
        # A text far longer than the room is rejected on its own, before it is indented
        # (copied): that keeps a huge text's cost bounded by the room, not by its length.
        if len(text) > _PRECHECK_CHARS and self.tok.count_upto(text, limit) > limit:
            return limit + 1
        # The newline that joins it to the next item is part of its cost (seed 000's +1).
        chunk = item_text(c.provenance.label, [s.name for s in scopes], text, self._uri(c)) + "\n"
        return self.tok.count_upto(chunk, limit)

    def _truncate(self, c: Candidate, scopes: tuple[Scope, ...], room: int) -> tuple[str | None, int]:
        """Cut ``c``'s text so its rendered item, ending in "…", fits ``room``."""
        overhead = self._cost(c, scopes, ELLIPSIS, None) if self.rendered else 2
        target = room - overhead
        while target > 0:
            cut = self.tok.truncate(c.text, target).rstrip()
            if not cut:
                return None, 0
            text = cut + ELLIPSIS
            cost = self._cost(c, scopes, text, room)
            if cost <= room:
                return text, cost
            target -= max(1, cost - room)
        return None, 0

    def _header_delta(self, scopes: tuple[Scope, ...]) -> int:
        if not self.rendered:
            return 0
        new: dict[str, Scope] = {}
        for scope in scopes:
            if scope.name != PRIVATE and scope.name not in self.scope_order:
                new.setdefault(scope.name, scope)
        if self.kept and not new:
            return 0
        return self._header_cost([*self.scope_order.values(), *new.values()]) - self.header_cost

    def _header_cost(self, scopes: Sequence[Scope]) -> int:
        return self.tok.count(header_text([(s.name, s.description) for s in scopes]))

    def _keep(
        self,
        rank: int,
        c: Candidate,
        scopes: tuple[Scope, ...],
        text: str,
        cost: int,
        header_delta: int,
        truncated: bool = False,
    ) -> None:
        evidence = Evidence(
            provenance=c.provenance,
            label=c.provenance.label,
            text=text,
            scopes=tuple(s.name for s in scopes),
            resource_uri=self._uri(c),
            token_count=cost,
            truncated=truncated,
        )
        for scope in scopes:
            if scope.name != PRIVATE:
                self.scope_order.setdefault(scope.name, scope)
        self.header_cost += header_delta
        kept = c if text == c.text else c.model_copy(update={"text": text})
        self.kept.append(_Kept(rank, kept, evidence, cost, scopes))
        self.used += cost + header_delta
        self.lane_used[c.provenance] = self.lane_used.get(c.provenance, 0) + cost
        if self.dedupe:
            self.seen.add((c.text, c.scope_ids))
            self.longest_kept = max(self.longest_kept, len(c.text))
        self._record(rank, c, Outcome.SELECTED, None, cost, truncated=truncated)

    def _drop(
        self,
        rank: int,
        c: Candidate,
        reason: Reason,
        outcome: Outcome = Outcome.DROPPED,
        tokens: int | None = None,
    ) -> bool:
        self._record(rank, c, outcome, reason, tokens)
        return True

    def _end(self, rank: int, c: Candidate, reason: Reason, tokens: int | None = None) -> bool:
        self._record(rank, c, Outcome.DROPPED, reason, tokens)
        self.tail_reason = reason
        return False

    def _record(
        self,
        rank: int,
        c: Candidate,
        outcome: Outcome,
        reason: Reason | None,
        tokens: int | None,
        *,
        truncated: bool = False,
    ) -> None:
        self.entries.append(
            TraceEntry(
                rank=rank,
                outcome=outcome,
                reason=reason,
                lane=c.lane.value,
                score=c.score,
                tokens=tokens,
                truncated=truncated,
            )
        )

    def _uri(self, c: Candidate) -> str | None:
        if not (c.artifact_id and c.artifact_content_id):
            return None
        return self.uri_template.format(
            artifact_id=quote(c.artifact_id, safe=""),
            artifact_content_id=quote(c.artifact_content_id, safe=""),
        )

    # -- after the walk -------------------------------------------------------------------------

    def give_back_last(self) -> None:
        """Drop the last kept item (over budget) after the rendered block came out too long."""
        last = self.kept.pop()
        entry = self.entries[last.rank]
        self.entries[last.rank] = entry.model_copy(
            update={"outcome": Outcome.DROPPED, "reason": Reason.OVER_BUDGET, "truncated": False}
        )
        self.scope_order = {}
        for kept in self.kept:
            for scope in kept.scopes:
                if scope.name != PRIVATE:
                    self.scope_order.setdefault(scope.name, scope)
        self.truncated = any(k.evidence.truncated for k in self.kept)
        self.used -= last.cost
        if self.rendered:
            header = self._header_cost(list(self.scope_order.values())) if self.kept else 0
            self.used += header - self.header_cost
            self.header_cost = header

    def item_of(self, index: int) -> str:
        """Kept item ``index`` as the default template renders it."""
        evidence = self.kept[index].evidence
        return item_text(evidence.label, evidence.scopes, evidence.text, evidence.resource_uri)

    def evidence(self) -> list[Evidence]:
        return [k.evidence for k in self.kept]

    def shared_scopes(self) -> list[Scope]:
        return list(self.scope_order.values())

    def result(
        self, evidence: list[Evidence], scopes: list[Scope], used: int, *, template: TemplateSpec
    ) -> RecallResult:
        reasons: dict[str, int] = {}
        withheld = 0
        for entry in self.entries:
            if entry.reason is not None:
                reasons[entry.reason.value] = reasons.get(entry.reason.value, 0) + 1
                withheld += entry.outcome is Outcome.WITHHELD
        tail = len(self.candidates) - len(self.entries)
        if tail:
            assert self.tail_reason is not None
            reasons[self.tail_reason.value] = reasons.get(self.tail_reason.value, 0) + tail
        selected = len(self.kept)
        report = PackReport(
            max_tokens=self.max_tokens,
            tokens_used=used,
            candidates=len(self.candidates),
            items_selected=selected,
            items_dropped=len(self.candidates) - selected - withheld,
            items_withheld=withheld,
            tokenizer_used=self.tok.name,
            policy=self.policy,
            truncated=self.truncated,
            reasons=reasons,
        )
        trace = Trace(self.entries, self.candidates, self.tail_reason)
        return RecallResult(evidence, scopes, report, trace, template=template)
