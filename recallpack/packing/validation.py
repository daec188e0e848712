"""How recallpack checks what it is given, once: shared field types, the checks of a budget, a
cap and a policy, the one translator of pydantic's errors, and the one "did you mean".

Every error raised here carries the ``field`` it is about (``RecallpackError.field``), so a
front end can say it in its own words (the CLI maps fields to flags) without reading messages.
A model validated by recallpack is a :class:`CheckedModel`: bad input raises one error of the
tree, naming the field and the fix, never a bare ValidationError.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, TypeGuard

from pydantic import BaseModel, Field, ValidationError
from pydantic_core import ErrorDetails

from recallpack.packing.errors import (
    BudgetError,
    ConfigError,
    PolicyError,
    RecallpackError,
    TemplateError,
    TokenizerError,
)
from recallpack.packing.limits import MAX_TOKENS_CEILING

__all__ = [
    "PositiveInt",
    "NonNegativeInt",
    "is_int",
    "check_each",
    "did_you_mean",
    "check_known",
    "unknown_setting",
    "refuse_unknown",
    "recallpack_error",
    "SETTING_ERRORS",
    "check_count",
    "check_max_tokens",
    "check_max_items",
    "CheckedModel",
    "json_type",
]

#: An int of at least 1 (a budget, a cap); a bool or a str of digits is refused.
PositiveInt = Annotated[int, Field(ge=1, strict=True)]
#: An int of at least 0 (a count, what is left).
NonNegativeInt = Annotated[int, Field(ge=0, strict=True)]


def check_each(
    items: Iterable[object], kind: type, error: Callable[[int, object], RecallpackError]
) -> None:
    """Raise ``error(position, item)`` for the first of ``items`` that is not a ``kind``.

    >>> check_each([1, "2"], int, lambda i, item: ConfigError(f"items[{i}] is {item!r}"))
    Traceback (most recent call last):
    recallpack.packing.errors.ConfigError: items[1] is '2'
    """
    for position, item in enumerate(items):
        if not isinstance(item, kind):
            raise error(position, item)


def did_you_mean(name: str, valid: Iterable[str], *, cutoff: float = 0.6) -> str | None:
    """The valid name closest to ``name``, or None when none is close.

    >>> did_you_mean("max_token", ["max_tokens", "max_items"]), did_you_mean("zzz", ["policy"])
    ('max_tokens', None)
    """
    close = difflib.get_close_matches(name, list(valid), n=1, cutoff=cutoff)
    return close[0] if close else None


def check_known(
    given: Iterable[str], known: Collection[str], error: Callable[[str, str | None], Exception]
) -> None:
    """Raise ``error(name, closest)`` for the first of ``given`` that is not ``known``, where
    ``closest`` is the known name :func:`did_you_mean` finds for it (None: none is close).

    >>> check_known(["query", "max_token"], ("query", "max_tokens"), lambda name, close: ConfigError(
    ...     f"unknown {name!r}; did you mean {close!r}?"))
    Traceback (most recent call last):
    recallpack.packing.errors.ConfigError: unknown 'max_token'; did you mean 'max_tokens'?
    """
    for name in given:
        if name not in known:
            raise error(name, did_you_mean(name, known))


def unknown_setting(
    owner: str, key: str, valid: Iterable[str], error: type[RecallpackError] = ConfigError
) -> RecallpackError:
    """The error for a keyword nobody takes, naming the closest valid one (or all of them)."""
    names = sorted(set(valid))
    close = did_you_mean(key, names)
    hint = f"; did you mean {close!r}?" if close else f"; valid settings: {', '.join(names)}"
    return error(f"{owner} got an unknown setting {key!r}{hint}", field=key)


def refuse_unknown(owner: str, given: Mapping[str, Any], valid: Iterable[str]) -> None:
    """Raise :func:`unknown_setting` for the first key of ``given`` that is not ``valid``."""
    valid = set(valid)
    for key in given:
        if key not in valid:
            raise unknown_setting(owner, key, valid)


#: The error of a setting's field, where it is more exact than a ConfigError.
SETTING_ERRORS: Mapping[str, type[RecallpackError]] = {
    "max_tokens": BudgetError,
    "max_items": BudgetError,
    "max_tokens_ceiling": BudgetError,
    "lane_budgets": BudgetError,
    "policy": PolicyError,
    "tokenizer": TokenizerError,
    "template": TemplateError,
}


def _fix(error: ErrorDetails, field: str) -> str:
    """What a value must be, in words, for one of pydantic's error types."""
    kind, ctx = error["type"], error.get("ctx", {})
    if kind == "greater_than_equal":
        return f"must be at least {ctx.get('ge')}"
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return "must be an int" + (" (or None for no cap)" if field == "max_items" else "")
    if kind == "bool_type":
        return "must be True or False"
    if kind == "literal_error":
        return f"must be one of {ctx.get('expected')}"
    return error["msg"]


