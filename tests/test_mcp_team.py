"""One ``recallpack serve --transport http`` for a team: each caller reads as the reader of its
bearer token, verified by the MCP SDK's own auth, and never sees another's scopes.

One server for the module, on 127.0.0.1 at a free port, started as a user starts it (a
subprocess) with a tokens file for two readers and a JWT issuer whose key the test makes. It is
driven with the SDK's streamable-HTTP client, as three callers at once.
"""

from __future__ import annotations

import json
import random
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp")
pytest.importorskip("jwt")

import httpx2
import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from recallpack import Packer
from recallpack.adapters.mcp.auth import hash_token
from recallpack.adapters.mcp.docs import DocsIndex
from recallpack.adapters.mcp.windows import split_spans
from recallpack.allowance import verify
from tests.adapters.mcp_host import CALL_TIMEOUT, REPO, STARTUP_TIMEOUT, serve_command, wait_listening

if sys.version_info < (3, 11):
    from exceptiongroup import BaseExceptionGroup

KEY = "r" * 32
ISSUER = "https://id.example.test"
AUDIENCE = "recallpack-team-test"
#: Each file's distinctive word and its scopes; "anteater" is in org-a AND org-b, which no one holds.
FILES = {
    "public.md": ("handbook", None),
    "acme.md": ("aardvark", ["org-a"]),
    "bravo.md": ("bison", ["org-b"]),
    "charlie.md": ("caracal", ["org-c"]),
    "alice.md": ("albatross", ["u-alice"]),
    "bob.md": ("buffalo", ["u-bob"]),
    "carol.md": ("cormorant", ["u-carol"]),
    "both.md": ("anteater", ["org-a", "org-b"]),
}
#: Who may read what: each reader's files, and the scope names its block's header may show.
MAY_READ = {
    "alice": ({"public.md", "acme.md", "alice.md"}, {"acme"}),
    "bob": ({"public.md", "bravo.md", "bob.md"}, {"bravo-team"}),
    "carol": ({"public.md", "charlie.md", "carol.md"}, {"charlie-club"}),
}
READER_IDS = {"alice": "u-alice", "bob": "u-bob", "carol": "u-carol"}
SCOPE_NAMES = {"acme", "bravo-team", "charlie-club"}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _key_pem(private: Any) -> bytes:
    return private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def _jwt(private: Any, **changes: Any) -> str:
    claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": "u-carol", "scope_ids": {"org-c": "charlie-club"},
              "exp": int(time.time()) + 3600, "iat": int(time.time())}  # fmt: skip
    claims.update(changes)
    return str(jwt.encode({k: v for k, v in claims.items() if v is not None}, private, algorithm="RS256"))


@dataclass
class Team:
    url: str
    tokens: dict[str, str]
    key: Any
    uris: dict[str, str]  # every window's resource URI -> its file
    log: Any


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Team]:
    root = tmp_path_factory.mktemp("team")
    docs = root / "docs"
    docs.mkdir()
    for name, (word, scopes) in FILES.items():
        front = f"---\nscope_ids: {json.dumps(scopes)}\n---\n" if scopes else ""
        (docs / name).write_text(f"{front}# {word.title()}\n\nThe {word} ledger records the terms.\n")
    tokens = {"alice": "alice-" + "a" * 40, "bob": "bob-" + "b" * 40}
    (root / "tokens.yaml").write_text(
        f"""tokens:
  - sha256: {hash_token(tokens["alice"])}
    reader: u-alice
    scopes:
      org-a: {{name: acme, description: Acme's shared notes}}
  - sha256: {hash_token(tokens["bob"])}
    reader: u-bob
    scopes: {{org-b: bravo-team}}
"""
    )
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    (root / "issuer.pem").write_bytes(_key_pem(private))
    tokens["carol"] = _jwt(private)
    port = _free_port()
    log = tempfile.TemporaryFile("w+")  # noqa: SIM115 - closed below
    process = subprocess.Popen(
        serve_command(
            "--docs", str(docs), "--transport", "http", "--port", str(port), "--tokens", str(root / "tokens.yaml"),
            "--jwt-key", str(root / "issuer.pem"), "--issuer", ISSUER, "--audience", AUDIENCE,
        ),
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=log, env={"RECALLPACK_RECEIPT_KEY": KEY, "PATH": ""},
    )  # fmt: skip
    index = DocsIndex(docs, Packer(), window_tokens=200, overlap_tokens=20)
    uris = {uri: c.artifact_id or "" for uri, c in index.by_uri.items()}
    try:
        wait_listening(process, port, log)
        yield Team(f"http://127.0.0.1:{port}/mcp", tokens, private, uris, log)
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()


@asynccontextmanager
async def _session(url: str, token: str) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        create_mcp_http_client(headers=headers) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write, read_timeout_seconds=CALL_TIMEOUT) as session,
    ):
        await session.initialize()
        yield session


def _text(result: types.CallToolResult) -> str:
    [content] = result.content
    assert isinstance(content, types.TextContent)
    return content.text


