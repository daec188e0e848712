"""Type checkers see what validation accepts: the README and docs examples pass mypy --strict and
pyright, and a misspelled keyword on any constructor is an error there, not only at run time.

Each checker runs once, in a project outside the checkout, on the examples (one module per README
section, one per docs page, as they run) and on a file of deliberate mistakes, one per line.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_install import clean_env, installed_through_import_hook

ROOT = Path(__file__).resolve().parent.parent
FENCE = re.compile(r"^```(\w+)\n(.*?)^```", re.M | re.S)
#: llama-index-retrievers-bm25 ships no type information (no py.typed); nothing of recallpack's.
MYPY_INI = """\
[mypy]
strict = True

[mypy-llama_index.retrievers.*]
ignore_missing_imports = True
"""
#: The same, under pydantic's own mypy plugin, which many pydantic users enable: it writes each
#: model's __init__ itself (keywords only, and **kwargs unless the model forbids extra ones).
MYPY_PLUGIN_INI = MYPY_INI.replace("strict = True\n", "strict = True\nplugins = pydantic.mypy\n", 1)
#: One mistake per line, each of which a type checker must report on that line.
MISTAKES = '''\
from langchain_core.documents import Document
from langchain_core.runnables import RunnableLambda
from llama_index.core.retrievers import BaseRetriever as LlamaRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle

from recallpack import Candidate, Packer, Reader, Scope
from recallpack.adapters import langchain as lc, langchain_memory as mem, llamaindex as li
from recallpack.allowance import Allowance, Remaining
from recallpack.adapters.langchain.splitter import TokenWindowSplitter
from recallpack.adapters.llamaindex.splitter import TokenWindowNodeParser


class Empty(LlamaRetriever):
    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return []


upstream: RunnableLambda[str, list[Document]] = RunnableLambda(lambda q: [Document(page_content=q)])
recaller = lc.BudgetedRetriever(upstream)
fine = [
    Packer(max_tokens=300, policy="skip", floor=False, dedupe=False),
    lc.BudgetedRetriever(upstream, max_tokens=120, fetch_k=8, k=3),
    lc.BudgetedRetriever(retriever=upstream, lane="facts"),
    li.BudgetedRetriever(Empty(), max_tokens=300, fetch_k=8),
    lc.BudgetedRetriever.from_lanes({"sources": upstream}, weights={"sources": 2.0}, max_tokens=120),
    li.BudgetedRetriever.from_lanes({"sources": Empty()}, rrf_k=30, max_tokens=300),
    TokenWindowNodeParser(120, 12),
    TokenWindowSplitter(120, 12),
    Candidate(text="x", lane="facts", scope_ids=["u-1"]),
    lc.BudgetCompressor(max_tokens=300, policy="skip"),
    li.BudgetPostprocessor(max_tokens=300),
    li.EvidenceQueryEngine(retriever=li.BudgetedRetriever(Empty())),
    li.EvidenceQueryEngine(li.BudgetedRetriever(Empty()), llm=None),
    mem.memory_search_tool(recaller, max_tokens=300, k=3, policy="truncate"),
    mem.evidence_allowance(Allowance(max_tokens=900), retriever=recaller, max_items=2),
    mem.EvidenceAllowanceMiddleware(retriever=recaller, fetch_k=8, cut="focus"),
    mem.assemble_messages([], retriever=recaller, reader=Reader.everyone()),
    Remaining(items=1, tokens=2, blocks=1),
    Scope(name="x"),
]
Packer(max_tokns=300)  # MISTAKE
lc.BudgetedRetriever(upstream, max_tokns=120)  # MISTAKE
lc.BudgetedRetriever(retriever=upstream, fetch_kk=3)  # MISTAKE
lc.BudgetCompressor(polcy="skip")  # MISTAKE
lc.EvidenceRenderer(readers=None)  # MISTAKE
li.BudgetPostprocessor(max_token=300)  # MISTAKE
li.BudgetedRetriever(Empty(), max_tokns=300)  # MISTAKE
li.BudgetedRetriever(Empty(), metadata_mod=None)  # MISTAKE
lc.BudgetedRetriever.from_lanes({"sources": upstream}, max_tokns=120)  # MISTAKE
li.BudgetedRetriever.from_lanes({"sources": Empty()}, weight={"sources": 2.0})  # MISTAKE
TokenWindowSplitter(max_tokns=120)  # MISTAKE
TokenWindowNodeParser(max_tokns=120)  # MISTAKE
Candidate(txt="x")  # MISTAKE
li.EvidenceQueryEngine(retriever=li.BudgetedRetriever(Empty()), text_qa_templat=None)  # MISTAKE
Packer(max_tokens="300")  # MISTAKE
lc.BudgetCompressor(max_tokns=300)  # MISTAKE
li.EvidenceQueryEngine(retriever=li.BudgetedRetriever(Empty()), max_tokns=300)  # MISTAKE
mem.memory_search_tool(recaller, max_tokns=300)  # MISTAKE
mem.evidence_allowance(retriever=recaller, max_item=2)  # MISTAKE
mem.EvidenceAllowanceMiddleware(retriever=recaller, fetchk=8)  # MISTAKE
mem.EvidenceAllowanceMiddleware(allowanse=None)  # MISTAKE
mem.assemble_messages([], retriever=recaller, polcy="skip")  # MISTAKE
mem.aassemble_messages([], retriever=recaller, max_tokns=300)  # MISTAKE
Allowance(max_tokns=300)  # MISTAKE
Remaining(item=1, tokens=2, blocks=1)  # MISTAKE
Reader(scope=None)  # MISTAKE
Scope(nme="x")  # MISTAKE
lc.TokenWindowSplitter(120, chunk_overlapp=12)  # MISTAKE
li.TokenWindowNodeParser(120, chunk_overlapp=12)  # MISTAKE
'''


#: Every public constructor, and every public function that passes settings on to one: each must
#: have a line of MISTAKES (a new public one must be added here, and there).
CONSTRUCTORS = {
    "Packer", "Candidate", "Reader", "Scope", "Allowance", "Remaining",
    "lc.BudgetedRetriever", "lc.BudgetedRetriever.from_lanes", "lc.BudgetCompressor", "lc.EvidenceRenderer",
    "li.BudgetedRetriever", "li.BudgetedRetriever.from_lanes", "li.BudgetPostprocessor", "li.EvidenceQueryEngine",
    "lc.TokenWindowSplitter", "li.TokenWindowNodeParser", "TokenWindowSplitter", "TokenWindowNodeParser",
    "mem.memory_search_tool", "mem.evidence_allowance", "mem.EvidenceAllowanceMiddleware",
    "mem.assemble_messages", "mem.aassemble_messages",
}


def examples() -> dict[str, str]:
    """The Python examples as modules: one per README section (the blocks of a section share a
    namespace when the README tests run them), one per docs page."""
    modules = {}
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        chunks = re.split(r"^## ", page.read_text(), flags=re.M) if page.name == "README.md" else [page.read_text()]
        for number, chunk in enumerate(chunks):
            code = "\n".join(m.group(2) for m in FENCE.finditer(chunk) if m.group(1) == "python")
            if code.strip():
                modules[f"{page.stem.replace('-', '_').lower()}_{number}.py"] = code
    return modules


def mistake_lines() -> set[int]:
    return {n for n, line in enumerate(MISTAKES.splitlines(), 1) if line.endswith("# MISTAKE")}


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A user's project holding every example and the file of mistakes."""
    if installed_through_import_hook():
        pytest.skip("recallpack is installed in editable mode through an import hook; make installs it strictly")
    path = tmp_path_factory.mktemp("typed")
    for name, code in examples().items():
        (path / name).write_text(code)
    (path / "mistakes.py").write_text(MISTAKES)
    (path / "mypy.ini").write_text(MYPY_INI)
    return path


