"""The shape of the package: no import cycles, small parts, one settings definition for all hosts."""

from __future__ import annotations

import ast
import inspect
import re
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


#: The modules one packing walks through, from the Packer's call to the rendered block.
WALK_MODULES = ("packer", "walk", "ledger", "render", "sandbox", "batch")
MAX_MODULE_LINES = 500
#: The pieces of the block's shape: render.py alone assembles them, from the values markdown.py
#: writes the block's way (a caller's template takes those as its filters, by markdown.FILTERS).
BLOCK_PIECES = frozenset({"header_text", "item_text", "evidence_lines", "EVIDENCE_LINE", "INDENT"})


def test_the_walks_modules_stay_under_500_lines() -> None:
    """No module a packing walks through (packer, walk, ledger, render, sandbox, batch) is over 500 lines."""
    packing = PACKAGE / "packing"
    # Found by name wherever the module stands among the core's folders.
    paths = {m: max(packing.rglob(f"{m}.py"), key=lambda p: len(p.parts)) for m in WALK_MODULES}
    long = {m: n for m, path in paths.items() if (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES}
    assert long == {}


def _names_used(tree: ast.AST) -> set[str]:
    names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    names |= {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    names |= {a.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) for a in node.names}
    return names


def test_the_blocks_shape_lives_in_render_alone() -> None:
    """No module but render.py (and markdown.py, which writes each value) names a piece of the
    block (header_text, item_text, evidence_lines, ...)."""
    elsewhere = {
        name: sorted(used)
        for name, path in _modules().items()
        if name not in ("recallpack.packing.block.render", "recallpack.packing.block.markdown") and (used := _names_used(ast.parse(path.read_text())) & BLOCK_PIECES)
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

    _profiled(profile, call)
    return out, back


def _profiled(profile: Callable[[Any, str, object], None], call: Callable[[], object]) -> None:
    """Run ``call`` with ``profile`` seeing its call events (sys.setprofile), then stop."""
    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)


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
    long = {_adapter(p): n for p in (PACKAGE / "adapters").rglob("*.py") if (n := len(p.read_text().splitlines())) >= MAX_ADAPTER_LINES}
    assert long == {}


def test_the_core_imports_no_host_framework() -> None:
    """Nothing under recallpack/packing imports langchain, llama_index or the MCP SDK (nor the
    mcp extra's BM25), even lazily. PyStemmer is a core dependency (the stemmers of every
    language), no longer the mcp extra's."""
    mcp_extra = {"mcp", "bm25s"}
    for path in (PACKAGE / "packing").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            hosts = [n for n in names if n.startswith(("langchain", "llama_index")) or n.split(".")[0] in mcp_extra]
            assert not hosts, path


# -- one host-neutral pipeline ------------------------------------------------------------------

MAX_HOST_ADAPTER_LINES = 300
#: The MCP server (adapters/mcp/) is no LangChain or LlamaIndex translator: its modules have their
#: own test below, to the same cap; every other adapter module is held here.
MCP = PACKAGE / "adapters" / "mcp"


def _adapter(path: Path) -> str:
    """An adapter module's path under recallpack/adapters/ (``mcp/docs.py``)."""
    return path.relative_to(PACKAGE / "adapters").as_posix()


def _host_adapters() -> list[Path]:
    """Every module of the adapters but the MCP server's."""
    return [p for p in sorted((PACKAGE / "adapters").rglob("*.py")) if not p.is_relative_to(MCP)]

#: What the core pipeline does once for every host (recallpack/packing/pipeline.py): no adapter
#: fuses, sizes a fetch, makes a Candidate, notes the depth or maps evidence back by rank itself.
PIPELINE_NAMES = {"fuse", "fetch_depth", "candidate_from", "Candidate", "with_fetch", "selected_ranks"}


def test_host_adapter_modules_stay_under_300_lines() -> None:
    """Each LangChain and LlamaIndex adapter module is at most 300 lines: it only translates."""
    long = {
        _adapter(p): n
        for p in _host_adapters()
        if (n := len(p.read_text().splitlines())) > MAX_HOST_ADAPTER_LINES
    }
    assert long == {}


def test_mcp_modules_stay_under_300_lines() -> None:
    """Each module of the MCP server (adapters/mcp/: the server, the tool's contract, the
    sources, the docs index) is at most 300 lines."""
    sizes = {p.name: len(p.read_text().splitlines()) for p in MCP.glob("*.py")}
    assert {"server.py", "tool.py", "sources.py", "docs.py"} <= set(sizes)
    assert {name: n for name, n in sizes.items() if n > MAX_HOST_ADAPTER_LINES} == {}


def test_no_adapter_repeats_what_the_core_pipeline_does() -> None:
    """No LangChain or LlamaIndex adapter module names fusion, the fetch depth, the Candidate
    maker or the map-back: the pipeline does each once, for both hosts. (The MCP server's own
    document source makes its Candidates from its files: it is not a host's translator.)"""
    named = {}
    for path in _host_adapters():
        tree = ast.parse(path.read_text())
        used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        used |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        used |= {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
        if found := used & PIPELINE_NAMES:
            named[_adapter(path)] = sorted(found)
    assert named == {}


# -- one pack passes through each module once -----------------------------------------------------

#: The layers a pack from an adapter passes through: the adapters' public and retriever modules,
#: their host translation modules, the pipeline, the Packer, the walk and the passages walk. Every
#: other recallpack module is a leaf: it returns values to whoever calls it (errors, Candidates,
#: text, tokenizers, validation, the view, the ledger, the events), and the trace checks it never
#: enters a layer.
PACK_LAYERS = frozenset({
    "adapters/langchain/evidence.py", "adapters/langchain/retriever.py", "adapters/langchain/documents.py",
    "adapters/llamaindex/postprocessor.py", "adapters/llamaindex/retriever.py", "adapters/llamaindex/nodes.py",
    "packing/pipeline.py", "packing/packer.py", "packing/choosing/walk.py", "packing/choosing/passages.py",
})  # fmt: skip


def _module_of(frame: Any) -> str | None:
    path = Path(frame.f_code.co_filename)
    return path.relative_to(PACKAGE).as_posix() if path.is_relative_to(PACKAGE) else None


def _owner(frame: Any) -> object:
    """The object a frame runs a method of (its ``self`` or ``cls``), or None."""
    code = frame.f_code
    return frame.f_locals.get(code.co_varnames[0]) if code.co_argcount and code.co_varnames[0] in ("self", "cls") else None


def _own_callable(frame: Any, module: str, caller: Any, stack: set[str]) -> bool:
    """Whether ``frame`` runs the caller's own callable rather than entering its module: a method
    of the caller's own object or class (an inherited or overridden one, in another module), code
    of the module that defines the caller's object (a model's validators, run by its base class),
    or a callable a module on the stack handed down (a closure, a lambda, a method of one of its
    own objects: a sort key, a callback)."""
    mine, theirs = _owner(frame), _owner(caller)
    if mine is not None and (mine is theirs or mine is type(theirs)):
        return True
    if theirs is not None and _module_of_class(theirs if isinstance(theirs, type) else type(theirs)) == module:
        return True
    if module not in stack:
        return False
    nested = "<locals>" in frame.f_code.co_qualname or frame.f_code.co_name == "<lambda>"
    return nested or (mine is not None and _module_of_class(mine if isinstance(mine, type) else type(mine)) == module)


def _module_of_class(kind: type) -> str | None:
    source = getattr(sys.modules.get(kind.__module__), "__file__", None)
    path = Path(source) if source else None
    return path.relative_to(PACKAGE).as_posix() if path is not None and path.is_relative_to(PACKAGE) else None


def _layers_entered(call: Callable[[], object]) -> tuple[list[str], list[str], list[str]]:
    """While ``call`` runs: the layers entered, in order (a call into a layer from anything but
    itself, not a resumed coroutine nor the caller's own callable, and not within the making of
    the call's Packer); the calls into a layer already on the call stack (callbacks up); and the
    calls from a leaf into a layer."""
    replace = Packer.replace.__code__
    entered: list[str] = []
    up: list[str] = []
    leaked: list[str] = []
    started: list[Any] = []  # the frames seen: a coroutine resumed is no new call

    def profile(frame: Any, event: str, arg: object) -> None:
        module = _module_of(frame) if event == "call" else None
        if module is None or any(frame is seen for seen in started):
            return
        started.append(frame)
        chain, making, back = [], frame.f_code is replace, frame.f_back
        while back is not None:
            if (name := _module_of(back)) is not None:
                chain.append((name, back))
            making = making or back.f_code is replace
            back = back.f_back
        caller, below = (chain[0] if chain else (None, None)), {name for name, _ in chain}
        if caller[0] == module or module not in PACK_LAYERS:
            return
        if caller[1] is not None and _own_callable(frame, module, caller[1], below):
            return
        if module in below:
            up.append(f"{caller[0]} -> {module}:{frame.f_code.co_name}")
        if not making:
            entered.append(module)
            if caller[0] is not None and caller[0] not in PACK_LAYERS:
                leaked.append(f"{caller[0]} -> {module}:{frame.f_code.co_name}")

    call()  # once before: what a first call imports is no part of a pack
    _profiled(profile, call)
    return entered, up, leaked


def _adapter_packs() -> dict[str, tuple[Callable[[], object], list[str]]]:
    """Each adapter entry point, over real retrievers and the stdlib's docstrings, and the layers
    its pack passes through."""
    import asyncio
    import warnings

    pytest.importorskip("langchain_core")
    pytest.importorskip("llama_index.core")
    from langchain_core.documents import Document
    from langchain_core.vectorstores import InMemoryVectorStore
    from llama_index.core import VectorStoreIndex
    from llama_index.core.schema import NodeWithScore, TextNode
    from llama_index.retrievers.bm25 import BM25Retriever as LlamaBM25

    from recallpack.adapters import langchain as lc
    from recallpack.adapters import llamaindex as li
    from recallpack.testing import HashingEmbedding, HashingEmbeddings, paragraphs

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # langchain-community's sunset notice
        from langchain_community.retrievers import BM25Retriever

    texts, query = paragraphs()[:300], "parse command line arguments"
    docs = [Document(page_content=text, metadata={"source": module}) for module, text in texts]
    bm25, store = BM25Retriever.from_documents(docs), InMemoryVectorStore.from_documents(docs, HashingEmbeddings())
    one = lc.BudgetedRetriever(bm25, max_tokens=300)
    lanes = lc.BudgetedRetriever.from_lanes({"sources": bm25, "facts": store.as_retriever()}, max_tokens=300)
    compressor = lc.BudgetCompressor(max_tokens=300)
    evidence, evidence_k = one.as_evidence(), one.as_evidence(k=3)
    nodes = [TextNode(text=text, metadata={"module": module}) for module, text in texts]
    index = VectorStoreIndex(nodes, embed_model=HashingEmbedding())
    llama = li.BudgetedRetriever(index.as_retriever(), max_tokens=300)
    llama_lanes = li.BudgetedRetriever.from_lanes(
        {"sources": index.as_retriever(), "facts": LlamaBM25.from_defaults(nodes=nodes)}, max_tokens=300
    )
    postprocessor = li.BudgetPostprocessor(max_tokens=300)
    handed = [NodeWithScore(node=node, score=1.0) for node in nodes[:40]]
    walk = ["packing/pipeline.py", "packing/packer.py", "packing/choosing/walk.py", "packing/choosing/passages.py"]
    chain = ["adapters/langchain/retriever.py", "adapters/langchain/documents.py", *walk]
    compress = ["adapters/langchain/evidence.py", "adapters/langchain/documents.py", *walk]
    retrieve = ["adapters/llamaindex/retriever.py", "adapters/llamaindex/nodes.py", *walk]
    postprocess = ["adapters/llamaindex/postprocessor.py", "adapters/llamaindex/nodes.py", *walk]
    return {
        "langchain invoke": (lambda: one.invoke(query), chain),
        "langchain ainvoke": (lambda: asyncio.run(one.ainvoke(query)), chain),
        "langchain lanes invoke": (lambda: lanes.invoke(query), chain),
        "langchain lanes ainvoke": (lambda: asyncio.run(lanes.ainvoke(query)), chain),
        "langchain recall": (lambda: one.recall(query, max_tokens=200), chain),
        "langchain as_evidence": (lambda: evidence.invoke(query), chain),
        "langchain as_evidence overrides": (lambda: evidence_k.invoke(query), chain),
        "langchain compress_documents": (lambda: compressor.compress_documents(docs[:40], query), compress),
        "langchain acompress_documents": (
            lambda: asyncio.run(compressor.acompress_documents(docs[:40], query)), compress
        ),
        "langchain render_evidence": (lambda: lc.render_evidence.invoke(docs[:10]), compress[:-1]),
        "llamaindex retrieve": (lambda: llama.retrieve(query), retrieve),
        "llamaindex aretrieve": (lambda: asyncio.run(llama.aretrieve(query)), retrieve),
        "llamaindex lanes retrieve": (lambda: llama_lanes.retrieve(query), retrieve),
        "llamaindex lanes aretrieve": (lambda: asyncio.run(llama_lanes.aretrieve(query)), retrieve),
        "llamaindex recall": (lambda: llama.recall(query, max_tokens=200, fetch_k=20), retrieve),
        "llamaindex arecall": (lambda: asyncio.run(llama.arecall(query)), retrieve),
        "llamaindex postprocess_nodes": (lambda: postprocessor.postprocess_nodes(handed, query_str=query), postprocess),
        "llamaindex apostprocess_nodes": (
            lambda: asyncio.run(postprocessor.apostprocess_nodes(handed, query_str=query)), postprocess
        ),
    }


ADAPTER_PACKS = [
    "langchain invoke", "langchain ainvoke", "langchain lanes invoke", "langchain lanes ainvoke",
    "langchain recall", "langchain as_evidence", "langchain as_evidence overrides",
    "langchain compress_documents", "langchain acompress_documents", "langchain render_evidence",
    "llamaindex retrieve", "llamaindex aretrieve", "llamaindex lanes retrieve", "llamaindex lanes aretrieve",
    "llamaindex recall", "llamaindex arecall", "llamaindex postprocess_nodes", "llamaindex apostprocess_nodes",
]  # fmt: skip


@pytest.mark.parametrize("entry", ADAPTER_PACKS)
def test_a_pack_from_each_adapter_passes_through_each_module_once(entry: str) -> None:
    """A pack from each adapter entry point passes through each module once, with no return to a
    module it has left.

    The trace follows calls between recallpack's own modules; the hosts' frames and the stdlib's
    are transparent, and so are the leaves (every module but :data:`PACK_LAYERS`: they return
    values and never call back up, which the trace checks too). Then (a) each layer (the
    adapter's public module, its host translation module, pipeline.py, packer.py, walk.py and the
    passages walk) is entered from outside at most once per pack, in that order; (b) no module
    calls into a layer already on the call stack below it, except the caller's own callables (a
    method of its own object, a model's validators, a closure, lambda or method of its own object
    it handed down). A resumed coroutine
    is no new entry. The making of the call's Packer from per-call settings (``Packer.replace``,
    before anything is fetched: the overrides are checked, and the fetch depth read from them,
    before an upstream is called) is left out of (a), and checked by (b)."""
    call, layers = _adapter_packs()[entry]
    entered, up, leaked = _layers_entered(call)
    assert (entered, up, leaked) == (layers, [], [])


def test_the_pack_trace_sees_a_return_to_a_module_left() -> None:
    """The trace above fails a pack that returns to a module it left or calls up the stack: the
    pipeline's own fetch-and-translate form (Pipeline.recall, a script's short way), handed an
    adapter's functions, enters their module again."""
    pytest.importorskip("langchain_core")
    from langchain_core.documents import Document

    from recallpack.adapters.langchain.documents import document_item, kept_documents
    from recallpack.packing.pipeline import Pipeline, Source

    docs = [Document(page_content=p) for p in (inspect.getdoc(ast) or "").split("\n\n") if p.strip()]
    pipeline = Pipeline([Source()], translate=document_item)
    packer = Packer(max_tokens=200)
    entered, _, _ = _layers_entered(lambda: kept_documents(pipeline.recall(packer, "grammar", lambda d: [docs]).kept))
    assert entered.count("adapters/langchain/documents.py") > 1


def _code_names(tree: ast.AST) -> set[str]:
    """Every identifier, attribute, keyword argument and word of a string constant of ``tree``'s
    code (docstrings are prose)."""
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docstrings.add(id(first.value))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, ast.keyword) and node.arg:
            names.add(node.arg)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            names.update(node.value.split())
    return names


def test_the_core_names_no_method_of_a_host_embedding() -> None:
    """No module under recallpack/packing names a LangChain or LlamaIndex embedding method: the
    adapters' duck-typing (adapters/shared/embeddings.py) hands the core a similarity function."""
    from recallpack.adapters.shared.embeddings import HOST_EMBEDDINGS

    methods = {name for pairs in HOST_EMBEDDINGS.values() for pair in pairs for name in pair}
    assert "embed_documents" in methods and "get_text_embedding_batch" in methods
    named = {}
    for path in (PACKAGE / "packing").rglob("*.py"):
        if found := _code_names(ast.parse(path.read_text())) & methods:
            named[_adapter(path)] = sorted(found)
    assert named == {}


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
    "language": "ru",
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
    from recallpack.adapters.shared.components import PackSettings

    adapters_own = {"policy": "passages"}
    for name, info in Packer.model_fields.items():
        if name in HOST_DECIDES:
            continue
        assert PackSettings.model_fields[name].default == adapters_own.get(name, info.default), name
    assert "join" not in PackSettings.model_fields
    assert inspect.isclass(PackSettings)


# -- the tokenizers and the windowing engine (issue 24, target shape item 3) -------------------------

#: The modules that count, cut text and window it: the tokenizers package along tiktoken's seams,
#: the text module, the windowing engine and its front, and the reader of the hosts' tokenizers.
TOKENIZING = [
    *sorted((PACKAGE / "packing" / "tokenizers").glob("*.py")),
    PACKAGE / "packing" / "encodings" / "__init__.py",
    PACKAGE / "packing" / "reading" / "text.py",
    PACKAGE / "packing" / "reading" / "windowing.py",
    PACKAGE / "packing" / "counting" / "windows.py",
    PACKAGE / "adapters" / "shared" / "tokenizers.py",
]
#: What the hosts' tokenizers are asked for: LangChain models' counter, Hugging Face's encode
#: keyword and name attribute. Only the adapters may name them.
HOST_TOKENIZER_NAMES = {"get_num_tokens", "add_special_tokens", "name_or_path", "custom_get_token_ids"}


def test_tokenizing_modules_stay_under_500_lines() -> None:
    """No module of the tokenizers package, the text module or the windowing engine is over 500 lines."""
    long = {p.name: n for p in TOKENIZING if (n := len(p.read_text().splitlines())) > 500}
    assert long == {}


def test_the_core_tokenizers_name_no_host_method() -> None:
    """The core's tokenizers, text and windowing modules name no method of a host's tokenizer
    (the adapters' reader does, and hands the core a Tokenizer)."""
    core = [p for p in TOKENIZING if "adapters" not in p.parts]
    named = {p.name: sorted(_code_names(ast.parse(p.read_text())) & HOST_TOKENIZER_NAMES) for p in core}
    assert {name: hosts for name, hosts in named.items() if hosts} == {}
    assert _code_names(ast.parse((PACKAGE / "adapters" / "shared" / "tokenizers.py").read_text())) & HOST_TOKENIZER_NAMES


def test_the_tokenizing_modules_form_no_cycle_even_counting_typing_imports() -> None:
    """No cycle runs through the tokenizing modules, counting imports under TYPE_CHECKING and in functions."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name in modules)
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("recallpack"):
                found.update(f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
                             for a in node.names)
        graph[name] = found - {name, "recallpack", "recallpack.packing", "recallpack.adapters"}
    ours = {name for name, path in modules.items() if path in TOKENIZING}

    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), list(graph.get(start, ()))
        while todo:
            node = todo.pop()
            if node == goal:
                return True
            if node not in seen:
                seen.add(node)
                todo.extend(graph.get(node, ()))
        return False

    assert sorted(name for name in ours if reaches(name, name)) == []


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
    allowance's helpers that the LangChain memory needs are public in recallpack.allowance, and
    the units the passages policy shares with the focus cut are public in packing/reading/units.py)."""
    assert _private_imports() == []


def test_the_allowance_is_a_package_of_its_parts_over_the_cores_arithmetic() -> None:
    """recallpack.allowance is receipts, assembly and recall (and budget, the old path of the
    core's packing/allowance.py), and re-exports each part's public names and the core's
    Allowance and Remaining; the core's limits no longer define the allowance's values."""
    import recallpack.allowance as allowance
    from recallpack.packing import allowance as arithmetic

    parts = {p.stem for p in (PACKAGE / "allowance").glob("*.py")} - {"__init__"}
    assert parts == {"budget", "receipts", "assembly", "recall"}
    for part in parts - {"budget"}:
        module = __import__(f"recallpack.allowance.{part}", fromlist=["__all__"])
        assert set(module.__all__) <= set(allowance.__all__), part
    assert {"Allowance", "Remaining", "as_remaining", "as_allowance"} <= set(allowance.__all__)
    assert allowance.Allowance is arithmetic.Allowance and allowance.Remaining is arithmetic.Remaining
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
    """Closest-name hints come from validation.did_you_mean alone (the token windows' too, with
    the hosts' own names for their settings first)."""
    callers = {
        name
        for name, path in _modules().items()
        if _calls(path, "difflib", "get_close_matches") and name != "recallpack.packing.validation"
    }
    assert callers == set()


def test_the_cli_maps_fields_to_flags_without_regexes() -> None:
    """The CLI says a core error in its own words from the error's field and index: it never
    rewrites the core's messages with re.sub."""
    assert _calls(PACKAGE / "cli.py", "re", "sub") == 0


#: The line that opens docs/architecture.md's list of every module, by folder.
MODULE_LIST = "Every module and package, by folder"


def _documented_paths(text: str) -> set[str]:
    """The paths (from the repository root) that the module list of an architecture page names:
    a line at column 0 is a folder's full path; an entry is indented two spaces per level under
    the last folder entry above it (a name ending in ``/``); a description's continuation lines
    are indented further and name nothing."""
    block = text.split(MODULE_LIST, 1)[1].split("```")[1]
    named: set[str] = set()
    folders: list[str] = []  # the folder of each indent level, from the root
    for line in block.splitlines():
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" "))
        name = line.split()[0]
        if indent == 0:
            folders = [name]
        elif indent % 2 == 0 and indent // 2 <= len(folders) and (name.endswith("/") or name.endswith(".py")):
            folders = folders[: indent // 2]
            if name.endswith("/"):
                folders.append(folders[-1] + name)
            name = folders[-1] + name if not name.endswith("/") else folders[-1]
        else:
            continue  # a description's continuation
        named.add(name.rstrip("/"))
    return named


def _package_paths() -> set[str]:
    """Every module (a .py file but a package's __init__.py) and every package of recallpack,
    as paths from the repository root."""
    root = PACKAGE.parent
    modules = {str(p.relative_to(root)) for p in PACKAGE.rglob("*.py") if p.name != "__init__.py"}
    packages = {str(p.parent.relative_to(root)) for p in PACKAGE.rglob("__init__.py")}
    return {m for m in modules | packages if "__pycache__" not in m}


def test_the_architecture_page_names_every_module_and_only_modules_that_exist() -> None:
    """docs/architecture.md's module list names every module and package of recallpack (the
    CLI, the bench, the adapters and the core alike), and everything it names exists."""
    named = _documented_paths((PACKAGE.parent / "docs" / "architecture.md").read_text())
    root = PACKAGE.parent
    assert sorted(p for p in named if not (root / p).exists()) == []
    # A package's __init__.py may be named too; the package's folder is what must be.
    assert sorted(_package_paths() - named) == []


def test_the_module_list_check_sees_a_module_missing_or_invented() -> None:
    """The list's parser reads nesting from the indent: a module left out, or a name that is not
    a file, shows up (the check above is not vacuous)."""
    page = (
        "## Every module and package, by folder\n```\n"
        "recallpack/              the package\n"
        "  cli.py                 the command line\n"
        "  _bench/                sections:\n"
        "    timing.py            how a call is timed,\n"
        "                         over several lines.py\n"
        "    gone.py              a module that does not exist\n"
        "  testing.py             stand-ins\n"
        "```\n"
    )
    named = _documented_paths(page)
    assert named == {"recallpack", "recallpack/cli.py", "recallpack/_bench", "recallpack/_bench/timing.py",
                     "recallpack/_bench/gone.py", "recallpack/testing.py"}
    assert not (PACKAGE / "_bench" / "gone.py").exists()
    assert "recallpack/bench.py" in _package_paths() - named
    assert "recallpack/packing/tokenizers" in _package_paths()


MAX_MODULE_LINES = 500
MAX_HOST_ADAPTER_LINES = 300
def _lines(path: Path) -> int:
    return len(path.read_text().splitlines())


def test_no_module_over_500_lines() -> None:
    """No module of the package (the bench aside) is over 500 lines, none excepted."""
    long = {
        name: n
        for name, path in _modules().items()
        if "bench" not in name and (n := _lines(path)) > MAX_MODULE_LINES
    }
    assert long == {}


#: What the hosts' model objects are read by (a LangChain chat model's profile and counter, a
#: LlamaIndex LLM's metadata): only the adapters may name them.
HOST_MODEL_NAMES = {"max_input_tokens", "context_window", "num_output", "get_num_tokens", "profile"}


def _host_model_reads(tree: ast.AST) -> set[str]:
    """Attributes named, and strings handed to getattr/hasattr, that are a host model's."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in HOST_MODEL_NAMES:
            found.add(node.attr)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr"):
            found.update(
                a.value for a in node.args[1:2] if isinstance(a, ast.Constant) and a.value in HOST_MODEL_NAMES
            )
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            found.update(a.value for a in node.args[:1] if isinstance(a, ast.Constant) and a.value in HOST_MODEL_NAMES)
    return found


def test_the_core_reads_no_host_model() -> None:
    """No module under recallpack/packing reads a host model's window or counter (budget_for
    reads them in recallpack/adapters/shared/sizing.py), and the check sees them where they are."""
    core = {p.name: sorted(_host_model_reads(ast.parse(p.read_text()))) for p in (PACKAGE / "packing").rglob("*.py")}
    assert {name: reads for name, reads in core.items() if reads} == {}
    assert _host_model_reads(ast.parse((PACKAGE / "adapters" / "shared" / "sizing.py").read_text())) >= {"context_window", "profile"}


#: What rebuilding a function of another package in a namespace of one's own needs: its code
#: object and globals, or (in the core) a private re-execution of its module.
CODE_COPYING = {"__code__", "__globals__", "__closure__", "FunctionType", "CodeType"}
RE_EXECUTING = {"module_from_spec", "exec_module"}


def test_encodings_are_built_through_tiktokens_public_seams() -> None:
    """No module copies another package's code (no ``types.FunctionType(...)``, no ``__code__``),
    the core re-runs none privately, and nothing imports tiktoken's constructors (tiktoken_ext),
    so none is patched: an encoding is a ``tiktoken.Encoding`` built from recallpack's definition."""
    found = {}
    for name, path in _modules().items():
        tree = ast.parse(path.read_text())
        banned = CODE_COPYING | (RE_EXECUTING if name.startswith("recallpack.packing") else set())
        used = (_names_used(tree) | {a.value for a in ast.walk(tree) if isinstance(a, ast.Constant)}) & banned
        imports = {
            alias.name if isinstance(node, ast.Import) else node.module or ""
            for node in ast.walk(tree)
            if isinstance(node, (ast.Import, ast.ImportFrom))
            for alias in node.names
        }
        if used or any(i.startswith("tiktoken_ext") for i in imports):
            found[name] = sorted(used) + sorted(i for i in imports if i.startswith("tiktoken_ext"))
    assert found == {}


