"""The Packer: every packing setting, validated once, with its tokenizer and template resolved.

Adapters and the module-level :func:`recall` / :func:`pack` all go through a Packer, so a
setting is defined here once and every host takes it by the same name.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import functools
import logging
import os
import string
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    StrictStr,
    ValidationError,
    field_validator,
    model_validator,
)

from recallpack.allowance.budget import Allowance, Remaining, as_remaining
from recallpack.packing import batch, validation
from recallpack.packing.candidate import Candidate, LaneKind, Provenance
from recallpack.packing.cuts import EmbedFn, cut_focus, cut_head
from recallpack.packing.embedding import CALLER_LOOP, embed_function
from recallpack.packing.errors import (
    BudgetError,
    CandidateError,
    ConfigError,
    LaneError,
    RecallpackError,
    TemplateError,
    moved_names,
)
from recallpack.packing.limits import DEFAULT_MAX_TOKENS, ELLIPSIS, MAX_TOKENS_CEILING, Policy
from recallpack.packing.passages import PassagesWalk
from recallpack.packing.render import (
    OUTPUT_CHARS_PER_TOKEN,
    OUTPUT_SLACK_CHARS,
    LoadedTemplate,
    load_template,
    render,
)
from recallpack.packing.result import (
    DEFAULT_RESOURCE_URI_TEMPLATE,
    Evidence,
    PackReport,
    Reason,
    RecallResult,
    Trace,
)
from recallpack.packing.scopes import Reader, Scope
from recallpack.packing.tokenizers import Tokenizer, get_tokenizer
from recallpack.packing.validation import CheckedModel, check_max_tokens, check_policy
from recallpack.packing.walk import (
    BlockCost,
    CostModel,
    Cutter,
    JoinedCost,
    Walk,
    WalkSettings,
    default_block,
    joined_by,
    newline_join,
)

__all__ = [
    "Packer",
    "PackerSettings",
    "recall",
    "pack",
    "recall_many",
    "CutMode",
    "DEFAULT_CITATION_KEYS",
]

CutMode = Literal["auto", "head", "focus"]
#: Metadata keys a citation is read from, in order: LangChain loaders record ``source`` (a path
#: or URL); LlamaIndex readers record ``file_path``, ``url`` and ``file_name``.
DEFAULT_CITATION_KEYS: tuple[str, ...] = ("source", "file_path", "url", "file_name")
#: Where recallpack logs: one DEBUG record per packing, a WARNING only for what the caller
#: should act on. recallpack/__init__.py gives it a NullHandler and nothing else.
logger = logging.getLogger("recallpack")
_WITHHELD = frozenset({Reason.UNREADABLE.value, Reason.NO_READER.value, Reason.MALFORMED_SCOPE.value})
def _one_or_many(value: object) -> object:
    if isinstance(value, str):
        return (value,)  # one key needs no tuple around it
    return tuple(value) if isinstance(value, list) else value


def _checked_lane_budgets(value: object) -> object:
    """Each budget an int as given: pydantic's lax ints would read True as 1 and "5" as 5."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise BudgetError(
            f"lane_budgets={value!r:.60} must be a mapping of lane or provenance name to tokens, "
            "such as {'facts': 300}"
        )
    for key, budget in value.items():
        if not isinstance(key, str):
            raise LaneError(f"lane_budgets has key {key!r}; a key is a lane or provenance name (a str)")
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < 0:
            raise BudgetError(f"lane_budgets[{key!r}]={budget!r} must be an int of at least 0")
    return value


