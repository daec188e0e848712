"""The shape of the package: no import cycles, small parts, one settings definition for all hosts."""

from __future__ import annotations

import ast
import inspect
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from recallpack import Candidate, Packer

PACKAGE = Path(__file__).resolve().parents[1] / "recallpack"
MAX_FUNCTION_LINES = 80
MAX_CLASS_LINES = 200
MAX_ADAPTER_LINES = 450


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST, modules: dict[str, Path]) -> set[str]:
    """Every recallpack module imported anywhere in ``tree`` (inside functions too), except under
    ``if TYPE_CHECKING:``, which is typing, not a dependency."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in modules)
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("recallpack"):
            for alias in node.names:
                child = f"{node.module}.{alias.name}"
                found.add(child if child in modules else node.module)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def test_no_import_cycle_inside_the_package() -> None:
    """No two modules of recallpack import each other, directly or through others, lazily or not."""
    modules = _modules()
    graph = {name: _imports(ast.parse(path.read_text()), modules) - {name} for name, path in modules.items()}
    # The package __init__ files re-export; an edge into a package is not an edge back from it.
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def walk(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if nxt in ("recallpack", "recallpack.packing", "recallpack.adapters"):
                continue
            if state.get(nxt) == 1:
                cycles.append([*stack[stack.index(nxt):], nxt])
            elif nxt not in state:
                walk(nxt, [*stack, nxt])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            walk(name, [name])
    assert cycles == []


def _sizes() -> list[tuple[str, str, int]]:
    sizes = []
    for name, path in _modules().items():
        if "bench" in name:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                kind = "class" if isinstance(node, ast.ClassDef) else "function"
                assert node.end_lineno is not None
                sizes.append((f"{name}.{node.name}", kind, node.end_lineno - node.lineno + 1))
    return sizes


def test_functions_and_classes_stay_small() -> None:
    """No function over 80 lines and no class over 200 outside the bench."""
    too_big = [
        (where, lines)
        for where, kind, lines in _sizes()
        if lines > (MAX_CLASS_LINES if kind == "class" else MAX_FUNCTION_LINES)
    ]
    assert too_big == []


#: The modules one packing walks through, from the Packer's call to the rendered block.
WALK_MODULES = ("packer", "walk", "tally", "render", "sandbox", "batch")
MAX_MODULE_LINES = 500
#: The pieces of the block's shape: render.py alone assembles them.
BLOCK_PIECES = frozenset({"header_text", "item_text", "evidence_lines", "EVIDENCE_LINE", "INDENT"})


def test_the_walks_modules_stay_under_500_lines() -> None:
    """No module a packing walks through (packer, walk, tally, render, sandbox, batch) is over 500 lines."""
    packing = PACKAGE / "packing"
    long = {m: n for m in WALK_MODULES if (n := len((packing / f"{m}.py").read_text().splitlines())) > MAX_MODULE_LINES}
    assert long == {}


def _names_used(tree: ast.AST) -> set[str]:
    names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    names |= {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    names |= {a.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) for a in node.names}
    return names


def test_the_blocks_shape_lives_in_render_alone() -> None:
    """No module but render.py names a piece of the block (header_text, item_text, evidence_lines, ...)."""
    elsewhere = {
        name: sorted(used)
        for name, path in _modules().items()
        if name != "recallpack.packing.render" and (used := _names_used(ast.parse(path.read_text())) & BLOCK_PIECES)
    }
    assert elsewhere == {}


def test_no_function_of_the_core_takes_the_packer() -> None:
    """The walk is built from resolved settings: no function under recallpack/packing takes a Packer."""
    takers = []
    for name, path in _modules().items():
        if not name.startswith("recallpack.packing."):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
                annotated = [a for a in args if a.annotation is not None and "Packer" in ast.unparse(a.annotation)]
                if annotated or any(a.arg == "packer" for a in args):
                    takers.append(f"{name}.{node.name}")
    assert takers == []


def _calls_out_of_the_packer(call: Callable[[], object]) -> tuple[list[str], list[str]]:
    """While ``call`` runs: the recallpack modules packer.py calls, in order, and the modules that
    call back into packer.py."""
    packer = str(PACKAGE / "packing" / "packer.py")
    out: list[str] = []
    back: list[str] = []

    def profile(frame: Any, event: str, arg: object) -> None:
        caller = frame.f_back.f_code.co_filename if frame.f_back is not None else ""
        callee = frame.f_code.co_filename
        if event != "call" or caller == callee or not callee.startswith(str(PACKAGE)):
            return
        if caller == packer:
            out.append(Path(callee).name)
        elif callee == packer and caller.startswith(str(PACKAGE)):
            back.append(Path(caller).name)

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return out, back


@pytest.mark.parametrize(
    "settings", [{}, {"policy": "passages"}, {"policy": "truncate"}, {"join": "\n\n".join}],
    ids=["prefix", "passages", "truncate", "joined"],
)
def test_a_recall_passes_from_the_packer_into_the_walk_once(settings: dict[str, Any]) -> None:
    """Packer.recall hands its candidates to walk.py once, and nothing calls the Packer back."""
    texts = [p for p in (inspect.getdoc(ast) or "").split("\n\n") if p.strip()] * 20
    candidates = [Candidate(text=t) for t in texts]
    packer = Packer(max_tokens=200, **settings)
    out, back = _calls_out_of_the_packer(lambda: packer.recall(candidates, query="abstract syntax grammar"))
    assert (out, back) == (["walk.py"], [])
    out, back = _calls_out_of_the_packer(lambda: packer.pack(candidates))
    assert (out, back) == (["walk.py"], [])


def test_adapter_modules_stay_under_450_lines() -> None:
    """Each module under recallpack/adapters/ is a translator, under 450 lines."""
    long = {p.name: n for p in (PACKAGE / "adapters").glob("*.py") if (n := len(p.read_text().splitlines())) >= MAX_ADAPTER_LINES}
    assert long == {}


def test_the_core_imports_no_host_framework() -> None:
    """Nothing under recallpack/packing imports langchain, llama_index or the MCP SDK (nor the
    mcp extra's BM25), even lazily."""
    mcp_extra = {"mcp", "bm25s", "Stemmer"}
    for path in (PACKAGE / "packing").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            hosts = [n for n in names if n.startswith(("langchain", "llama_index")) or n.split(".")[0] in mcp_extra]
            assert not hosts, path


# -- one settings definition ----------------------------------------------------------------------

#: A valid value other than the default, for each Packer setting (a new setting must add one
#: here, and then it is checked in every host with no adapter edit).
NON_DEFAULT = {
    "max_tokens": 321,
    "max_items": 3,
    "policy": "skip",
    "floor": False,
    "cut": "head",
    "embed": None,
    "tokenizer": "chars",
    "reader": None,
    "lane_budgets": {"facts": 50},
    "dedupe": False,
    "template": "{% for item in evidence %}{{ item.text }}{% endfor %}",
    "resource_uri_template": "mem://{artifact_id}/{artifact_content_id}",
    "citation_keys": ("url",),
    "max_tokens_ceiling": 20_000,
}
HOST_DECIDES = {"join"}


def test_every_packer_setting_has_a_probe_value() -> None:
    """The table above names every Packer setting (so the host checks below cover each one)."""
    assert set(Packer.settings_names()) - HOST_DECIDES == set(NON_DEFAULT)


def _hosts() -> list[object]:
    langchain = pytest.importorskip("recallpack.adapters.langchain")
    llamaindex = pytest.importorskip("recallpack.adapters.llamaindex")
    from langchain_core.documents import Document
    from langchain_core.runnables import RunnableLambda
    from llama_index.core.retrievers import BaseRetriever as LlamaRetriever

    class Empty(LlamaRetriever):
        def _retrieve(self, query_bundle: object) -> list[object]:
            return []

    upstream = RunnableLambda(lambda q: [Document(page_content=q)])
    return [
        lambda **s: langchain.BudgetedRetriever(retriever=upstream, **s),
        lambda **s: langchain.BudgetCompressor(**s),
        lambda **s: langchain.EvidenceRenderer(**s),
        lambda **s: llamaindex.BudgetPostprocessor(**s),
        lambda **s: llamaindex.BudgetedRetriever(Empty(), **s),
    ]


@pytest.mark.parametrize("name", sorted(NON_DEFAULT))
def test_each_setting_reaches_the_packer_of_every_adapter(name: str) -> None:
    """Every Packer setting is taken by name by every adapter component, with no adapter edit."""
    value = NON_DEFAULT[name]
    expected = getattr(Packer(**{name: value}), name)
    for build in _hosts():
        component = build(**{name: value})  # type: ignore[operator]
        assert getattr(component.packer, name) == expected, (build, name)


@pytest.mark.parametrize("typo", ["max_token", "readers", "polcy", "lane_budget"])
def test_every_adapter_refuses_a_misspelled_setting(typo: str) -> None:
    """A misspelled setting is refused by each adapter with the closest valid name."""
    for build in _hosts():
        with pytest.raises(Exception, match="did you mean") as caught:
            build(**{typo: 1})  # type: ignore[operator]
        from recallpack import ConfigError

        assert isinstance(caught.value, ConfigError)


def test_adapter_fields_are_generated_from_the_packer() -> None:
    """The pydantic adapters' fields are the Packer's, inherited: same names and defaults, but the
    policy, which is passages in the adapters (they always have the query)."""
    from recallpack.adapters._common import PackSettings

    adapters_own = {"policy": "passages"}
    for name, info in Packer.model_fields.items():
        if name in HOST_DECIDES:
            continue
        assert PackSettings.model_fields[name].default == adapters_own.get(name, info.default), name
    assert "join" not in PackSettings.model_fields
    assert inspect.isclass(PackSettings)