def _check_recall(team: Team, who: str, result: types.CallToolResult) -> str:
    """The block holds this reader's words only, names only its scopes, and its receipt is its own."""
    files, names = MAY_READ[who]
    text = _text(result)
    assert not result.is_error, text
    for name, (word, _) in FILES.items():
        assert (word in text) <= (name in files), (who, word, text)
    shown_names = {n for n in SCOPE_NAMES if f"`{n}`" in text}
    assert shown_names <= names, (who, shown_names)
    for item in result.structured_content["items"]:
        assert team.uris.get(split_spans(item["citation"])[0]) in files, (who, item)
    receipt = result.structured_content["receipt"]
    assert verify(text, receipt, key=KEY, context={"owner": READER_IDS[who]})
    others = [r for w, r in READER_IDS.items() if w != who]
    assert not any(verify(text, receipt, key=KEY, context={"owner": other}) for other in others)
    return text


async def _check_read(team: Team, who: str, session: ClientSession, uri: str) -> None:
    """A window reads back only for a reader who may read its file; for any other, no such resource."""
    files, _ = MAY_READ[who]
    try:
        read = await session.read_resource(uri)
    except MCPError as exc:
        assert team.uris[uri] not in files and exc.error.code == -32002, (who, uri, exc)
        return
    assert team.uris[uri] in files, (who, uri)
    [content] = read.contents
    word = FILES[team.uris[uri]][0]
    assert isinstance(content, types.TextResourceContents) and word in content.text


def _all_three_at_once(caller: Callable[[str], Awaitable[None]]) -> None:
    """``caller(who)`` for each of the three readers, at once, bounded in time."""

    async def all_three() -> None:
        with anyio.fail_after(STARTUP_TIMEOUT):
            async with anyio.create_task_group() as group:
                for who in MAY_READ:
                    group.start_soon(caller, who)

    anyio.run(all_three)


def test_three_callers_at_once_each_see_only_their_scopes(team: Team) -> None:
    """Two readers from the tokens file and one from a JWT, at once: recall, list and read are each their own."""
    seen: dict[str, str] = {}

    async def caller(who: str) -> None:
        files, _ = MAY_READ[who]
        async with _session(team.url, team.tokens[who]) as session:
            result = await session.call_tool("recall", {"query": "ledger terms"})
            seen[who] = _check_recall(team, who, result)
            listed = {split_spans(str(r.uri))[0] for r in (await session.list_resources()).resources}
            assert listed and {team.uris[u] for u in listed} <= files, (who, listed)
            for uri in team.uris:
                await _check_read(team, who, session, uri)

    _all_three_at_once(caller)
    # Each saw its own: its organization's file and its private one, and nobody saw "anteater".
    for who, (files, _) in MAY_READ.items():
        assert all(FILES[f][0] in seen[who] for f in files), (who, seen[who])
    assert "`acme`" in seen["alice"] and "Acme's shared notes" in seen["alice"]


def test_a_thousand_interleaved_calls_never_cross_readers(team: Team) -> None:
    """1,000 calls of three callers interleaved (recall, list, read of any window): no text, receipt or resource crosses."""
    rng = random.Random(35)
    uris = sorted(team.uris)
    queries = ["ledger", "terms", "aardvark bison", "caracal cormorant", "albatross buffalo anteater", "handbook"]
    done = {who: 0 for who in MAY_READ}

    async def caller(who: str, calls: int) -> None:
        files, _ = MAY_READ[who]
        async with _session(team.url, team.tokens[who]) as session:
            for _ in range(calls):
                kind = rng.random()
                if kind < 0.5:
                    _check_recall(team, who, await session.call_tool("recall", {"query": rng.choice(queries)}))
                elif kind < 0.6:
                    listed = (await session.list_resources()).resources
                    assert {team.uris[split_spans(str(r.uri))[0]] for r in listed} <= files
                else:
                    await _check_read(team, who, session, rng.choice(uris))
                done[who] += 1
                await anyio.sleep(0)  # let the others in between every call

    async def interleaved() -> None:
        with anyio.fail_after(300):
            async with anyio.create_task_group() as group:
                for who, calls in zip(MAY_READ, (334, 333, 333)):
                    group.start_soon(caller, who, calls)

    anyio.run(interleaved)
    assert sum(done.values()) == 1000


def test_spans_of_a_file_read_under_the_files_scopes(team: Team) -> None:
    """Each caller reads ranges of a file (its URI with spans=) only where it may read the file;
    out of its scopes, spans in range, past the end or garbled all read as a missing file
    (-32002), and past the end of a file it may read they are invalid params (-32602)."""

    async def caller(who: str) -> None:
        files, _ = MAY_READ[who]
        async with _session(team.url, team.tokens[who]) as session:
            for uri, name in team.uris.items():
                word = FILES[name][0]
                whole = f"# {word.title()}\n\nThe {word} ledger records the terms."
                for spans, expected in ((f"0-{len(whole)}", whole), ("2-5,13-16", f"{whole[2:5]}\n…\n{whole[13:16]}\n…"),
                                        ("0-99999", None), ("0-2,1-3", None), ("x", None)):  # fmt: skip
                    try:
                        read = await session.read_resource(f"{uri}?spans={spans}")
                    except MCPError as exc:
                        if name not in files:
                            assert exc.error.code == -32002, (who, name, spans, exc)
                        else:
                            assert expected is None and exc.error.code == -32602, (who, name, spans, exc)
                        continue
                    assert name in files and expected is not None, (who, name, spans)
                    [content] = read.contents
                    assert isinstance(content, types.TextResourceContents) and content.text == expected

    _all_three_at_once(caller)


