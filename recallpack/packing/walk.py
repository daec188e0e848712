"""The walk: decide, in the order given, what fits the budget, and make the whole fit.

Candidates arrive in merit order. The walk never reorders: it only decides where to stop (or,
under ``skip``, what to pass over). It counts tokens only for the candidates it reaches, so its
work follows what it keeps, not what it was handed.

A Packer resolves its settings once into a :class:`Plan` (the tokenizer, the view, the walk
settings); each call builds a :class:`Walk` from the plan, and :meth:`Walk.fit` returns the
outcome (:class:`~recallpack.packing.tally.Packed`). What an item costs is what it adds to
what the model is shown, the plan's view (:mod:`recallpack.packing.render`): the Markdown
block, or the kept texts joined, as a LlamaIndex synthesizer shows them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from recallpack.packing.candidate import Candidate, LaneKind, Provenance, coerce_candidate
from recallpack.packing.cuts import cut_focus, cut_head
from recallpack.packing.embedding import EmbedFn
from recallpack.packing.errors import BudgetError, CandidateError, ConfigError, LaneError
from recallpack.packing.limits import ELLIPSIS
from recallpack.packing.render import (
    JoinedTexts,
    LoadedTemplate,
    MarkdownBlock,
    View,
    joined_by,
    newline_join,
)
from recallpack.packing.result import Evidence, Outcome, Reason, RecallResult
from recallpack.packing.scopes import PRIVATE, Scope
from recallpack.packing.tally import CutResult, Ledger, Packed, WalkSettings, log_result, withheld
from recallpack.packing.tokenizers import Tokenizer
from recallpack.packing.validation import check_count

__all__ = ["Plan", "Walk", "Cutter", "candidate_list", "candidate_lists_of", "lane_targets"]

#: ``cutter(text, max_tokens, measure)``: the best cut of ``text`` such that
#: ``measure(cut.text) <= max_tokens`` (``measure`` prices a text as its item renders it), or None.
Cutter = Callable[[str, int, Callable[[str], int]], "CutResult | None"]


#: What stands for a withheld item in a walk, by why it is withheld: nothing of the item itself.
_WITHHELD_REASONS = (Reason.NO_READER, Reason.UNREADABLE, Reason.MALFORMED_SCOPE)
_STAND_INS = {reason: Candidate(text=reason.value) for reason in _WITHHELD_REASONS}
_WITHHELD_BY = {id(stand_in): reason for reason, stand_in in _STAND_INS.items()}


@dataclass(frozen=True)
class Plan:
    """What a Packer's settings resolve to, once: the tokenizer, what the model is shown (the
    view), the embedding for focus cuts, the walk settings. A call reads it once (each read of
    a pydantic private attribute costs about a microsecond, a good part of a small packing)."""

    tok: Tokenizer
    view: View
    embed: EmbedFn | None
    settings: WalkSettings
    cut: str
    #: The walk of the ``passages`` policy (None: another policy). The Packer names it: this
    #: module cannot import the walk that is built on it.
    passages: type[Walk] | None
    #: The fewest tokens that can hold any evidence, and what takes them.
    least_tokens: int
    least_parts: str

    @classmethod
    def make(
        cls, settings: WalkSettings, *, tok: Tokenizer, template: LoadedTemplate | None,
        join: Callable[[Sequence[str]], str] | None, embed: EmbedFn | None, cut: str,
        passages: type[Walk] | None,
    ) -> Plan:
        view: View = MarkdownBlock(tok, template) if join is None else JoinedTexts(tok, join, template)
        least, parts = least_budget(tok, view, settings.max_tokens)
        passages = passages if settings.policy == "passages" else None
        return cls(tok, view, embed, settings, cut, passages, least, parts)

    def recall(self, candidates: object, *, query: str | None, max_tokens: int | None,
               max_items: int | None) -> RecallResult:
        """One recall: the fitted walk's result, logged."""
        result = self.walk(candidate_list(candidates), query=query, max_tokens=max_tokens,
                           max_items=max_items).fit().result()
        log_result(result)
        return result

    def pack(self, candidates: object, *, max_tokens: int, max_items: int | None) -> list[Candidate]:
        """One :func:`~recallpack.pack`: the kept candidates of the fitted walk, logged."""
        packed = self.walk(candidate_list(candidates), query=None, max_tokens=max_tokens,
                           max_items=max_items).fit()
        packed.log_kept()
        return packed.kept_candidates()

    def least_for(self, candidate: object, query: str | None = None) -> int | None:
        """The fewest tokens at which a call given ``candidate`` keeps it, under this plan's policy
        and floor: found by the walk itself, from what its item really renders (the scopes header,
        its label and scopes, its resource line, its first characters and the marks of the cut).
        None when it can never be shown (withheld, blank, not text, or over its lane's budget even
        cut) or the floor is off."""
        probe = self.walk([candidate], query=query, max_tokens=None, max_items=None)
        c = probe._read(0)
        if probe._gate(c) is not None or not self.settings.floor:
            return None
        scopes = probe._scopes(c)
        names, uri = probe._names(scopes), probe._uri(c)
        header = self.view.header(s for s in scopes if s.name != PRIVATE)
        whole = max(self.least_tokens, header + self.view.item(probe, c, names, c.text, uri, None))
        # What is rendered around the mark alone: no budget below it can keep the item.
        bare = header + self.view.item(probe, c, names, ELLIPSIS, uri, None)
        low = min(whole, max(self.least_tokens, bare))
        step, high = 1, low
        while not self._keeps(c, query, high):  # gallop up: the first characters may cost several tokens
            low = high + 1
            if high >= whole:
                return None
            high, step = min(whole, high + step), step * 2
        while low < high:  # then the least that keeps it, between the last miss and the first fit
            middle = (low + high) // 2
            low, high = (low, middle) if self._keeps(c, query, middle) else (middle + 1, high)
        return high

    def _keeps(self, c: Candidate, query: str | None, max_tokens: int) -> bool:
        return bool(self.walk([c], query=query, max_tokens=max_tokens, max_items=None).fit().walk.kept)

    def walk(self, candidates: Sequence[Any], *, query: str | None, max_tokens: int | None,
             max_items: int | None) -> Walk:
        """The walk of one call: these candidates, this query, these bounds."""
        settings = self.settings
        if max_tokens != settings.max_tokens or max_items != settings.max_items:
            settings = dataclasses.replace(settings, max_tokens=max_tokens, max_items=max_items)
        if self.passages is not None and query:
            return self.passages(self, candidates, settings, query)
        if self.passages is None:
            return Walk(self, candidates, settings, query)
        # Without a query, passages has nothing to score: it packs as prefix, and says so.
        walk = Walk(self, candidates, dataclasses.replace(settings, policy="prefix"), query)
        walk.notes = ("policy 'passages' needs the query, and this call had none: it packed as 'prefix'",)
        return walk

    def cutter(self, query: str | None) -> Cutter:
        """How a call cuts an item: by focus on the query when there is one (or ``cut="focus"``),
        else by head."""
        if query is not None and not isinstance(query, str):
            raise ConfigError(f"query={query!r} must be a str or None", field="query")
        if self.cut == "focus" and not query:
            raise ConfigError("cut='focus' needs the query: pass recall(..., query=...) or use cut='auto'")
        tok, embed, language = self.tok, self.embed, self.settings.language
        if self.cut == "head" or not query:
            return lambda text, room, measure: cut_head(text, room, tok, measure=measure)
        return lambda text, room, measure: cut_focus(
            text, query, room, tok, embed=embed, measure=measure, language=language
        )

    def caller_code(self) -> list[str]:
        """The settings that hold code of the caller's (which a forked worker would run)."""
        join = self.view.join if isinstance(self.view, JoinedTexts) else None
        held = (
            ("tokenizer", self.tok.runs_caller_code),
            ("embed", self.embed is not None),
            ("join", join is not None and join is not newline_join),
        )
        return [name for name, runs_callers in held if runs_callers]


