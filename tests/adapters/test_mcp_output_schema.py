"""Every answer of the recall tool validates against the ``outputSchema`` it declares.

A client that validates structured content (the MCP Inspector does, even a result with
``isError``) must see the error envelope, not a schema failure. The 1,000 calls run in-process
(the SDK's own client on ``build_server``); a smaller set goes over real stdio and HTTP servers
(``recallpack serve`` as a subprocess), where what is validated is what came over the wire.
"""

from __future__ import annotations

import json
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")
pytest.importorskip("langchain_core")

import httpx2
from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema.validators import validator_for
from mcp import Client, types

from recallpack import BudgetError
from recallpack.adapters.mcp import build_server, docs_source, retriever_source
from recallpack.adapters.mcp.auth import hash_token
from recallpack.adapters.mcp.tool import ERROR_CODES, MAX_QUERY_CHARS, OUTPUT_SCHEMA
from tests.adapters import mcp_factories
from tests.adapters.mcp_host import REPO, connect, serve_command, wait_listening

KEY = "k" * 32
TOKEN = "reader-" + "t" * 40
FILES = {
    "floor.md": "# The floor\n\nA match is never answered with nothing. The floor keeps the best "
    "match's first sentence when nothing else fits.\n\nSee the walk for details.\n",
    "budget.md": "# Budget\n\nThe budget is counted in tokens of the model's tokenizer. " * 6,
    "हिन्दी.md": "बजट टोकन में गिना जाता है। हर वाक्य एक इकाई है। " * 8,
}

# -- what a call may pass: valid, invalid, and everything between -------------------------------

_WORDS = st.sampled_from(["floor", "budget", "tokens", "match", "टोकन", "walk", "nothing", "zzz"])
_QUERY = st.one_of(
    st.lists(_WORDS, min_size=1, max_size=4).map(" ".join),
    st.text(max_size=30),
    st.sampled_from(["", "   ", "\n", "x" * (MAX_QUERY_CHARS + 1)]),
    st.integers(), st.none(), st.booleans(), st.lists(st.integers(), max_size=2),
)
_MAX_TOKENS = st.one_of(
    st.integers(min_value=-5, max_value=40_000),
    st.integers(min_value=1, max_value=300),
    st.floats(allow_nan=False, allow_infinity=False),  # JSON has neither
    st.sampled_from([512.0, 64.5, True, False, "512", None, [512]]),
)
_ARGUMENTS = st.one_of(
    st.fixed_dictionaries({"query": _QUERY}, optional={"max_tokens": _MAX_TOKENS}),
    st.fixed_dictionaries({"query": _QUERY, "max_token": _MAX_TOKENS}),  # a misspelt name
    st.dictionaries(st.text(max_size=8), _QUERY, max_size=2),
    st.none(),
)

_VALIDATOR = validator_for(OUTPUT_SCHEMA)(OUTPUT_SCHEMA)


def _check(result: types.CallToolResult) -> dict[str, Any]:
    """The result's structured content, after checking it is one of the schema's answers."""
    structured = result.structured_content
    assert structured is not None, result
    errors = sorted(_VALIDATOR.iter_errors(structured), key=str)
    assert not errors, (structured, [e.message for e in errors])
    assert result.is_error == (structured["status"] == "error"), structured
    if result.is_error:
        [content] = result.content
        assert isinstance(content, types.TextContent)
        assert content.text == f"{structured['error_code']}: {structured['error_message']}"
    return structured


# -- the servers: the docs index (with receipts), and retrievers that fail ------------------------


def _budget_refused() -> Any:
    """A LangChain Runnable whose search refuses its budget, as a user's retriever may."""
    from langchain_core.runnables import RunnableLambda

    async def search(query: str) -> list[Any]:
        raise BudgetError("max_tokens is too small for this index's smallest chunk", field="max_tokens")

    return RunnableLambda(lambda q: [], afunc=search)


@pytest.fixture(scope="module")
def docs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("schema") / "docs"
    folder.mkdir()
    for name, text in FILES.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def clients(docs: Path) -> Iterator[tuple[BlockingPortal, dict[str, Client]]]:
    servers = {
        "docs": build_server(docs_source(str(docs)), key=KEY),
        "failing": build_server(retriever_source(mcp_factories.failing())),
        "budget": build_server(retriever_source(_budget_refused())),
    }
    with start_blocking_portal() as portal, ExitStack() as stack:
        opened = {name: stack.enter_context(portal.wrap_async_context_manager(Client(server)))
                  for name, server in servers.items()}  # fmt: skip
        yield portal, opened