class PackerSettings(CheckedModel):
    """Every packing setting a host takes by name, declared once: :class:`Packer` adds ``join``
    (what the model is shown, which each host decides), and the adapter components inherit these
    same fields, so a type checker sees one signature everywhere."""

    model_config = ConfigDict(arbitrary_types_allowed=True, use_attribute_docstrings=True)

    max_tokens: int = Field(default=DEFAULT_MAX_TOKENS, strict=True, ge=1)
    """The token budget for what the model is shown: the whole rendered block by default."""
    max_items: int | None = Field(default=None, strict=True, ge=1)
    """At most this many items, whatever room the budget leaves (None: no cap)."""
    policy: Policy = "prefix"
    """An item that does not fit: ``prefix`` ends the walk, ``skip`` passes over it,
    ``truncate`` cuts it to the room left and ends the walk. ``passages`` (with a query) spends
    the budget on the passages that best answer it, across every item."""
    floor: bool = Field(default=True, strict=True)
    """A match is never answered with nothing: if nothing fits whole, the top readable match is
    kept, cut to the room. False gives the strict prefix."""
    cut: CutMode = "auto"
    """How an item is cut: ``head`` keeps its start, ``focus`` the passages that match the
    query; ``auto`` is focus when the call gives a query, head otherwise."""
    embed: Any = None
    """For focus cuts: a LangChain Embeddings, a LlamaIndex embedding or a callable, used to
    score the passages of the one item being cut (None: lexical scoring)."""
    tokenizer: Any = None
    """An encoding or model name, ``"chars"``, a Tokenizer, a ``str -> int`` (None: cl100k_base)."""
    reader: Reader | None = None
    """Who reads: items in scopes they do not hold are withheld. With no reader, items that carry
    scopes are withheld too, unless this is ``Reader.everyone()``."""
    lane_budgets: Annotated[Mapping[str, int] | None, BeforeValidator(_checked_lane_budgets)] = None
    """Tokens per lane (``"facts"``) or per provenance (``"derived"``: all its lanes)."""
    dedupe: bool = Field(default=True, strict=True)
    """Drop an item whose text and scopes equal a kept one's."""
    template: str | Path | None = None
    """Template source (a str) or a template file (a Path); None: the default block."""
    resource_uri_template: str = Field(default=DEFAULT_RESOURCE_URI_TEMPLATE, strict=True)
    """The resource line for items with ``artifact_id`` and ``artifact_content_id``."""
    citation_keys: Annotated[tuple[StrictStr, ...], BeforeValidator(_one_or_many)] = DEFAULT_CITATION_KEYS
    """Metadata keys a resource line is read from when an item has no artifact ids."""
    max_tokens_ceiling: int = Field(default=MAX_TOKENS_CEILING, strict=True, ge=1)
    """Raise it to allow a max_tokens above 16384."""

    @field_validator("template", mode="before")
    @classmethod
    def _template_kind(cls, value: object) -> object:
        if value is not None and not isinstance(value, (str, os.PathLike)):
            raise TemplateError(
                f"template={value!r} must be template source (a str), a pathlib.Path to a "
                "template file, or None for the default"
            )
        return value

    @field_validator("policy", mode="before")
    @classmethod
    def _policy(cls, value: object) -> object:
        return check_policy(value)


