"""``recallpack serve --docs DIR``, driven as an MCP host drives it: the SDK's client over stdio.

One server for the module, over a copy of the repository's own docs/ plus three scoped notes,
for a reader ``u-1`` who holds scope ``org-a``; it has a receipt key.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")
pytest.importorskip("bm25s")

from mcp import types
from mcp.shared.exceptions import MCPError

from recallpack import MAX_TOKENS_CEILING, Packer, Reader, Scope, count_tokens
from recallpack.adapters.mcp import MAX_QUERY_CHARS, check_arguments
from recallpack.adapters.mcp.docs import DocsIndex, front_matter_scopes
from recallpack.adapters.mcp.windows import split_spans
from recallpack.allowance import verify
from tests.adapters.mcp_host import REPO, Host, RawServer, connect

KEY = "k" * 32
#: The smallest block the server's Packer can return (its header, a label, one token): cl100k's.
#: A --docs server's least is more, by its dearest resource line (every item has one).
LEAST = Packer().least_tokens
#: In INVALID, where the server's least goes (its schema's minimum, read from tools/list).
ONE_BELOW = "one below the least"
ENVELOPE_KEYS = {"status", "error_code", "error_message"}
SEED_NAMES = {"context_tokens_used", "chunks_selected", "chunks_dropped", "tokenizer_used"}
NOTES = {
    # The reader's own and org-a's: readable, its scopes joined as their intersection.
    "team/a.md": "---\nscope_ids: [u-1, org-a]\n---\n# Offsite\n\nThe wombat roster lists every organiser.\n",
    # org-b's: this reader may not see it.
    "team/b.md": "---\nscope_ids:\n  - org-b\n---\n# Deal\n\nThe quokka ledger records the undisclosed terms.\n",
    # Scope metadata that is there but unreadable: withheld from everyone.
    "team/broken.md": "---\nscope_ids: []\n---\nThe narwhal inventory counts every tusk.\n",
}


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("docs")
    shutil.copytree(REPO / "docs", root, dirs_exist_ok=True)
    for name, text in NOTES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    (root / ".hidden.md").write_text("The okapi is hidden and never served.\n")
    (root / "data.bin.md").write_bytes(b"\xff\xfe not text")
    return root


@pytest.fixture(scope="module")
def host(folder: Path):  # type: ignore[no-untyped-def]
    with connect(
        "--docs", str(folder), "--reader", "u-1", "--scope", "org-a=team-a:Team A",
        env={"RECALLPACK_RECEIPT_KEY": KEY},
    ) as connected:
        yield connected


def _index(folder: Path) -> DocsIndex:
    """The same index the server built (same settings), to find a window's URI."""
    return DocsIndex(folder, Packer(), window_tokens=200, overlap_tokens=20)


def _least(host: Host) -> int:
    """The server's least budget: its schema's minimum."""
    [tool] = host.run(host.session.list_tools).tools
    least: int = tool.input_schema["properties"]["max_tokens"]["minimum"]
    return least


def _filled(arguments: Any, least: int) -> Any:
    """``arguments`` with ONE_BELOW made the number one below the server's least."""
    if isinstance(arguments, dict) and arguments.get("max_tokens") == ONE_BELOW:
        return {**arguments, "max_tokens": least - 1}
    return arguments


def _text(result: types.CallToolResult) -> str:
    assert len(result.content) == 1 and isinstance(result.content[0], types.TextContent)
    return result.content[0].text


# -- tools/list ------------------------------------------------------------------------------


def test_lists_one_recall_tool_with_its_schema(host: Host) -> None:
    """tools/list has recall(query, max_tokens=2048 up to 16384), no other argument."""
    tools = host.run(host.session.list_tools).tools
    assert [t.name for t in tools] == ["recall"]
    schema = tools[0].input_schema
    assert schema["required"] == ["query"] and schema["additionalProperties"] is False
    assert schema["properties"]["max_tokens"] == {**schema["properties"]["max_tokens"], "type": "integer",
                                                  "default": 2048, "maximum": MAX_TOKENS_CEILING}
    assert schema["properties"]["max_tokens"]["minimum"] > LEAST  # the least block and a resource line
    assert tools[0].output_schema is not None and tools[0].annotations.read_only_hint is True


# -- recall ------------------------------------------------------------------------------------


