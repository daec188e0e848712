"""The Packer: the settings (:mod:`recallpack.packing.settings`), validated once, with its
tokenizer and template resolved into a walk's plan; and the calls that pack with it.

Adapters and the module-level :func:`recall` / :func:`pack` all go through a Packer, so a
setting is defined once and every host takes it by the same name.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import functools
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from pydantic import (
    ConfigDict,
    PrivateAttr,
    ValidationError,
    model_validator,
)

from recallpack.packing import batch, validation
from recallpack.packing._compat import moved_names
from recallpack.packing.allowance import Allowance, Remaining, capped
from recallpack.packing.block.citations import check_uri_template
from recallpack.packing.block.render import load_template, newline_join
from recallpack.packing.candidate import Candidate
from recallpack.packing.choosing.embedding import CALLER_LOOP, embed_function
from recallpack.packing.choosing.ledger import WalkSettings
from recallpack.packing.choosing.policies import table_version
from recallpack.packing.choosing.walk import Plan, candidate_lists_of, lane_targets
from recallpack.packing.errors import (
    BudgetError,
    ConfigError,
    RecallpackError,
)
from recallpack.packing.limits import DEFAULT_MAX_TOKENS
from recallpack.packing.results.result import RecallResult
from recallpack.packing.scopes import replaces_reader
from recallpack.packing.settings import (
    BOUNDS,
    DEFAULT_CITATION_KEYS,
    CutMode,
    PackerSettings,
    checked_bounds,
)
from recallpack.packing.tokenizers import Tokenizer, get_tokenizer
from recallpack.packing.validation import check_max_tokens

__all__ = [
    "Packer",
    "PackerSettings",
    "recall",
    "pack",
    "recall_many",
    "CutMode",
    "DEFAULT_CITATION_KEYS",
]

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

    _plan: Plan = PrivateAttr()

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
        check_uri_template(self.resource_uri_template)
        # Every walk setting is the Packer setting of that name, but the lane budgets: checked.
        shared = {f.name: getattr(self, f.name) for f in dataclasses.fields(WalkSettings)}
        tok = get_tokenizer(self.tokenizer)
        template = None if self.template is None else load_template(self.template)
        plan = self._plan = Plan.make(
            WalkSettings(**{**shared, "lane_budgets": lane_targets(self.lane_budgets)}),
            tok=tok,
            template=template,
            join=self.join,
            embed=None if self.embed is None else embed_function(self.embed),
            cut=self.cut,
        )
        _check_least(plan, self.join is None or self.floor, self.max_tokens)
        return self

    # -- calls ----------------------------------------------------------------------------------

    @property
    def least_tokens(self) -> int:
        """The fewest tokens that can hold any evidence (a smaller ``max_tokens`` is refused):
        the block's header, the longest label, the mark of a cut and one token of text."""
        return self._plan.least_tokens

    def least_tokens_for(
        self, candidate: Candidate | Mapping[str, Any], *, query: str | None = None
    ) -> int | None:
        """The fewest tokens at which a call given ``candidate`` keeps it, cut if need be: from it
        up the floor holds, for every policy. It counts what the item renders (its scopes header,
        label, resource line, the cut's marks): at least :attr:`least_tokens`. None: never shown."""
        return self._plan.least_for(candidate, query, self.reader)

    @property
    def tokenizer_used(self) -> Tokenizer:
        """The resolved tokenizer every call counts with."""
        return self._plan.tok

    def replace(self, **overrides: Any) -> Packer:
        """A Packer with some settings changed, validated like a new one.

        A configured reader cannot be lifted: an override of ``reader`` is refused unless no
        reader was configured (open a packer up on purpose with ``Reader.everyone()``).
        """
        validation.refuse_unknown(type(self).__name__, overrides, self.settings_names())
        if "reader" in overrides and replaces_reader(overrides["reader"], self.reader):
            raise ConfigError(
                "reader is configured, and a per-call reader cannot replace it (that could "
                "lift its scopes); build another Packer or retriever for another reader", field="reader"
            )
        if not overrides:
            return self
        if overrides.keys() <= BOUNDS:  # per-call values: the same plan, handed down
            ceiling, owner = self.max_tokens_ceiling, type(self).__name__
            max_tokens = checked_bounds(owner, overrides, self.max_tokens, ceiling)
            _check_least(self._plan, self.join is None or self.floor, max_tokens)
            return self.model_copy(update=overrides)
        settings = {name: getattr(self, name) for name in self.settings_names()}
        # The resolved tokenizer goes on as is: nothing is resolved again per call, and a
        # callable tokenizer keeps its count cache across calls.
        settings["tokenizer"] = self._plan.tok
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
        if packer._plan.embed is None or not query:
            return packer._recall(candidates, query=query, allowance=allowance)
        # The packing runs in the loop's own executor (no thread of recallpack's), in a copy of the
        # caller's context that names this loop: the embedding's async methods are submitted to it.
        loop = asyncio.get_running_loop()
        context = contextvars.copy_context()
        context.run(CALLER_LOOP.set, loop)
        pack_once = functools.partial(packer._recall, candidates, query=query, allowance=allowance)
        return await loop.run_in_executor(None, context.run, pack_once)

    def pack(self, candidates: Iterable[Candidate | Mapping[str, Any]]) -> list[Candidate]:
        """The kept candidates themselves (a cut one with its cut text), in order."""
        plan: Plan = self.__pydantic_private__["_plan"]  # type: ignore[index]  # self._plan, ~2 µs less
        return plan.pack(candidates, max_tokens=self.max_tokens, max_items=self.max_items, reader=self.reader)

    def recall_many(
        self,
        candidate_lists: Iterable[Iterable[Candidate | Mapping[str, Any]]],
        *,
        queries: Sequence[str | None] | None = None,
        workers: int | None = None,
        fork_callables: bool = False, show_progress: bool = False,  # fmt: skip
    ) -> list[RecallResult]:
        """Pack many independent lists (one per query, ``queries`` to steer their cuts): the same
        results, and the same first error, as a loop of :meth:`recall`.

        By default (``workers=None``, as ``1``) that is the loop, in this process. ``workers=N``
        asks for up to N processes: on Linux a batch worth it is then shared with forked copies
        of this process, which inherit the lists. A forked copy shares this process's sockets and
        pools, so settings that hold code of the caller's (a tokenizer function, ``embed``,
        ``join``) keep the batch in this process, with a warning, unless ``fork_callables=True``
        says that code may run there; so do another thread alive and platforms other than
        Linux (``docs/scaling.md`` says when and what it gains, and what ``show_progress`` draws).
        """
        processes = batch.check_workers(workers)
        if not isinstance(fork_callables, bool):
            raise ConfigError(f"fork_callables={fork_callables!r} must be True or False")
        lists = candidate_lists_of(candidate_lists)
        asked = batch.queries_per_list(queries, len(lists))
        callers = () if fork_callables else self._plan.caller_code()
        # Every list is packed as recall packs it, in whichever process: so the results are a loop's.
        def pack_one(i: int) -> RecallResult:
            return self._recall(lists[i], query=asked[i])

        return batch.run(pack_one, len(lists), processes, workers is not None, callers, show_progress)

    # -- one packing ----------------------------------------------------------------------------

    def _recall(
        self,
        candidates: Iterable[Candidate | Mapping[str, Any]],
        *,
        query: str | None = None,
        allowance: Allowance | Remaining | None = None,
    ) -> RecallResult:
        max_tokens: int | None = self.max_tokens
        max_items = self.max_items
        if allowance is not None:
            max_tokens, max_items = capped(allowance, max_tokens, max_items)
        plan: Plan = self.__pydantic_private__["_plan"]  # type: ignore[index]  # self._plan, ~2 µs less
        return plan.recall(
            candidates, query=query, max_tokens=max_tokens, max_items=max_items, reader=self.reader
        )


