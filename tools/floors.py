"""Move recallpack's modules into folders by concept and rewrite every import of them.

    python tools/floors.py PLAN [--dry-run]

PLAN names one table of moves below (``adapters``, ``packing``). For each move it runs
``git mv OLD NEW`` (so history follows), then rewrites every mention of the old module in the
tree's text: the dotted path (``recallpack.adapters._common`` -> ``recallpack.adapters.shared.components``),
``from PARENT import LEAF`` forms, and the file path (``adapters/_common.py``). A move marked
``face`` keeps its dotted path working through the new package's ``__init__`` (a face that
re-exports the moved module's ``__all__``), so its dotted mentions are left alone. A move marked
``shim`` leaves a module at the old path that forwards every public name with a
DeprecationWarning (``recallpack.packing._compat.MOVED_MODULES``). Deterministic: the same tree
and plan give the same result, and a second run finds nothing to move.
"""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Where a module's mentions are rewritten (CHANGELOG.md is history: it keeps the old names).
REWRITTEN = ("recallpack", "tests", "examples", "docs", "benchmarks", "tools")
REWRITTEN_FILES = ("README.md", "pyproject.toml", "mkdocs.yml", "Makefile", ".ci/run", ".ci/postgres.sh")
SUFFIXES = {".py", ".md", ".toml", ".yml", ".yaml", ".ipynb", ".j2", ".sh", ".cfg", ".txt", ""}


@dataclass(frozen=True)
class Move:
    old: str  # dotted module path today
    new: str  # dotted module path after the move
    face: bool = False  # the old dotted path becomes the new package's face
    shim: bool = False  # the old path keeps working one release, with a DeprecationWarning


def _plan_adapters() -> list[Move]:
    a = "recallpack.adapters"
    moves = [
        # What every host shares.
        Move(f"{a}._common", f"{a}.shared.components"),
        Move(f"{a}._depth", f"{a}.shared.depth"),
        Move(f"{a}._embeddings", f"{a}.shared.embeddings"),
        Move(f"{a}._extras", f"{a}.shared.extras"),
        Move(f"{a}._served", f"{a}.shared.served"),
        Move(f"{a}._hugging_face_reader", f"{a}.shared.hugging_face"),
        Move(f"{a}.tokenizers", f"{a}.shared.tokenizers", shim=True),
        Move(f"{a}.sizing", f"{a}.shared.sizing", shim=True),
        # LangChain.
        Move(f"{a}.langchain", f"{a}.langchain.evidence", face=True),
        Move(f"{a}._langchain_retriever", f"{a}.langchain.retriever"),
        Move(f"{a}._langchain_documents", f"{a}.langchain.documents"),
        Move(f"{a}._langchain_settings", f"{a}.langchain.settings"),
        Move(f"{a}._langchain_events", f"{a}.langchain.events"),
        Move(f"{a}._langchain_reader", f"{a}.langchain.reader"),
        Move(f"{a}._langchain_assembly", f"{a}.langchain.assembly"),
        Move(f"{a}.langchain_splitter", f"{a}.langchain.splitter", shim=True),
        Move(f"{a}.langchain_memory", f"{a}.langchain.memory", shim=True),
        # LangGraph: its own framework and extra, a LangChain retriever over its stores.
        Move(f"{a}.langgraph", f"{a}.langgraph.retriever", face=True),
        Move(f"{a}._langgraph_items", f"{a}.langgraph.items"),
        Move(f"{a}.langgraph_memory", f"{a}.langgraph.memory", shim=True),
        # LlamaIndex.
        Move(f"{a}.llamaindex", f"{a}.llamaindex.postprocessor", face=True),
        Move(f"{a}._llamaindex_retriever", f"{a}.llamaindex.retriever"),
        Move(f"{a}._llamaindex_nodes", f"{a}.llamaindex.nodes"),
        Move(f"{a}._llamaindex_settings", f"{a}.llamaindex.settings"),
        Move(f"{a}._llamaindex_events", f"{a}.llamaindex.events"),
        Move(f"{a}._llamaindex_reader", f"{a}.llamaindex.reader"),
        Move(f"{a}._llamaindex_views", f"{a}.llamaindex.views"),
        Move(f"{a}.llamaindex_splitter", f"{a}.llamaindex.splitter", shim=True),
        Move(f"{a}.llamaindex_memory", f"{a}.llamaindex.memory", shim=True),
        # The MCP server: a product of its own.
        Move(f"{a}.mcp", f"{a}.mcp.server", face=True),
    ]
    for part in (
        "auth",
        "jwt",
        "http",
        "stdio",
        "index",
        "docs",
        "folder",
        "front_matter",
        "windows",
        "tool",
        "log",
        "sources",
    ):
        moves.append(Move(f"{a}.mcp_{part}", f"{a}.mcp.{part}"))
    return moves


