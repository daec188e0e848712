"""Constants, limits and their checks, and the allowance's value types.

A leaf: it imports nothing of recallpack but the error classes, so every other module may
import it without forming a cycle.
"""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from recallpack.packing.errors import BudgetError, ConfigError, PolicyError, RecallpackError

__all__ = [
    "Policy",
    "POLICIES",
    "DEFAULT_MAX_TOKENS",
    "MAX_TOKENS_CEILING",
    "ELLIPSIS",
    "FETCH_CHUNK_TOKENS",
    "FETCH_DEPTH_CAP",
    "fetch_depth",
    "check_max_tokens",
    "check_max_items",
    "check_policy",
    "Allowance",
    "Remaining",
    "CheckedModel",
    "as_remaining",
]

Policy = Literal["prefix", "skip", "truncate", "passages"]
POLICIES: tuple[str, ...] = ("prefix", "skip", "truncate", "passages")
DEFAULT_MAX_TOKENS = 2048
#: A caller may raise its budget up to here; past it only by raising the ceiling too, so one
#: request cannot swallow a whole context window by accident.
MAX_TOKENS_CEILING = 16384
#: Marks text that was cut out of an item.
ELLIPSIS = "…"
#: The adapters ask an upstream that says its depth for max_tokens / this many candidates: a
#: short retrieved chunk (a paragraph, a fact), so that chunks of that size or longer fill the
#: budget; longer ones stop the walk early, which is cheap, since it reads only what it keeps.
FETCH_CHUNK_TOKENS = 50
#: ... and never more than this many: past it a budget is filled by longer chunks, or not at all.
FETCH_DEPTH_CAP = 100