def _check_least(run: Plan, promised: bool, max_tokens: int) -> None:
    """A BudgetError when ``max_tokens`` is below the least that holds any evidence, where that
    is ``promised`` (a joined view without the floor, pack()'s, promises nothing below it: an
    empty list is its answer)."""
    if promised and max_tokens < run.least_tokens:
        raise BudgetError(
            f"max_tokens={max_tokens} is below the least that holds any evidence, "
            f"{run.least_tokens} tokens ({run.tok.name}): {run.least_parts}; use "
            f"max_tokens={run.least_tokens} or more",
            field="max_tokens",
        )


# -- the module-level functions users know ------------------------------------------------------

_CACHE: dict[tuple[Any, ...], Packer] = {}
_CACHE_SIZE = 64
_CACHE_LOCK = threading.Lock()


def _typed(value: object) -> object:
    """``value`` with its type, all the way down: 5, 5.0, True and numpy's 5 are equal, and
    hash alike, but only one of them is a valid max_tokens."""
    if isinstance(value, (tuple, frozenset)):
        return type(value), tuple([_typed(v) for v in value])
    return type(value), value


def _packer(settings: Mapping[str, Any]) -> Packer:
    """A Packer for ``settings``, reused when the same hashable settings, of the same types,
    come again (safe under threads: a lost race builds one Packer too many, nothing worse)."""
    try:
        # The table's version too: a Packer holds its policy object, and a name registered again
        # must not run the one it replaced.
        key = (table_version(), *sorted([(name, _typed(value)) for name, value in settings.items()]))
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

    Takes every :class:`~recallpack.Packer` setting by name (its entry lists each one's type,
    default and meaning). The budget covers the rendered Markdown, header and labels included,
    counted with the same tokenizer.

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
    the first that does not fit ends it. Takes every :class:`~recallpack.Packer` setting by name,
    with these defaults of its own: ``join`` a newline, ``dedupe`` and ``floor`` off.

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
    show_progress: bool = False,
    **settings: Any,
) -> list[RecallResult]:
    """:func:`recall` for many independent lists: the same results as a loop, which it is unless
    ``workers`` asks for more processes (see :meth:`Packer.recall_many`). Takes every
    :class:`~recallpack.Packer` setting by name, as :func:`recall` does."""
    return _packer(settings).recall_many(
        candidate_lists, queries=queries, workers=workers, fork_callables=fork_callables,
        show_progress=show_progress,
    )


#: Names that moved to :mod:`recallpack.packing.validation` keep working for one release, with a
#: DeprecationWarning naming the new home: see :mod:`recallpack.packing._compat`.
__getattr__ = moved_names(__name__)