def _plan_packing() -> list[Move]:
    """The core's floors by concept, in the order the picture draws them: reading text, counting,
    choosing (the policies, the ledger, the walk), the block, the results. The packages that
    are folders already (tokenizers/, encodings/) stay; so do the modules every floor shares
    (errors, limits, validation, candidate, scopes, _compat) and those above the floors (the
    Packer, its settings, the pipeline, the batch). A module path the docs present keeps a shim."""
    p = "recallpack.packing"
    table = {
        # The windowing engine finds where windows end on the text's own boundaries (given the
        # counts): the tokenizers use it, so it stands under them, with the text.
        "reading": ("text", "languages", "analysis", "english", "units", "windowing"),
        "counting": ("windows", "model_budget"),
        "choosing": (
            "bm25",
            "scoring",
            "embedding",
            "focus",
            "cuts",
            "documents",
            "selection",
            "twins",
            "policies",
            "in_order",
            "passages",
            "ledger",
            "records",
            "door",
            "legacy_ledger",
            "small_room",
            "walk",
        ),
        "block": ("markdown", "template", "sandbox", "citations", "render"),
        "results": ("result", "logs", "report_html"),
    }
    #: Module paths README.md and docs/*.md present (docs/architecture.md aside).
    public = {"windows", "result", "policies", "ledger", "embedding"}
    return [
        Move(f"{p}.{name}", f"{p}.{floor}.{name}", shim=name in public)
        for floor, names in table.items()
        for name in names
    ]


def _plan_allowance() -> list[Move]:
    """An allowance's arithmetic (Allowance, Remaining) is the core's: the Packer takes it as
    ``allowance=``, and the core imports nothing above it."""
    return [Move("recallpack.allowance.budget", "recallpack.packing.allowance", shim=True)]


PLANS = {"adapters": _plan_adapters, "allowance": _plan_allowance, "packing": _plan_packing}


def _path(module: str, package: bool = False) -> Path:
    parts = module.split(".")
    return ROOT.joinpath(*parts, "__init__.py") if package else ROOT.joinpath(*parts[:-1], parts[-1] + ".py")


def _rel(module: str) -> str:
    return "/".join(module.split(".")) + ".py"


def _git(*args: str) -> None:
    subprocess.run(["git", *args], cwd=ROOT, check=True)


def _texts() -> list[Path]:
    found = [ROOT / name for name in REWRITTEN_FILES if (ROOT / name).is_file()]
    for top in REWRITTEN:
        found += [
            p
            for p in sorted((ROOT / top).rglob("*"))
            if p.is_file() and p.suffix in SUFFIXES and "__pycache__" not in p.parts
        ]
    return [p for p in found if p.resolve() != Path(__file__).resolve()]


_NAME = r"\w+(?: as \w+)?"
_FROM_IMPORT = re.compile(
    rf"^(?P<indent>[ \t]*)from (?P<parent>[\w.]+) import (?P<names>{_NAME}(?:, {_NAME})*)[ \t]*$", re.M
)


def _split_from_imports(text: str, moves: list[Move]) -> str:
    """``from PARENT import a, b as c`` where ``PARENT.a`` moved: ``a`` is imported from its new
    parent under its old name (the code that uses it is unchanged); the others stay."""
    moved = {m.old: m for m in moves if not m.face}

    def split(match: re.Match[str]) -> str:
        indent, parent = match["indent"], match["parent"]
        stay, lines = [], []
        for part in match["names"].split(", "):
            name, _, alias = part.partition(" as ")
            move = moved.get(f"{parent}.{name}")
            if move is None:
                stay.append(part)
                continue
            new_parent, new_leaf = move.new.rsplit(".", 1)
            alias = alias or name
            lines.append(
                f"{indent}from {new_parent} import {new_leaf}" + ("" if alias == new_leaf else f" as {alias}")
            )
        if not lines:
            return match[0]
        return "\n".join(([f"{indent}from {parent} import {', '.join(stay)}"] if stay else []) + lines)

    return _FROM_IMPORT.sub(split, text)