def _isinstance_of(node: ast.AST) -> tuple[str, set[str]] | None:
    """``isinstance(x, T)`` or ``not isinstance(x, T)``: x (as source) and the names of T's types."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        node = node.operand
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance"):
        return None
    if len(node.args) != 2:
        return None
    kinds = node.args[1].elts if isinstance(node.args[1], ast.Tuple) else [node.args[1]]
    return ast.unparse(node.args[0]), {k.id for k in kinds if isinstance(k, ast.Name)}


def _hand_written_int_checks(tree: ast.AST) -> list[int]:
    """Lines where one condition tests a value for both int and bool (``isinstance(x, bool) or
    not isinstance(x, int)``, ``isinstance(x, int) and not isinstance(x, bool)``)."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.BoolOp):
            kinds: dict[str, set[str]] = {}
            for subject, names in filter(None, map(_isinstance_of, node.values)):
                kinds.setdefault(subject, set()).update(names)
            # An int check: (int, float) with bool left out is a number check, another idea.
            if any({"int", "bool"} <= names and "float" not in names for names in kinds.values()):
                lines.append(node.lineno)
    return lines


def test_ints_are_checked_by_the_validation_module_alone() -> None:
    """No module but packing/validation.py hand-writes an int-but-not-bool check: settings go
    through ``check_count``/``check_max_tokens``/``check_max_items``, lenient reads through ``is_int``."""
    found = {
        name: lines
        for name, path in _modules().items()
        if name != "recallpack.packing.validation" and (lines := _hand_written_int_checks(ast.parse(path.read_text())))
    }
    assert found == {}
    # The check sees the forms it names, where they are.
    validation = ast.parse((PACKAGE / "packing" / "validation.py").read_text())
    assert _hand_written_int_checks(validation)
    assert _hand_written_int_checks(ast.parse("if isinstance(v, bool) or not isinstance(v, int) or v < 1: pass"))
    assert _hand_written_int_checks(ast.parse("ok = isinstance(v, (str, int)) and not isinstance(v, bool)"))


