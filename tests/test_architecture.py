"""The shape of the package: no import cycles, small parts, one settings definition for all hosts."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from recallpack import Packer

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


def _imports(tree: ast.AST, modules: dict[str, Path], typing: bool = False) -> set[str]:
    """Every recallpack module imported anywhere in ``tree`` (inside functions too), except under
    ``if TYPE_CHECKING:``, which is typing, not a dependency (counted too when ``typing``)."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if not typing and isinstance(node, ast.If) and _is_type_checking(node):
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


def _cycles(typing: bool) -> list[list[str]]:
    modules = _modules()
    graph = {
        name: _imports(ast.parse(path.read_text()), modules, typing) - {name} for name, path in modules.items()
    }
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
    return cycles


def test_no_import_cycle_inside_the_package() -> None:
    """No two modules of recallpack import each other, directly or through others, lazily or not."""
    assert _cycles(typing=False) == []


def test_no_import_cycle_even_for_type_checkers() -> None:
    """No cycle either when imports under ``if TYPE_CHECKING:`` count: a result never needs the
    module that draws it (the notebook HTML reads results through protocols)."""
    assert _cycles(typing=True) == []


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


def _private_imports() -> list[tuple[str, str, str]]:
    found = []
    for name, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("recallpack"):
                found += [
                    (name, node.module, alias.name)
                    for alias in node.names
                    if alias.name.startswith("_") and not alias.name.startswith("__")
                ]
    return found


def test_no_module_imports_an_underscore_name_of_another() -> None:
    """What one module takes from another is public there: no ``from x import _name`` (the
    allowance's helpers that the LangChain memory needs are public in recallpack.allowance).
    packing/passages.py is left out while its speed is tuned: it still takes cuts' word helpers."""
    found = [entry for entry in _private_imports() if entry[0] != "recallpack.packing.passages"]
    assert found == []


def test_the_allowance_is_a_package_of_its_four_parts() -> None:
    """recallpack.allowance is budget, receipts, assembly and recall, and re-exports each part's
    public names; the core's limits no longer define the allowance's values."""
    import recallpack.allowance as allowance

    parts = {p.stem for p in (PACKAGE / "allowance").glob("*.py")} - {"__init__"}
    assert parts == {"budget", "receipts", "assembly", "recall"}
    for part in parts:
        module = __import__(f"recallpack.allowance.{part}", fromlist=["__all__"])
        assert set(module.__all__) <= set(allowance.__all__), part
    limits = ast.parse((PACKAGE / "packing" / "limits.py").read_text())
    assert not {"Allowance", "Remaining"} & {n.name for n in limits.body if isinstance(n, ast.ClassDef)}


def _calls(path: Path, module: str, function: str) -> int:
    tree = ast.parse(path.read_text())
    return sum(
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == function
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == module
        for node in ast.walk(tree)
    )


def test_one_did_you_mean() -> None:
    """Closest-name hints come from validation.did_you_mean alone (packing/windows.py, the
    token-window engine, is left to its own rework)."""
    callers = {
        name
        for name, path in _modules().items()
        if _calls(path, "difflib", "get_close_matches")
        and name not in ("recallpack.packing.validation", "recallpack.packing.windows")
    }
    assert callers == set()


def test_the_cli_maps_fields_to_flags_without_regexes() -> None:
    """The CLI says a core error in its own words from the error's field and index: it never
    rewrites the core's messages with re.sub."""
    assert _calls(PACKAGE / "cli.py", "re", "sub") == 0


def _documented_modules() -> dict[str, set[str]]:
    """The files and folders docs/architecture.md's layer list names, by the folder it lists."""
    text = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    block = text.split("## The layers", 1)[1].split("```")[1]
    named: dict[str, set[str]] = {}
    folder = ""
    for line in block.splitlines():
        if line.startswith("recallpack/"):
            folder = line.split()[0]
            named[folder] = set()
        elif line.startswith("  ") and not line.startswith("   ") and folder:
            named[folder].add(line.split()[0])
    return named


def test_the_architecture_page_names_the_modules_that_exist() -> None:
    """Every module docs/architecture.md lists exists, and it lists every module of the core
    and of the allowance (a new module, or a module gone, updates the page)."""
    for folder, names in _documented_modules().items():
        path = PACKAGE.parent / folder
        for name in names:
            assert list(path.glob(name.rstrip("/"))), f"{folder}{name} is documented but does not exist"
    named = _documented_modules()
    for folder in ("recallpack/packing/", "recallpack/allowance/"):
        actual = {
            p.name + ("/" if p.is_dir() else "")
            for p in (PACKAGE.parent / folder).iterdir()
            if (p.suffix == ".py" and p.name != "__init__.py") or (p.is_dir() and (p / "__init__.py").exists())
        }
        assert actual == named[folder], folder


MAX_MODULE_LINES = 500
MAX_HOST_ADAPTER_LINES = 300
#: Modules issue 24's other parts are splitting at the same time (the walk, the tokenizers, the
#: pipeline, the passages policy's tuning); each leaves this list when it is under the cap.
BEING_SPLIT = {
    "recallpack.packing.cuts",
    "recallpack.packing.packer",
    "recallpack.packing.passages",
    "recallpack.packing.tokenizer",
    "recallpack.packing.walk",
    "recallpack.packing.windows",
    "recallpack.adapters.langchain",
    "recallpack.adapters.llamaindex",
    "recallpack.adapters._llamaindex_nodes",
}


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines())


def test_no_module_over_500_lines() -> None:
    """No module of the package (the bench aside) is over 500 lines, but those being split."""
    long = {
        name: n
        for name, path in _modules().items()
        if "bench" not in name and name not in BEING_SPLIT and (n := _lines(path)) > MAX_MODULE_LINES
    }
    assert long == {}


def test_host_adapter_modules_stay_under_300_lines() -> None:
    """Each module that translates for LangChain or LlamaIndex is at most 300 lines."""
    hosts = {
        name: n
        for name, path in _modules().items()
        if name.startswith("recallpack.adapters.")
        and ("langchain" in name or "llamaindex" in name)
        and name not in BEING_SPLIT
        and (n := _lines(path)) > MAX_HOST_ADAPTER_LINES
    }
    assert hosts == {}
