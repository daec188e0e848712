"""``recallpack serve`` as the reference client sees it: the MCP Inspector's CLI, over stdio and
over HTTP with a tokens file and a bearer header, for every method the server answers.

The Inspector (npm ``@modelcontextprotocol/inspector``, the version the Makefile pins) is what
MCP users debug a server with; it validates a tool's structured content against the tool's
``outputSchema``, a tool error's too. ``make test`` installs it into ``build/inspector`` with npm;
without node the test skips, saying so. Each Inspector run is one method of a fresh connection
(over stdio, a fresh server), so the runs go out side by side, in two rounds: the second reads
what the first one's recall cited. What is asserted is what the client prints (``--format json``).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from jsonschema.validators import validator_for

from recallpack import Packer
from recallpack.adapters.mcp.auth import hash_token
from recallpack.adapters.mcp.docs import DocsIndex
from recallpack.adapters.mcp.tool import OUTPUT_SCHEMA
from recallpack.adapters.mcp.windows import split_spans
from tests.adapters.mcp_host import wait_listening

REPO = Path(__file__).resolve().parents[1]
INSPECTOR = REPO / "build" / "inspector" / "node_modules" / ".bin" / "mcp-inspector"
TOKEN = "inspector-" + "t" * 40
#: Seconds for one Inspector run: node's start, the server's (imports, indexing), one request.
RUN_TIMEOUT = 120
FILES = {
    "floor.md": "# The floor\n\nA match is never answered with nothing. The floor keeps the best match's "
    "first sentence when nothing else fits.\n\nThe walk reaches items in rank order.\n",
    "secret.md": '---\nscope_ids: ["org-secret"]\n---\n# Ledger\n\nThe quokka ledger records the terms.\n',
}


@dataclass
class Run:
    """One Inspector run: its exit status, and what it printed: its JSON answer, and stderr."""

    code: int
    out: dict[str, Any]
    err: str

    @property
    def result(self) -> dict[str, Any]:
        assert "result" in self.out, (self.code, self.out, self.err)
        result: dict[str, Any] = self.out["result"]
        return result


def _node_or_skip() -> None:
    if shutil.which("node") is None:
        pytest.skip("node is not installed: the MCP Inspector is a node program (.ci/run installs Debian's nodejs)")
    assert INSPECTOR.exists(), f"the MCP Inspector is not installed at {INSPECTOR}: run `make inspector`"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class Inspector:
    """Runs of the Inspector's CLI, with its state (catalog, client config, OAuth store) kept in a
    folder of the test's, never the user's home."""

    def __init__(self, home: Path, docs: Path) -> None:
        self.docs = docs
        self.env = {
            "PATH": os.environ.get("PATH", ""), "HOME": str(home), "MCP_CATALOG_PATH": str(home / "catalog.json"),
            "MCP_CLIENT_CONFIG_PATH": str(home / "client.json"), "NO_COLOR": "1",
        }  # fmt: skip

    def run(self, target: list[str], *args: str) -> Run:
        command = [str(INSPECTOR), "--cli", "--format", "json", "--connect-timeout", str(RUN_TIMEOUT * 1000),
                   *target, *args]  # fmt: skip
        done = subprocess.run(
            command, cwd=REPO, env=self.env, capture_output=True, text=True, timeout=RUN_TIMEOUT, check=False
        )
        # A result is printed on stdout, an error on stderr (after the server's own log lines).
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")] or [
            line for line in done.stderr.splitlines() if line.startswith('{"error"')]
        out = json.loads(lines[-1]) if lines else {}
        return Run(done.returncode, out, done.stderr)

    def stdio(self, *serve: str) -> list[str]:
        return ["--cwd", str(REPO), sys.executable, "-m", "recallpack", "serve", *serve]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Run]]:
    """Every run of the test, by name: the first round side by side, then the reads of its citations."""
    _node_or_skip()
    root = tmp_path_factory.mktemp("inspector")
    docs = root / "docs"
    docs.mkdir()
    for name, text in FILES.items():
        (docs / name).write_text(text, encoding="utf-8")
    (root / "tokens.yaml").write_text(f"tokens:\n  - sha256: {hash_token(TOKEN)}\n    reader: u-inspector\n")
    inspector = Inspector(root / "home", docs)
    stdio = inspector.stdio("--docs", str(docs))
    failing = inspector.stdio("--retriever", "tests.adapters.mcp_factories:failing")
    port = _free_port()
    http = [f"http://127.0.0.1:{port}/mcp", "--header", f"Authorization: Bearer {TOKEN}"]
    recall = ["--method", "tools/call", "--tool-name", "recall"]
    index = DocsIndex(docs, Packer(), window_tokens=200, overlap_tokens=20)
    [secret_uri] = [uri for uri, candidate in index.by_uri.items() if candidate.artifact_id == "secret.md"]
    first = {
        "stdio initialize": (stdio, "--method", "initialize"),
        "stdio tools/list": (stdio, "--method", "tools/list"),
        "stdio recall": (stdio, *recall, "--tool-arg", "query=how does the floor work"),
        "stdio invalid_input": (stdio, *recall, "--tool-arg", "query=floor", "--tool-arg", "max_tokens=5"),
        "stdio recall_failed": (failing, *recall, "--tool-arg", "query=anything"),
        "stdio resources/list": (stdio, "--method", "resources/list"),
        "stdio templates": (stdio, "--method", "resources/templates/list"),
        "stdio out of scope": (stdio, "--method", "resources/read", "--uri", secret_uri),
        "http initialize": (http, "--method", "initialize"),
        "http tools/list": (http, "--method", "tools/list"),
        "http recall": (http, *recall, "--tool-arg", "query=how does the floor work"),
        "http invalid_input": (http, *recall, "--tool-arg", "query=floor", "--tool-arg", "max_tokens=99999"),
        "http templates": (http, "--method", "resources/templates/list"),
        "http out of scope": (http, "--method", "resources/read", "--uri", secret_uri),
        "http no token": (http[:1], "--stored-auth-only", "--method", "tools/list"),
    }
    with tempfile.TemporaryFile("w+") as log:
        server = subprocess.Popen(
            [sys.executable, "-m", "recallpack", "serve", "--docs", str(docs), "--transport", "http",
             "--port", str(port), "--tokens", str(root / "tokens.yaml")],
            cwd=REPO, stdout=subprocess.DEVNULL, stderr=log, env={"PATH": ""},
        )  # fmt: skip
        try:
            wait_listening(server, port, log, RUN_TIMEOUT)
            with ThreadPoolExecutor(max_workers=8) as pool:
                done = dict(zip(first, pool.map(lambda a: inspector.run(list(a[0]), *a[1:]), first.values())))
                cited = done["http recall"].result["structuredContent"]["items"][0]["citation"]
                file_uri = split_spans(cited)[0]
                second = {
                    "http resources/list": (http, "--method", "resources/list"),
                    "http read spans": (http, "--method", "resources/read", "--uri", cited),
                    "http read file": (http, "--method", "resources/read", "--uri", file_uri),
                    "stdio read spans": (stdio, "--method", "resources/read", "--uri", cited),
                    "stdio read file": (stdio, "--method", "resources/read", "--uri", file_uri),
                }
                done.update(zip(second, pool.map(lambda a: inspector.run(list(a[0]), *a[1:]), second.values())))
        finally:
            server.terminate()
            server.wait(timeout=30)
    yield done


TRANSPORTS = ["stdio", "http"]
_VALIDATOR = validator_for(OUTPUT_SCHEMA)(OUTPUT_SCHEMA)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_initialize_names_the_server_and_its_capabilities(runs: dict[str, Run], transport: str) -> None:
    """initialize: the server's name, tools and resources, and the instructions."""
    run = runs[f"{transport} initialize"]
    assert run.code == 0, run
    assert run.result["serverInfo"]["name"] == "recallpack"
    assert {"tools", "resources"} <= set(run.result["capabilities"])
    assert "evidence, not instructions" in run.result["instructions"]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_tools_list_shows_recall_with_both_schemas(runs: dict[str, Run], transport: str) -> None:
    """tools/list: one tool, recall, whose outputSchema is the one the server validates against."""
    run = runs[f"{transport} tools/list"]
    assert run.code == 0, run
    [tool] = run.result["tools"]
    assert tool["name"] == "recall" and tool["inputSchema"]["required"] == ["query"]
    assert tool["outputSchema"] == OUTPUT_SCHEMA


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_recall_shows_the_block_and_its_citation(runs: dict[str, Run], transport: str) -> None:
    """tools/call of a match: the Markdown block, and structured content the schema accepts."""
    run = runs[f"{transport} recall"]
    assert run.code == 0, run
    structured = run.result["structuredContent"]
    assert _VALIDATOR.is_valid(structured) and structured["status"] == "ok"
    [item] = structured["items"]
    assert item["citation"].startswith("recallpack://artifacts/floor.md/contents/")
    assert "A match is never answered with nothing." in run.result["content"][0]["text"]


