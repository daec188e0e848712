"""One file cannot stop ``recallpack serve --docs``: whatever its front matter holds (a list or a
mapping as a key, nesting thousands deep, anchors and aliases, an alias bomb), reading it never
raises; the file is read or withheld, and the folder's other files are served.

The front matter is drawn as YAML node graphs and written by PyYAML's own serializer (which
writes a node met twice as an anchor and aliases), except for deep nesting, which PyYAML's
serializer cannot write (it recurses) and is written here as flow collections.
"""

from __future__ import annotations

import tracemalloc
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("yaml")
pytest.importorskip("mcp")

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client

from recallpack.adapters.mcp import build_server, docs_source
from recallpack.adapters.mcp.front_matter import front_matter_scopes

BODY = "The quokka ledger holds the terms.\n"
STR, INT, FLOAT = "tag:yaml.org,2002:str", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float"
BOOL, NULL, DATE = "tag:yaml.org,2002:bool", "tag:yaml.org,2002:null", "tag:yaml.org,2002:timestamp"
SEQ, MAP = "tag:yaml.org,2002:seq", "tag:yaml.org,2002:map"
SCALARS = st.sampled_from([
    (STR, "title"), (STR, "scope_ids"), (STR, "Scopes"), (STR, "org-secret"), (STR, ""), (INT, "42"),
    (INT, "-7"), (FLOAT, "1.5"), (FLOAT, ".nan"), (BOOL, "true"), (BOOL, "false"), (NULL, "null"),
    (NULL, "~"), (DATE, "2024-01-31"), (DATE, "2001-12-14t21:59:43.10-05:00"),
])  # fmt: skip


def _scalar(pair: tuple[str, str]) -> Any:
    return yaml.ScalarNode(pair[0], pair[1])


#: Any node: a scalar of every type, or a list or mapping whose keys are any node (a list or a
#: mapping as a key too).
NODES = st.recursive(
    SCALARS.map(_scalar),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4).map(lambda items: yaml.SequenceNode(SEQ, items)),
        st.lists(st.tuples(inner, inner), max_size=4).map(lambda pairs: yaml.MappingNode(MAP, pairs)),
    ),
    max_leaves=24,
)


@st.composite
def _graphs(draw: st.DrawFn) -> Any:
    """A top-level mapping whose nodes may be shared (written as anchors and aliases) or hold
    themselves (a cycle), with or without a scope key."""
    pool = draw(st.lists(NODES, min_size=1, max_size=6))
    pairs = []
    for _ in range(draw(st.integers(1, 6))):
        key = draw(st.one_of(st.sampled_from(pool), NODES))
        pairs.append((key, draw(st.sampled_from(pool))))
    collections = [n for n in pool if isinstance(n, (yaml.SequenceNode, yaml.MappingNode))]
    if collections and draw(st.booleans()):  # a collection that holds itself
        looped = draw(st.sampled_from(collections))
        if isinstance(looped, yaml.SequenceNode):
            looped.value.append(looped)
        else:
            looped.value.append((_scalar((STR, "self")), looped))
    if draw(st.booleans()):
        secret = yaml.SequenceNode(SEQ, [_scalar((STR, "org-secret"))])
        pairs.insert(draw(st.integers(0, len(pairs))), (_scalar((STR, "scope_ids")), secret))
    return yaml.MappingNode(MAP, pairs)


def _written(node: Any) -> str:
    return str(yaml.serialize(node, Dumper=yaml.SafeDumper))