@pytest.mark.parametrize("budget", [100, 300, 2048, 9000])
def test_block_bytes_fit_the_budget_by_the_same_tokenizer(host: Host, budget: int) -> None:
    """The text content counts at most max_tokens in cl100k_base, exactly what the result says."""
    result = host.recall({"query": "how does the floor keep a match when nothing fits", "max_tokens": budget})
    assert not result.is_error
    text, data = _text(result), result.structured_content
    assert text and count_tokens(text, "cl100k_base") == data["context_tokens_used"] <= budget
    report = data["report"]
    assert report["max_tokens"] == budget and report["policy"] == "passages"  # serve's default
    assert report["items_selected"] + report["items_dropped"] + report["items_withheld"] == report["candidates"]
    assert data["chunks_selected"] == report["items_selected"] == len(data["items"])


def test_default_budget_seed_names_and_citations(host: Host) -> None:
    """No max_tokens: the 2048 default; the seed's names; each item cited on its resource line."""
    result = host.recall({"query": "token windows chunk id offsets"})
    text, data = _text(result), result.structured_content
    assert set(data) >= SEED_NAMES and data["status"] == "ok" and data["tokenizer_used"] == "cl100k_base"
    assert data["report"]["max_tokens"] == 2048 and count_tokens(text) <= 2048
    assert data["chunks_selected"] >= 2
    for item in data["items"]:
        assert item["citation"].startswith("recallpack://artifacts/")
        assert f"Resource `{item['citation']}`" in text
    assert any("token-windows.md" in item["citation"] for item in data["items"])


def test_receipt_binds_the_returned_bytes(host: Host) -> None:
    """With a key configured, the receipt verifies for exactly the text content, and not edited."""
    result = host.recall({"query": "what a receipt binds", "max_tokens": 500})
    text, receipt = _text(result), result.structured_content["receipt"]
    assert receipt["keyed"] is True and receipt["tokens"] == result.structured_content["context_tokens_used"]
    assert verify(text, receipt, key=KEY)
    assert not verify(text.replace("receipt", "reciept"), receipt, key=KEY)


def test_a_query_nothing_matches_is_an_empty_block(host: Host) -> None:
    """Words in no file: a success with empty text (the block is "" when nothing was kept)."""
    result = host.recall({"query": "xylophone zeppelin"})
    assert not result.is_error and _text(result) == ""
    assert result.structured_content["chunks_selected"] == 0 == result.structured_content["context_tokens_used"]


def test_hidden_and_undecodable_files_are_not_served(host: Host) -> None:
    """A dot-file and a file that is not UTF-8 are left out of the index."""
    assert "okapi" not in _text(host.recall({"query": "okapi hidden"}))
    assert "skipped 1: data.bin.md (not UTF-8 text)" in host.stderr()


# -- invalid input ---------------------------------------------------------------------------

INVALID: list[tuple[Any, str]] = [
    (None, "query is required"),
    ({}, "query is required"),
    ({"max_tokens": 100}, "query is required"),
    ({"query": ""}, "query is empty"),
    ({"query": " \n\t "}, "query is empty"),
    ({"query": 42}, "query must be a string, got a number"),
    ({"query": None}, "query must be a string, got null"),
    ({"query": ["a", "b"]}, "query must be a string, got an array"),
    ({"query": "x" * (MAX_QUERY_CHARS + 1)}, "over the limit of 10,000"),
    ({"query": "budget", "max_tokens": 0}, "max_tokens=0 is out of range: use a whole number from {least} to 16384"),
    ({"query": "budget", "max_tokens": 1}, "max_tokens=1 is below the least block this server can return, {least} tokens"),
    ({"query": "budget", "max_tokens": ONE_BELOW}, "is below the least block this server can return, {least} tokens"),
    ({"query": "budget", "max_tokens": -5}, "max_tokens=-5 is out of range"),
    ({"query": "budget", "max_tokens": 16385}, "max_tokens=16385 is out of range"),
    ({"query": "budget", "max_tokens": 10**30}, "is out of range"),
    ({"query": "budget", "max_tokens": 100.5}, "max_tokens must be a whole number from {least} to 16384, got a number 100.5"),
    ({"query": "budget", "max_tokens": "100"}, "got a string '100'"),
    ({"query": "budget", "max_tokens": True}, "got a boolean True"),
    ({"query": "budget", "max_tokens": [100]}, "got an array"),
    ({"query": "budget", "max_token": 100}, "unknown argument 'max_token'; did you mean 'max_tokens'?"),
    ({"query": "budget", "reader": "admin"}, "unknown argument 'reader'"),
]


