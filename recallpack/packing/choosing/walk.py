"""The walk: one call's candidates, in merit order, packed into what fits the budget.

A Packer resolves its settings once into a :class:`Plan` (the tokenizer, the view, the policy,
the walk settings); each call builds a :class:`Walk` from the plan, and :meth:`Walk.fit`
returns the outcome (:class:`Fitted`). The walk hands its policy
(:mod:`recallpack.packing.choosing.policies`) a fresh :class:`~recallpack.packing.choosing.ledger.Ledger`; the
policy decides and records, and the walk counts what the model is shown exactly (the plan's
view, :mod:`recallpack.packing.block.render`: the Markdown block, or the kept texts joined, as a
LlamaIndex synthesizer shows them), lets the policy correct its choice with that count, applies
the floor through the ledger, and makes the whole fit.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import GeneratorType
from typing import Any, cast

from recallpack.packing.block.render import (
    JoinedTexts,
    LoadedTemplate,
    MarkdownBlock,
    View,
    joined_by,
    newline_join,
)
from recallpack.packing.candidate import Candidate, LaneKind, Provenance
from recallpack.packing.choosing.cuts import FocusCutter, cut_head
from recallpack.packing.choosing.door import Door, PolicyView
from recallpack.packing.choosing.embedding import EmbedFn
from recallpack.packing.choosing.ledger import WITHHELD_REASONS, Counted, Cutter, Ledger, WalkSettings
from recallpack.packing.choosing.legacy_ledger import LEGACY
from recallpack.packing.choosing.policies import PackingPolicy, is_built_in, policy_named
from recallpack.packing.errors import BudgetError, CandidateError, ConfigError, LaneError, RecallpackError
from recallpack.packing.limits import ELLIPSIS
from recallpack.packing.reading.analysis import CallReading
from recallpack.packing.results.logs import log_result, logger
from recallpack.packing.results.result import Evidence, PackReport, RecallResult, Trace
from recallpack.packing.scopes import PRIVATE, Reader
from recallpack.packing.tokenizers import Tokenizer
from recallpack.packing.validation import check_count

__all__ = ["Plan", "Walk", "Fitted", "candidate_list", "candidate_lists_of", "lane_targets"]

_WITHHELD_VALUES = frozenset(reason.value for reason in WITHHELD_REASONS)


class _Same(enum.Enum):
    SAME = "the plan's"


#: A per-call value that is the plan's own.
SAME = _Same.SAME
#: What a call without a query packs as, under a policy that needs one.
_WITHOUT_QUERY = "prefix"


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
    #: The policy the settings name, looked up once (:mod:`recallpack.packing.choosing.policies`).
    policy: PackingPolicy
    #: The fewest tokens that can hold any evidence, and what takes them.
    least_tokens: int
    least_parts: str

    @classmethod
    def make(
        cls,
        settings: WalkSettings,
        *,
        tok: Tokenizer,
        template: LoadedTemplate | None,
        join: Callable[[Sequence[str]], str] | None,
        embed: EmbedFn | None,
        cut: str,
    ) -> Plan:
        view: View = MarkdownBlock(tok, template) if join is None else JoinedTexts(tok, join, template)
        least, parts = least_budget(tok, view, settings.max_tokens)
        return cls(tok, view, embed, settings, cut, policy_named(settings.policy), least, parts)

    def recall(
        self, candidates: object, *, query: str | None, max_tokens: int | None, max_items: int | None,
        reader: Reader | None,
    ) -> RecallResult:
        """One recall: the fitted walk's result, logged."""
        walk = self.walk(candidate_list(candidates), query=query, max_tokens=max_tokens, max_items=max_items,
                         reader=reader)
        result = walk.fit().result()
        log_result(result)
        return result

    def pack(self, candidates: object, *, max_tokens: int, max_items: int | None,
             reader: Reader | None | _Same = SAME) -> list[Candidate]:
        """One :func:`~recallpack.pack`: the kept candidates of the fitted walk, logged."""
        packed = self.walk(
            candidate_list(candidates), query=None, max_tokens=max_tokens, max_items=max_items, reader=reader
        ).fit()
        packed.log_kept()
        return packed.kept_candidates()

    def least_for(self, candidate: object, query: str | None = None,
                  reader: Reader | None | _Same = SAME) -> int | None:
        """The fewest tokens at which a call given ``candidate`` keeps it, under this plan's policy
        and floor: found by the walk itself, from what its item really renders (the scopes header,
        its label and scopes, its resource line, its first characters and the marks of the cut).
        None when it can never be shown (withheld, blank, not text, or over its lane's budget even
        cut) or the floor is off."""
        probe = self.walk([candidate], query=query, max_tokens=None, max_items=None, reader=reader)
        ledger = probe.ledger
        c = ledger.read(0)
        if ledger.gate(c) is not None or not self.settings.floor:
            return None
        scopes, names, uri = ledger.look(c)
        header = self.view.header(s for s in scopes if s.name != PRIVATE)
        whole = max(self.least_tokens, header + self.view.item(ledger, c, names, c.text, uri, None))
        # What is rendered around the mark alone: no budget below it can keep the item.
        bare = header + self.view.item(ledger, c, names, ELLIPSIS, uri, None)
        low = min(whole, max(self.least_tokens, bare))
        step, high = 1, low
        # Gallop up: the first characters may cost several tokens.
        while not self._keeps(c, query, high, reader):
            low = high + 1
            if high >= whole:
                return None
            high, step = min(whole, high + step), step * 2
        while low < high:  # then the least that keeps it, between the last miss and the first fit
            middle = (low + high) // 2
            low, high = (low, middle) if self._keeps(c, query, middle, reader) else (middle + 1, high)
        return high

    def _keeps(self, c: Candidate, query: str | None, max_tokens: int, reader: Reader | None | _Same) -> bool:
        walk = self.walk([c], query=query, max_tokens=max_tokens, max_items=None, reader=reader)
        return bool(walk.fit().ledger.kept)

    def walk(
        self, candidates: Sequence[Any], *, query: str | None, max_tokens: int | None, max_items: int | None,
        reader: Reader | None | _Same = SAME,
    ) -> Walk:
        """The walk of one call: these candidates, this query, these bounds, this reader (by
        default the plan's)."""
        settings = self.settings
        if reader is SAME:
            reader = settings.reader
        same_bounds = max_tokens == settings.max_tokens and max_items == settings.max_items
        if not same_bounds or reader is not settings.reader:
            new = dataclasses.replace  # the call's bounds and reader, on the plan's settings
            settings = new(settings, max_tokens=max_tokens, max_items=max_items, reader=reader)
        policy = self.policy
        if policy.needs_query and not query:
            # Without a query such a policy has nothing to score: it packs as prefix, and says so.
            note = (
                f"policy {settings.policy!r} needs the query, and this call had none: "
                f"it packed as {_WITHOUT_QUERY!r}"
            )
            settings = dataclasses.replace(settings, policy=_WITHOUT_QUERY)
            return Walk(self, candidates, settings, query, policy_named(_WITHOUT_QUERY), (note,))
        return Walk(self, candidates, settings, query, policy)

    def cutter(self, query: str | None, reading: CallReading | None = None) -> Cutter:
        """How a call cuts an item: by focus on the query when there is one (or ``cut="focus"``),
        else by head; the focus reads the text as the call's ``reading`` does."""
        if query is not None and not isinstance(query, str):
            raise ConfigError(f"query={query!r} must be a str or None", field="query")
        if self.cut == "focus" and not query:
            raise ConfigError(
                "cut='focus' needs the query: pass recall(..., query=...) or use cut='auto'", field="cut"
            )
        tok, embed = self.tok, self.embed
        # Partials of the cuts themselves, handed down: the ledger calls the cut, not back here.
        if self.cut == "head" or not query:
            return functools.partial(cut_head, tokenizer=tok)
        reading = reading or CallReading(self.settings.language, query)
        return FocusCutter(query, tok, embed, reading)

    def caller_code(self) -> list[str]:
        """The settings that hold code of the caller's (which a forked worker would run)."""
        join = self.view.join if isinstance(self.view, JoinedTexts) else None
        held = (
            ("tokenizer", self.tok.runs_caller_code),
            ("embed", self.embed is not None),
            ("join", join is not None and join is not newline_join),
        )
        return [name for name, runs_callers in held if runs_callers]


