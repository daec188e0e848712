"""Constants, limits and their checks.

A leaf: it imports nothing of recallpack but the error classes, so every other module may
import it without forming a cycle.
"""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ValidationError

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
    "CheckedModel",
    "invalid_setting",
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
        return invalid_setting(cls, exc, ConfigError)


def invalid_setting(model: type[BaseModel], exc: ValidationError, error: type[ConfigError]) -> ConfigError:
    """The first problem of ``exc`` as ``error``; a misspelled key with its closest name."""
    problem = sorted(exc.errors(), key=lambda e: e["type"] != "extra_forbidden")[0]
    where = ".".join(str(p) for p in problem["loc"])
    if problem["type"] == "extra_forbidden":
        close = difflib.get_close_matches(where, list(model.model_fields), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return error(f"{model.__name__} got an unknown setting {where!r}{hint}")
    return error(f"invalid {model.__name__}: {where}={problem.get('input')!r:.60} {problem['msg']}")