@pytest.mark.parametrize(("arguments", "says"), INVALID, ids=[s for _, s in INVALID])
def test_invalid_input_is_the_seed_envelope(host: Host, arguments: Any, says: str) -> None:
    """Each invalid input is a tool error whose structured content is the invalid_input envelope."""
    least = _least(host)
    says = says.format(least=least)
    result = host.recall(_filled(arguments, least))
    assert result.is_error
    envelope = result.structured_content
    assert set(envelope) == ENVELOPE_KEYS and envelope["status"] == "error"
    assert envelope["error_code"] == "invalid_input" and says in envelope["error_message"]
    assert envelope["error_message"] in _text(result)


def test_serving_goes_on_after_every_invalid_input(host: Host) -> None:
    """After all the invalid calls, and an unknown tool, the same session still recalls."""
    for arguments, _ in INVALID:
        assert host.recall(_filled(arguments, _least(host))).is_error
    with pytest.raises(MCPError, match="unknown tool 'recal'"):
        host.run(host.session.call_tool, "recal", {"query": "budget"})
    assert host.recall({"query": "budget", "max_tokens": 200}).structured_content["chunks_selected"] >= 1
    assert "Traceback" not in host.stderr() and "ERROR" not in host.stderr()


def test_the_least_budget_is_answered_and_one_less_is_the_callers_mistake(host: Host) -> None:
    """max_tokens at the schema's minimum is a result, not a failure; one below is invalid_input naming the least."""
    least = _least(host)
    at_least = host.recall({"query": "budget", "max_tokens": least})
    assert not at_least.is_error and at_least.structured_content["status"] == "ok"
    assert 0 < at_least.structured_content["context_tokens_used"] <= least  # the top match, cut
    below = host.recall({"query": "budget", "max_tokens": least - 1}).structured_content
    assert below["error_code"] == "invalid_input" and f"{least} tokens" in below["error_message"]
    assert "recall_failed" not in host.stderr() and "Traceback" not in host.stderr()


@pytest.mark.parametrize(("value", "expected"), [(512.0, 512), (None, 2048), (16384, 16384), (1, 1)])
def test_whole_numbers_and_null_max_tokens_are_accepted(value: object, expected: int) -> None:
    """A float with no fraction is that whole number; null is the default; the bounds are in."""
    assert check_arguments({"query": "q", "max_tokens": value}, default=2048, ceiling=16384) == ("q", expected)


# -- scopes and resources --------------------------------------------------------------------


def test_a_scoped_note_the_reader_holds_is_shown_as_theirs(host: Host) -> None:
    """The reader's own and org-a's note is shown, its scopes joined: private ∩ team-a."""
    result = host.recall({"query": "wombat roster organiser"})
    text = _text(result)
    assert "wombat roster" in text and "private ∩ team-a" in text and "Team A" in text
    assert result.structured_content["items"][0]["scopes"] == ["private", "team-a"]


@pytest.mark.parametrize("query", ["quokka ledger undisclosed terms", "narwhal inventory tusk"])
def test_a_note_the_reader_may_not_see_is_withheld(host: Host, query: str) -> None:
    """Another org's note, and one with malformed scopes, are withheld: counted, never shown."""
    result = host.recall({"query": query})
    # The note's own animal: "ledger" or "inventory" may well be in the docs beside it.
    assert query.split()[0] not in _text(result)
    assert result.structured_content["report"]["items_withheld"] == 1


def test_out_of_scope_uris_read_like_uris_that_do_not_exist(host: Host, folder: Path) -> None:
    """Reading a withheld note by its URI fails exactly as a made-up URI does."""
    by_source = {c.metadata["source"]: uri for uri, c in _index(folder).by_uri.items()}
    errors = {}
    for name in ("team/b.md", "team/broken.md", "made/up.md"):
        uri = by_source.get(name, "recallpack://artifacts/made%2Fup.md/contents/0")
        with pytest.raises(MCPError) as caught:
            host.run(host.session.read_resource, uri)
        errors[name] = (caught.value.code, caught.value.message.replace(uri, "URI"))
    assert len(set(errors.values())) == 1 and errors["made/up.md"][0] == -32002
    assert host.run(host.session.read_resource, by_source["team/a.md"]).contents[0].text.startswith("# Offsite")