def _rewrite(text: str, moves: list[Move]) -> str:
    text = _split_from_imports(text, moves)
    # Longest old path first, so recallpack.adapters.mcp_docs is never read as ...mcp + _docs.
    for move in sorted(moves, key=lambda m: -len(m.old)):
        old_parent, old_leaf = move.old.rsplit(".", 1)
        new_parent, new_leaf = move.new.rsplit(".", 1)
        rel_old, rel_new = _rel(move.old), _rel(move.new)
        short_old, short_new = rel_old.split("/", 1)[1], rel_new.split("/", 1)[1]
        text = re.sub(rf"(?<![\w/]){re.escape(rel_old)}", rel_new, text)
        text = re.sub(rf"(?<![\w/.]){re.escape(short_old)}", short_new, text)
        # A test's path join: PACKAGE / "packing" / "render.py".
        *old_dirs, old_file = rel_old.split("/")[1:]
        *new_dirs, new_file = rel_new.split("/")[1:]
        joined_old = " / ".join(f'"{part}"' for part in [*old_dirs, old_file])
        joined_new = " / ".join(f'"{part}"' for part in [*new_dirs, new_file])
        text = text.replace(joined_old, joined_new)
        if move.face:
            continue

        # The dotted path as a regex writes it (a test's match=).
        escaped_old, escaped_new = move.old.replace(".", "\\."), move.new.replace(".", "\\.")
        text = re.sub(rf"(?<![\w.]){re.escape(escaped_old)}(?![\w])", escaped_new.replace("\\", "\\\\"), text)
        text = re.sub(rf"(?<![\w.]){re.escape(move.old)}(?![\w])", move.new, text)
    return text


COMPAT = ROOT / "recallpack" / "packing" / "_compat.py"
_OLD_PATHS = "MOVED_MODULES: Mapping[str, str] = {"


def _rewrite_compat(text: str, moves: list[Move]) -> str:
    """_compat.py: every module it names is rewritten (MOVED's keys are the modules whose
    ``__getattr__`` forwards, wherever they now live), but the keys of MOVED_MODULES, which are
    old paths on purpose; the new old paths join that table."""
    start = text.index(_OLD_PATHS) + len(_OLD_PATHS)
    end = text.index("\n}\n", start)
    table = text[start:end]
    kept = [
        line if ":" not in line else line.split(":", 1)[0] + ":" + _rewrite(line.split(":", 1)[1], moves)
        for line in table.split("\n")
    ]
    added = [f'    "{m.old}": "{m.new}",' for m in moves if m.shim and f'"{m.old}"' not in table]
    return _rewrite(text[:start], moves) + "\n".join(kept + added) + _rewrite(text[end:], moves)


ARCHITECTURE = ROOT / "docs" / "architecture.md"
#: What each new folder of the core holds, for docs/architecture.md's module list.
FOLDER_NOTES = {
    "reading": "reading text: graphemes and line breaks, languages, the analysis chain, units, window ends",
    "counting": "counting in tokens (beside tokenizers/ and encodings/): token windows, budget_for",
    "choosing": "choosing what is kept: scores, cuts, the policies, the ledger, the walk",
    "block": "the block: each value's Markdown, a caller's template, the sandbox, the view",
    "results": "the results: values, their log records, their notebook HTML",
    "shared": "what the hosts share",
}


def _relist(text: str, moves: list[Move]) -> str:
    """docs/architecture.md's module list: each moved module's entry goes under its new folder
    (an entry is its line at one indent and the deeper lines after it); an old path kept by a
    shim gets an entry of its own. Only folders directly under a package's folder are handled."""
    lines = text.split("\n")
    moved = {}
    for move in moves:
        old_rel, new_rel = _rel(move.old), _rel(move.new)
        moved[old_rel] = (new_rel, move.shim)
    out: list[str] = []
    groups: dict[str, dict[str, list[str]]] = {}  # package folder -> new folder -> entries
    folder = ""

    def flush() -> None:
        # The package's section ends at the next folder line or the list's end: its new folders go there.
        for sub, entries in groups.pop(folder, {}).items():
            out.append(f"  {sub + '/':<23}{FOLDER_NOTES.get(sub, '')}".rstrip())
            out.extend(entries)

    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("```") or (line and not line.startswith(" ")):
            flush()
        if line and not line.startswith(" ") and line.split()[0].endswith("/"):
            folder = line.split()[0]
        name = line.strip().split(" ")[0] if line.startswith("  ") and not line.startswith("   ") else ""
        if name and f"{folder}{name}" in moved:
            entry = [line]
            while i + 1 < len(lines) and lines[i + 1].startswith("   ") and lines[i + 1].strip():
                i += 1
                entry.append(lines[i])
            new_rel, shim = moved[f"{folder}{name}"]
            sub = new_rel[len(folder) :].split("/")[0]
            head = re.match(r"  (\S+)(\s*)(.*)", entry[0])
            assert head is not None
            pad = head[2][2:] if len(head[2]) > 2 else " "
            nested = [f"    {head[1]}{pad}{head[3]}".rstrip(), *entry[1:]]
            groups.setdefault(folder, {}).setdefault(sub, []).extend(nested)
            if shim:
                where = new_rel[len(folder) :]
                out.append(f"  {name:<23}the old path of {where}: its _compat line (one release)")
        else:
            out.append(line)
        i += 1
    return "\n".join(out)


