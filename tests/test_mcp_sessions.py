"""One caller cannot lock out the rest of ``recallpack serve --transport http``: each caller may
hold a bounded number of open sessions (``--max-sessions-per-caller``), one more gets HTTP 429
with a JSON-RPC error naming the limit and how to raise it, and every other caller is served.
A session idle for ``--session-idle-timeout`` is closed, and frees its place. And the server logs
one line per request and one per refusal, never a token.

In-process through Starlette's TestClient on ``http_app``, and once as a user starts it: a
subprocess on 127.0.0.1, flooded by one token while another reader keeps working. Every loop is
bounded and ends by itself.
"""

from __future__ import annotations

import json
import logging
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp")

import httpx2
from starlette.testclient import TestClient

from recallpack import ConfigError, Reader, Scope
from recallpack.adapters.mcp import build_server, docs_source, http_app
from recallpack.adapters.mcp.auth import ReaderVerifier, hash_token
from tests.adapters.mcp_host import CALL_TIMEOUT, REPO, log_text, serve_command, wait_listening

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
VERSION = "2025-06-18"
TOKENS = {"alice": "alice-" + "a" * 40, "bob": "bob-" + "b" * 40}
READERS = {
    hash_token(TOKENS["alice"]): Reader(id="u-alice", scopes={"org-a": Scope(name="acme")}),
    hash_token(TOKENS["bob"]): Reader(id="u-bob", scopes={"org-b": Scope(name="bravo")}),
}