class Walk(Ledger):
    """One walk over the candidates, built from a Packer's resolved settings (a :class:`Plan`):
    :meth:`fit` runs it, makes the whole fit with the exact count of what the model is shown,
    and returns the outcome."""

    def __init__(self, plan: Plan, candidates: Sequence[Any], settings: WalkSettings,
                 query: str | None) -> None:
        super().__init__(candidates, settings, plan.view, plan.tok)
        self.query = query
        self.embed = plan.embed
        self.cutter = plan.cutter(query)

    def fit(self) -> Packed:
        """Walk, then count what the model is shown exactly and correct until it fits."""
        self.run()
        max_tokens = self.s.max_tokens
        used, block = self.view.measure(self, max_tokens)
        while self.refit(used, max_tokens):
            used, block = self.view.measure(self, max_tokens)
        if not self.kept and self.dropped_sizes:  # a correction gave back all a choice kept
            self._floor_if_empty()
            if self.kept:
                used, block = self.view.measure(self, max_tokens)
        # Per-item counts are nearly always exact; this makes the bound a guarantee whatever
        # the template or join: the last item is cut shorter or given back until the whole fits.
        while max_tokens is not None and used > max_tokens and self.kept:
            if self.kept[-1].cut is not None:
                self.recut_last(used - max_tokens)  # shorter, or given back when it cannot be
            else:
                self.give_back_last()
            used, block = self.view.measure(self, max_tokens)
        if block is None and self.view.shows_block:
            block = self.view.block(self.evidence(), self.shared_scopes(), max_tokens)
        return Packed(self, used, block)

    def refit(self, used: int, max_tokens: int | None) -> bool:
        """Correct the choice with ``used``, the exact count; True when it changed something (a
        walk that chooses more than a prefix, as ``passages`` does, says so)."""
        return False

    def run(self) -> None:
        for rank in range(len(self.candidates)):
            if not self._step(rank, self._read(rank)):
                break
        self._floor_if_empty()

    def _read(self, rank: int) -> Candidate:
        """Candidate ``rank``, validated; for a withheld one, the stand-in of why. Its scopes are
        read first and alone: a withheld item is never validated, looked at again or named."""
        item = self.candidates[rank]
        reason = withheld(item, self.s.reader)
        return coerce_candidate(item, rank) if reason is None else _STAND_INS[reason]

    def _floor_if_empty(self) -> None:
        """Nothing kept, with the floor on: keep the top readable match, cut to its room; a
        later one only if an earlier cannot be cut at all (its lane has no room), so merit
        order still decides."""
        if not self.kept and self.s.floor:
            for rank in list(self.dropped_sizes):
                if self._floor(rank):
                    break

    def _gate(self, c: Candidate) -> tuple[Reason, Outcome] | None:
        """Why ``c`` (as :meth:`_read` gives it) cannot be shown at all, whatever the room; None
        when it can."""
        reason = _WITHHELD_BY.get(id(c))
        if reason is not None:  # first: nothing else of a withheld item is looked at
            return reason, Outcome.WITHHELD
        if c.modality != "text":
            return Reason.NO_TEXT, Outcome.DROPPED
        if not c.text or c.text.isspace():  # isspace() scans without copying the text
            return Reason.EMPTY, Outcome.DROPPED
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
        header = self.view.header_delta(self, scopes)
        room, lane_room, limit = self._limits(c, header)
        uri, names = self._uri(c), self._names(scopes)
        cost = self.view.item(self, c, names, c.text, uri, limit)
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
        header = self.view.header_delta(self, scopes)
        room, lane_room, limit = self._limits(c, header)
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
            return self.view.item(self, c, names, text, uri, room)

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
        header = self.view.header_delta(self, scopes)
        room = last.cost - excess
        if room > 0 and self._keep_cut(last.rank, c, scopes, header, room, replace=True):
            self.kept[-1].twins = last.twins  # it still stands for the same duplicates
            return True
        self._count_reason(Reason.OVER_BUDGET, 1)
        return False


