"""Front matter read by a real parser, failing closed: scoped text never reaches a reader outside
its scopes, through ``recall`` or ``resources/read``, however the front matter is spelled.

Each case serves a folder in-process (the SDK's own client on ``build_server``) to two readers:
one outside the secret's scope and one inside it. The outsider must never see the secret; the
insider must either see it or find the file named among those withheld at start.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp")
pytest.importorskip("yaml")

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client
from mcp.shared.exceptions import MCPError

from recallpack import Reader, Scope
from recallpack.adapters.mcp import build_server, docs_source
from recallpack.adapters.mcp.docs import DocsIndex, front_matter_scopes

SECRET = "The zyxwvut ledger holds the undisclosed terms."
PUBLIC = "The public notes mention the zyxwvut once, openly."
OUTSIDER = Reader(id="u-out", scopes={"org-public": Scope(name="public")})
INSIDER = Reader(id="u-in", scopes={"org-public": Scope(name="public"), "org-secret": Scope(name="secret")})


async def _seen(folder: Path, reader: Reader) -> tuple[list[str], Any]:
    """Every text ``reader`` is served: the recall block, and each window read by its URI."""
    source = docs_source(str(folder), reader=reader)
    index = DocsIndex(folder, source.packer, window_tokens=200, overlap_tokens=20)
    texts: list[str] = []
    async with Client(build_server(source)) as client:
        result = await client.call_tool("recall", {"query": "zyxwvut ledger terms"})
        texts.extend(c.text for c in result.content if hasattr(c, "text"))
        for uri in index.by_uri:
            try:
                read = await client.read_resource(uri)
            except MCPError:
                continue
            texts.extend(c.text for c in read.contents if hasattr(c, "text"))
    return texts, index


def _serve_both(folder: Path) -> tuple[list[str], list[str], DocsIndex]:
    async def both() -> tuple[list[str], list[str], DocsIndex]:
        outside, _ = await _seen(folder, OUTSIDER)
        inside, index = await _seen(folder, INSIDER)
        return outside, inside, index

    return anyio.run(both)


def _check(folder: Path, name: str = "secret.md") -> tuple[list[str], DocsIndex]:
    """The rule: the outsider never sees the secret; the insider sees it or is told it is withheld."""
    outside, inside, index = _serve_both(folder)
    assert not any("zyxwvut ledger" in text for text in outside), outside
    withheld = {w.path for w in index.withheld}
    assert name in withheld or any("zyxwvut ledger" in text for text in inside), (withheld, inside)
    return inside, index


def _folder(tmp_path: Path, front: bytes) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir(exist_ok=True)
    (folder / "secret.md").write_bytes(front + SECRET.encode())
    (folder / "public.md").write_text(PUBLIC)
    return folder


# -- the five spellings that leaked through the hand-written parser --------------------------


@pytest.mark.parametrize(
    "front",
    [
        b"---\rscope_ids: [org-secret]\r---\r",
        b'---\n"scope_ids": [org-secret]\n---\n',
        b"---\n'scope_ids': [org-secret]\n---\n",
        b"---\nscope_ids:\n  - org-public\n  # and\n  - org-secret\n---\n",
        b"--- {scope_ids: [org-secret]}\n---\n",
    ],
    ids=["CR-only line ends", "double-quoted key", "single-quoted key", "a list broken by a comment",
         "YAML on the opening line"],
)
def test_a_spelling_that_leaked_is_read(tmp_path: Path, front: bytes) -> None:
    """Each front matter that once leaked is read as scoped: hidden from the outsider, shown to the insider."""
    inside, index = _check(_folder(tmp_path, front))
    assert index.withheld == [] and any("zyxwvut ledger" in text for text in inside)


def test_a_visible_link_to_a_hidden_file_is_not_served(tmp_path: Path) -> None:
    """A link whose name is visible but whose target is hidden is judged by the target: not served."""
    folder = _folder(tmp_path, b"---\nscope_ids: [org-secret]\n---\n")
    (folder / ".private").mkdir()
    (folder / ".private" / "notes.md").write_text(SECRET.replace("ledger", "ledger (hidden)"))
    os.symlink(folder / ".private" / "notes.md", folder / "notes.md")
    outside, inside, index = _serve_both(folder)
    assert not any("hidden" in text for text in outside + inside)
    assert any(s.path == "notes.md" and "hidden" in s.why for s in index.skipped)


def test_a_visible_link_to_a_scoped_file_keeps_its_scopes(tmp_path: Path) -> None:
    """A link to a scoped file is that file: its text reaches no reader outside the file's scopes."""
    folder = _folder(tmp_path, b"---\nscope_ids: [org-secret]\n---\n")
    os.symlink(folder / "secret.md", folder / "aaa-public-looking.md")
    _check(folder)


# -- every spelling -----------------------------------------------------------------------------

_KEY_WORDS = st.sampled_from(["scope_ids", "Scope_IDs", "SCOPE_IDS", "scope-ids", "scope ids", "scopeids",
                              "scope_id", "Scopes", "scope"])  # fmt: skip


