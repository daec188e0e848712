"""The floors docs/architecture.md draws, held against every import of the package (read with ast)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "recallpack"
PAGE = ROOT / "docs" / "architecture.md"
#: The line that opens the page's picture of the floors.
FLOORS = "The floors, top to bottom:"


def floors_of(page: str) -> dict[str, int]:
    """Each room the page's picture names (a path from the repository root: a file, or a folder
    ending in ``/``) -> its floor, read from the ``floor N  path  path`` lines of the first code
    block after :data:`FLOORS`."""
    block = page.split(FLOORS, 1)[1].split("```")[1]
    rooms: dict[str, int] = {}
    for line in block.splitlines():
        match = re.match(r"\s*floor\s+(\d+)\s+(.*)", line)
        if match is None:
            continue
        for path in match.group(2).split():
            assert path not in rooms, f"{path} stands on two floors"
            rooms[path] = int(match.group(1))
    return rooms


def modules(package: Path = PACKAGE) -> dict[str, str]:
    """Every module of the package (dotted name) -> its path from the repository root."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path.relative_to(package.parent).as_posix()
    return found


def room_of(path: str, rooms: dict[str, int]) -> str | None:
    """The most specific room that holds ``path`` (the file itself, or the deepest folder)."""
    holders = [room for room in rooms if path == room or (room.endswith("/") and path.startswith(room))]
    return max(holders, key=len, default=None)


def imports_of(tree: ast.AST, known: dict[str, str]) -> set[str]:
    """Every module of the package ``tree`` imports, at the top, inside functions or under
    ``if TYPE_CHECKING:`` alike (``from package import module`` names the module)."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in known)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and node.module in known:
            for alias in node.names:
                child = f"{node.module}.{alias.name}"
                found.add(child if child in known else node.module)
    return found


def arrows(package: Path = PACKAGE) -> set[tuple[str, str]]:
    """Every import between two modules of the package: (importer, imported), as paths."""
    known = modules(package)
    return {
        (path, known[target])
        for name, path in known.items()
        for target in imports_of(ast.parse((package.parent / path).read_text()), known)
        if target != name
    }


def wrong_arrows(found: set[tuple[str, str]], rooms: dict[str, int]) -> list[str]:
    """Each arrow that runs back up, or sideways between two rooms of one floor."""
    wrong = []
    for importer, imported in sorted(found):
        here, there = room_of(importer, rooms), room_of(imported, rooms)
        if here is None or there is None or here == there:
            continue
        if rooms[there] > rooms[here]:
            wrong.append(f"{importer} (floor {rooms[here]}) -> {imported} (floor {rooms[there]}): runs back up")
        elif rooms[there] == rooms[here]:
            wrong.append(f"{importer} -> {imported}: sideways between two rooms of floor {rooms[here]}")
    return wrong


def circles(found: set[tuple[str, str]]) -> list[list[str]]:
    """The modules that import one another in a loop (Tarjan's strongly connected components)."""
    graph: dict[str, list[str]] = {}
    for importer, imported in found:
        graph.setdefault(importer, []).append(imported)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    loops: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            loop = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                loop.append(member)
                if member == node:
                    break
            if len(loop) > 1:
                loops.append(sorted(loop))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return loops


def test_every_module_stands_in_a_room_the_page_draws() -> None:
    """Every module of recallpack is in one room of the picture, and every room exists."""
    rooms = floors_of(PAGE.read_text())
    assert sorted(room for room in rooms if not (ROOT / room).exists()) == []
    assert sorted(path for path in modules().values() if room_of(path, rooms) is None) == []


def test_no_import_runs_back_up_or_sideways() -> None:
    """Every import of the package runs down the floors docs/architecture.md draws, or stays in its room."""
    assert wrong_arrows(arrows(), floors_of(PAGE.read_text())) == []


def test_no_modules_import_one_another_in_a_circle() -> None:
    """No loop of imports, counting those inside functions and under TYPE_CHECKING."""
    assert circles(arrows()) == []


def test_the_check_sees_an_arrow_up_a_sideways_one_and_a_circle(tmp_path: Path) -> None:
    """A toy package with an import back up (which closes a loop), one sideways and a loop
    through a typing import: each is found (the checks above are not vacuous)."""
    toy = tmp_path / "toy"
    (toy / "core").mkdir(parents=True)
    (toy / "hosts").mkdir()
    files = {
        "__init__.py": "",
        "core/__init__.py": "",
        "core/a.py": "def f():\n    from toy.hosts import one\n",  # up, lazily
        "core/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from toy.core import c\n",
        "core/c.py": "import toy.core.b\n",  # b and c: a circle, through a typing import
        "hosts/__init__.py": "",
        "hosts/one.py": "from toy.core.a import f\nfrom toy.hosts2 import x\n",
        "hosts2.py": "x = 1\n",
    }
    for name, code in files.items():
        (toy / name).write_text(code)
    page = f"{FLOORS}\n\n```\nfloor 2  toy/hosts/  toy/hosts2.py\nfloor 1  toy/core/  toy/__init__.py\n```\n"
    found = arrows(toy)
    assert wrong_arrows(found, floors_of(page)) == [
        "toy/core/a.py (floor 1) -> toy/hosts/one.py (floor 2): runs back up",
        "toy/hosts/one.py -> toy/hosts2.py: sideways between two rooms of floor 2",
    ]
    assert sorted(circles(found)) == [["toy/core/a.py", "toy/hosts/one.py"], ["toy/core/b.py", "toy/core/c.py"]]


@pytest.mark.parametrize(
    ("path", "room"),
    [("recallpack/adapters/mcp/server.py", "recallpack/adapters/mcp/"),
     ("recallpack/adapters/langchain_memory.py", "recallpack/adapters/"),
     ("recallpack/packing/tokenizers/base.py", "recallpack/packing/")],
)  # fmt: skip
def test_a_module_stands_in_the_most_specific_room(path: str, room: str) -> None:
    """A host's module is its host's room; a file directly under adapters/ is the adapters' own."""
    assert room_of(path, floors_of(PAGE.read_text())) == room
