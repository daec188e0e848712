"""The bounded sandbox: Jinja's immutable sandbox, with every value a template makes bounded.

Jinja's sandbox keeps a template from reaching Python, not from building a huge value: ``'x' *
10**9``, ``"x"|center(10**9)``, a macro or block whose output is a loop of large strings. Every
way a value can grow by more than a constant factor in one step is checked against the render's
bound before the value is made (so no huge string ever exists), and every value made is checked
after. This module knows nothing of the evidence block: :mod:`recallpack.packing.block.render` builds
its environment here with the block's filters, and renders through :func:`generate`.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.compiler import CodeGenerator, Frame
from jinja2.sandbox import ImmutableSandboxedEnvironment

from recallpack.packing.errors import TemplateError
from recallpack.packing.validation import is_int

__all__ = ["environment", "generate"]

#: The bound of a render in progress (None: at compile time, when Jinja folds constants).
_BOUND: ContextVar[int | None] = ContextVar("recallpack_template_bound", default=None)
#: The bound when no render is in progress: a constant folded at compile time stays small.
_COMPILE_BOUND = 1 << 20
_DIGITS = re.compile(r"\d+")
_FORMAT_FIELD = re.compile(r"\{[^{}]*\}")
_PERCENT_FIELD = re.compile(r"%[-#0 +]*[\d*]*(?:\.[\d*]+)?")


def _bound() -> int:
    bound = _BOUND.get()
    return _COMPILE_BOUND if bound is None else bound


def _too_big(what: str) -> TemplateError:
    return TemplateError(
        f"template output passed {_bound():,} characters ({what}), far more than the budget can "
        "hold; check the template for a loop or filler"
    )


def _size(value: object, limit: int | None = None) -> int:
    """At least how many characters ``str(value)`` has: a string's length; for a container, its
    items' (nested ones quoted) and separators, counted until the sum passes ``limit``. A list
    of a thousand references to one long string is a thousand times that string to print."""
    limit = _bound() if limit is None else limit
    total = 0
    stack: list[tuple[object, int]] = [(value, 0)]
    seen: set[int] = set()
    while stack and total <= limit:
        item, quotes = stack.pop()
        if isinstance(item, (str, bytes)):
            total += len(item) + quotes
        elif isinstance(item, (list, tuple, set, frozenset, dict)):
            if id(item) not in seen:  # a container printed twice is counted once: a lower bound
                seen.add(id(item))
                total += 2 + 2 * len(item)
                stack.extend((child, 2) for child in (item.items() if isinstance(item, dict) else item))
        else:
            total += 1
    return total


def _checked(value: Any, what: str) -> Any:
    if _size(value) > _bound():
        raise _too_big(what)
    return value


def _check_inputs(values: Iterable[Any], what: str) -> None:
    """What a call, a filter or a join is about to turn into text is not past the bound already."""
    limit = _bound()
    if sum(_size(v, limit) for v in values) > limit:
        raise _too_big(f"{what} on values that long")


def _check_args(args: Sequence[Any], kwargs: Mapping[str, Any], what: str) -> None:
    """No argument asks for more than the bound: a width, a count, a number of repeats."""
    limit = _bound()
    for value in (*args, *kwargs.values()):
        if is_int(value) and abs(value) > limit:
            raise _too_big(f"{what} asked for {value:,}")


def _check_format(fmt: object, what: str, values: Sequence[Any] = ()) -> None:
    """No field of a format (``"{:>99999999}"``, ``"%99999999s"``) is wider than the bound, and
    its fields cannot repeat its values past it (``"{0}{0}{0}..."`` prints one value per field)."""
    if isinstance(fmt, str):
        limit = _bound()
        specs = [*_FORMAT_FIELD.findall(fmt), *_PERCENT_FIELD.findall(fmt)]
        if any(len(run) > 9 or int(run) > limit for spec in specs for run in _DIGITS.findall(spec)):
            raise _too_big(f"{what} with a field wider than it")
        if len(fmt) + len(specs) * sum(_size(v, limit) for v in values) > limit:
            raise _too_big(f"{what} whose fields repeat its values past it")


def _grows(name: str, subject: Any, args: Sequence[Any], kwargs: Mapping[str, Any]) -> int:
    """How large ``subject.name(*args)`` (or the filter ``name``) can be, for the operations whose
    result can be the product of their inputs' sizes; 0 for the rest (checked after)."""
    if name == "join" and isinstance(subject, (list, tuple)):  # the filter: items|join(separator)
        separator = args[0] if args else kwargs.get("d", "")
        return _size(separator) * len(subject) + sum(map(_size, subject))
    if not isinstance(subject, str):
        return 0
    if name == "join" and args and isinstance(args[0], (list, tuple)):  # the method: sep.join(items)
        return len(subject) * len(args[0]) + sum(map(_size, args[0]))
    if name == "replace" and len(args) >= 2:
        old, new = _size(args[0]), _size(args[1])
        return len(subject) + (len(subject) + 1) * new // max(1, old)
    if name == "expandtabs":
        size = args[0] if args else kwargs.get("tabsize", 8)
        return len(subject) + subject.count("\t") * (size if isinstance(size, int) else 8)
    if name == "translate" and args and isinstance(args[0], Mapping):  # a character to a string
        return len(subject) * max((_size(v) for v in args[0].values()), default=1)
    if name in ("indent", "wordwrap"):  # a prefix or a break per line
        extra = max((_size(v) for v in (*args, *kwargs.values())), default=0)
        return len(subject) * (1 + max(extra, 1))
    return 0


