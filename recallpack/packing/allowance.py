"""What all the evidence of one model request may add up to (:class:`Allowance`) and what an
assembly left of it (:class:`Remaining`): the values a recall takes as ``allowance=``.

The core's arithmetic of an allowance: it imports nothing but the core's limits, errors and
checks, so the Packer takes these values without importing anything above the core.
:mod:`recallpack.allowance` (receipts, assemblies) hands them on as its own.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BeforeValidator, ConfigDict, Field, ValidationInfo, field_validator

from recallpack.packing.errors import BudgetError
from recallpack.packing.limits import MAX_TOKENS_CEILING
from recallpack.packing.validation import CheckedModel, NonNegativeInt, check_count, check_max_tokens

__all__ = ["Allowance", "Remaining", "as_remaining", "as_allowance", "capped"]


def _checked_ceiling(value: object) -> int:
    # An allowance may raise its ceiling far above the packer's default one, never past 2**62.
    return check_max_tokens(value, ceiling=1 << 62, field="max_tokens_ceiling")


class Allowance(CheckedModel):
    """What all the evidence in one model request may add up to, corrections aside.

    ``max_blocks`` bounds how many retained search blocks a request may carry (four by
    default), so many small searches cannot crowd the context with headers and repeats.

    >>> Allowance().max_items, Allowance().max_tokens, Allowance().max_blocks
    (20, 2000, 4)
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: Same meaning as the packer's: a caller raises it on purpose to allow more per request.
    max_tokens_ceiling: Annotated[int, BeforeValidator(_checked_ceiling)] = Field(
        default=MAX_TOKENS_CEILING, repr=False
    )
    max_items: int = 20
    max_tokens: int = 2000
    max_blocks: int = 4

    _error = BudgetError

    @field_validator("max_items", "max_blocks", mode="before")
    @classmethod
    def _positive_cap(cls, value: object, info: ValidationInfo) -> int:
        # Unlike a recall's max_items, an allowance's caps have no "None means no cap".
        return check_count(value, str(info.field_name), minimum=1)

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

    items: NonNegativeInt
    tokens: NonNegativeInt
    blocks: NonNegativeInt

    _error = BudgetError

    @property
    def exhausted(self) -> bool:
        """True when no optional evidence at all can be added."""
        return self.items == 0 or self.tokens == 0


def as_remaining(allowance: Allowance | Remaining) -> Remaining:
    """An Allowance (nothing spent yet) or a Remaining, as a Remaining."""
    if isinstance(allowance, Remaining):
        return allowance
    if isinstance(allowance, Allowance):
        return allowance.full()
    raise BudgetError(
        f"allowance={allowance!r} must be a recallpack.Allowance or the Remaining an assembly returned"
    )


def as_allowance(allowance: object) -> Allowance:
    """``allowance`` as an Allowance (None: the default one), or a BudgetError."""
    if allowance is not None and not isinstance(allowance, Allowance):
        raise BudgetError(f"allowance={allowance!r} must be a recallpack.allowance.Allowance (or None)")
    return allowance or Allowance()


def capped(
    allowance: Allowance | Remaining | None, max_tokens: int | None, max_items: int | None
) -> tuple[int | None, int | None]:
    """A call's token and item bounds with what ``allowance`` has left: both hold at once. What
    is left may be zero, which no caller may pass as its own budget, so it goes to the walk as
    it is: nothing fits, and each drop says why."""
    if allowance is None:
        return max_tokens, max_items
    left = as_remaining(allowance)
    return (
        left.tokens if max_tokens is None else min(max_tokens, left.tokens),
        left.items if max_items is None else min(max_items, left.items),
    )
