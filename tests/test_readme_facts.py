"""What the README states about the package itself (its extras, the scope_ids rule, the test
count's place) agrees with pyproject.toml and the code, so the README cannot drift from them."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from recallpack.packing.candidate import scope_ids_of
from recallpack.packing.translate import scope_ids_from

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from Python 3.11")
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
#: How the README names a distribution whose name alone says little.
SPOKEN = {"mcp": "the MCP SDK", "ray": "ray[data]", "mkdocstrings": "mkdocstrings"}


def _name(requirement: str) -> str:
    """A requirement's distribution name: ``PyJWT[crypto]>=2.8`` is ``PyJWT``."""
    found = re.match(r"[A-Za-z0-9._-]+", requirement)
    assert found is not None, requirement
    return found.group(0)


def _extras_table() -> dict[str, str]:
    """The README's extras table: extra (``(none)`` for the core) -> what it says the extra adds."""
    rows = re.findall(r"^\| (`[\w-]+`|\(none\)) \| ([^|]+) \|", README, re.M)
    return {extra.strip("`"): adds for extra, adds in rows}


def _mentions(cell: str, requirement: str) -> bool:
    name = _name(requirement)
    spoken = SPOKEN.get(name.lower(), name)
    return re.search(rf"(?<![\w-]){re.escape(spoken)}(?![\w-])", cell, re.I) is not None


def test_the_core_row_names_every_dependency_and_no_extra_names_one() -> None:
    """The table's (none) row names each core dependency (PyStemmer among them), and no extra's row
    lists a core dependency as what that extra adds."""
    table = _extras_table()
    core = PROJECT["dependencies"]
    assert [r for r in core if not _mentions(table["(none)"], r)] == [], table["(none)"]
    for extra, adds in table.items():
        if extra != "(none)":
            assert [r for r in core if _mentions(adds, r)] == [], (extra, adds)


def test_each_extra_row_names_what_that_extra_adds() -> None:
    """Every extra in pyproject.toml has a row, and its row names each package the extra adds
    (another extra by name, in backticks), unless the row ends in "..." (a long list, abridged)."""
    table = _extras_table()
    extras: dict[str, list[str]] = PROJECT["optional-dependencies"]
    assert set(extras) <= set(table), set(extras) - set(table)
    for extra, requirements in extras.items():
        adds = table[extra]
        if adds.rstrip().endswith("..."):
            continue
        for requirement in requirements:
            inner = re.fullmatch(r"recallpack\[([\w,-]+)\]", requirement)
            if inner:
                named = [f"`{e}`" in adds or (e in ("langchain", "llamaindex") and "both of the above" in adds)
                         for e in inner.group(1).split(",")]
                assert all(named), (extra, requirement, adds)
            else:
                assert _mentions(adds, requirement), (extra, requirement, adds)


def _scope_sentence() -> str:
    """The README's statement of what ``metadata["scope_ids"]`` may hold."""
    found = re.search(r'`metadata\["scope_ids"\]`.*?\(`malformed_scope`\)', README, re.S)
    assert found is not None, "the README no longer says what metadata['scope_ids'] may hold"
    return " ".join(found.group(0).split())


def test_the_scope_ids_rule_is_the_cores() -> None:
    """The README's rule for metadata["scope_ids"] is what the adapters apply: one string is one
    scope, and each value it lists as malformed withholds the item."""
    sentence = _scope_sentence()
    one, many = scope_ids_from({"scope_ids": "org-1"}), scope_ids_from({"scope_ids": ["org-1", "u-7"]})
    assert one == (("org-1",), None) and many == (("org-1", "u-7"), None)
    assert "one non-empty string" in sentence, sentence
    examples = re.search(r"\(((?:`[^`]+`, )+)\.\.\.\)", sentence)
    assert examples is not None, sentence
    values = [ast.literal_eval(v) for v in re.findall(r"`([^`]+)`", examples.group(1))]
    assert len(values) >= 4
    for value in values:
        scope_ids, error = scope_ids_from({"scope_ids": value})
        assert scope_ids == () and error is not None and scope_ids_of(value) is None, value


def test_the_test_count_is_a_floor_that_ci_checks() -> None:
    """The README's count of tests is a floor that .ci/run holds to the run, not a number that drifts."""
    stated = re.search(r"every test, more than ([\d,]+) of them", README)
    assert stated is not None and int(stated.group(1).replace(",", "")) >= 2000
    assert "every test, more than [0-9,]* of them" in (ROOT / ".ci" / "run").read_text()
