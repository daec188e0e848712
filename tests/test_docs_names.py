"""The docs name only code that exists: every file path, and every code name, in docs/ and the README.

A page that says ``build_result`` in ``recallpack/packing/budget.py`` after both were renamed
misleads whoever reads it next. Code blocks are run by tests/test_readme.py; this checks the
names in the prose: a path must be a file of this repository, and a name that can only be code
(dotted, with an underscore, or CamelCase joined) must occur in the package's source.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SOURCE = "\n".join(p.read_text() for p in (ROOT / "recallpack").rglob("*") if p.suffix in (".py", ".j2"))
#: Names of other projects' code (Ray, Dask, Python, LangChain, the MCP SDK) that the docs mention
#: on purpose, and the handler class a page's own example defines.
ELSEWHERE = {"map_batches", "map_partitions", "__globals__", "langchain_classic", "run_id",
             "on_retriever_start", "on_retriever_end", "PrintPacked", "stdio_client", "ClientSession"}
CODE_NAME = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+|_\w+|[a-z]+_[a-z_]+|[A-Z][a-z]+[A-Z]\w*")
PATH = re.compile(r"(?<![\w/.])(?:recallpack|tests|examples|docs|benchmarks)/[\w./-]+")


def spans(page: Path) -> list[str]:
    """The inline code spans of ``page``, outside fenced blocks."""
    prose = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.M | re.S)
    return re.findall(r"`([^`\n]+)`", prose)


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_every_path_a_page_names_exists(page: Path) -> None:
    """Each repository path in a code span is a file or folder that exists."""
    missing = [p for span in spans(page) for p in PATH.findall(span) if not (ROOT / p.rstrip(".")).exists()]
    assert missing == []


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_every_code_name_a_page_uses_is_in_the_source(page: Path) -> None:
    """Each code-looking name in a code span (``Walk._step``, ``tokens_used``) is defined in recallpack."""
    missing = []
    for span in spans(page):
        name = span.strip().removesuffix("()")
        if PATH.fullmatch(name) or not CODE_NAME.fullmatch(name) or name in ELSEWHERE:
            continue
        last = name.rsplit(".", 1)[-1]
        if last not in ELSEWHERE and not re.search(rf"\b{re.escape(last)}\b", SOURCE):
            missing.append(span)
    assert missing == []


def test_the_check_catches_a_stale_name(tmp_path: Path) -> None:
    """The names the budget page used to cite, which no longer exist, are caught (not vacuous)."""
    stale = tmp_path / "stale.md"
    stale.write_text("The walk (`_Walk._cost` in `recallpack/packing/budget.py`), then `build_result`.\n")
    names = [s for s in spans(stale) if CODE_NAME.fullmatch(s.removesuffix("()")) and not PATH.fullmatch(s)]
    assert [n for n in names if not re.search(rf"\b{re.escape(n.rsplit('.', 1)[-1])}\b", SOURCE)] == [
        "_Walk._cost", "build_result"]
    assert not (ROOT / "recallpack/packing/budget.py").exists()