def _face(move: Move) -> str:
    tree = ast.parse(_path(move.new).read_text())
    doc = ast.get_docstring(tree, clean=False) or ""
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            names = list(ast.literal_eval(node.value))
    lines = ", ".join(sorted(names, key=str.lower))
    first = doc.strip().split("\n\n")[0]
    return (
        f'"""{first}\n\nThe names live in :mod:`{move.new}`; this package hands them on."""\n\n'
        f"from {move.new} import (  # noqa: F401\n    {lines},\n)\n\n"
        f"__all__ = {names!r}\n"
    )


def _shim(move: Move) -> str:
    return (
        f'"""The old path of :mod:`{move.new}`.\n\n'
        "Every name still works for one release, with a DeprecationWarning\n"
        '(recallpack.packing._compat.MOVED_MODULES); type checkers see the names where they live now."""\n\n'
        "from typing import TYPE_CHECKING\n\n"
        "from recallpack.packing._compat import moved_module\n\n"
        f"if TYPE_CHECKING:\n    from {move.new} import *  # noqa: F403\n\n"
        "__getattr__ = moved_module(__name__)\n"
    )


def run(plan: str, dry_run: bool) -> list[str]:
    moves = PLANS[plan]()
    todo = [m for m in moves if _path(m.old).is_file() and not (m.shim and _path(m.new).is_file())]
    done: list[str] = []
    for move in todo:
        target = _path(move.new)
        done.append(f"git mv {_path(move.old).relative_to(ROOT)} {target.relative_to(ROOT)}")
        if dry_run:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        _git("mv", str(_path(move.old)), str(target))
    if dry_run or not todo:
        return done
    for folder in sorted({_path(m.new).parent for m in todo}):
        init = folder / "__init__.py"
        if not init.exists():
            faced = [m for m in todo if m.face and _path(m.new).parent == folder]
            note = FOLDER_NOTES.get(folder.name, folder.name)
            init.write_text(_face(faced[0]) if faced else f'"""{note[0].upper()}{note[1:]}."""\n')
            _git("add", str(init))
            done.append(f"wrote {init.relative_to(ROOT)}" + (" (a face)" if faced else ""))
    for path in _texts():
        text = path.read_text()
        new = _rewrite_compat(text, todo) if path == COMPAT else _rewrite(text, todo)
        if path == ARCHITECTURE:
            new = _relist(text, todo)
            new = _rewrite(new, todo)
        if new != text:
            path.write_text(new)
            done.append(f"rewrote {path.relative_to(ROOT)}")
    # Imports renamed sort differently: only their order is fixed, nothing else is reformatted.
    ruff = Path(sys.executable).with_name("ruff")
    if ruff.exists():
        sort = [str(ruff), "check", "--select", "I", "--fix", "-q", *REWRITTEN]
        subprocess.run(sort, cwd=ROOT, check=False)
        done.append("sorted the imports (ruff check --select I --fix)")
    for move in (m for m in todo if m.shim):
        _path(move.old).write_text(_shim(move))
        _git("add", str(_path(move.old)))
        done.append(f"shim {_path(move.old).relative_to(ROOT)} -> {move.new}")
    left = [
        'tests that build a path from a module\'s name (f"{m}.py"), and the module list of '
        "docs/architecture.md, which is laid out by hand: see the report of the run"
    ]
    done.append("CHECK by hand: " + left[0])
    return done


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("plan", choices=sorted(PLANS))
    parser.add_argument("--dry-run", action="store_true", help="print the moves, change nothing")
    args = parser.parse_args(argv)
    for line in run(args.plan, args.dry_run):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
