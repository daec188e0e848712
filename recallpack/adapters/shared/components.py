"""What both adapters share: one settings definition taken from the Packer, and the async gather.

Every :class:`~recallpack.Packer` setting is a field of each adapter component, by the same
name, through :class:`PackSettings`, which inherits them from the core's ``PackerSettings``; a
setting added there reaches both hosts with no adapter edit. Imports no host framework.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Concatenate, ParamSpec, TypedDict, TypeVar

from pydantic import (
    BeforeValidator,
    ConfigDict,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from recallpack.adapters.shared.embeddings import as_embed_fn
from recallpack.packing.candidate import LaneKind, coerce_lane
from recallpack.packing.choosing.policies import Policy
from recallpack.packing.errors import ConfigError, RecallpackError
from recallpack.packing.packer import CutMode, Packer, PackerSettings
from recallpack.packing.pipeline import ITEM_SETTINGS, ItemSettings
from recallpack.packing.scopes import Reader
from recallpack.packing.translate import UnknownLane, check_on_unknown_lane
from recallpack.packing.validation import check_max_items, recallpack_error, refuse_unknown

__all__ = [
    "PackSettings",
    "PackerComponent",
    "RecallSettings",
    "HOST_DECIDES",
    "HOST_OBJECTS",
    "host_settings",
    "check_query",
    "check_recall_settings",
    "k_or_max_items",
    "takes_config_of",
    "gather_or_cancel",
    "keywords_of",
    "only_keywords_of",
]

T = TypeVar("T")
U = TypeVar("U")
P = ParamSpec("P")

#: Packer settings a host decides itself, because they describe what its model is shown.
HOST_DECIDES = frozenset({"join"})
#: Settings a component holds as the caller gave them, while its Packer holds what the core
#: made of them (:func:`host_settings`).
HOST_OBJECTS = frozenset({"embed"})


class PackSettings(PackerSettings):
    """Every Packer setting but ``join`` (inherited: one definition, in the core), and how an
    upstream item becomes a Candidate: the same fields, by the same names, in both hosts.

    Declared statically, so type checkers see every setting in each component's signature."""

    # _precheck refuses unknown keywords at run time; "forbid" tells pydantic's mypy plugin (through
    # every subclass) to give __init__ no **kwargs, so a misspelled keyword is a type error there too.
    model_config = ConfigDict(extra="forbid")

    policy: Policy = "passages"
    """``passages`` (the adapters' default: they always have the query) spends the budget on the
    passages that best answer it, across every item; ``prefix`` ends the walk at the first item
    that does not fit, ``skip`` passes over it, ``truncate`` cuts it to the room left. A call
    without a query packs as ``prefix``."""
    lane: LaneKind | str | None = None
    """A fixed lane for every item; else metadata[lane_key]."""
    lane_key: str = "lane"
    """The metadata key that holds an item's lane."""
    on_unknown_lane: Annotated[UnknownLane, BeforeValidator(check_on_unknown_lane)] = "raise"
    """A metadata lane that is not a lane: 'raise', or 'default' (sources)."""

    @field_validator("lane", mode="before")
    @classmethod
    def _known_lane(cls, value: object) -> object:
        return None if value is None else coerce_lane(value)


class PackerComponent(PackSettings):
    """The settings fields plus what every adapter component does with them: build one Packer
    at construction (every check runs there, before any query), refuse unknown keywords, and
    hold the item settings its :class:`~recallpack.packing.pipeline.Pipeline` reads items by."""

    _packer: Packer = PrivateAttr()
    _items: ItemSettings = PrivateAttr(default=ItemSettings())

    @classmethod
    def _precheck(cls, data: dict[str, Any]) -> None:
        refuse_unknown(cls.__name__, data, [*cls.model_fields, *cls._aliases()])

    @classmethod
    def _invalid(cls, exc: ValidationError) -> RecallpackError:
        return recallpack_error(cls.__name__, exc)

    @classmethod
    def _aliases(cls) -> tuple[str, ...]:
        return ()

    @model_validator(mode="after")
    def _build_packer(self) -> PackerComponent:
        names = [n for n in Packer.settings_names() if n not in HOST_DECIDES]
        host = self._host_settings()
        self._packer = Packer(**host_settings({**{n: getattr(self, n) for n in names}, **host}))
        for name in names:  # hold the values as validated (a Reader from its dict form, say)
            if name not in host and name not in HOST_OBJECTS:
                self.__dict__[name] = getattr(self._packer, name)
        # The same checks as for components that are not pydantic models (lane_key="" too).
        self._items = ItemSettings.checked({name: getattr(self, name) for name in ITEM_SETTINGS})
        return self

    def _host_settings(self) -> dict[str, Any]:
        """Settings this host fixes (what its model is shown) or fills in (a default of its own)."""
        return {}

    @property
    def packer(self) -> Packer:
        """The validated Packer every call of this component packs with."""
        return self._packer

    def _per_call(self, overrides: Mapping[str, Any]) -> Packer:
        """The Packer for one call's settings, refused per call where refused at construction."""
        for name in sorted(HOST_DECIDES & set(overrides)):
            raise ConfigError(
                f"{name}= is decided by {type(self).__name__} (it is what its host shows the model) "
                "and cannot be set per call"
            )
        # No overrides: the component's own Packer, as replace() would return it.
        return self._packer.replace(**host_settings(overrides)) if overrides else self._packer


def host_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """``settings`` with what only an adapter reads turned into what the core takes: a host's
    embedding object (``embed=``) as the core's similarity function."""
    settings = dict(settings)
    if settings.get("embed") is not None:
        settings["embed"] = as_embed_fn(settings["embed"])
    return settings


