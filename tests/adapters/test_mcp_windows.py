"""``recallpack serve --docs``: each file is one item, its windows merged, driven by the SDK's client.

A file cut into small overlapping windows, every one of which matches the query, and a file whose
matching windows are far apart: under every policy the server offers, each file is one item, no
sentence of it is shown twice, the text between far-apart windows is one mark, the block's bytes
are what it counted, and its citation (the file and the ranges shown) reads back as the item
showed them, for a reader who may see the file only. Spans an attacker makes up read like a
missing file outside the reader's scopes, and are invalid input inside them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("mcp")
pytest.importorskip("bm25s")

from mcp import types
from mcp.shared.exceptions import MCPError

from recallpack import Packer, count_tokens
from recallpack.adapters.mcp.docs import DocsIndex
from recallpack.adapters.mcp.windows import MAX_SPANS, split_spans
from tests.adapters.mcp_host import Host, connect

#: Short sentences (13 tokens), each about the alpaca: a window of 60 tokens holds four, and the
#: overlap of 28 tokens at least one whole sentence of the window before.
SENTENCES = [f"Alpaca fact {n} says the herd grazes on hill {n}." for n in range(1, 13)]
#: far.md: gazelle sentences at its start and its end, and between them text that never names it.
GAZELLE = [f"Gazelle note {n} says the gazelle runs at dawn." for n in range(1, 9)]
FILLER = [f"The river carries silt past mill {n} in spring." for n in range(1, 41)]
WINDOW = ("--window-tokens", "60", "--overlap-tokens", "28")
POLICIES = ["passages", "prefix", "skip", "truncate"]


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("windows")
    (root / "herd.md").write_text(" ".join(SENTENCES) + "\n")
    (root / "other.md").write_text("A page about llamas, which are not what we look for.\n")
    secret = " ".join(s.replace("Alpaca", "Vicuna") for s in SENTENCES)
    (root / "secret.md").write_text(f"---\nscope_ids: [org-z]\n---\n{secret}\n")
    far = "\n".join([" ".join(GAZELLE[:4]), *FILLER, " ".join(GAZELLE[4:])])
    (root / "far.md").write_text(f"---\nscope_ids: [u-1]\n---\n{far}\n")
    return root


@pytest.fixture(scope="module", params=POLICIES)
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
    # Every file handed over is accounted for: shown, dropped or withheld.
    report = data["report"]
    assert report["items_selected"] + report["items_dropped"] + report["items_withheld"] == report["candidates"]


def test_the_items_citation_reads_back_as_it_shows_the_file(host: Host, folder: Path) -> None:
    """The merged item cites its file and the range its windows cover, which reads back as the
    file's text (every window matched) and is listed; the file's own URI reads back too."""
    result = host.recall({"query": "alpaca herd grazes", "max_tokens": 2048})
    assert isinstance(result.structured_content, dict)
    uri = result.structured_content["items"][0]["citation"]
    file_uri, named = split_spans(uri)
    whole = (folder / "herd.md").read_text()
    assert "herd.md" in uri and named == f"0-{len(whole.rstrip())}"
    text = host.run(host.session.read_resource, uri).contents[0]
    assert isinstance(text, types.TextResourceContents) and text.text == whole.rstrip()
    assert host.run(host.session.read_resource, file_uri).contents[0].text == whole
    assert uri in [str(r.uri) for r in host.run(host.session.list_resources).resources]


def _item_text(block: str, name: str) -> str:
    """The evidence text of the item citing ``name``, its indentation taken off."""
    for item in block.split("- **Source excerpt**")[1:]:
        body, _, resource = item.partition("\n\n")[2].partition("\n\n    Resource `")
        if f"/{name}/" in resource:
            return "\n".join(line[4:] for line in body.strip("\n").split("\n"))
    raise AssertionError(f"no item cites {name}")


def test_far_apart_windows_of_one_file_are_one_item(host: Host) -> None:
    """far.md matches at its start and its end only: one item, both runs in file order, the
    text between them one mark on a line of its own (never read, never paid for), two ranges in
    its citation, which reads back as exactly what the item shows."""
    result = host.recall({"query": "gazelle runs at dawn", "max_tokens": 2048})
    block, data = _block(result), result.structured_content
    assert isinstance(data, dict) and not result.is_error
    [item] = [item for item in data["items"] if "/far.md/" in item["citation"]]
    assert count_tokens(block) == data["context_tokens_used"] <= 2048 and block.count("/far.md/") == 1
    shown = _item_text(block, "far.md")
    assert [s for s in GAZELLE if s in shown] == GAZELLE and all(shown.count(s) == 1 for s in GAZELLE)
    assert not any(s in shown for s in FILLER[8:-8])
    assert "\n…\n" in shown and shown.index("\n…\n") > shown.index(GAZELLE[3])
    _, named = split_spans(item["citation"])
    assert named is not None and re.fullmatch(r"\d+-\d+,\d+-\d+", named)
    read = host.run(host.session.read_resource, item["citation"]).contents[0]
    assert isinstance(read, types.TextResourceContents) and read.text == shown


def test_made_up_spans_of_a_hidden_file_read_like_a_missing_file(host: Host, folder: Path) -> None:
    """An attacker's spans of secret.md (org-z, which u-1 does not hold), well formed, past its end
    or garbled, all answer as a made-up URI does: -32002 and the same message, not a length."""
    index = DocsIndex(folder, Packer(), window_tokens=60, overlap_tokens=28)
    secret = next(uri for uri, c in index.by_uri.items() if c.artifact_id == "secret.md")
    made_up = "recallpack://artifacts/made-up.md/contents/0000000000000000"
    answers = set()
    for uri in (f"{secret}?spans=0-10", f"{secret}?spans=0-99999999", f"{secret}?spans=junk",
                f"{secret}?spans=0-10,400-410", f"{made_up}?spans=0-10", made_up):
        with pytest.raises(MCPError) as caught:
            host.run(host.session.read_resource, uri)
        answers.add((caught.value.code, caught.value.message.replace(uri[:200], "URI")))
    assert answers == {(-32002, "no resource 'URI' for this reader")}
    assert "Traceback" not in host.stderr()


@pytest.mark.parametrize("spans", [
    "0-99999999", "5-3", "4-4", "junk", "", "0-5,5-9", "0-5,3-9", "9-12,0-5", "-1-5", "0-5;9-12",
    "1" * 11 + "-" + "1" * 11, ",".join(f"{2 * i}-{2 * i + 1}" for i in range(MAX_SPANS + 1)),
])  # fmt: skip
def test_wrong_spans_of_a_readable_file_are_invalid_params(host: Host, folder: Path, spans: str) -> None:
    """Spans of herd.md (readable) that are past its end, empty, out of order, touching,
    overlapping, not numbers or too many: the protocol's invalid params (-32602) naming spans,
    never a traceback; the server goes on."""
    index = DocsIndex(folder, Packer(), window_tokens=60, overlap_tokens=28)
    herd = next(uri for uri, c in index.by_uri.items() if c.artifact_id == "herd.md")
    with pytest.raises(MCPError) as caught:
        host.run(host.session.read_resource, f"{herd}?spans={spans}")
    assert caught.value.code == -32602 and "span" in caught.value.message
    assert host.run(host.session.read_resource, f"{herd}?spans=0-5,13-20").contents[0].text == (
        # The file goes on after the last range: the mark says so, as the item would.
        (folder / "herd.md").read_text()[0:5] + "\n…\n" + (folder / "herd.md").read_text()[13:20] + "\n…"
    )
    assert "Traceback" not in host.stderr()


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


@pytest.mark.parametrize("policy", POLICIES)
def test_from_the_least_budget_up_a_match_is_never_answered_with_nothing(folder: Path, policy: str) -> None:
    """From the least budget up (where a file's item may hold more than one range, and its
    citation name them all), every query that matches gets a block with evidence that fits."""
    import anyio

    from recallpack import Reader
    from recallpack.adapters.mcp import docs_source

    source = docs_source(str(folder), policy=policy, window_tokens=60, overlap_tokens=28, reader=Reader(id="u-1"))
    for budget in range(source.least, source.least + 60, 3):
        for query in ("gazelle runs at dawn", "alpaca herd grazes", "llamas page"):
            result = anyio.run(source.recall, query, budget, None)
            assert result.evidence and result.report.tokens_used <= budget, (budget, query)