class Packer(PackerSettings):
    """How to pack: a token budget, caps, a policy, who reads, and how the block looks.

    Built once (every setting is checked here, before any candidate), then used for any number
    of calls; per call, :meth:`recall` takes overrides of the same names.

    >>> packer = Packer(max_tokens=64, tokenizer="chars")
    >>> packer.recall([Candidate(text="Alice works at Initech.")]).report.items_selected
    1
    >>> Packer(max_token=64)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    recallpack.packing.errors.ConfigError: Packer got an unknown setting 'max_token'; did you mean ...
    """

    model_config = ConfigDict(
        frozen=True, extra="forbid", arbitrary_types_allowed=True, use_attribute_docstrings=True
    )

    join: Callable[[Sequence[str]], str] | None = None
    """None: the model is shown the rendered block. A function: it is shown ``join(kept texts)``
    instead (as a LlamaIndex synthesizer builds its context), and that is what is budgeted."""

    _run: Resolved = PrivateAttr()

    @classmethod
    def _precheck(cls, data: dict[str, Any]) -> None:
        validation.refuse_unknown(cls.__name__, data, cls.settings_names())

    @classmethod
    def _invalid(cls, exc: ValidationError) -> RecallpackError:
        return validation.recallpack_error(cls.__name__, exc)

    @classmethod
    def settings_names(cls) -> tuple[str, ...]:
        """Every setting a Packer (and so every adapter) takes."""
        return tuple(cls.model_fields)

    @model_validator(mode="after")
    def _resolve(self) -> Packer:
        check_max_tokens(self.max_tokens, self.max_tokens_ceiling)
        _check_uri_template(self.resource_uri_template)
        # Every walk setting is the Packer setting of that name, but the lane budgets: checked.
        shared = {f.name: getattr(self, f.name) for f in dataclasses.fields(WalkSettings)}
        tok = get_tokenizer(self.tokenizer)
        template = None if self.template is None else load_template(self.template)
        least, parts = least_budget(tok, template, self.join, self.max_tokens)
        _check_least_budget(self, tok, least, parts)
        self._run = Resolved(
            tok=tok,
            template=template,
            embed=None if self.embed is None else embed_function(self.embed),
            walk=WalkSettings(**{**shared, "lane_budgets": _lane_budgets(self.lane_budgets)}),
            least_tokens=least,
        )
        return self

    # -- calls ----------------------------------------------------------------------------------

    @property
    def least_tokens(self) -> int:
        """The fewest tokens that can hold any evidence (a smaller ``max_tokens`` is refused):
        the block's header, the longest label, the mark of a cut and one token of text."""
        return self._run.least_tokens

    @property
    def tokenizer_used(self) -> Tokenizer:
        """The resolved tokenizer every call counts with."""
        return self._run.tok

    def replace(self, **overrides: Any) -> Packer:
        """A Packer with some settings changed, validated like a new one.

        A configured reader cannot be lifted: an override of ``reader`` is refused unless no
        reader was configured (open a packer up on purpose with ``Reader.everyone()``).
        """
        validation.refuse_unknown(type(self).__name__, overrides, self.settings_names())
        if "reader" in overrides and self.reader is not None and overrides["reader"] != self.reader:
            raise ConfigError(
                "reader is configured, and a per-call reader cannot replace it (that could "
                "lift its scopes); build another Packer or retriever for another reader"
            )
        if not overrides:
            return self
        settings = {name: getattr(self, name) for name in self.settings_names()}
        # The resolved tokenizer goes on as is: nothing is resolved again per call, and a
        # callable tokenizer keeps its count cache across calls.
        settings["tokenizer"] = self._run.tok
        return type(self)(**{**settings, **overrides})

    def recall(
        self,
        candidates: Iterable[Candidate | Mapping[str, Any]],
        *,
        query: str | None = None,
        allowance: Allowance | Remaining | None = None,
        **overrides: Any,
    ) -> RecallResult:
        """Pack ``candidates`` (in merit order) into evidence that fits ``max_tokens``.

        ``query`` lets a cut keep the passages that answer it; ``allowance`` (an Allowance or
        the Remaining an assembly left) caps the block further; ``overrides`` change settings
        for this call only.
        """
        packer = self.replace(**overrides) if overrides else self
        return packer._recall(candidates, query=query, allowance=allowance)

    async def arecall(
        self,
        candidates: Iterable[Candidate | Mapping[str, Any]],
        *,
        query: str | None = None,
        allowance: Allowance | Remaining | None = None,
        **overrides: Any,
    ) -> RecallResult:
        """:meth:`recall` for async code: the same result, and an ``embed`` model never runs on
        the event loop. Its async methods (LangChain's ``aembed_query``/``aembed_documents``,
        LlamaIndex's ``aget_query_embedding``/``aget_text_embedding_batch``) are awaited on
        this loop; sync ones run in the loop's default executor, with the packing. Without an
        embedding to call, the packing is a short CPU walk and runs inline."""
        packer = self.replace(**overrides) if overrides else self
        return await _arecall(packer, candidates, query, allowance)

    def pack(self, candidates: Iterable[Candidate | Mapping[str, Any]]) -> list[Candidate]:
        """The kept candidates themselves (a cut one with its cut text), in order."""
        # The walk's own kept items: no evidence, trace entries or report are made for them.
        listed = _as_list(candidates)
        walk, *_ = _fitted_walk(self, listed)
        _log_pack(walk, listed)
        return [
            k.candidate if k.cut is None else k.candidate.model_copy(update={"text": k.text})
            for k in walk.kept
        ]

    def recall_many(
        self,
        candidate_lists: Iterable[Iterable[Candidate | Mapping[str, Any]]],
        *,
        queries: Sequence[str | None] | None = None,
        workers: int | None = None,
        fork_callables: bool = False,
    ) -> list[RecallResult]:
        """Pack many independent lists (one per query, ``queries`` to steer their cuts): the same
        results, and the same first error, as a loop of :meth:`recall`.

        By default (``workers=None``, as ``1``) that is the loop, in this process. ``workers=N``
        asks for up to N processes: on Linux a batch worth it is then shared with forked copies
        of this process, which inherit the lists. A forked copy shares this process's sockets and
        pools, so settings that hold code of the caller's (a tokenizer function, ``embed``,
        ``join``) keep the batch in this process, with a warning, unless ``fork_callables=True``
        says that code may run there; so do another thread alive and platforms other than
        Linux (``docs/scaling.md`` says when and what it gains).
        """
        return _recall_many(self, candidate_lists, queries, workers, fork_callables)

    # -- one packing ----------------------------------------------------------------------------

    def _recall(
        self,
        candidates: Iterable[Candidate | Mapping[str, Any]],
        *,
        query: str | None = None,
        allowance: Allowance | Remaining | None = None,
    ) -> RecallResult:
        return _pack_once(self, candidates, query=query, allowance=allowance)