def reported(output: str, file: str) -> dict[int, list[str]]:
    """Line number -> the errors a checker reported there, for one file (mypy's and pyright's formats)."""
    found: dict[int, list[str]] = {}
    for match in re.finditer(rf"{re.escape(file)}:(\d+)(?::\d+)?:?\s*-?\s*error:?(.*)", output):
        found.setdefault(int(match.group(1)), []).append(match.group(2).strip())
    return found


def check_output(output: str) -> None:
    examples_with_errors = {
        name: errors for name in examples() if (errors := reported(output, name))
    }
    assert examples_with_errors == {}, output
    mistakes = reported(output, "mistakes.py")
    assert set(mistakes) == mistake_lines(), output


@pytest.mark.parametrize("config", [MYPY_INI, MYPY_PLUGIN_INI], ids=["mypy", "pydantic-plugin"])
def test_examples_pass_and_mistakes_fail_under_mypy_strict(project: Path, config: str) -> None:
    """mypy --strict, with pydantic's plugin and without, accepts every README/docs example and
    reports each misspelled keyword."""
    pytest.importorskip("mypy")
    ini = project / ("plugin.ini" if "pydantic.mypy" in config else "plain.ini")
    ini.write_text(config)
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ini), "--no-incremental", "--cache-dir", os.devnull, "."],
        cwd=project, env=clean_env(), capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert "Cannot find implementation or library stub" not in done.stdout, done.stdout
    check_output(done.stdout)