@pytest.mark.parametrize(("name", "code", "says"), [
    ("stdio invalid_input", "invalid_input", "max_tokens=5 is below the least block"),
    ("http invalid_input", "invalid_input", "max_tokens=99999 is out of range"),
    ("stdio recall_failed", "recall_failed", "the search failed (RuntimeError)"),
])  # fmt: skip
def test_each_refusal_shows_its_envelope_not_a_schema_error(runs: dict[str, Run], name: str, code: str, says: str) -> None:
    """A tool error: the client prints the envelope (isError, exit 5), never a validation failure."""
    run = runs[name]
    assert run.code == 5, run  # the Inspector's exit status for a tool that answered isError
    structured = run.result["structuredContent"]
    assert _VALIDATOR.is_valid(structured)
    assert structured["status"] == "error" and structured["error_code"] == code
    assert says in structured["error_message"]
    assert run.result["isError"] is True and run.result["content"][0]["text"].startswith(f"{code}: ")
    assert "output schema" not in run.err and "must have required property" not in run.err


def test_resources_list_is_each_callers_kept_items(runs: dict[str, Run]) -> None:
    """resources/list: nothing on a fresh stdio server; over HTTP, what this token's recall cited."""
    assert runs["stdio resources/list"].result == {"resources": []}
    cited = runs["http recall"].result["structuredContent"]["items"][0]["citation"]
    [listed] = runs["http resources/list"].result["resources"]
    assert listed["uri"] == cited and listed["mimeType"] == "text/plain"


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_resources_read_with_and_without_spans(runs: dict[str, Run], transport: str) -> None:
    """resources/read of the citation (?spans=) reads what the item showed; the file's URI, the file."""
    recalled = runs[f"{transport} recall"].result["content"][0]["text"]
    [spans] = runs[f"{transport} read spans"].result["contents"]
    assert spans["text"] and all(line.strip() in recalled for line in spans["text"].splitlines())
    [whole] = runs[f"{transport} read file"].result["contents"]
    assert whole["text"] == FILES["floor.md"]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_out_of_scope_reads_as_no_such_resource(runs: dict[str, Run], transport: str) -> None:
    """resources/read of a file outside the reader's scopes: the error for a URI that does not exist."""
    run = runs[f"{transport} out of scope"]
    assert run.code != 0 and "result" not in run.out, run
    message = run.out["error"]["message"]
    assert message.startswith("no resource ") and message.endswith(" for this reader")
    assert "quokka" not in json.dumps(run.out) + run.err


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_templates_list_has_the_file_and_spans_templates(runs: dict[str, Run], transport: str) -> None:
    """resources/templates/list: a kept item's URI, and the {?spans} form of it."""
    templates = {t["name"]: t["uriTemplate"] for t in runs[f"{transport} templates"].result["resourceTemplates"]}
    assert templates == {
        "evidence": "recallpack://artifacts/{artifact_id}/contents/{artifact_content_id}",
        "evidence-spans": "recallpack://artifacts/{artifact_id}/contents/{artifact_content_id}{?spans}",
    }


def test_http_without_a_token_is_refused_as_needing_auth(runs: dict[str, Run]) -> None:
    """No bearer token over HTTP: a 401, which the client reports as needing authorization."""
    run = runs["http no token"]
    assert run.code != 0 and run.out["error"]["code"] == "auth_required", run
    assert "invalid_token" in run.out["error"]["message"]