def _log_pack(walk: Walk, listed: Sequence[Any]) -> None:
    if logger.isEnabledFor(logging.DEBUG):
        kept, reached = len(walk.kept), len(walk.entries)
        logger.debug("pack: kept %d of %d candidates (%d reached)", kept, len(listed), reached)


async def _arecall(
    packer: Packer,
    candidates: Iterable[Candidate | Mapping[str, Any]],
    query: str | None,
    allowance: Allowance | Remaining | None,
) -> RecallResult:
    if packer._run.embed is None or not query:
        return packer._recall(candidates, query=query, allowance=allowance)
    # The packing runs in the loop's own executor (no thread of recallpack's), in a copy of the
    # caller's context that names this loop: the embedding's async methods are submitted to it.
    loop = asyncio.get_running_loop()
    context = contextvars.copy_context()
    context.run(CALLER_LOOP.set, loop)
    pack_once = functools.partial(packer._recall, candidates, query=query, allowance=allowance)
    return await loop.run_in_executor(None, context.run, pack_once)


def _pack_once(
    packer: Packer,
    candidates: Iterable[Candidate | Mapping[str, Any]],
    *,
    query: str | None = None,
    allowance: Allowance | Remaining | None = None,
) -> RecallResult:
    listed = _as_list(candidates)
    walk, used, block, max_tokens = _fitted_walk(packer, listed, query, allowance)
    result = _result(packer, walk, listed, used, block, max_tokens)
    _log(result)
    return result


#: Under this share of the budget used while items were dropped for size, the caller is told.
_UNFILLED_SHARE = 0.5


def _log(result: RecallResult) -> None:
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