# -- the hosts: a table the core reads lazily -----------------------------------------------------

#: The one module outside the adapters, the CLI and the bench that names an adapter module: by
#: string, in its host table, never by an import.
HOST_TABLE = "recallpack.packing.hosts"
#: Where the old paths of moved names are kept for a release; they name the new home by string.
COMPAT = "recallpack.packing._compat"
ADAPTER_MODULE = re.compile(r"recallpack\.adapters(?:\.\w+)*")


def _may_import_adapters(module: str) -> bool:
    """An adapter, the CLI (cli.py, _cli_*.py) or the bench (bench.py, _bench/)."""
    parts = module.split(".")
    return (
        parts[:2] == ["recallpack", "adapters"]
        or module in ("recallpack.cli", "recallpack.bench", "recallpack.__main__")
        or (len(parts) > 1 and (parts[1].startswith("_cli_") or parts[1] == "_bench"))
    )


def _adapter_names(tree: ast.AST) -> list[str]:
    """The adapter modules ``tree`` names by string (an ``importlib.import_module`` argument, a
    table), but in a docstring, or in an old path's forward (a ``moved_names(...)`` call, and
    what it is given by name)."""
    forwards: list[ast.AST] = []
    for node in ast.walk(tree):
        called = node.func if isinstance(node, ast.Call) else None
        if isinstance(called, ast.Name) and called.id == "moved_names":
            forwards.append(node)
            given = {arg.id for arg in ast.walk(node) if isinstance(arg, ast.Name)}
            forwards += [
                assign for assign in ast.walk(tree) if isinstance(assign, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id in given for t in assign.targets)
            ]  # fmt: skip
    skipped = {id(node) for node in ast.walk(tree) if isinstance(node, ast.Expr)}  # docstrings, bare strings
    skipped |= {id(inner) for forward in forwards for inner in ast.walk(forward)}
    return sorted(
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skipped
        and ADAPTER_MODULE.fullmatch(node.value)  # fmt: skip
    )