def _nested(kind: str, depth: int) -> str:
    if kind == "list":
        return "[" * depth + "]" * depth
    if kind == "mapping":
        return "{a: " * depth + "1" + "}" * depth
    return "[{a: " * (depth // 2) + "1" + "}]" * (depth // 2)


@st.composite
def _deep(draw: st.DrawFn) -> str:
    """Front matter with one collection nested 500 to 10,000 deep, as a value or as a key."""
    nested = _nested(draw(st.sampled_from(["list", "mapping", "both"])), draw(st.integers(500, 10_000)))
    line = f"x: {nested}" if draw(st.booleans()) else f"? {nested}\n: x"
    lines = [line, "scope_ids: [org-secret]"] if draw(st.booleans()) else [line]
    return "\n".join(draw(st.permutations(lines)))


def _scoped(graph: Any) -> bool:
    """Whether the top-level mapping has a scope key (a string key that spells one)."""
    return any(isinstance(k, yaml.ScalarNode) and k.tag == STR and k.value in ("scope_ids", "Scopes")
               for k, _ in graph.value)  # fmt: skip


def _check(front: str, scoped: bool) -> tuple[tuple[str, ...], str | None]:
    """The parser's rule: it returns (never raises); a file with a scope key is scoped or withheld."""
    text = f"---\n{front}\n---\n{BODY}"
    start, ids, why = front_matter_scopes(text)
    assert 0 <= start <= len(text)
    assert why is None or isinstance(why, str)
    assert all(isinstance(i, str) and i.strip() for i in ids)
    if scoped:
        assert why is not None or ids, (front[:200], ids)
    return ids, why


@settings(max_examples=300, deadline=None)
@given(graph=_graphs())
def test_no_node_graph_raises(graph: Any) -> None:
    """Front matter of any node graph (keys of every type, aliases, cycles) is read or withheld, never raised."""
    _check(_written(graph), _scoped(graph))


@settings(max_examples=30, deadline=None)
@given(front=_deep())
def test_nesting_to_ten_thousand_never_raises(front: str) -> None:
    """Lists and mappings nested 500 to 10,000 deep, as a key or a value, are read or withheld, never raised."""
    _check(front, "scope_ids" in front)


def _laughs(levels: int, merge: bool = False) -> str:
    """Billion laughs: each level ten aliases of the one before (10**levels items expanded)."""
    if merge:
        lines = ["l0: &l0 {a: 1, b: 2}"]
        lines += [f"l{i}: &l{i} {{<<: [{', '.join([f'*l{i - 1}'] * 10)}]}}" for i in range(1, levels + 1)]
    else:
        lines = ["l0: &l0 [lol]"]
        lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, levels + 1)]
    return "\n".join([*lines, f"scope_ids: *l{levels}", f"other: *l{levels}"])


@pytest.mark.parametrize("merge", [False, True], ids=["aliases", "merge keys"])
def test_an_alias_bomb_is_withheld_in_little_memory(merge: bool) -> None:
    """Billion laughs (10**12 items expanded) is withheld while tracing less than 10 MB, so it never hangs."""
    tracemalloc.start()
    try:
        ids, why = _check(_laughs(12, merge), scoped=True)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert ids == () and why is not None
    assert peak < 10 * 2**20, peak


POISONS = {
    "a list as a key": "[a, b]: c",
    "a mapping as a key inside a value": "meta: {? {a: 1} : x}",
    "a list nested 999 deep": "x: " + _nested("list", 999),
    "a mapping nested 600 deep as a key": f"? {_nested('mapping', 600)}\n: x",
    "nesting 10,000 deep": "x: " + _nested("both", 10_000),
    "a set as a key": "? !!set {a}\n: c",
    "billion laughs": _laughs(12),
}


@pytest.mark.parametrize("poison", list(POISONS))
def test_one_poisoned_file_leaves_the_others_served(
    tmp_path: Path, poison: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """recallpack serve --docs starts over a folder with one poisoned file, names it once if withheld, and serves the rest."""
    from recallpack.adapters import mcp as mcp_adapter
    from recallpack.cli import main

    (tmp_path / "good.md").write_text(f"---\ntitle: fine\n---\n{BODY}")
    (tmp_path / "poisoned.md").write_text(f"---\n{POISONS[poison]}\nscope_ids: [org-x]\n---\nThe poisoned quokka.\n")
    served: list[Any] = []
    monkeypatch.setattr(mcp_adapter, "serve", lambda source, **kw: served.append(source))
    assert main(["serve", "--docs", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    # Named once when withheld; nesting that reads as YAML is read, and scoped by its scope_ids.
    named = 0 if poison == "a list nested 999 deep" else 1
    assert err.count("poisoned.md") == named and "internal error" not in err, err
    [source] = served

    async def ask() -> str:
        async with Client(build_server(source)) as client:
            result = await client.call_tool("recall", {"query": "quokka ledger"})
        return "".join(getattr(c, "text", "") for c in result.content)

    text = anyio.run(ask)
    assert "quokka ledger holds the terms" in text and "poisoned quokka" not in text


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(graph=_graphs())
def test_a_folder_with_any_front_matter_builds(tmp_path: Path, graph: Any) -> None:
    """docs_source builds over a folder whose one file has any drawn front matter, and serves the other file."""
    folder = tmp_path / "docs"
    folder.mkdir(exist_ok=True)
    (folder / "good.md").write_text(BODY)
    (folder / "drawn.md").write_text(f"---\n{_written(graph)}\n---\nThe drawn walrus.\n")
    source = docs_source(str(folder))
    found = anyio.run(source.recall, "quokka ledger", 512, None)
    assert any("quokka ledger" in e.text for e in found.evidence)