def _fitted_walk(
    packer: Packer,
    listed: Sequence[Any],
    query: str | None = None,
    allowance: Allowance | Remaining | None = None,
) -> tuple[Walk, int, str | None, int | None]:
    """The walk over ``listed``, made to fit: its exact count, the rendered block (None when
    the model is shown the joined texts) and the budget it fits."""
    max_tokens: int | None = packer.max_tokens
    max_items = packer.max_items
    if allowance is not None:
        # Both bounds hold at once. What is left may be zero, which no caller may pass as
        # its own budget, so it goes to the walk directly: nothing fits, each drop says why.
        left = as_remaining(allowance)
        max_tokens = left.tokens if max_tokens is None else min(max_tokens, left.tokens)
        max_items = left.items if max_items is None else min(max_items, left.items)
    run = packer._run
    settings = run.walk  # made once per Packer; a call changes only its bounds
    if max_tokens != settings.max_tokens or max_items != settings.max_items:
        settings = dataclasses.replace(settings, max_tokens=max_tokens, max_items=max_items)
    cost: CostModel = BlockCost(run.tok) if packer.join is None else JoinedCost(run.tok, packer.join)
    cutter = _cutter(packer, run, query)
    walk: Walk
    if packer.policy == "passages" and query:
        walk = PassagesWalk(listed, settings, cost, cutter, query=query, embed=run.embed, tokenizer=run.tok)
    else:  # without a query, passages has nothing to score: it packs as prefix (the report says so)
        walk = Walk(listed, settings, cost, cutter)
    walk.run()
    used, block = _measure(packer, run, walk, max_tokens)
    if isinstance(walk, PassagesWalk):
        while walk.refit(used, max_tokens):
            used, block = _measure(packer, run, walk, max_tokens)
    # Per-item counts are nearly always exact; this makes the bound a guarantee whatever
    # the template or join: the last item is cut shorter or given back until the whole fits.
    while max_tokens is not None and used > max_tokens and walk.kept:
        if walk.kept[-1].cut is not None:
            walk.recut_last(used - max_tokens)  # shorter, or given back when it cannot be
        else:
            walk.give_back_last()
        used, block = _measure(packer, run, walk, max_tokens)
    return walk, used, block, max_tokens


def least_budget(
    tok: Tokenizer, template: LoadedTemplate | None, join: Callable[[Sequence[str]], str] | None,
    max_tokens: int,
) -> tuple[int, str]:
    """The fewest tokens in which the floor can keep one item, and what takes them: the block's
    fixed parts (header, the longest label, the mark of a cut) around one token of text, or,
    when the model is shown the joined texts, that text, its mark and its separator."""
    cut = (tok.truncate("x" * 16, 1) or "x") + ELLIPSIS  # one token of text, marked as cut
    if join is not None:
        joined = joined_by(join, [cut])
        parts = "one token of text, the mark of a cut and the separator"
        return max(tok.count(cut) + 1, tok.count(joined)), parts
    label = max((p.label for p in Provenance), key=tok.count)
    one = Evidence(provenance=Provenance.SESSION, label=label, text=cut)
    parts = f"the block's header, the label {label!r}, one token of text and the mark of a cut"
    return tok.count(_render(template, [one], [], max_tokens)), parts


def _check_least_budget(packer: Packer, tok: Tokenizer, least: int, parts: str) -> None:
    # A joined view without the floor (pack()) promises nothing below it: an empty list is its answer.
    if packer.join is not None and not packer.floor:
        return
    if packer.max_tokens < least:
        raise BudgetError(
            f"max_tokens={packer.max_tokens} is below the least that holds any evidence, {least} tokens "
            f"({tok.name}): {parts}; use max_tokens={least} or more"
        )