SEEN: dict[str, set[str]] = {}


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(server=st.sampled_from(["docs", "docs", "failing", "budget"]), arguments=_ARGUMENTS)
def test_every_answer_in_process_validates(
    clients: tuple[BlockingPortal, dict[str, Client]], server: str, arguments: dict[str, Any] | None
) -> None:
    """1,000 calls of valid, invalid and failing kinds: each answer is one the outputSchema describes."""
    portal, opened = clients
    result = portal.call(opened[server].call_tool, "recall", arguments)
    structured = _check(result)
    SEEN.setdefault(server, set()).add(structured.get("error_code", "ok"))


def test_the_run_reached_every_answer() -> None:
    """The run above produced a recall, each error code, and each from the server meant to."""
    if not SEEN:
        pytest.skip("runs only after the property test in the same process")
    assert SEEN["docs"] >= {"ok", "invalid_input"}, SEEN
    assert SEEN["failing"] >= {"recall_failed", "invalid_input"}, SEEN
    assert "invalid_input" in SEEN["budget"] and "recall_failed" not in SEEN["budget"], SEEN
    assert {code for codes in SEEN.values() for code in codes} == {"ok", *ERROR_CODES}


def test_the_schema_tells_the_answers_apart_by_status() -> None:
    """A recall's fields under an error's status, or an unknown code, is no answer the schema allows."""
    ok = {"status": "ok", "context_tokens_used": 0, "chunks_selected": 0, "chunks_dropped": 0,
          "tokenizer_used": "o200k_base", "report": {}, "items": []}  # fmt: skip
    error = {"status": "error", "error_code": "invalid_input", "error_message": "query is empty"}
    assert _VALIDATOR.is_valid(ok) and _VALIDATOR.is_valid(error)
    assert not _VALIDATOR.is_valid({**ok, "status": "error"})
    assert not _VALIDATOR.is_valid({**error, "error_code": "teapot"})
    assert not _VALIDATOR.is_valid({**error, "context_tokens_used": 0})


# -- over the wire: stdio and HTTP -------------------------------------------------------------

_WIRE = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def stdio_hosts(docs: Path) -> Iterator[dict[str, Any]]:
    with (
        connect("--docs", str(docs), env={"RECALLPACK_RECEIPT_KEY": KEY}) as docs_host,
        connect("--retriever", "tests.adapters.mcp_factories:failing") as failing_host,
    ):
        yield {"docs": docs_host, "failing": failing_host}


@_WIRE
@given(server=st.sampled_from(["docs", "failing"]), arguments=_ARGUMENTS)
def test_every_answer_over_stdio_validates(
    stdio_hosts: dict[str, Any], server: str, arguments: dict[str, Any] | None
) -> None:
    """Over a real stdio server: each answer, as the client reads it off the pipe, validates."""
    _check(stdio_hosts[server].recall(arguments))


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def http_url(docs: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tokens = tmp_path_factory.mktemp("tokens") / "tokens.yaml"
    tokens.write_text(f"tokens:\n  - sha256: {hash_token(TOKEN)}\n    reader: u-schema\n")
    port = _free_port()
    with tempfile.TemporaryFile("w+") as log:
        process = subprocess.Popen(
            serve_command("--docs", str(docs), "--transport", "http", "--port", str(port),
                          "--tokens", str(tokens)),
            cwd=REPO, stdout=subprocess.DEVNULL, stderr=log, env={"RECALLPACK_RECEIPT_KEY": KEY, "PATH": ""},
        )  # fmt: skip
        try:
            wait_listening(process, port, log)
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            process.terminate()
            process.wait(timeout=30)


@_WIRE
@given(arguments=_ARGUMENTS)
def test_every_answer_over_http_validates(http_url: str, arguments: dict[str, Any] | None) -> None:
    """Over streamable HTTP with a bearer token: each JSON-RPC result body validates as sent."""
    headers = {"Authorization": f"Bearer {TOKEN}", "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": "2025-06-18"}  # fmt: skip
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "recall", "arguments": arguments}}
    with httpx2.Client(timeout=60) as http:
        init = http.post(http_url, headers=headers, json={"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "schema-test", "version": "0"}}})  # fmt: skip
        assert init.status_code == 200, init.text
        session = init.headers.get("mcp-session-id")
        if session:
            headers["mcp-session-id"] = session
        http.post(http_url, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        answer = http.post(http_url, headers=headers, json=call)
    assert answer.status_code == 200, answer.text
    body = _body(answer.text, answer.headers.get("content-type", ""))
    _check(types.CallToolResult.model_validate(body["result"]))


def _body(text: str, content_type: str) -> dict[str, Any]:
    """The JSON-RPC message of a response: plain JSON, or the data of a server-sent event."""
    if content_type.startswith("text/event-stream"):
        data = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")]
        text = next(d for d in data if d)
    message: dict[str, Any] = json.loads(text)
    return message
