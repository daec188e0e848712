"""Names say one thing: no two modules define the same public class or function, and none
shadows a name of Python's own."""

from __future__ import annotations

import ast
import builtins
import collections
import collections.abc
import typing
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "recallpack"

#: The same component in each host, by design: the contract names both
#: (``recallpack.adapters.langchain.BudgetedRetriever``, ``...llamaindex.BudgetedRetriever``).
HOST_TWINS = {"BudgetedRetriever", "LanesSettings"}
#: What each host's reader module defines for the host table (recallpack.packing.hosts), by name.
HOST_READER_NAMES = {"read_tokenizer", "read_embedding", "read_model", "read_depth", "read_retriever"}

#: What a reader takes a bare name to mean.
PYTHONS_OWN = set(dir(builtins)) | set(collections.__all__) | set(collections.abc.__all__) | set(typing.__all__)


def _definitions(paths: list[Path], root: Path = PACKAGE.parent) -> dict[str, list[str]]:
    """Each public class and function defined at a module's top level, with where (under ``root``)."""
    found: defaultdict[str, list[str]] = defaultdict(list)
    for path in paths:
        for node in ast.parse(path.read_text()).body:
            defines = isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            if defines and not node.name.startswith("_"):
                found[node.name].append(str(path.relative_to(root)))
    return found


def _package() -> list[Path]:
    return [p for p in PACKAGE.rglob("*.py") if "_bench" not in p.parts and p.name != "bench.py"]


def test_no_two_modules_define_the_same_public_name() -> None:
    """A class or function name is defined once in the package (Source, Kept, Outcome and
    documents_of each had two definitions), the hosts' twin components and the names each host's
    reader module defines for the host table aside."""
    twice = {name: where for name, where in _definitions(_package()).items() if len(where) > 1}
    readers = {name: where for name, where in twice.items() if name in HOST_READER_NAMES}
    # A host's reader is its folder's reader.py (adapters/langchain/reader.py, ...).
    assert all(Path(p).name == "reader.py" for where in readers.values() for p in where), readers
    assert set(twice) - set(readers) == HOST_TWINS, twice


def test_no_module_shadows_a_name_of_pythons_own() -> None:
    """No public class or function is named like a builtin, a collections or a typing name
    (windowing.Counter read as collections.Counter)."""
    assert sorted(set(_definitions(_package())) & PYTHONS_OWN) == []


def test_the_name_checks_see_a_homonym_and_a_shadow(tmp_path: Path) -> None:
    """Two modules defining one name, and a class called Counter, are found (the checks above
    are not vacuous)."""
    (tmp_path / "a.py").write_text("class Source:\n    pass\n")
    (tmp_path / "b.py").write_text(
        "from typing import Protocol\nclass Source(Protocol):\n    pass\nclass Counter:\n    pass\n"
    )
    found = {name: len(where) for name, where in _definitions(sorted(tmp_path.glob("*.py")), tmp_path).items()}
    assert found == {"Source": 2, "Counter": 1}
    assert set(found) & PYTHONS_OWN == {"Counter"}