class Walk:
    """One call's walk: its policy chooses into a fresh ledger; :meth:`fit` runs it, makes the
    whole fit with the exact count of what the model is shown, and returns the outcome."""

    def __init__(
        self,
        plan: Plan,
        candidates: Sequence[Any],
        settings: WalkSettings,
        query: str | None,
        policy: PackingPolicy,
        notes: tuple[str, ...] = (),
    ) -> None:
        # One reading of the query and the texts for the whole call: every cut and every score.
        reading = CallReading(settings.language, query) if query else None
        cutter = plan.cutter(query, reading)
        self.ledger = Ledger(candidates, settings, plan.view, plan.tok, cutter=cutter, reading=reading)
        for note in notes:
            self.ledger.note(note)
        self.query = query
        self.embed = plan.embed
        self.policy = policy

    def fit(self) -> Fitted:
        """Let the policy choose, then count what the model is shown exactly and correct until it fits."""
        ledger, view = self.ledger, self.ledger.view
        # recallpack's own policies apply their decisions through the ledger's door as they make
        # them, and record what the view priced, so their costs add up to the exact count; a
        # registered one's decisions are applied here, and its block is counted again.
        recount = not is_built_in(self.policy)
        counted = run_policy(self.policy, ledger, self.query, self.embed, recount)
        max_tokens = ledger.settings.max_tokens
        if counted is None or recount:
            used, block = view.measure(ledger, max_tokens, recount)
        else:
            used, block = counted
        if not ledger.kept and ledger.dropped_sizes:  # a correction gave back all a choice kept
            ledger.floor_if_empty()
            if ledger.kept:
                used, block = view.measure(ledger, max_tokens, recount)
        # Per-item counts are nearly always exact; this makes the bound a guarantee whatever
        # the template or join: the last item is cut shorter or given back until the whole fits.
        while max_tokens is not None and used > max_tokens and ledger.kept:
            if ledger.kept[-1].cut is not None:
                ledger.recut_last(used - max_tokens)  # shorter, or given back when it cannot be
            else:
                ledger.give_back_last()
            used, block = view.measure(ledger, max_tokens, recount)
        if block is None and view.shows_block:
            block = view.kept_block(ledger, max_tokens)
        return Fitted(ledger, used, block)