def _initialize(request_id: int = 0) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "initialize", "params": {
        "protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}  # fmt: skip


def _answer(text: str) -> dict[str, Any]:
    """The JSON-RPC message of a response body: plain JSON, or the data line of an SSE event."""
    data = [line[len("data:"):] for line in text.splitlines() if line.startswith("data:")]
    return dict(json.loads(data[-1] if data else text))


def _folder(tmp_path: Path) -> Path:
    (tmp_path / "docs").mkdir(exist_ok=True)
    (tmp_path / "docs" / "notes.md").write_text("The wombat ledger records the terms.\n")
    (tmp_path / "docs" / "acme.md").write_text("---\nscope_ids: [org-a]\n---\nThe aardvark ledger.\n")
    return tmp_path / "docs"


class Caller:
    """One bearer token's requests to an app: open sessions, call in them, end them."""

    def __init__(self, client: Any, token: str | None) -> None:
        self.client = client
        self.headers = {**HEADERS, **({"Authorization": f"Bearer {token}"} if token else {})}

    def open(self) -> Any:
        response = self.client.post("/mcp", headers=self.headers, json=_initialize())
        if response.status_code == 200:
            session = self._in(response.headers["mcp-session-id"])
            self.client.post("/mcp", headers=session, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        return response

    def _in(self, session_id: str) -> dict[str, str]:
        return {**self.headers, "mcp-session-id": session_id, "mcp-protocol-version": VERSION}

    def recall(self, session_id: str, query: str) -> dict[str, Any]:
        call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                "params": {"name": "recall", "arguments": {"query": query}}}  # fmt: skip
        response = self.client.post("/mcp", headers=self._in(session_id), json=call)
        assert response.status_code == 200, response.text
        return _answer(response.text)

    def end(self, session_id: str) -> int:
        return int(self.client.delete("/mcp", headers=self._in(session_id)).status_code)


def _app(tmp_path: Path, verifier: ReaderVerifier | None, **limits: Any) -> Any:
    server = build_server(docs_source(str(_folder(tmp_path))), per_caller=verifier is not None)
    return http_app(server, "127.0.0.1", 8000, verifier, **limits)


def test_one_token_over_its_limit_gets_429_while_another_is_served(tmp_path: Path) -> None:
    """Alice opens 3 sessions, the most allowed; her next 12 get 429 naming the flag, while Bob opens and recalls after each."""
    app = _app(tmp_path, ReaderVerifier(READERS), max_sessions_per_caller=3)
    with TestClient(app, base_url="http://127.0.0.1:8000") as client:
        alice, bob = Caller(client, TOKENS["alice"]), Caller(client, TOKENS["bob"])
        opened = [alice.open() for _ in range(3)]
        assert [r.status_code for r in opened] == [200, 200, 200]
        bob_session = bob.open().headers["mcp-session-id"]
        for attempt in range(12):
            refused = alice.open()
            assert refused.status_code == 429, (attempt, refused.status_code, refused.text)
            error = refused.json()["error"]
            assert "--max-sessions-per-caller" in error["message"] and error["data"]["value"] == 3
            assert int(refused.headers["retry-after"]) >= 1
            answer = bob.recall(bob_session, f"ledger {attempt}")
            assert not answer["result"]["isError"] and "wombat" in answer["result"]["content"][0]["text"]
        # Bob's own opens are his: alice's limit is not his.
        assert all(bob.open().status_code == 200 for _ in range(2))
        # Alice ends one session: she may open one again, and no more.
        assert alice.end(opened[0].headers["mcp-session-id"]) == 200
        assert alice.open().status_code == 200 and alice.open().status_code == 429


def test_without_authentication_a_caller_is_its_address(tmp_path: Path) -> None:
    """Without a verifier the limit holds per client address: the TestClient's second session over 1 gets 429."""
    with TestClient(_app(tmp_path, None, max_sessions_per_caller=1), base_url="http://127.0.0.1:8000") as client:
        anyone = Caller(client, None)
        assert anyone.open().status_code == 200
        assert anyone.open().status_code == 429


def test_an_idle_session_is_closed_and_frees_its_place(tmp_path: Path) -> None:
    """With --session-idle-timeout 0.5, a caller at its limit can open a session again once one has been idle that long."""
    app = _app(tmp_path, ReaderVerifier(READERS), max_sessions_per_caller=1, session_idle_timeout=0.5)
    with TestClient(app, base_url="http://127.0.0.1:8000") as client:
        alice = Caller(client, TOKENS["alice"])
        first = alice.open().headers["mcp-session-id"]
        assert alice.open().status_code == 429
        deadline = time.monotonic() + 30  # bounds a hang; the session closes after 0.5 s idle
        while (status := alice.open().status_code) == 429 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert status == 200
        # The idle session is closed by the SDK too: its id is no longer served.
        assert alice.client.post("/mcp", headers=alice._in(first), json={"jsonrpc": "2.0", "id": 1,
                                 "method": "tools/list"}).status_code == 404  # fmt: skip


@pytest.mark.parametrize(
    ("limits", "field"),
    [({"max_sessions_per_caller": 0}, "max_sessions_per_caller"), ({"session_idle_timeout": -1.0}, "session_idle_timeout"),
     ({"session_idle_timeout": float("nan")}, "session_idle_timeout")],
)  # fmt: skip
def test_a_limit_that_is_not_positive_is_a_config_error(tmp_path: Path, limits: dict[str, Any], field: str) -> None:
    """http_app refuses a limit of 0, a negative timeout or NaN with a ConfigError naming the setting."""
    with pytest.raises(ConfigError, match=field) as caught:
        _app(tmp_path, None, **limits)
    assert caught.value.field == field


def test_each_request_and_each_refusal_is_one_log_line(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """One INFO line per request served (reader, method, tool, tokens, outcome, ms), one WARNING per refusal; no token."""
    app = _app(tmp_path, ReaderVerifier(READERS), max_sessions_per_caller=1)
    with caplog.at_level(logging.INFO, logger="recallpack"), TestClient(app, base_url="http://127.0.0.1:8000") as client:
        alice = Caller(client, TOKENS["alice"])
        session = alice.open().headers["mcp-session-id"]
        caplog.clear()
        tokens = alice.recall(session, "wombat ledger")["result"]["structuredContent"]["context_tokens_used"]
        assert alice.open().status_code == 429
        assert Caller(client, "not-a-token").open().status_code == 401
        assert Caller(client, None).open().status_code == 401
    records = [r for r in caplog.records if r.name == "recallpack.mcp.http"]
    served, refused, no_token, unknown = (r.getMessage() for r in records)
    assert records[0].levelno == logging.INFO and all(r.levelno == logging.WARNING for r in records[1:])
    assert served.startswith("POST /mcp 200 reader=u-alice method=tools/call tool=recall")
    assert f"tokens={tokens} outcome=ok" in served and served.endswith(" ms")
    assert refused.startswith("refused POST /mcp 429 reader=u-alice ")
    assert "why=max-sessions-per-caller 1" in refused
    assert no_token.startswith("refused POST /mcp 401 reader=- ") and "why=unknown bearer token" in no_token
    assert "why=no bearer token" in unknown
    text = caplog.text
    assert not any(secret in text for secret in [*TOKENS.values(), "not-a-token", "wombat", *READERS])


# -- as a user runs it: a flood from one token on loopback, while another reader works -------------


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, Any]]:
    """``recallpack serve --transport http`` on a free loopback port, 4 sessions per caller, its stderr kept."""
    docs = _folder(tmp_path)
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text("tokens:\n" + "".join(
        f"  - sha256: {digest}\n    reader: {reader.id}\n    scopes: {list(reader.scopes)}\n"
        for digest, reader in READERS.items()))  # fmt: skip
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    log = tempfile.TemporaryFile("w+")  # noqa: SIM115 - closed below
    process = subprocess.Popen(
        serve_command("--docs", str(docs), "--transport", "http", "--port", str(port), "--tokens", str(tokens),
                      "--max-sessions-per-caller", "4"),
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=log,
    )  # fmt: skip
    try:
        wait_listening(process, port, log)
        yield f"http://127.0.0.1:{port}/mcp", log
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()