def _initialize() -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}  # fmt: skip


def _bad_tokens(team: Team) -> dict[str, str | None]:
    other_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ec_key = ec.generate_private_key(ec.SECP256R1())
    return {
        "missing": None,
        "unknown": "Bearer not-a-token-anyone-was-given",
        "a token's hash as the token": f"Bearer {hash_token(team.tokens['alice'])}",
        "not bearer": f"Basic {team.tokens['alice']}",
        "expired": f"Bearer {_jwt(team.key, exp=int(time.time()) - 3600)}",
        "another audience": f"Bearer {_jwt(team.key, aud='another-service')}",
        "another issuer": f"Bearer {_jwt(team.key, iss='https://evil.example.test')}",
        "no expiry": f"Bearer {_jwt(team.key, exp=None)}",
        "no subject": f"Bearer {_jwt(team.key, sub=None)}",
        "malformed scopes": f"Bearer {_jwt(team.key, scope_ids=[1, 2])}",
        "signed by another key": f"Bearer {_jwt(other_key)}",
        "signed by another kind of key": "Bearer "
        + jwt.encode({"iss": ISSUER, "aud": AUDIENCE, "sub": "u-carol", "exp": int(time.time()) + 60}, ec_key, "ES256"),
        "alg none": "Bearer "
        + jwt.encode({"iss": ISSUER, "aud": AUDIENCE, "sub": "u-carol", "exp": int(time.time()) + 60}, None, "none"),
        "HS256 keyed with the public key": "Bearer " + _hs256_with_public_key(team),
    }


def _hs256_with_public_key(team: Team) -> str:
    """The classic confusion: an HMAC token keyed with the issuer's public key bytes."""
    import base64
    import hashlib
    import hmac

    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": "u-carol", "exp": int(time.time()) + 60}
    signing = b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode()) + "." + b64(json.dumps(claims).encode())
    mac = hmac.new(_key_pem(team.key), signing.encode(), hashlib.sha256).digest()
    return signing + "." + b64(mac)


def test_missing_bad_and_expired_tokens_get_401(team: Team) -> None:
    """Each bad credential gets 401 with the SDK's Bearer WWW-Authenticate, and no MCP answer."""
    with httpx2.Client(timeout=CALL_TIMEOUT) as http:
        for case, authorization in _bad_tokens(team).items():
            headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
            if authorization is not None:
                headers["Authorization"] = authorization
            response = http.post(team.url, headers=headers, json=_initialize())
            assert response.status_code == 401, (case, response.status_code, response.text)
            challenge = response.headers["www-authenticate"]
            assert challenge.startswith('Bearer error="invalid_token"'), (case, challenge)
            assert "jsonrpc" not in response.text and "result" not in response.json(), case
            assert "resource_metadata=" in challenge  # the issuer's resource metadata, for a client to find it
        good = http.post(
            team.url, json=_initialize(), headers={"Accept": "application/json, text/event-stream",
            "Content-Type": "application/json", "Authorization": f"Bearer {team.tokens['carol']}"},
        )  # fmt: skip
        assert good.status_code == 200, good.text


def test_the_sdk_client_with_a_bad_token_is_refused(team: Team) -> None:
    """The SDK's own client with an unknown token cannot even initialize: nothing is served."""

    async def attempt() -> None:
        with anyio.fail_after(CALL_TIMEOUT):
            async with _session(team.url, "Bearer-less-and-unknown") as session:
                await session.call_tool("recall", {"query": "ledger"})

    with pytest.raises(BaseExceptionGroup) as caught:
        anyio.run(attempt)
    # The SDK's client turns the 401 into an error response to its initialize request.
    assert caught.group_contains(MCPError, match="Server returned an error response")


def test_the_docs_client_reads_as_its_token(team: Team) -> None:
    """docs/mcp.md's client snippet, run against the server, gets the block of its token's reader."""
    import re

    page = (REPO / "docs" / "mcp.md").read_text()
    [block] = [b for b in re.findall(r"```python\n(.*?)```", page, re.S) if "async def ask" in b]
    namespace: dict[str, Any] = {}
    exec(compile(block, "docs/mcp.md", "exec"), namespace)  # noqa: S102
    text = anyio.run(namespace["ask"], team.url, team.tokens["bob"], "ledger terms")
    assert "bison" in text and "buffalo" in text and "aardvark" not in text and "caracal" not in text