def fetch_depth(max_tokens: int, max_items: int | None = None, own: int | None = None) -> int:
    """How many candidates to ask an upstream for, so that its results can fill ``max_tokens``:
    ``ceil(max_tokens / 50)``, at most twice ``max_items`` when there is a cap (room for
    duplicates and withheld items), at most 100, and never fewer than the upstream's ``own``.

    >>> fetch_depth(2000), fetch_depth(2000, own=4), fetch_depth(2000, max_items=3), fetch_depth(100, own=4)
    (40, 40, 6, 4)
    """
    wanted = min(-(-max_tokens // FETCH_CHUNK_TOKENS), FETCH_DEPTH_CAP)
    if max_items is not None:
        wanted = min(wanted, 2 * max_items)
    return max(wanted, own or 1)


def check_max_tokens(value: object, ceiling: int = MAX_TOKENS_CEILING, field: str = "max_tokens") -> int:
    """``value`` as a valid token budget, or a BudgetError saying what is allowed."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise BudgetError(
            f"{field}={value!r} must be an int between 1 and {ceiling}, got {type(value).__name__}"
        )
    if value < 1:
        raise BudgetError(f"{field}={value} must be at least 1 (the budget is in tokens)")
    if value > ceiling:
        raise BudgetError(
            f"{field}={value} is over the ceiling of {ceiling}; pass "
            f"max_tokens_ceiling={value} as well if one request should really take that much"
        )
    return value


def check_max_items(value: object, field: str = "max_items") -> int | None:
    """``value`` as an item cap (None: no cap), or a BudgetError."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise BudgetError(f"{field}={value!r} must be an int of at least 1, or None for no cap")
    return value


def check_policy(value: object) -> Policy:
    if value not in POLICIES:
        raise PolicyError(f"policy={value!r} is not a policy; use one of: {', '.join(POLICIES)}")
    return value  # type: ignore[return-value]


class CheckedModel(BaseModel):
    """A pydantic model whose bad input raises one error of recallpack's tree, naming the field
    and the fix, never a bare ValidationError. A subclass says which error in ``_invalid`` and
    may look at the raw keywords first in ``_precheck`` (to refuse unknown ones, say)."""

    if not TYPE_CHECKING:
        # Hidden from type checkers, which then see each model's own fields as its signature
        # (a misspelled keyword is a type error, not only a ConfigError at run time).
        def __init__(self, **data: Any) -> None:
            self._precheck(data)
            try:
                super().__init__(**data)
            except ValidationError as exc:
                error = self._invalid(exc)
                # A recallpack error raised inside a validator keeps what caused it (the
                # caller's tokenizer raising, say); pydantic's own wrapping is dropped.
                raise error from error.__cause__

    @classmethod
    def _precheck(cls, data: dict[str, Any]) -> None:
        """Nothing by default: pydantic's own rules decide."""

    @classmethod
    def _invalid(cls, exc: ValidationError) -> RecallpackError:
        return _invalid(cls, exc, ConfigError)


class Allowance(CheckedModel):
    """What all the evidence in one model request may add up to, corrections aside.

    ``max_blocks`` bounds how many retained search blocks a request may carry (four by
    default), so many small searches cannot crowd the context with headers and repeats.

    >>> Allowance().max_items, Allowance().max_tokens, Allowance().max_blocks
    (20, 2000, 4)
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: Same meaning as the packer's: a caller raises it on purpose to allow more per request.
    max_tokens_ceiling: int = Field(default=MAX_TOKENS_CEILING, repr=False)
    max_items: int = 20
    max_tokens: int = 2000
    max_blocks: int = 4

    @classmethod
    def _invalid(cls, exc: ValidationError) -> RecallpackError:
        causes = [e.get("ctx", {}).get("error") for e in exc.errors()]
        known = next((c for c in causes if isinstance(c, BudgetError)), None)
        return known if known is not None else _invalid(cls, exc, BudgetError)

    @field_validator("max_tokens_ceiling", mode="before")
    @classmethod
    def _ceiling(cls, value: object) -> int:
        return check_max_tokens(value, ceiling=1 << 62, field="max_tokens_ceiling")

    @field_validator("max_items", "max_blocks", mode="before")
    @classmethod
    def _positive_cap(cls, value: object, info: ValidationInfo) -> int:
        # Unlike a recall's max_items, an allowance's caps have no "None means no cap".
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise BudgetError(f"{info.field_name}={value!r} must be an int of at least 1")
        return value

    @field_validator("max_tokens", mode="before")
    @classmethod
    def _token_budget(cls, value: object, info: ValidationInfo) -> int:
        ceiling = info.data.get("max_tokens_ceiling", MAX_TOKENS_CEILING)
        return check_max_tokens(value, ceiling)

    def full(self) -> Remaining:
        """The whole allowance, as what is left before anything was spent."""
        return Remaining(items=self.max_items, tokens=self.max_tokens, blocks=self.max_blocks)


class Remaining(CheckedModel):
    """What an allowance has left: each part may be zero. Pass it to ``recall(allowance=...)``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    items: int = Field(ge=0, strict=True)
    tokens: int = Field(ge=0, strict=True)
    blocks: int = Field(ge=0, strict=True)

    @classmethod
    def _invalid(cls, exc: ValidationError) -> RecallpackError:
        return _invalid(cls, exc, BudgetError)

    @property
    def exhausted(self) -> bool:
        """True when no optional evidence at all can be added."""
        return self.items == 0 or self.tokens == 0


def _invalid(model: type[BaseModel], exc: ValidationError, error: type[ConfigError]) -> ConfigError:
    """The first problem of ``exc`` as ``error``; a misspelled key with its closest name."""
    problem = sorted(exc.errors(), key=lambda e: e["type"] != "extra_forbidden")[0]
    where = ".".join(str(p) for p in problem["loc"])
    if problem["type"] == "extra_forbidden":
        close = difflib.get_close_matches(where, list(model.model_fields), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return error(f"{model.__name__} got an unknown setting {where!r}{hint}")
    return error(f"invalid {model.__name__}: {where}={problem.get('input')!r:.60} {problem['msg']}")


def as_remaining(allowance: Allowance | Remaining) -> Remaining:
    """An Allowance (nothing spent yet) or a Remaining, as a Remaining."""
    if isinstance(allowance, Remaining):
        return allowance
    if isinstance(allowance, Allowance):
        return allowance.full()
    raise BudgetError(
        f"allowance={allowance!r} must be a recallpack.Allowance or the Remaining an assembly returned"
    )