def _recall_many(
    packer: Packer,
    candidate_lists: Iterable[Iterable[Candidate | Mapping[str, Any]]],
    queries: Sequence[str | None] | None,
    workers: int | None,
    fork_callables: bool = False,
) -> list[RecallResult]:
    processes = batch.check_workers(workers)
    if not isinstance(fork_callables, bool):
        raise ConfigError(f"fork_callables={fork_callables!r} must be True or False")
    lists = _candidate_lists(candidate_lists)
    asked = _queries(queries, len(lists))
    # Every list is packed as recall packs it, in whichever process: so the results are a loop's.
    def pack_one(i: int) -> RecallResult:
        return packer._recall(lists[i], query=asked[i])

    keep_here = None if fork_callables else _caller_code(packer)
    return batch.run(pack_one, len(lists), processes, asked=workers is not None, keep_here=keep_here)


def _queries(queries: object, n: int) -> list[str | None]:
    """``queries`` as one query (or None) per list; a str is one query, not a list of letters."""
    if queries is None:
        return [None] * n
    if isinstance(queries, (str, bytes, Mapping)) or not isinstance(queries, Sequence):
        raise ConfigError(
            f"queries={queries!r:.60} must be a list with one query (a str or None) per candidate "
            f"list, got {type(queries).__name__}"
        )
    if len(queries) != n:
        raise ConfigError(f"queries has {len(queries)} entries for {n} candidate lists")
    for i, query in enumerate(queries):
        if query is not None and not isinstance(query, str):
            raise ConfigError(f"queries[{i}]={query!r:.60} must be a str or None")
    return list(queries)


def _caller_code(packer: Packer) -> str | None:
    """Which settings hold code of the caller's that a forked worker would run, said as
    batch.run's reason to keep the batch in this process (None: recallpack's own code only)."""
    held = [
        name
        for name, runs_callers in (
            ("tokenizer", packer._run.tok.runs_caller_code),
            ("embed", packer.embed is not None),
            ("join", packer.join is not None and packer.join is not newline_join),
        )
        if runs_callers
    ]
    return f"{batch.CALLER_CODE} ({', '.join(held)})" if held else None


@dataclass(frozen=True)
class Resolved:
    """What a Packer's settings resolve to, once. A call reads it once: each read of a pydantic
    private attribute costs about a microsecond, a good part of a small packing's overhead."""

    tok: Tokenizer
    template: LoadedTemplate | None
    embed: EmbedFn | None
    walk: WalkSettings
    least_tokens: int


def _measure(packer: Packer, run: Resolved, walk: Walk, max_tokens: int | None) -> tuple[int, str | None]:
    """The exact token count of what the model is shown, and the block (rendered once; None
    when the model is shown the joined texts)."""
    if packer.join is not None:
        return walk.cost.measure(walk), None
    text = _render(run.template, walk.evidence(), walk.shared_scopes(), max_tokens)
    if run.template is None and run.tok.splits_at_line_starts:
        return walk.cost.measure(walk), text
    return (run.tok.count(text) if text else 0), text


def _render(
    template: LoadedTemplate | None, evidence: Sequence[Evidence], scopes: Sequence[Scope],
    max_tokens: int | None,
) -> str:
    if template is None:
        return default_block(evidence, scopes)
    bound = None if max_tokens is None else max_tokens * OUTPUT_CHARS_PER_TOKEN + OUTPUT_SLACK_CHARS
    return render(
        template,
        [e.model_dump() for e in evidence],
        [s.model_dump() for s in scopes],
        max_chars=bound,
    )