@st.composite
def _keys(draw: st.DrawFn) -> str:
    word = draw(_KEY_WORDS)
    quote = draw(st.sampled_from(["", '"', "'"]))
    if not quote and " " in word:
        word = draw(st.sampled_from([word, word.replace(" ", "_")]))
    return f"{quote}{word}{quote}" + draw(st.sampled_from(["", " ", "  ", "\t"]))


@st.composite
def _lists(draw: st.DrawFn, indent: str) -> str:
    ids = draw(st.lists(st.sampled_from(["org-public", "u-in"]), max_size=2, unique=True))
    ids.insert(draw(st.integers(0, len(ids))), "org-secret")
    quoted = [draw(st.sampled_from(["{}", "'{}'", '"{}"'])).format(i) for i in ids]
    style = draw(st.sampled_from(["flow", "flow-lines", "block", "block-flush", "string", "one"]))
    if style == "flow":
        return " [" + ", ".join(quoted) + draw(st.sampled_from(["]", ", ]"]))
    if style == "flow-lines":
        return " [\n" + ",\n".join(indent + q for q in quoted) + "\n" + indent + "]"
    if style in ("block", "block-flush"):
        pad = "" if style == "block-flush" else indent
        return "".join(f"\n{pad}- {q}" for q in quoted)
    if style == "string":
        return " " + ", ".join(ids)
    return " " + quoted[ids.index("org-secret")]


@st.composite
def _front_matters(draw: st.DrawFn) -> bytes:
    indent = draw(st.sampled_from(["  ", "    ", "\t", " \t"]))
    extras = ["title: Deal notes", "# a comment", "tags: [a, b]", "draft: false", "summary: >\n  folded text"]
    lines = draw(st.lists(st.sampled_from(extras), max_size=3))
    lines.insert(draw(st.integers(0, len(lines))), draw(_keys()) + ":" + draw(_lists(indent)))
    end = draw(st.sampled_from(["\n", "\r\n", "\r"]))
    opening = draw(st.sampled_from(["---", "--- ", "---\t", "--- # scoped notes"]))
    closing = draw(st.sampled_from(["---", "...", "--- "]))
    text = end.join([opening, *"\n".join(lines).split("\n"), closing]) + end
    lead = draw(st.sampled_from(["", "\ufeff", "\n", "\ufeff\n"]))
    return (lead + text).encode()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(front=_front_matters())
def test_no_spelling_shows_scoped_text_outside_its_scopes(tmp_path: Path, front: bytes) -> None:
    """Whatever the spelling (line ends, quotes, key, list style, BOM, tabs), the outsider sees nothing of it."""
    _check(_folder(tmp_path, front))


@settings(max_examples=300, deadline=None)
@given(front=_front_matters())
def test_every_spelling_is_scoped_or_withheld(front: bytes) -> None:
    """The parser alone: every spelling names org-secret among its scope ids, or withholds the file."""
    text = front.decode("utf-8-sig") + SECRET
    start, ids, error = front_matter_scopes(text)
    assert error is not None or "org-secret" in ids, (text, ids)
    assert error is not None or text[start:] == SECRET


@pytest.mark.parametrize(
    ("front", "why"),
    [
        ("---\nscope_ids: [org-secret]\n", "never closes"),
        ("---\nscope_ids: [org-secret\n---\n", "not readable YAML"),
        ("---\nscope_ids: [org-public]\nscope_ids: [org-secret]\n---\n", "given twice"),
        ("---\n- scope_ids\n---\n", "not a mapping"),
        ("---\nscope_ids: [42]\n---\n", "holds a int"),
        ("---\nscope_ids: {org-secret: true}\n---\n", "is a dict"),
        ("---\nmeta:\n  scope_ids: [org-secret]\n---\n", "inside another value"),
        ("---\nscope_ids: !secret [org-secret]\n---\n", "not readable YAML"),
        ("---\nscope_ids:\n\t- org-secret\n---\n", "not readable YAML"),
        ("+++\nscope_ids = ['org-secret']\n+++\n", "TOML front matter"),
        ("--- title\nscope_ids: [org-secret]\n---\n", "not readable YAML (line 2)"),
    ],
)
def test_unreadable_front_matter_withholds_the_file_and_names_it(tmp_path: Path, front: str, why: str) -> None:
    """Front matter that is there but cannot be read for certain withholds the file from everyone, named at start."""
    folder = _folder(tmp_path, front.encode())
    outside, inside, index = _serve_both(folder)
    assert not any("zyxwvut ledger" in text for text in outside + inside)
    [withheld] = index.withheld
    assert withheld.path == "secret.md" and why in withheld.why, withheld
    warning = index.warning()
    assert warning is not None and "secret.md" in warning and why in warning


def test_serve_names_the_withheld_files_at_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:  # type: ignore[no-untyped-def]
    """recallpack serve prints one warning line on stderr naming each file withheld for its front matter."""
    import recallpack.adapters.mcp as mcp_adapter
    from recallpack.cli import main

    folder = _folder(tmp_path, b"---\nscope_ids: []\n---\n")
    monkeypatch.setattr(mcp_adapter, "serve", lambda source, **kw: None)
    assert main(["serve", "--docs", str(folder)]) == 0
    err = capsys.readouterr().err
    assert "recallpack: warning: 1 files are withheld from every reader" in err and "secret.md: " in err
