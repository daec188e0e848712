"""A griffe extension for the API reference: every packing setting in a table, where it is taken.

A pydantic model's constructor is ``(**data)``, so mkdocstrings shows ``Packer(**data: Any)``
and the inherited fields nowhere. Here each class that takes the Packer's settings gets a
"Settings" table at the end of its docstring: each field's name, type, default and its attribute
docstring, read (statically, as the rest of the reference is) from the models that define them,
``PackerSettings``, ``Packer`` and the adapters' ``PackSettings``. A class takes them when one of
those is among its bases, or when its ``__init__`` is typed by ``keywords_of(a settings model)``
(LlamaIndex's ``BudgetedRetriever``, which is not a pydantic model). A new setting is a new row
with no edit here; tests/test_docs_reference.py checks the built pages against the models.
"""

from __future__ import annotations

import ast
from typing import Any

import griffe

#: The models a setting is defined in, one home each: the core's settings, the Packer's own
#: ``join``, and the adapters' defaults and item settings.
SETTINGS_MODELS = (
    "recallpack.packing.settings.PackerSettings",
    "recallpack.packing.packer.Packer",
    "recallpack.adapters.shared.components.PackSettings",
)
PACKER = "recallpack.Packer"


def _ancestors(cls: griffe.Class) -> list[griffe.Class]:
    """``cls`` and its bases that griffe can resolve (those of this package), nearest first."""
    found, todo = [], [cls]
    while todo:
        current = todo.pop(0)
        if current.path not in {c.path for c in found}:
            found.append(current)
            try:
                todo.extend(b for b in current.resolved_bases if isinstance(b, griffe.Class))
            except griffe.AliasResolutionError:
                continue
    return found


def _settings_model(cls: griffe.Class) -> griffe.Class | None:
    """What ``cls`` takes its settings from: itself, or the model its ``__init__`` is typed by."""
    init = cls.members.get("__init__")
    for decorator in getattr(init, "decorators", ()):
        value = decorator.value
        if isinstance(value, griffe.ExprCall) and str(value.function) == "keywords_of" and value.arguments:
            model = value.arguments[0]
            if isinstance(model, griffe.ExprName):
                target = cls.modules_collection[model.canonical_path]
                return target.final_target if isinstance(target, griffe.Alias) else target
    return cls


def _target(name: Any, at: griffe.Object) -> Any:
    """What the name ``name`` (seen from ``at``) refers to, its aliases followed; None if unknown."""
    try:
        target = at.modules_collection[name.canonical_path]
        return target.final_target if isinstance(target, griffe.Alias) else target
    except (KeyError, griffe.AliasResolutionError):
        return None


def _literal(expr: Any, at: griffe.Object) -> str:
    """A default as Python shows it: a constant's value when the name holds a literal."""
    if isinstance(expr, griffe.ExprName):
        target = _target(expr, at)
        if isinstance(target, griffe.Attribute) and target.value is not None:
            return _literal(target.value, target)
        return str(expr)
    try:
        return repr(ast.literal_eval(str(expr)))
    except (ValueError, SyntaxError):
        return str(expr)


def _default(value: Any, at: griffe.Object) -> str:
    """The default of a field whose value is ``value`` (``Field(default=...)`` or a plain value)."""
    if isinstance(value, griffe.ExprCall) and str(value.function) == "Field":
        for argument in value.arguments:
            if isinstance(argument, griffe.ExprKeyword) and argument.name == "default":
                return _literal(argument.value, at)
            if isinstance(argument, griffe.ExprKeyword) and argument.name == "default_factory":
                return f"{argument.value}()"
        return "required"
    return "required" if value is None else _literal(value, at)


def _type(annotation: Any, at: griffe.Object) -> str:
    """A field's type as a reader wants it: ``Annotated`` unwrapped, a Literal alias spelled out."""
    if isinstance(annotation, griffe.ExprSubscript) and str(annotation.left) == "Annotated":
        inner = annotation.slice
        return _type(inner.elements[0] if isinstance(inner, griffe.ExprTuple) else inner, at)
    if isinstance(annotation, griffe.ExprName):
        target = _target(annotation, at)
        if isinstance(target, griffe.Attribute) and str(target.value or "").startswith("Literal["):
            return str(target.value)
    return str(annotation)