#: At most this many correction rounds of a registered policy's ``refine``.
REFINE_ROUNDS = 8


def run_policy(policy: PackingPolicy, ledger: Ledger, query: str | None, embed: EmbedFn | None,
               registered: bool) -> Counted | None:
    """Run ``policy`` on a read-only view of ``ledger``: each decision it yields or returns is
    applied through the ledger's door, in order, until it ends the walk; then every candidate is
    decided or the walk ended (:meth:`.Door.finish`). A registered policy
    with ``refine(view, used)`` is then shown the exact count of its choice, and may choose again
    (a few rounds at most). What a registered policy raises that is not a RecallpackError is a
    PolicyError naming it."""
    door = Door(ledger)
    view = PolicyView(door, LEGACY)
    try:
        made = policy.choose(view, query, embed)
        if not registered and isinstance(made, tuple):  # passages: decided, corrected and counted
            door.finish()
            return made
        # None: nothing yielded (an old policy recorded through the view, warned). A count and
        # block: an old policy's, which is counted again anyway.
        old_count = isinstance(made, tuple) and len(made) == 2 and type(made[0]) is int
        if made is not None and not old_count:
            apply_all(door, made)
        door.finish()
        if not registered:  # the walk applies the floor after a registered one's count
            ledger.floor_if_empty()
        refine = getattr(policy, "refine", None)
        for _ in range(REFINE_ROUNDS if callable(refine) else 0):
            used, _block = ledger.view.measure(ledger, ledger.settings.max_tokens, True)
            again = refine(view, used)  # type: ignore[misc]
            if again is None:
                break
            ledger.reset()  # a new choice, decided and checked as the first was
            apply_all(door, again)
            door.finish()
    except (RecallpackError, Warning):  # a warning raised as an error (-W error) stays one
        raise
    except Exception as exc:  # a registered policy's own code: said as the policy's, not ours
        if not registered:
            raise
        raise door.broken("its own code", f"choose raised {type(exc).__name__}") from exc
    return None