def _adapter_uses() -> dict[str, list[str]]:
    """Per module that may not import an adapter: the adapter modules it imports (anywhere, under
    TYPE_CHECKING too) or names by string (the host table and the old paths' forwards aside)."""
    modules = _modules()
    found: dict[str, list[str]] = {}
    for name, path in modules.items():
        if _may_import_adapters(name):
            continue
        tree = ast.parse(path.read_text())
        used = sorted(m for m in _imports(tree, modules, typing=True) if m.startswith("recallpack.adapters"))
        if name not in (HOST_TABLE, COMPAT):
            used += _adapter_names(tree)
        if used:
            found[name] = used
    return found


def test_no_module_but_an_adapter_the_cli_or_the_bench_imports_an_adapter() -> None:
    """No module outside recallpack/adapters/, the CLI and the bench imports recallpack.adapters,
    even lazily or for typing, and the host table (packing/hosts.py) is the one that names an
    adapter module by string, one per host."""
    assert _adapter_uses() == {}
    table = _adapter_names(ast.parse((PACKAGE / "packing" / "hosts.py").read_text()))
    from recallpack.packing.hosts import HOSTS

    assert table == sorted(host.reader for host in HOSTS)
    assert all((PACKAGE.parent / f"{reader.replace('.', '/')}.py").exists() for reader in table)