def keywords_of(
    settings: Callable[P, object],
) -> Callable[[Callable[Concatenate[Any, U, ...], T]], Callable[Concatenate[Any, U, P], T]]:
    """Type a constructor (``__init__``, or a ``from_lanes`` classmethod) that takes its upstream
    (or its lanes) positionally, then the fields of ``settings`` (a settings model) by keyword:
    type checkers see exactly those keywords, so a misspelled one is an error there too. At run
    time the function is returned unchanged."""

    def typed(function: Any) -> Any:
        return function

    return typed


def only_keywords_of(
    settings: Callable[P, object],
) -> Callable[[Callable[..., T]], Callable[Concatenate[Any, P], T]]:
    """:func:`keywords_of` for a constructor's overload that takes every field by keyword."""

    def typed(function: Any) -> Any:
        return function

    return typed


def check_query(
    query: object, kwargs: Mapping[str, Any] | None = None, *, bundle: type | None = None,
    owner: str = "", built: Collection[str] = (),
) -> None:
    """The query is a str (or the host's query ``bundle``), and no per-call keyword is named
    ``query`` too (``invoke("q", query="x")``) or one of ``built``, what ``owner`` is built around."""
    for name in sorted(set(built) & set(kwargs or ())):
        fix = f"build another {owner}"
        raise ConfigError(f"{name}= is set when a {owner} is built, not per call: {fix}", field=name)
    if not isinstance(query, str) and not (bundle is not None and isinstance(query, bundle)):
        kinds = "a str" + (f" or a {bundle.__name__}" if bundle is not None else "")
        raise ConfigError(f"the query must be {kinds}, got {type(query).__name__} {query!r:.60}")
    if kwargs and "query" in kwargs:
        raise ConfigError("query= is not a setting: the query is the call's first argument, given once")


#: What LangChain's BudgetedRetriever takes per call besides the Packer's settings.
_CALL_SETTINGS = ("k", "fetch_k", "verbose")


class RecallSettings(TypedDict, total=False):
    """The settings a recall tool or an assembly passes on to ``retriever.recall``, for type
    checkers only (``**recall_overrides: Unpack[RecallSettings]``), so a misspelled one is an
    error there as it is at run time. The names are the Packer's (but the host's ``join``) and
    ``_CALL_SETTINGS``; a test pins them to those, so a new setting cannot be left out."""

    max_tokens: int
    max_items: int | None
    policy: Policy
    floor: bool
    cut: CutMode
    embed: Any
    tokenizer: Any
    reader: Reader | None
    lane_budgets: Mapping[str, int] | None
    dedupe: bool
    template: str | Path | None
    resource_uri_template: str
    citation_keys: str | Sequence[str]
    max_tokens_ceiling: int
    language: str | None
    k: int | None
    fetch_k: int | None
    verbose: bool


def positional_retriever(retriever: object, data: dict[str, Any], what: str) -> dict[str, Any]:
    """``data`` with ``retriever`` given positionally in it, as both BudgetedRetrievers and the
    query engine take their upstream (pydantic alone raises a bare TypeError); ``what`` names it
    in the error when it is given twice."""
    if retriever is not None:
        if "retriever" in data:
            raise ConfigError(f"the {what} is given twice: positionally and as retriever=")
        data["retriever"] = retriever
    return data


def k_or_max_items(k: object, max_items: object) -> int | None:
    """LangChain's ``k`` (its retrievers' number of results) as ``max_items``, checked; refused
    when a ``max_items`` given too (``"unset"``: none) says otherwise."""
    k = check_max_items(k, "k")
    if max_items != "unset" and max_items != k:
        raise ConfigError(f"k={k!r} and max_items={max_items!r} disagree; pass one (k is max_items)")
    return k


def check_recall_settings(retriever: Any, overrides: Mapping[str, Any]) -> None:
    """The settings a tool or an assembly will pass to ``retriever.recall`` on every call, checked
    now as that call would check them, so a bad one fails where it is given, not at first use."""
    if not overrides:
        return
    if retriever is None:
        raise ConfigError(
            f"recall settings ({', '.join(sorted(overrides))}) were given without retriever=...: "
            "they configure automatic recall, which needs a retriever"
        )
    try:
        params = inspect.signature(retriever.recall).parameters
    except (TypeError, ValueError):  # a builtin or C callable: nothing to read ahead
        return
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        for name in overrides:
            if name not in params or name == "query":
                raise ConfigError(
                    f"{type(retriever).__name__}.recall takes no setting {name!r}; configure it "
                    "where the retriever is built"
                )
        return
    packer = getattr(retriever, "packer", None)
    if not isinstance(packer, Packer):
        return  # a duck-typed recaller that takes anything: it checks its own settings
    settings = {name: value for name, value in overrides.items() if name not in _CALL_SETTINGS}
    refuse_unknown(type(retriever).__name__, settings, [*Packer.settings_names(), *_CALL_SETTINGS])
    for name in ("k", "fetch_k"):
        if name in overrides:
            check_max_items(overrides[name], name)
    per_call = getattr(retriever, "_per_call", None)  # an adapter's: it refuses what its host decides
    if callable(per_call):
        per_call(settings)
    else:
        packer.replace(**settings)


def takes_config_of(retriever: object) -> bool:
    # BudgetedRetriever.recall takes a RunnableConfig, so a trace nests the search under the
    # tool; a duck-typed recaller may not, and is then called without it.
    try:
        return "config" in inspect.signature(retriever.recall).parameters  # type: ignore[attr-defined]
    except (TypeError, ValueError):
        return False


async def gather_or_cancel(awaitables: Sequence[Awaitable[T]]) -> list[T]:
    """Await all concurrently; if one fails (or the call is cancelled), cancel and await the
    rest, so no lane keeps searching after the caller has its exception."""
    tasks = [asyncio.ensure_future(a) for a in awaitables]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