def test_a_kept_item_reads_back_as_the_ranges_it_shows(host: Host, folder: Path) -> None:
    """A kept item's citation names its file and ranges of it; it reads back as those ranges of the
    file's text, in order, joined by the mark alone; it is listed; the file's own URI reads the file."""
    result = host.recall({"query": "tiktoken cache vocabularies offline", "max_tokens": 120, })
    item = result.structured_content["items"][0]
    ranges = host.run(host.session.read_resource, item["citation"]).contents[0].text
    shown = _text(result).split("\n\n    ", 1)[1].rsplit("\n\n    Resource", 1)[0]
    file_uri, named = split_spans(item["citation"])
    assert named is not None and file_uri in _index(folder).by_uri
    body = host.run(host.session.read_resource, file_uri).contents[0].text
    source = _index(folder).by_uri[file_uri].metadata["source"]
    assert (folder / source).read_text() == body
    rest = ranges
    for i, span in enumerate(named.split(",")):
        if i:  # between two ranges: the mark, on a line of its own
            mark = re.match(r"\n?…\n?", rest)
            assert mark is not None, rest[:40]
            rest = rest[mark.end():]
        start, end = map(int, span.split("-"))
        assert rest.startswith(body[start:end]), span
        rest = rest[end - start:]
    assert rest == ("\n…" if body[end:].strip() else "")  # the mark ends an item the file goes on after
    # A focus cut may open with the mark alone on its line: the first line with words is checked.
    first_line = next(line.strip("…").strip() for line in shown.splitlines() if line.strip("…").strip())
    assert first_line and first_line in ranges
    listed = [str(r.uri) for r in host.run(host.session.list_resources).resources]
    assert item["citation"] in listed


# -- the index itself ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("front", "expected"),
    [
        ("---\nscope_ids: a, b\n---\n", (("a", "b"), None)),
        ("---\ntitle: x\nscope_ids: ['a']\n---\n", (("a",), None)),
        ("---\nscope_ids:\n  - a\n  - \"b\"\n---\n", (("a", "b"), None)),
        ("---\ntitle: x\n---\n", ((), None)),
        ("---\nscope_ids: [a, ]\n---\n", (("a",), None)),  # YAML: a flow list may end in a comma
        ("---\nscope_ids: a, \n---\n", ((), "holds an empty string")),
        ("---\nscope_ids:\n---\n", ((), "scope_ids is empty; give a list of scope ids")),
    ],
)
def test_front_matter_scopes(front: str, expected: tuple[tuple[str, ...], str | None]) -> None:
    """scope_ids in front matter: inline, quoted, as a YAML list; malformed is said, not dropped."""
    start, ids, error = front_matter_scopes(front + "Body")
    assert (front + "Body")[start:] == "Body"
    assert ids == expected[0] and (error is None) == (expected[1] is None)
    if expected[1]:
        assert expected[1] in error


def test_windows_carry_stable_ids_and_file_offsets(folder: Path) -> None:
    """Each window's text is its file's text at its offsets; a second index gives the same ids."""
    index = _index(folder)
    for candidate in index.candidates:
        source = (folder / candidate.metadata["source"]).read_text()
        assert source[candidate.metadata["start_char"]:candidate.metadata["end_char"]] == candidate.text
    assert [c.artifact_content_id for c in _index(folder).candidates] == [c.artifact_content_id for c in index.candidates]
    assert {c.metadata["source"] for c in index.candidates} >= {"architecture.md", "team/a.md"}
    assert not any(c.metadata["source"].startswith(".") for c in index.candidates)


def test_a_link_out_of_the_folder_is_not_followed(tmp_path: Path) -> None:
    """A symbolic link to a file outside the folder is skipped, said so, never indexed."""
    outside = tmp_path / "outside.md"
    outside.write_text("The secret gazebo plans.\n")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "own.md").write_text("Our own page.\n")
    (tmp_path / "docs" / "link.md").symlink_to(outside)
    index = DocsIndex(tmp_path / "docs", Packer(), window_tokens=50, overlap_tokens=0)
    assert [c.metadata["source"] for c in index.candidates] == ["own.md"]
    assert "link.md (a link to outside the folder)" in index.summary()
    assert index.search("gazebo") == []