def settings_rows(cls: griffe.Class) -> list[tuple[str, str, str, str]]:
    """Each setting ``cls`` takes: (name, type, default, meaning), in the models' source order,
    a subclass's definition of a field replacing its base's in place."""
    model = _settings_model(cls)
    if not isinstance(model, griffe.Class):
        return []
    homes = [c for c in reversed(_ancestors(model)) if c.path in SETTINGS_MODELS]
    rows: dict[str, tuple[str, str, str, str]] = {}
    for home in homes:
        for name, member in home.members.items():
            if (
                name.startswith("_")
                or name == "model_config"
                or not isinstance(member, griffe.Attribute)
                or "property" in member.labels
                or member.annotation is None
                or str(member.annotation).startswith("ClassVar")
            ):
                continue
            meaning = " ".join((member.docstring.value if member.docstring else "").split())
            rows[name] = (name, _type(member.annotation, home), _default(member.value, home), meaning)
    return list(rows.values())


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def settings_table(cls: griffe.Class, rows: list[tuple[str, str, str, str]]) -> str:
    """The Markdown that ends ``cls``'s docstring: a sentence on where the settings come from,
    and the table."""
    if any(name == "join" for name, *_ in rows):
        intro = (
            "**Settings.** Every setting, validated once when the Packer is built; a call takes "
            "overrides of the same names (`recall(..., max_tokens=200)`), and so do "
            "[`recall`][recallpack.recall], [`pack`][recallpack.pack] and "
            "[`recall_many`][recallpack.recall_many] and every adapter component."
        )
    elif cls.path.startswith("recallpack.adapters."):
        intro = (
            f"**Settings.** Every [`Packer`][{PACKER}] setting but `join` (what the model is shown, "
            "which the host decides), by the same names, at construction and per call; the "
            "adapters' own default policy, and how an item's lane is read."
        )
    else:
        intro = f"**Settings.** Every [`Packer`][{PACKER}] setting but `join`."

    # In div.settings-table, which docs/stylesheets/reference.css fits to the page (md_in_html).
    lines = [intro, "", '<div class="settings-table" markdown="1">', ""]
    lines += ["| Setting | Type | Default | Meaning |", "| --- | --- | --- | --- |"]
    # A pipe inside a code span does not end a cell (Python-Markdown's tables); in prose it must be escaped.
    lines += [f"| `{n}` | `{t}` | `{d}` | {_cell(m)} |" for n, t, d, m in rows]
    lines += ["", "</div>"]
    return "\n".join(lines)


class SettingsTables(griffe.Extension):
    """Append the settings table to each class that takes the Packer's settings."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        if pkg.name != "recallpack":
            return
        for cls in _classes(pkg):
            rows = settings_rows(cls)
            if rows and cls.docstring is not None:
                cls.docstring.value = f"{cls.docstring.value}\n\n{settings_table(cls, rows)}"
            if cls.path in SETTINGS_MODELS and rows:
                _keyword_signature(cls, rows)


def _keyword_signature(cls: griffe.Class, rows: list[tuple[str, str, str, str]]) -> None:
    """Give a settings model the signature it is called with, every setting by keyword, in
    place of the ``(**data)`` its validating base class declares."""
    keyword = griffe.ParameterKind.keyword_only
    parameters = [griffe.Parameter("self", kind=griffe.ParameterKind.positional_or_keyword)]
    parameters += [griffe.Parameter(n, annotation=t, kind=keyword, default=d) for n, t, d, _ in rows]
    init = griffe.Function("__init__", parameters=griffe.Parameters(*parameters), returns="None")
    init.labels.add("synthesized")
    cls.set_member("__init__", init)


def _classes(module: griffe.Module) -> list[griffe.Class]:
    """Every class defined in ``module`` and its submodules (aliases aside)."""
    found: list[griffe.Class] = []
    for member in module.members.values():
        if isinstance(member, griffe.Alias):
            continue
        if isinstance(member, griffe.Module):
            found += _classes(member)
        elif isinstance(member, griffe.Class):
            found.append(member)
    return found