def pyright_command() -> list[str]:
    exe = shutil.which("pyright", path=str(Path(sys.executable).parent)) or shutil.which("pyright")
    if exe is None:
        pytest.skip("pyright is not installed (it is in the dev extra)")
    try:  # the PyPI package fetches its node package on first use, from the npm registry
        ready = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        pytest.skip("pyright could not start in time (it fetches its node package on first use)")
    if ready.returncode != 0:
        pytest.skip(f"pyright cannot run here: {ready.stderr.strip()[:200]}")
    return [exe, "--pythonpath", sys.executable]


def test_examples_pass_and_mistakes_fail_under_pyright(project: Path) -> None:
    """pyright accepts every README/docs example and reports each misspelled keyword."""
    done = subprocess.run(
        [*pyright_command(), "."], cwd=project, env=clean_env(), capture_output=True, text=True, timeout=600
    )
    assert "could not be resolved" not in done.stdout, done.stdout
    check_output(done.stdout)


def test_every_public_constructor_has_a_misspelled_keyword_line() -> None:
    """Each public constructor (and settings-taking function) of the adapters is misspelled in
    MISTAKES, and nothing public that takes settings is missing from CONSTRUCTORS."""
    import importlib
    import inspect

    import pydantic

    called = {m.group(1) for m in re.finditer(r"^([\w.]+)\(.*# MISTAKE$", MISTAKES, re.M)}
    assert called >= CONSTRUCTORS, CONSTRUCTORS - called
    aliases = {
        "recallpack": "", "recallpack.allowance": "", "recallpack.adapters.langchain": "lc.",
        "recallpack.adapters.llamaindex": "li.", "recallpack.adapters.langchain.memory": "mem.",
    }
    public = set()
    for module, alias in aliases.items():
        for name in importlib.import_module(module).__all__:
            obj = getattr(importlib.import_module(module), name)
            takes_settings = inspect.isclass(obj) and issubclass(obj, pydantic.BaseModel) or (
                inspect.isfunction(obj) and alias == "mem."
                and any(p.kind is p.VAR_KEYWORD for p in inspect.signature(obj).parameters.values())
            )
            if takes_settings:
                public.add(alias + name)
    # Values the library builds and hands back, never built by a caller with settings.
    returned = {"Evidence", "PackReport", "TraceEntry", "Receipt", "Withheld", "Assembly", "li.RecallPackedEvent"}
    # recall_remaining passes its overrides to any Recaller's recall (recallpack.allowance cannot
    # import the adapters' RecallSettings): typed Any, and checked at run time.
    untyped = {"mem.recall_remaining", "mem.arecall_remaining"}
    assert public - returned - untyped <= CONSTRUCTORS, public - returned - untyped - CONSTRUCTORS


def test_recall_settings_name_every_setting_a_recall_takes() -> None:
    """RecallSettings, the typed **recall_overrides of the memory components, names exactly the
    Packer's settings (but the host's join) and the LangChain retriever's per-call ones."""
    from recallpack import Packer
    from recallpack.adapters.shared.components import _CALL_SETTINGS, HOST_DECIDES, RecallSettings

    expected = {*Packer.settings_names(), *_CALL_SETTINGS} - HOST_DECIDES
    assert set(RecallSettings.__annotations__) == expected


def test_candidate_signature_names_every_field() -> None:
    """Candidate's typing-only signature has every field, with the field's default."""
    import inspect
    import typing

    from recallpack import Candidate

    source = inspect.getsource(Candidate)
    assert "if TYPE_CHECKING:" in source
    stub = source[source.index("def __init__("):source.index(") -> None: ...")]
    names = re.findall(r"^\s+(\w+):", stub, re.M)
    assert names == list(Candidate.model_fields)
    for name, info in Candidate.model_fields.items():
        shown = re.search(rf"^\s+{name}: [^=\n]+(?:= (.+),)?$", stub, re.M)
        assert shown is not None, name
        if info.is_required():
            assert shown.group(1) is None, name
        elif info.default_factory is None:
            assert eval(shown.group(1), vars(sys.modules["recallpack.packing.candidate"])) == info.default, name  # noqa: S307
    assert typing.TYPE_CHECKING is False