def test_a_calls_budget_reaches_the_one_packer_as_a_value(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each call's max_tokens is handed to the source's one Packer as recall's max_tokens=: the
    server builds no Packer per call (issue 36), and the block fits that budget."""
    import anyio

    from recallpack.adapters.mcp import docs_source

    source = docs_source(str(folder))
    seen: list[tuple[bool, object]] = []
    recall = Packer.recall

    def spy(self: Packer, candidates: Any, **kwargs: Any) -> Any:
        seen.append((self is source.packer, kwargs.get("max_tokens")))
        return recall(self, candidates, **kwargs)

    monkeypatch.setattr(Packer, "recall", spy)
    budgets = [source.least, 300, 2048, MAX_TOKENS_CEILING]
    results = [anyio.run(source.recall, "receipt binds the block", budget, None) for budget in budgets]
    assert seen == [(True, budget) for budget in budgets]
    assert all(0 < r.report.tokens_used <= budget for r, budget in zip(results, budgets))


def test_reader_gate_is_the_packers(folder: Path) -> None:
    """Which windows a reader could read by URI is exactly which the packer would show them."""
    from recallpack.adapters.mcp import docs_source

    reader = Reader(id="u-1", scopes={"org-a": Scope(name="team-a")})
    source = docs_source(str(folder), reader=reader)
    index = _index(folder)
    for uri, candidate in index.by_uri.items():
        shown = Packer(reader=reader).recall([candidate]).report.items_selected == 1
        assert (source.read(uri) is not None) == shown, uri


# -- a malformed request, on plain pipes ------------------------------------------------------


def test_malformed_lines_get_errors_and_serving_goes_on(folder: Path) -> None:
    """Garbage, a request missing its params and an unknown method are answered; then recall works."""
    raw = RawServer("--docs", str(folder))
    try:
        raw.initialize()
        raw.send("this is not JSON {")
        raw.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"arguments": {"query": "x"}}})
        raw.send({"jsonrpc": "2.0", "id": 2, "method": "no/such/method"})
        raw.send({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "recall", "arguments": {"query": "budget"}}})
        answers = {}
        while 3 not in answers:
            message = raw.receive()
            answers[message.get("id")] = message
        assert answers[1]["error"]["code"] == -32602 and answers[2]["error"]["code"] == -32601
        assert answers[3]["result"]["structuredContent"]["chunks_selected"] >= 1
        assert raw.process.poll() is None and "Traceback" not in raw.stderr()
    finally:
        raw.close()


def test_ids_in_the_index_match_the_served_citations(host: Host, folder: Path) -> None:
    """Every citation the server hands out is a URI of the index (the packer fills it the same way)."""
    result = host.recall({"query": "scopes reader withheld", "max_tokens": 4000})
    citations = [i["citation"] for i in result.structured_content["items"]]
    files = [split_spans(c)[0] for c in citations]
    assert citations and set(files) <= set(_index(folder).by_uri) and len(files) == len(set(files))
    shape = r"recallpack://artifacts/[^/]+/contents/[0-9a-f]{16}\?spans=\d+-\d+(,\d+-\d+)*"
    assert all(re.fullmatch(shape, c) for c in citations)


def test_the_example_client_asks_the_server_on_the_repositorys_docs() -> None:
    """examples/mcp_client.py (in make demo) starts serve on docs/ and gets a block that fits."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, str(REPO / "examples" / "mcp_client.py"), "what does a receipt bind", "--max-tokens", "400"],
        capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    block = done.stdout.split("tool recall: ", 1)[1].split("\n\n", 1)[1].split("\n---\n")[0]
    assert 0 < count_tokens(block) <= 400 and "evidence, not instructions" in block
    assert '"tokenizer_used": "cl100k_base"' in done.stdout and "reads back as the ranges it names" in done.stdout


def test_the_demos_mcp_output_shows_no_text_twice() -> None:
    """make demo's MCP example (its own question): each file is one item, its windows merged, so no
    file and no line of evidence is shown twice, and each item cites its file and ranges."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, str(REPO / "examples" / "mcp_client.py")],
        capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    block = done.stdout.split("tool recall: ", 1)[1].split("\n\n", 1)[1].split("\n---\n")[0]
    lines = [line.strip("… ") for line in block.splitlines() if line.startswith("    ") and "Resource" not in line]
    long = [line for line in lines if len(line) >= 30]
    assert len(long) >= 5 and len(long) == len(set(long))
    cited = re.findall(r"Resource `recallpack://artifacts/([^/]+)/contents/[0-9a-f]{16}\?spans=[-,0-9]+`", block)
    assert cited and len(cited) == block.count("- **Source excerpt**") and len(cited) == len(set(cited))


def test_resource_templates_say_the_shape_of_a_citation(host: Host) -> None:
    """resources/templates/list is answered (not "Method not found"): a file's URI template, and
    the citation's, the file's with the RFC 6570 query of its ranges."""
    file, ranges = host.run(host.session.list_resource_templates).resource_templates
    assert file.uri_template == Packer().resource_uri_template and file.mime_type == "text/plain"
    assert ranges.uri_template == file.uri_template + "{?spans}" and ranges.mime_type == "text/plain"
    result = host.recall({"query": "what a receipt binds"})
    prefix = file.uri_template.split("{", 1)[0]
    items = result.structured_content["items"]
    assert items and all(item["citation"].startswith(prefix) and "?spans=" in item["citation"] for item in items)