def recallpack_error(
    owner: str,
    exc: ValidationError,
    error: type[RecallpackError] = ConfigError,
    error_of_field: Mapping[str, type[RecallpackError]] = SETTING_ERRORS,
    fields: Collection[str] = (),
) -> RecallpackError:
    """One ValidationError as one error of recallpack's tree, naming the field and the fix.

    An error a validator raised on purpose (a recallpack error) is the answer as it is;
    otherwise every problem is said after ``owner``: ``where=value fix`` (or ``where: reason``
    when a validator gave its reason, or the closest of ``fields`` to a key the model does not
    take), as ``error_of_field[field]`` or else ``error``, with ``field`` set to the first
    problem's field.
    """
    problems = exc.errors()
    for problem in problems:
        cause = problem.get("ctx", {}).get("error")
        if isinstance(cause, RecallpackError):
            if cause.field is None and problem["loc"]:
                cause.field = str(problem["loc"][0])
            return cause
    parts = []
    for problem in problems:
        where = ".".join(str(p) for p in problem["loc"])
        cause = problem.get("ctx", {}).get("error")
        if problem["type"] == "extra_forbidden":
            close = did_you_mean(str(problem["loc"][-1]), fields)
            hint = f"; did you mean {close!r}?" if close else f"; valid settings: {', '.join(sorted(fields))}"
            parts.append(f"{where}={problem.get('input')!r:.60} is not a setting{hint}")
        elif problem["type"] == "missing":
            parts.append(f"{where} is required")
        elif cause is not None:
            parts.append(f"{where}: {cause}")
        else:
            top = str(problem["loc"][0]) if problem["loc"] else ""
            parts.append(f"{where or 'value'}={problem.get('input')!r:.80} {_fix(problem, top)}")
    field = str(problems[0]["loc"][0]) if problems and problems[0]["loc"] else None
    kind = error_of_field.get(field or "", error)
    return kind(f"{owner}: " + "; ".join(parts), field=field)


def is_int(value: object, minimum: int | None = None) -> TypeGuard[int]:
    """Whether ``value`` is an int, and at least ``minimum`` when one is given: the package's one
    int check. A bool is not one (``True`` is not a budget of 1), nor a float, a str of digits or
    a NumPy integer. A check raises on False; a lenient reading of metadata takes None instead.

    >>> is_int(3, minimum=1), is_int(0, minimum=1), is_int(True), is_int(-2)
    (True, False, False, True)
    """
    return isinstance(value, int) and not isinstance(value, bool) and (minimum is None or value >= minimum)


def check_count(
    value: object,
    field: str,
    minimum: int = 0,
    error: type[RecallpackError] = BudgetError,
    *,
    why: str = "",
    label: str | None = None,
) -> int:
    """``value`` as an int of at least ``minimum``, or ``error`` naming ``field``: "``label``
    (``field`` unless given)=value must be an int of at least ``minimum``", then ``why``."""
    if not is_int(value, minimum):
        raise error(f"{label or field}={value!r} must be an int of at least {minimum}{why}", field=field)
    return value


def check_max_tokens(value: object, ceiling: int = MAX_TOKENS_CEILING, field: str = "max_tokens") -> int:
    """``value`` as a valid token budget, or a BudgetError saying what is allowed."""
    if not is_int(value):
        raise BudgetError(
            f"{field}={value!r} must be an int between 1 and {ceiling}, got {type(value).__name__}",
            field=field,
        )
    if value < 1:
        raise BudgetError(f"{field}={value} must be at least 1 (the budget is in tokens)", field=field)
    if value > ceiling:
        raise BudgetError(
            f"{field}={value} is over the ceiling of {ceiling}; pass "
            f"max_tokens_ceiling={value} as well if one request should really take that much",
            field=field,
        )
    return value


def check_max_items(value: object, field: str = "max_items") -> int | None:
    """``value`` as an item cap (None: no cap), or a BudgetError."""
    if value is None:
        return None
    if not is_int(value, 1):
        raise BudgetError(f"{field}={value!r} must be an int of at least 1, or None for no cap", field=field)
    return value


class CheckedModel(BaseModel):
    """A pydantic model whose bad input raises one error of recallpack's tree, naming the field
    and the fix, never a bare ValidationError. A subclass says which error in ``_invalid`` and
    may look at the raw keywords first in ``_precheck`` (to refuse unknown ones, say)."""

    #: The error bad input raises, unless its field names a more exact one (SETTING_ERRORS).
    _error: ClassVar[type[RecallpackError]] = ConfigError

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
        return recallpack_error(f"invalid {cls.__name__}", exc, cls._error, fields=cls.model_fields)


def json_type(value: object) -> str:
    """What a JSON value is, in words, for a message about JSON input (``"a string"``, ``"null"``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"