def _result(
    packer: Packer, walk: Walk, listed: Sequence[Any], used: int, block: str | None,
    max_tokens: int | None,
) -> RecallResult:
    run = packer._run
    reasons = dict(walk.reasons)
    tail = len(listed) - len(walk.entries)
    if tail:
        assert walk.tail_reason is not None
        reasons[walk.tail_reason.value] = reasons.get(walk.tail_reason.value, 0) + tail
    withheld = sum(count for reason, count in reasons.items() if reason in _WITHHELD)
    cut_kinds = [k.cut.kind for k in walk.kept if k.cut is not None]
    policy: str = packer.policy
    notes: tuple[str, ...] = ()
    if policy == "passages" and not isinstance(walk, PassagesWalk):
        policy = "prefix"
        notes = ("policy 'passages' needs the query, and this call had none: it packed as 'prefix'",)
    report = PackReport(
        max_tokens=max_tokens,
        tokens_used=used,
        candidates=len(listed),
        items_selected=len(walk.kept),
        items_dropped=len(listed) - len(walk.kept) - withheld,
        items_withheld=withheld,
        tokenizer_used=run.tok.name,
        policy=policy,
        truncated=bool(cut_kinds),
        items_cut=len(cut_kinds),
        reasons=reasons,
        floor_applied=walk.floor_applied and bool(walk.kept),
        cut=cut_kinds[0] if cut_kinds else None,
        largest_dropped_chars=max(walk.dropped_sizes.values(), default=0),
        notes=notes,
        floor_failed=packer.floor and not walk.kept and bool(walk.dropped_sizes),
    )
    evidence, scopes = walk.evidence(), walk.shared_scopes()
    # With a join the model is shown the joined texts; the block is rendered only if someone
    # asks, from the kept evidence alone (the closure must not keep the caller's candidates alive).
    markdown: str | Callable[[], str] = (
        (lambda: _render(run.template, evidence, scopes, max_tokens)) if block is None else block
    )
    return RecallResult(
        evidence,
        scopes,
        report,
        Trace(walk.entries, len(listed), walk.tail_reason),
        markdown=markdown,
        selected_ranks=[k.rank for k in walk.kept],
    )


def _cutter(packer: Packer, run: Resolved, query: str | None) -> Cutter:
    """How this call cuts an item: by focus on the query when there is one (or ``cut="focus"``),
    else by head."""
    if query is not None and not isinstance(query, str):
        raise ConfigError(f"query={query!r} must be a str or None")
    if packer.cut == "focus" and not query:
        raise ConfigError("cut='focus' needs the query: pass recall(..., query=...) or use cut='auto'")
    tok, embed = run.tok, run.embed
    if packer.cut == "head" or not query:
        return lambda text, room, measure: cut_head(text, room, tok, measure=measure)
    return lambda text, room, measure: cut_focus(text, query, room, tok, embed=embed, measure=measure)


# -- validation ---------------------------------------------------------------------------------


def _lane_budgets(value: Mapping[str, int] | None) -> dict[LaneKind | Provenance, int]:
    if not value:
        return {}
    budgets: dict[LaneKind | Provenance, int] = {}
    for key, budget in value.items():
        name = key.value if isinstance(key, (LaneKind, Provenance)) else key
        target: LaneKind | Provenance
        if name in {lane.value for lane in LaneKind}:
            target = LaneKind(name)
        elif name in {p.value for p in Provenance}:
            target = Provenance(name)
        else:
            lanes = ", ".join(lane.value for lane in LaneKind)
            provenances = ", ".join(p.value for p in Provenance)
            raise LaneError(
                f"lane_budgets has key {key!r}, which is neither a lane ({lanes}) nor a "
                f"provenance ({provenances})"
            )
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < 0:
            raise BudgetError(f"lane_budgets[{key!r}]={budget!r} must be an int of at least 0")
        budgets[target] = budget
    return budgets


_URI_FIELDS = frozenset({"artifact_id", "artifact_content_id"})


def _check_uri_template(template: str) -> None:
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


def _candidate_lists(value: object) -> list[Sequence[Any]]:
    if value is None or isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise CandidateError(f"candidate_lists must be a list of candidate lists, got {type(value).__name__}")
    return [_as_list(candidates) for candidates in value]


def _as_list(candidates: object) -> Sequence[Any]:
    # A list or tuple is used as is: copying 100,000 references is work the walk need not do.
    if isinstance(candidates, (list, tuple)):
        return candidates
    textual = isinstance(candidates, (str, bytes, Mapping))
    if candidates is None or textual or not isinstance(candidates, Iterable):
        raise CandidateError(
            f"candidates must be a list (or any iterable) of Candidate objects or mappings, "
            f"got {type(candidates).__name__}"
        )
    return list(candidates)


