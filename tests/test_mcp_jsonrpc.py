"""Malformed JSON-RPC gets the protocol's error answer, on stdio and on streamable HTTP, and the
server goes on serving.

On stdio the MCP SDK drops a line it cannot validate (a client then waits forever), so
``recallpack serve`` checks each line first and answers it (recallpack/adapters/mcp/stdio.py).
On HTTP the SDK answers by itself: 400 with a JSON-RPC error, id null; the test records that.
A batch on stdio is taken apart, and each of its requests answered by its own id.
"""

from __future__ import annotations

import json
import socket
import subprocess
from collections.abc import Iterator

import pytest

pytest.importorskip("mcp")

import httpx2

from tests.adapters.mcp_host import (
    CALL_TIMEOUT,
    REPO,
    RawServer,
    serve_command,
    wait_listening,
)

#: An answer to a malformed line comes at once (measured: about 0.01 s); this bounds a hang.
ANSWER_TIMEOUT = 5.0
RECALL = '"method": "tools/call", "params": {"name": "recall", "arguments": {"query": "x"'
#: (line, the id a stdio answer carries, its code, the SDK's code over HTTP): the six of issue
#: 35, and a line that is not JSON. stdio reads the id wherever Python's json can; the SDK's
#: parser refuses a lone surrogate and a 4,301-digit number as not JSON, and answers id null.
MALFORMED = {
    "lone surrogate escape": ('{"jsonrpc": "2.0", "id": 11, ' + RECALL + ', "q": "a\\ud800b"}}}', 11, -32600, -32700),
    "4,301-digit number": ('{"jsonrpc": "2.0", "id": 12, ' + RECALL + ', "max_tokens": ' + "9" * 4301 + "}}}", 12, -32600, -32700),
    "params a string": ('{"jsonrpc": "2.0", "id": 13, "method": "tools/call", "params": "recall"}', 13, -32600, -32602),
    "jsonrpc 1.0": ('{"jsonrpc": "1.0", "id": 14, "method": "tools/list"}', 14, -32600, -32602),
    "a batch array": ('[{"jsonrpc": "2.0", "id": 15, "method": "tools/list"}]', None, -32600, -32602),
    "100,000-deep nesting": ('{"jsonrpc": "2.0", "id": 16, "x": ' + "[" * 100_000 + "]" * 100_000 + "}", None, -32700, -32700),
    "not JSON": ("this is not JSON {", None, -32700, -32700),
}


@pytest.fixture(scope="module")
def raw() -> Iterator[RawServer]:
    server = RawServer("--docs", "docs")
    try:
        server.initialize()
        yield server
    finally:
        server.close()


@pytest.mark.parametrize("case", [case for case in MALFORMED if case != "a batch array"])
def test_stdio_answers_each_malformed_line(raw: RawServer, case: str) -> None:
    """Each malformed line on stdio is answered with the protocol's error (with its id when readable); serving goes on."""
    line, request_id, code, _ = MALFORMED[case]
    raw.send(line)
    answer = raw.receive(timeout=ANSWER_TIMEOUT)
    assert answer["jsonrpc"] == "2.0" and answer["id"] == request_id and answer["error"]["code"] == code, answer
    raw.send({"jsonrpc": "2.0", "id": 100, "method": "tools/list"})
    assert raw.receive(timeout=ANSWER_TIMEOUT)["result"]["tools"][0]["name"] == "recall"
    assert raw.process.poll() is None and "Traceback" not in raw.stderr()


def test_stdio_answers_each_request_of_a_batch_by_its_own_id(raw: RawServer) -> None:
    """A batch on stdio: each request is served and answered by its own id (a bad one refused by its id), a notification not at all."""
    batch = [
        {"jsonrpc": "2.0", "id": 21, "method": "tools/list"},
        {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"},
        {"jsonrpc": "1.0", "id": 22, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": "s-23", "method": "tools/call", "params": {"name": "recall", "arguments": {"query": "budget"}}},
    ]
    raw.send(json.dumps(batch))
    answers = {}
    for _ in range(3):
        answer = raw.receive(timeout=CALL_TIMEOUT)
        answers[answer["id"]] = answer
    assert set(answers) == {21, 22, "s-23"}, answers
    assert answers[21]["result"]["tools"][0]["name"] == "recall"
    assert answers[22]["error"]["code"] == -32600
    assert answers["s-23"]["result"]["isError"] is False
    raw.send("[]")  # an empty batch is one invalid request, as JSON-RPC says
    empty = raw.receive(timeout=ANSWER_TIMEOUT)
    assert empty["id"] is None and empty["error"]["code"] == -32600, empty
    raw.send({"jsonrpc": "2.0", "id": 24, "method": "tools/list"})
    assert raw.receive(timeout=ANSWER_TIMEOUT)["id"] == 24


def test_a_blank_line_is_not_a_message(raw: RawServer) -> None:
    """A blank line on stdio gets no answer (it is no request); the next request is answered as usual."""
    raw.send("")
    raw.send({"jsonrpc": "2.0", "id": 101, "method": "tools/list"})
    assert raw.receive(timeout=ANSWER_TIMEOUT)["id"] == 101


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    process = subprocess.Popen(
        serve_command("--docs", "docs", "--transport", "http", "--port", str(port)),
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_listening(process, port)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.mark.parametrize("case", list(MALFORMED))
def test_http_answers_each_malformed_body_as_the_sdk_does(http_url: str, case: str) -> None:
    """The SDK's streamable HTTP answers each malformed body itself: 400, a JSON-RPC error, id null."""
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    initialize = ('{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": '
                  '"2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}')  # fmt: skip
    line, _, _, code = MALFORMED[case]
    with httpx2.Client(timeout=ANSWER_TIMEOUT) as http:
        opened = http.post(http_url, headers=headers, content=initialize)
        session = {**headers, "mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-06-18"}
        response = http.post(http_url, headers=session, content=line.encode())
        assert response.status_code == 400, response.text
        answer = response.json()
        # The SDK says -32602 (invalid params) where the body is JSON but not a message.
        assert answer["id"] is None and answer["error"]["code"] == code, answer
        listed = http.post(http_url, headers=session, content='{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}')
        assert listed.status_code == 200 and '"recall"' in listed.text
