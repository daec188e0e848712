"""Moved names: one table (recallpack.packing._compat), each old name working for one release."""

from __future__ import annotations

import ast
import importlib
import warnings
from pathlib import Path
from typing import Any

import pytest

import recallpack
from recallpack.packing._compat import MOVED, MOVED_MODULES, REMOVED_IN, moved_names

PACKAGE = Path(recallpack.__file__).resolve().parent
COMPAT = "recallpack.packing._compat"
ENTRIES = [(module, name, home) for module, moves in MOVED.items() for name, home in moves.homes.items()]


def _modules() -> dict[str, ast.Module]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = ast.parse(path.read_text())
    return found


def _top_level(tree: ast.Module) -> list[ast.stmt]:
    """The module's own statements, those under a top-level if/else or try included."""
    found: list[ast.stmt] = []
    todo: list[ast.stmt] = list(tree.body)
    while todo:
        node = todo.pop()
        found.append(node)
        if isinstance(node, (ast.If, ast.Try)):
            todo += [*node.body, *node.orelse, *getattr(node, "finalbody", [])]
    return found


def _moved_name_warnings(tree: ast.Module) -> list[int]:
    """Lines that make a DeprecationWarning for a name: in a module ``__getattr__``, or saying
    that something "moved to" somewhere."""
    lines = []
    getattrs = [n for n in _top_level(tree) if isinstance(n, ast.FunctionDef) and n.name == "__getattr__"]
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not any(
            isinstance(n, ast.Name) and n.id == "DeprecationWarning" for n in ast.walk(node)
        ):
            continue
        says_moved = any(
            isinstance(n, ast.Constant) and isinstance(n.value, str) and " moved to " in n.value for n in ast.walk(node)
        )
        inside_getattr = any(node in set(ast.walk(g)) for g in getattrs)
        if says_moved or inside_getattr:
            lines.append(node.lineno)
    return lines


def _shimmed(tree: ast.Module) -> bool:
    """Whether the module's ``__getattr__`` is ``moved_names(__name__)``."""
    return any(
        isinstance(node, ast.Assign)
        and [t.id for t in node.targets if isinstance(t, ast.Name)] == ["__getattr__"]
        and isinstance(node.value, ast.Call)
        and isinstance(node.value.func, ast.Name)
        and node.value.func.id == "moved_names"
        and [a.id for a in node.value.args if isinstance(a, ast.Name)] == ["__name__"]
        for node in _top_level(tree)
    )


@pytest.mark.parametrize("module, name, home", ENTRIES, ids=[f"{m}.{n}" for m, n, _ in ENTRIES])
def test_every_moved_name_still_works_and_warns_at_the_callers_line(module: str, name: str, home: str) -> None:
    """Each old name gives the object of its new home, with one DeprecationWarning naming that
    home and pointing at the line that used the old name (stacklevel)."""
    old = importlib.import_module(module)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = getattr(old, name)
    assert value is getattr(importlib.import_module(home), name)
    assert [w.category for w in caught] == [DeprecationWarning]
    assert str(caught[0].message).startswith(f"{module}.{name} moved to {home}.{name}; import it from there")
    assert caught[0].filename == __file__


@pytest.mark.parametrize("module", sorted(MOVED))
def test_a_name_no_module_had_is_an_attribute_error_without_a_warning(module: str) -> None:
    """A name an old module never had is refused as any module refuses it, and nothing warns."""
    old = importlib.import_module(module)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(AttributeError, match=rf"module '{module}' has no attribute 'no_such_name'"):
            old.no_such_name  # noqa: B018


def test_the_warnings_say_what_their_users_have_seen() -> None:
    """The three ways a warning says what goes (a name, a whole module, an alias), word for word."""
    said = {}
    for module, name in [("recallpack", "Receipt"), ("recallpack.packing.tokenizer", "CountsTokens"),
                         ("recallpack.packing.choosing.cuts", "CALLER_LOOP")]:  # fmt: skip
        with pytest.warns(DeprecationWarning) as caught:
            getattr(importlib.import_module(module), name)
        said[module] = str(caught[0].message)
    assert said == {
        "recallpack": "recallpack.Receipt moved to recallpack.allowance.Receipt; import it from there "
        "(the old name goes in the next release)",
        "recallpack.packing.tokenizer": "recallpack.packing.tokenizer.CountsTokens moved to "
        "recallpack.adapters.shared.tokenizers.CountsTokens; import it from there (the old module goes in the next release)",
        "recallpack.packing.choosing.cuts": "recallpack.packing.choosing.cuts.CALLER_LOOP moved to recallpack.packing.choosing.embedding."
        "CALLER_LOOP; import it from there (this alias goes in the next release)",
    }


def test_from_import_of_an_old_name_warns_too() -> None:
    """``from old import name`` goes through the same __getattr__: it works and warns."""
    with pytest.warns(DeprecationWarning, match=r"recallpack\.packing\.counting\.model_budget\.budget_for"):
        from recallpack.packing.sizing import budget_for  # type: ignore[attr-defined]
    assert budget_for is recallpack.budget_for