def _ints(*values: object) -> bool:
    return all(map(is_int, values))


class _BoundedSandbox(ImmutableSandboxedEnvironment):
    """The immutable sandbox, with every value a template makes bounded by the render's bound."""

    intercepted_binops = frozenset({"*", "**", "+", "%"})

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        limit = _bound()
        if operator == "*":
            for sequence, times in ((left, right), (right, left)):
                repeated = isinstance(sequence, (str, bytes, list, tuple)) and _ints(times)
                if repeated and _size(sequence, limit) * times > limit:
                    raise _too_big(f"a value {_size(sequence, limit):,} long times {times:,}")
            bits = left.bit_length() + right.bit_length() if _ints(left, right) else 0
            if bits > limit:
                raise _too_big("a product of huge numbers")
        elif operator == "**" and _ints(left, right) and abs(left) > 1:
            if right * left.bit_length() > limit:
                raise _too_big(f"{left} ** {right}")
        elif operator == "+" and not _ints(left, right) and _size(left, limit) + _size(right, limit) > limit:
            raise _too_big("a sum of long values")
        elif operator == "%" and isinstance(left, str):
            _check_format(left, "a % format", [right])
            _check_args(right if isinstance(right, tuple) else (right,), {}, "a % format")
            _check_inputs([left, right], "a % format")
        return _checked(super().call_binop(context, operator, left, right), f"the result of {operator}")

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805
        name = getattr(__obj, "__name__", type(__obj).__name__)
        # The sandbox wraps str.format in a function of its own; the string is what it wraps.
        subject = getattr(getattr(__obj, "__wrapped__", __obj), "__self__", None)
        _check_args(args, kwargs, f"{name}()")
        _check_inputs([*args, *kwargs.values()], f"{name}()")
        if name in ("format", "format_map"):
            _check_format(subject, f"{name}()", [*args, *kwargs.values()])
        if name == "generate_lorem_ipsum":  # lipsum(n, html, min, max): n paragraphs of max words
            words = kwargs.get("max", args[3] if len(args) > 3 else 100)
            paragraphs = kwargs.get("n", args[0] if args else 5)
            if _ints(words, paragraphs) and words * paragraphs * 12 > _bound():
                raise _too_big(f"lipsum() of {paragraphs:,} paragraphs")
        if _grows(name, subject, args, kwargs) > _bound():
            raise _too_big(f"{name}() of that value")
        return _checked(super().call(__context, __obj, *args, **kwargs), f"the result of {name}()")


def _bounded_concat(parts: Iterable[str]) -> str:
    """What a block, a macro or a ``~`` joins: refused before it is joined when too long."""
    parts = list(parts)
    _check_inputs(parts, "a block, macro or ~ joined")
    return "".join([str(part) for part in parts])


class _BoundedCodeGenerator(CodeGenerator):
    """Compiles ``a ~ b`` to the bounded join (Jinja's own joins without a look at the size)."""

    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:
        self.write("environment.concat((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


def _printable(value: Any) -> Any:
    return _checked(value, "a value to print")


def _bounded_filter(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    passes = getattr(fn, "jinja_pass_arg", None)

    def bounded(*args: Any, **kwargs: Any) -> Any:
        offset = 1 if passes is not None else 0  # the context or environment Jinja passes first
        value, rest = (args[offset], args[offset + 1 :]) if len(args) > offset else (None, ())
        if name == "join" and not isinstance(value, (str, list, tuple, Mapping)) and value is not None:
            value = list(value)  # a generator's items, counted before they are joined
            args = (*args[:offset], value, *rest)
        _check_args(rest, kwargs, f"the {name} filter")
        _check_inputs([value, *rest, *kwargs.values()], f"the {name} filter")
        if name == "format":
            _check_format(value, "the format filter", [*rest, *kwargs.values()])
        if _grows(name, value, rest, kwargs) > _bound():
            raise _too_big(f"the {name} filter on that value")
        return _checked(fn(*args, **kwargs), f"the {name} filter")

    if passes is not None:
        bounded.jinja_pass_arg = passes  # type: ignore[attr-defined]
    return bounded


def environment(filters: Mapping[str, Callable[..., Any]]) -> ImmutableSandboxedEnvironment:
    """A bounded sandbox for Markdown templates, with Jinja's filters and ``filters``, all bounded."""
    env = _BoundedSandbox(
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,  # Markdown, not HTML; content reaches the output only through filters
        undefined=jinja2.StrictUndefined,
    )
    env.code_generator_class = _BoundedCodeGenerator
    env.concat = _bounded_concat  # type: ignore[method-assign]
    env.finalize = _printable  # every {{ value }}, before it is made text
    env.filters.update(filters)
    env.filters = {name: _bounded_filter(name, fn) for name, fn in env.filters.items()}
    return env


def generate(chunks: Callable[[], Iterator[str]], max_chars: int | None) -> str:
    """The output of ``chunks()`` (a template's ``generate``), joined; past ``max_chars`` of
    output, or a value inside the template past it, a TemplateError raised before it exists."""
    parts: list[str] = []
    size = 0
    token = _BOUND.set(sys.maxsize if max_chars is None else max_chars)
    try:
        for chunk in chunks():
            size += len(chunk)
            if max_chars is not None and size > max_chars:
                raise _too_big("its output")
            parts.append(chunk)
    except TemplateError:
        raise
    except Exception as exc:  # a template can raise anything (1/0, a bad filter argument)
        raise TemplateError(f"template failed to render: {type(exc).__name__}: {exc}") from exc
    finally:
        _BOUND.reset(token)
    return "".join(parts)