def least_budget(tok: Tokenizer, view: View, max_tokens: int | None) -> tuple[int, str]:
    """The fewest tokens in which the floor can keep one item, and what takes them: the block's
    fixed parts (header, the longest label, the mark of a cut) around one token of text, or,
    when the model is shown the joined texts, that text, its mark and its separator."""
    cut = (tok.truncate("x" * 16, 1) or "x") + ELLIPSIS  # one token of text, marked as cut
    if isinstance(view, JoinedTexts):
        joined = joined_by(view.join, [cut])
        parts = "one token of text, the mark of a cut and the separator"
        return max(tok.count(cut) + 1, tok.count(joined)), parts
    label = max((p.label for p in Provenance), key=tok.count)
    one = Evidence(provenance=Provenance.SESSION, label=label, text=cut)
    parts = f"the block's header, the label {label!r}, one token of text and the mark of a cut"
    return tok.count(view.block([one], [], max_tokens)), parts


def lane_targets(value: object) -> dict[LaneKind | Provenance, int]:
    """``lane_budgets`` checked, and keyed by what each caps: a lane, or every lane of a provenance."""
    if not isinstance(value, Mapping):
        if value is None:
            return {}
        raise BudgetError(
            f"lane_budgets={value!r:.60} must be a mapping of lane or provenance name to tokens, "
            "such as {'facts': 300}"
        )
    lanes = {lane.value: lane for lane in LaneKind}
    provenances = {p.value: p for p in Provenance}
    budgets: dict[LaneKind | Provenance, int] = {}
    for key, budget in value.items():
        if not isinstance(key, str):
            raise LaneError(f"lane_budgets has key {key!r}; a key is a lane or provenance name (a str)")
        budget = check_count(budget, "lane_budgets", 0, label=f"lane_budgets[{key!r}]")
        name = key.value if isinstance(key, (LaneKind, Provenance)) else key
        target = lanes.get(name) or provenances.get(name)
        if target is None:
            raise LaneError(
                f"lane_budgets has key {key!r}, which is neither a lane ({', '.join(lanes)}) nor a "
                f"provenance ({', '.join(provenances)})"
            )
        budgets[target] = budget
    return budgets


def candidate_list(candidates: object) -> Sequence[Any]:
    """What a walk takes: a list or tuple as is (copying 100,000 references is work the walk
    need not do), any other iterable of candidates as a list."""
    if isinstance(candidates, (list, tuple)):
        return candidates
    textual = isinstance(candidates, (str, bytes, Mapping))
    if candidates is None or textual or not isinstance(candidates, Iterable):
        raise CandidateError(
            f"candidates must be a list (or any iterable) of Candidate objects or mappings, "
            f"got {type(candidates).__name__}"
        )
    return list(candidates)


def candidate_lists_of(value: object) -> list[Sequence[Any]]:
    """What :meth:`~recallpack.Packer.recall_many` takes: each list as :func:`candidate_list` takes it."""
    if value is None or isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise CandidateError(f"candidate_lists must be a list of candidate lists, got {type(value).__name__}")
    return [candidate_list(candidates) for candidates in value]