def apply_all(door: Door, decisions: object) -> None:
    """Each of ``decisions`` (an iterable of them) applied, until the walk ends."""
    if type(decisions) is not GeneratorType and (
        isinstance(decisions, (str, bytes, Mapping)) or not isinstance(decisions, Iterable)
    ):
        said = f"choose returned {type(decisions).__name__}: yield decisions, return a list of them, or None"
        raise door.broken("decision", said)
    iterator = iter(cast(Iterable[object], decisions))
    apply, ledger = door.apply, door.ledger
    try:
        for decision in iterator:
            apply(decision)
            if ledger.tail_reason is not None:
                break
    finally:
        close = getattr(iterator, "close", None)
        if callable(close):  # a generator stopped early runs its own cleanup now
            close()


@dataclass(frozen=True)
class Fitted:
    """What a walk returns once it fits: its ledger, the exact count of what the model is shown, and
    the block it counted (None when the model is shown the joined texts)."""

    ledger: Ledger
    tokens_used: int
    block: str | None

    def kept_candidates(self) -> list[Candidate]:
        """The kept candidates themselves (a cut one with its cut text), in order: no evidence,
        trace entries or report are made for them."""
        return [
            k.candidate if k.cut is None else k.candidate.model_copy(update={"text": k.text})
            for k in self.ledger.kept
        ]

    def log_kept(self) -> None:
        """The DEBUG record of a :func:`~recallpack.pack`: what it kept of how many."""
        if logger.isEnabledFor(logging.DEBUG):
            kept, reached, listed = (
                len(self.ledger.kept),
                len(self.ledger.entries),
                len(self.ledger.candidates),
            )
            logger.debug("pack: kept %d of %d candidates (%d reached)", kept, listed, reached)

    def result(self) -> RecallResult:
        """The RecallResult: the evidence, its report and trace, and the block."""
        w = self.ledger
        reasons = dict(w.reasons)
        tail = len(w.candidates) - len(w.entries)
        if tail and w.tail_reason is not None:  # Ledger.finish: a tail has its reason
            reasons[w.tail_reason.value] = reasons.get(w.tail_reason.value, 0) + tail
        withheld = sum(count for reason, count in reasons.items() if reason in _WITHHELD_VALUES)
        cut_kinds = [k.cut.kind for k in w.kept if k.cut is not None]
        report = PackReport(
            max_tokens=w.settings.max_tokens,
            tokens_used=self.tokens_used,
            candidates=len(w.candidates),
            items_selected=len(w.kept),
            items_dropped=len(w.candidates) - len(w.kept) - withheld,
            items_withheld=withheld,
            tokenizer_used=w.tok.name,
            policy=w.settings.policy,
            truncated=bool(cut_kinds),
            items_cut=len(cut_kinds),
            reasons=reasons,
            floor_applied=w.floor_applied and bool(w.kept),
            cut=cut_kinds[0] if cut_kinds else None,
            largest_dropped_chars=max(w.dropped_sizes.values(), default=0),
            notes=w.notes,
            floor_failed=w.settings.floor and not w.kept and bool(w.dropped_sizes),
        )
        evidence, scopes = w.evidence(), w.shared_scopes()
        # With a join the model is shown the joined texts; the block is rendered only if someone
        # asks, from the kept evidence alone (the partial holds no candidate of the caller's).
        view, max_tokens = w.view, w.settings.max_tokens
        markdown: str | Callable[[], str] = (
            functools.partial(view.block, evidence, scopes, max_tokens) if self.block is None else self.block
        )
        return RecallResult(
            evidence,
            scopes,
            report,
            Trace(w.entries, len(w.candidates), w.tail_reason),
            markdown=markdown,
            selected_ranks=[k.rank for k in w.kept],
        )


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