# -- the module-level functions users know ------------------------------------------------------

_CACHE: dict[tuple[Any, ...], Packer] = {}
_CACHE_SIZE = 64
_CACHE_LOCK = threading.Lock()


def _typed(value: object) -> object:
    """``value`` with its type, all the way down: 5, 5.0, True and numpy's 5 are equal, and
    hash alike, but only one of them is a valid max_tokens."""
    if isinstance(value, (tuple, frozenset)):
        return type(value), tuple(_typed(v) for v in value)
    return type(value), value


def _packer(settings: Mapping[str, Any]) -> Packer:
    """A Packer for ``settings``, reused when the same hashable settings, of the same types,
    come again (safe under threads: a lost race builds one Packer too many, nothing worse)."""
    try:
        key = tuple(sorted((name, _typed(value)) for name, value in settings.items()))
        hash(key)
    except TypeError:  # a callable tokenizer, a Reader with scopes: build one for this call
        return Packer(**settings)
    cached = _CACHE.get(key)
    if cached is None:
        built = Packer(**settings)  # outside the lock: it may resolve a tokenizer
        with _CACHE_LOCK:
            while len(_CACHE) >= _CACHE_SIZE:
                del _CACHE[next(iter(_CACHE))]
            cached = _CACHE.setdefault(key, built)
    return cached


def recall(
    candidates: Iterable[Candidate | Mapping[str, Any]],
    *,
    query: str | None = None,
    allowance: Allowance | Remaining | None = None,
    **settings: Any,
) -> RecallResult:
    """Pack ``candidates`` into evidence whose rendered block fits ``max_tokens``.

    Takes every :class:`Packer` setting by name. The budget covers the rendered Markdown,
    header and labels included, counted with the same tokenizer.

    >>> result = recall([Candidate(text="Alice works at Initech.")], max_tokens=64)
    >>> result.report.items_selected, result.report.tokens_used <= 64
    (1, True)
    """
    return _packer(settings)._recall(candidates, query=query, allowance=allowance)


def pack(
    candidates: Iterable[Candidate | Mapping[str, Any]],
    max_tokens: int = DEFAULT_MAX_TOKENS,
    **settings: Any,
) -> list[Candidate]:
    """The longest run of ``candidates`` (in order) whose tokens, plus one newline each, fit.

    The simplest walk: each candidate costs its own tokens and the newline that joins it, and
    the first that does not fit ends it.

    >>> texts = ["a" * 2448, "b" * 1720, "c" * 3520, "d" * 760, "e" * 160]  # 612/430/880/190/40
    >>> [c.text[0] for c in pack([Candidate(text=t) for t in texts], 2048, tokenizer="chars")]
    ['a', 'b', 'c']
    """
    defaults: dict[str, Any] = {"join": newline_join, "dedupe": False, "floor": False}
    return _packer({**defaults, **settings, "max_tokens": max_tokens}).pack(candidates)


def recall_many(
    candidate_lists: Iterable[Iterable[Candidate | Mapping[str, Any]]],
    *,
    queries: Sequence[str | None] | None = None,
    workers: int | None = None,
    fork_callables: bool = False,
    **settings: Any,
) -> list[RecallResult]:
    """:func:`recall` for many independent lists: the same results as a loop, which it is unless
    ``workers`` asks for more processes (see :meth:`Packer.recall_many`)."""
    return _packer(settings).recall_many(
        candidate_lists, queries=queries, workers=workers, fork_callables=fork_callables
    )


#: Names that moved to :mod:`recallpack.packing.validation`: from here they still work for one
#: release, with a DeprecationWarning that names the new home.
__getattr__ = moved_names(
    __name__,
    dict.fromkeys(("unknown_setting", "refuse_unknown", "recallpack_error"), "recallpack.packing.validation"),
)
