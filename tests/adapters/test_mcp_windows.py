"""``recallpack serve --docs``: the windows of one file are one document, driven by the SDK's client.

A file cut into small overlapping windows, every one of which matches the query: under the
default policy (``passages``, which merges pieces itself) and under ``prefix`` (which is handed
them merged by the same merge), the file is one item, no sentence of it is shown twice, the
block's bytes are what it counted, and its citation (the file's URI) reads back, for a reader
who may see the file only.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("mcp")
pytest.importorskip("bm25s")

from mcp import types
from mcp.shared.exceptions import MCPError

from recallpack import Packer, count_tokens
from recallpack.adapters.mcp_docs import DocsIndex
from tests.adapters.mcp_host import Host, connect

#: Short sentences (13 tokens), each about the alpaca: a window of 60 tokens holds four, and the
#: overlap of 28 tokens at least one whole sentence of the window before.
SENTENCES = [f"Alpaca fact {n} says the herd grazes on hill {n}." for n in range(1, 13)]
WINDOW = ("--window-tokens", "60", "--overlap-tokens", "28")


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("windows")
    (root / "herd.md").write_text(" ".join(SENTENCES) + "\n")
    (root / "other.md").write_text("A page about llamas, which are not what we look for.\n")
    secret = " ".join(s.replace("Alpaca", "Vicuna") for s in SENTENCES)
    (root / "secret.md").write_text(f"---\nscope_ids: [org-z]\n---\n{secret}\n")
    return root


@pytest.fixture(scope="module", params=["passages", "prefix"])
def host(request: pytest.FixtureRequest, folder: Path) -> Iterator[Host]:
    with connect("--docs", str(folder), *WINDOW, "--policy", request.param, "--reader", "u-1") as connected:
        yield connected


def _block(result: types.CallToolResult) -> str:
    assert isinstance(result.content[0], types.TextContent)
    return result.content[0].text


def test_the_file_is_cut_into_overlapping_windows(folder: Path) -> None:
    """The setup holds: herd.md is several windows, each pair of neighbours sharing a whole sentence."""
    index = DocsIndex(folder, Packer(), window_tokens=60, overlap_tokens=28)
    windows = [c for c in index.candidates if c.artifact_id == "herd.md"]
    assert len(windows) >= 3
    for before, after in zip(windows, windows[1:]):
        assert before.metadata["end_char"] > after.metadata["start_char"]
        assert any(s in before.text and s in after.text for s in SENTENCES)


@pytest.mark.parametrize("budget", [2048, 120])
def test_overlapping_windows_of_one_file_are_one_item(host: Host, budget: int) -> None:
    """Every window of herd.md matches: one item, each sentence at most once, the budget exact."""
    result = host.recall({"query": "alpaca herd grazes", "max_tokens": budget})
    block, data = _block(result), result.structured_content
    assert isinstance(data, dict)
    herd = [item for item in data["items"] if "herd.md" in item["citation"]]
    assert len(herd) == 1 and block.count("herd.md") == 1
    assert all(block.count(sentence) <= 1 for sentence in SENTENCES)
    assert count_tokens(block) == data["context_tokens_used"] <= budget
    if budget == 2048:  # room for the whole file: every sentence shown, once
        assert all(block.count(sentence) == 1 for sentence in SENTENCES)
    # Every window is accounted for: shown in the item, merged into it, or (prefix) handed merged.
    report = data["report"]
    assert report["items_selected"] + report["items_dropped"] + report["items_withheld"] == report["candidates"]


def test_the_items_citation_reads_back_as_its_file(host: Host, folder: Path) -> None:
    """The merged item cites its file's URI, which reads back as the file's text and is listed."""
    result = host.recall({"query": "alpaca herd grazes", "max_tokens": 2048})
    assert isinstance(result.structured_content, dict)
    uri = result.structured_content["items"][0]["citation"]
    assert "herd.md" in uri
    text = host.run(host.session.read_resource, uri).contents[0]
    assert isinstance(text, types.TextResourceContents)
    assert text.text == (folder / "herd.md").read_text()
    assert uri in [str(r.uri) for r in host.run(host.session.list_resources).resources]


def test_a_scoped_files_uri_reads_like_no_uri_for_a_reader_outside(host: Host, folder: Path) -> None:
    """secret.md (org-z) is withheld from u-1 in recall, and its file URI reads as not found."""
    result = host.recall({"query": "vicuna herd grazes", "max_tokens": 2048})
    assert "Vicuna" not in _block(result)
    index = DocsIndex(folder, Packer(), window_tokens=60, overlap_tokens=28)
    secret = next(uri for uri, c in index.by_uri.items() if c.artifact_id == "secret.md")
    with pytest.raises(MCPError) as caught:
        host.run(host.session.read_resource, secret)
    assert caught.value.code == -32002


def test_at_exactly_the_least_budget_the_top_match_is_kept(host: Host, folder: Path) -> None:
    """max_tokens at the schema's minimum (the least block) keeps the top match, cut and marked:
    never an empty block while something matched."""
    [tool] = host.run(host.session.list_tools).tools
    least = tool.input_schema["properties"]["max_tokens"]["minimum"]
    top = DocsIndex(folder, Packer(), window_tokens=60, overlap_tokens=28).search("llamas page")[0]
    result = host.recall({"query": "llamas page", "max_tokens": least})
    block, data = _block(result), result.structured_content
    assert isinstance(data, dict) and not result.is_error
    assert data["chunks_selected"] == 1 and count_tokens(block) == data["context_tokens_used"] <= least
    assert top.artifact_id == "other.md" and "other.md" in data["items"][0]["citation"]
    evidence = block.split("- **Source excerpt**", 1)[1].split("Resource", 1)[0].strip(" \n…")
    assert evidence and evidence in top.text