def _log_once(log: Any, written: Callable[[str], bool], timeout: float = 10.0) -> str:
    """The server's log once ``written(text)`` holds, or as it is after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        text = log_text(log)
        if written(text) or time.monotonic() > deadline:
            return text
        time.sleep(0.05)


def test_a_flood_from_one_token_leaves_another_reader_served(server: tuple[str, Any]) -> None:
    """200 initializes from Alice's token at once: 4 are served, the rest 429; Bob's 20 recalls meanwhile all succeed."""
    url, log = server
    statuses: list[int] = []
    bob_answers: list[str] = []

    async def flood(http: Any) -> None:
        headers = {**HEADERS, "Authorization": f"Bearer {TOKENS['alice']}"}

        async def one() -> None:
            statuses.append((await http.post(url, headers=headers, json=_initialize())).status_code)

        async with anyio.create_task_group() as group:
            for _ in range(200):
                group.start_soon(one)

    async def bob(http: Any) -> None:
        headers = {**HEADERS, "Authorization": f"Bearer {TOKENS['bob']}"}
        opened = await http.post(url, headers=headers, json=_initialize())
        assert opened.status_code == 200, opened.text
        session = {**headers, "mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": VERSION}
        await http.post(url, headers=session, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        for i in range(20):
            call = {"jsonrpc": "2.0", "id": i, "method": "tools/call",
                    "params": {"name": "recall", "arguments": {"query": "ledger"}}}  # fmt: skip
            response = await http.post(url, headers=session, json=call)
            assert response.status_code == 200, response.text
            bob_answers.append(_answer(response.text)["result"]["content"][0]["text"])
            await anyio.sleep(0)

    async def both() -> None:
        limits = httpx2.Limits(max_connections=50)
        with anyio.fail_after(CALL_TIMEOUT * 2):
            async with httpx2.AsyncClient(timeout=CALL_TIMEOUT, limits=limits) as http, anyio.create_task_group() as group:
                group.start_soon(flood, http)
                group.start_soon(bob, http)

    anyio.run(both)
    assert statuses.count(200) == 4 and statuses.count(429) == 196, sorted(set(statuses))
    assert len(bob_answers) == 20 and all("wombat" in text for text in bob_answers)
    # The server writes a request's line once its response is sent, so the last lines may land
    # just after the client has its answers: wait (bounded) for them before counting.
    err = _log_once(log, lambda text: text.count("reader=u-bob method=tools/call tool=recall") >= 20
                    and text.count("refused POST /mcp 429 reader=u-alice") >= 196)  # fmt: skip
    assert err.count("refused POST /mcp 429 reader=u-alice") == 196, err[-2000:]
    assert err.count("reader=u-bob method=tools/call tool=recall") == 20
    assert not any(token in err for token in TOKENS.values())


def test_a_request_cannot_write_a_log_line_of_its_own(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A path and a JSON-RPC method holding line breaks stay on their request's one line (each break a ?)."""
    app = _app(tmp_path, None)
    with caplog.at_level(logging.INFO, logger="recallpack"), TestClient(app, base_url="http://127.0.0.1:8000") as client:
        caplog.clear()
        client.post("/mcp%0Arefused%20POST", headers=HEADERS, json=_initialize())
        forged = {"jsonrpc": "2.0", "id": 1, "method": "tools/list\nPOST /mcp 200 reader=u-admin"}
        client.post("/mcp", headers=HEADERS, json=forged)
    lines = [r.getMessage() for r in caplog.records if r.name == "recallpack.mcp.http"]
    assert len(lines) == 2 and not any("\n" in line for line in lines), lines
    assert "/mcp?refused?POST" in lines[0] and "method=tools/list?POST?/mcp?200?reader=u-admin" in lines[1]