def test_the_adapter_import_check_sees_an_import_a_lazy_one_and_a_name() -> None:
    """The check sees an adapter imported at the top, inside a function, and named by string to
    importlib; it passes over docstrings and an old path's forward (the check is not vacuous)."""
    modules = _modules()
    code = (
        '"""Reads recallpack.adapters.shared.sizing in its docstring."""\n'
        "import importlib\n"
        "from recallpack.adapters import tokenizers\n"
        "def f():\n"
        "    from recallpack.adapters.shared.sizing import budget_for\n"
        "    return importlib.import_module('recallpack.adapters.langchain.reader')\n"
        "_MOVED = {'y': 'recallpack.adapters.shared.sizing'}\n"
        "__getattr__ = moved_names(__name__, {'x': 'recallpack.adapters.shared.tokenizers', **_MOVED})\n"
        "_OTHER = {'z': 'recallpack.adapters.mcp'}\n"
    )
    tree = ast.parse(code)
    imported = {m for m in _imports(tree, modules, typing=True) if m.startswith("recallpack.adapters")}
    assert imported == {"recallpack.adapters.tokenizers", "recallpack.adapters.shared.sizing"}
    assert _adapter_names(tree) == ["recallpack.adapters.langchain.reader", "recallpack.adapters.mcp"]
    assert not _may_import_adapters("recallpack.packing.hosts") and not _may_import_adapters("recallpack")
    assert all(map(_may_import_adapters, ("recallpack.cli", "recallpack._cli_serve", "recallpack._bench.timing")))