def test_no_old_name_shadows_a_name_its_module_still_has() -> None:
    """An old name is one its module no longer defines (else __getattr__ would never be asked),
    and its new home defines it."""
    for module, name, home in ENTRIES:
        assert name not in vars(importlib.import_module(module)), f"{module}.{name}"
        assert name in vars(importlib.import_module(home)), f"{home}.{name}"


def test_the_table_is_the_only_place_a_moved_name_is_kept() -> None:
    """No module but _compat makes a DeprecationWarning for a moved name, and the modules whose
    __getattr__ is ``moved_names(__name__)`` are exactly those the table lists."""
    trees = _modules()
    elsewhere = {name: lines for name, tree in trees.items() if name != COMPAT and (lines := _moved_name_warnings(tree))}
    assert elsewhere == {}
    assert _moved_name_warnings(trees[COMPAT]) != []  # the scan sees the one that exists
    assert {name for name, tree in trees.items() if _shimmed(tree)} == set(MOVED)


def test_the_scan_sees_a_hand_written_shim() -> None:
    """A module ``__getattr__`` that warns by itself, or a "moved to" warning anywhere, is found."""
    by_hand = ast.parse(
        "import warnings\n"
        "def __getattr__(name):\n"
        "    warnings.warn(f'{name} is elsewhere', DeprecationWarning, stacklevel=2)\n"
        "def other():\n"
        "    warnings.warn('x moved to y', DeprecationWarning)\n"
        "def kept():\n"
        "    warnings.warn('this method is deprecated', DeprecationWarning)\n"
    )
    assert _moved_name_warnings(by_hand) == [3, 5]


def test_the_old_names_go_in_the_release_the_table_says() -> None:
    """Every entry goes in REMOVED_IN, a release still to come: when the version reaches it, this
    fails until the old names are deleted."""
    assert {moves.removed_in for moves in MOVED.values()} == {REMOVED_IN}
    release = tuple(int(part) for part in REMOVED_IN.split("."))
    assert tuple(int(part) for part in recallpack.__version__.split(".")[:2]) < release


def test_the_tables_example_runs() -> None:
    """The >>> example of recallpack.packing._compat passes."""
    import doctest

    from recallpack.packing import _compat

    outcome = doctest.testmod(_compat)
    assert outcome.failed == 0 and outcome.attempted > 0


def test_a_module_the_table_does_not_list_has_no_moved_names() -> None:
    """Asking for the moved names of a module the table does not list is a KeyError at import."""
    with pytest.raises(KeyError):
        moved_names("recallpack.packing.choosing.walk")



# -- whole modules that moved into a folder (MOVED_MODULES) ------------------------------------


def _home_or_skip(home: str) -> Any:
    try:
        return importlib.import_module(home)
    except ImportError as missing:  # the host framework's extra is not installed here
        pytest.skip(str(missing))


@pytest.mark.parametrize("old, home", sorted(MOVED_MODULES.items()))
def test_every_public_name_of_a_moved_module_works_through_its_old_path_and_warns(old: str, home: str) -> None:
    """Each name of the new module's __all__ is reached through the old path, is the same object,
    and warns once, naming the new module, at the line that used it."""
    new = _home_or_skip(home)
    names = list(new.__all__)
    assert names
    for name in names:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            value = getattr(importlib.import_module(old), name)
        assert value is getattr(new, name)
        assert [w.category for w in caught] == [DeprecationWarning]
        assert str(caught[0].message) == (
            f"{old} moved to {home}; import {name} from there (the old module goes in the next release)"
        )
        assert caught[0].filename == __file__


@pytest.mark.parametrize("old", sorted(MOVED_MODULES))
def test_a_private_or_unknown_name_of_an_old_module_path_is_an_attribute_error(old: str) -> None:
    """Only the new module's public names pass through an old path: anything else is refused, unwarned."""
    _home_or_skip(MOVED_MODULES[old])
    module = importlib.import_module(old)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in ("no_such_name", "_private", "__wrapped__"):
            with pytest.raises(AttributeError, match=rf"module '{old}' has no attribute '{name}'"):
                getattr(module, name)


def test_from_import_through_an_old_module_path_warns() -> None:
    """``from recallpack.adapters.langchain_memory import name``, as the docs wrote it, still works, and warns."""
    memory = _home_or_skip("recallpack.adapters.langchain.memory")
    with pytest.warns(DeprecationWarning, match=r"recallpack\.adapters\.langchain\.memory; import assemble_messages"):
        from recallpack.adapters.langchain_memory import assemble_messages
    assert assemble_messages is memory.assemble_messages


def test_the_old_module_paths_are_exactly_the_tables() -> None:
    """The modules whose __getattr__ is ``moved_module(__name__)`` are those MOVED_MODULES lists, and
    each new home exists as a file."""
    shims = {
        name
        for name, tree in _modules().items()
        for node in _top_level(tree)
        if isinstance(node, ast.Assign)
        and isinstance(node.value, ast.Call)
        and isinstance(node.value.func, ast.Name)
        and node.value.func.id == "moved_module"
    }
    assert shims == set(MOVED_MODULES)
    assert all((PACKAGE.parent / f"{home.replace('.', '/')}.py").is_file() for home in MOVED_MODULES.values())
