"""The bearer-token verifier of ``recallpack serve --transport http`` on its own: JWTs against a
PEM key or a JWKS file, readers from the claims flags name, and per-reader memory in a
``--retriever`` source."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp")
pytest.importorskip("jwt")

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519

from recallpack import ConfigError, Reader, Scope
from recallpack.adapters.mcp.auth import JwtSettings, ReaderToken, ReaderVerifier

ISSUER, AUDIENCE = "https://id.example.test/realms/team", "recallpack"


def _claims(**changes: Any) -> dict[str, Any]:
    claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": "u-dana", "exp": int(time.time()) + 600}
    return {**claims, **changes}


def _verify(verifier: ReaderVerifier, token: str) -> Any:
    return anyio.run(verifier.verify_token, token)


def _public_pem(private: Any) -> bytes:
    return private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def test_a_jwks_file_picks_the_key_by_kid(tmp_path: Path) -> None:
    """With a key set, the token's kid chooses the key; an unknown kid, or another key's signature, is refused."""
    keys = {kid: ec.generate_private_key(ec.SECP256R1()) for kid in ("k-1", "k-2")}
    jwks = {"keys": [{**json.loads(jwt.algorithms.ECAlgorithm.to_jwk(k.public_key())), "kid": kid, "use": "sig"}
                     for kid, k in keys.items()]}  # fmt: skip
    (tmp_path / "jwks.json").write_text(json.dumps(jwks))
    verifier = ReaderVerifier(jwt_settings=JwtSettings(
        issuer=ISSUER, audience=AUDIENCE, jwks_file=str(tmp_path / "jwks.json"), scopes_claim="orgs",
    ))  # fmt: skip
    token = jwt.encode(_claims(orgs=["org-a", "org-b"]), keys["k-2"], "ES256", headers={"kid": "k-2"})
    verified = _verify(verifier, token)
    assert isinstance(verified, ReaderToken) and verified.subject == "u-dana"
    # Seed 000: the caller's own id is its private scope, plus one scope per organization.
    assert verified.reader == Reader(id="u-dana", scopes={"org-a": Scope(name="org-a"), "org-b": Scope(name="org-b")})
    wrong_kid = jwt.encode(_claims(orgs=["org-a"]), keys["k-2"], "ES256", headers={"kid": "k-1"})
    unknown_kid = jwt.encode(_claims(orgs=["org-a"]), keys["k-2"], "ES256", headers={"kid": "k-9"})
    assert _verify(verifier, wrong_kid) is None and _verify(verifier, unknown_kid) is None


def test_claims_named_by_flags_make_the_reader(tmp_path: Path) -> None:
    """--reader-claim and --scopes-claim name the claims; a mapping gives names and descriptions."""
    private = ed25519.Ed25519PrivateKey.generate()
    (tmp_path / "key.pem").write_bytes(_public_pem(private))
    verifier = ReaderVerifier(jwt_settings=JwtSettings(
        issuer=ISSUER, audience=AUDIENCE, key_file=str(tmp_path / "key.pem"),
        reader_claim="preferred_username", scopes_claim="groups",
    ))  # fmt: skip
    groups = {"org-a": {"name": "acme", "description": "Acme's notes"}, "org-b": "bravo"}
    token = jwt.encode(_claims(preferred_username="dana", groups=groups), private, "EdDSA")
    assert _verify(verifier, token).reader == Reader(
        id="dana", scopes={"org-a": Scope(name="acme", description="Acme's notes"), "org-b": Scope(name="bravo")}
    )
    no_claim = jwt.encode(_claims(groups=groups), private, "EdDSA")
    bad_scopes = jwt.encode(_claims(preferred_username="dana", groups="org-a org-b"), private, "EdDSA")
    assert _verify(verifier, no_claim) is None and _verify(verifier, bad_scopes) is None
    no_scopes = jwt.encode(_claims(preferred_username="dana"), private, "EdDSA")
    assert _verify(verifier, no_scopes) is None  # refused: the scopes claim is required


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"not a key", "is not a PEM public key"),
        (None, "the issuer's, not a private key"),
    ],
)
def test_a_key_that_cannot_verify_is_refused_at_start(tmp_path: Path, content: bytes | None, says: str) -> None:
    """--jwt-key that is not a public key (garbage, or the issuer's private key) is a ConfigError at start."""
    if content is None:
        content = ec.generate_private_key(ec.SECP256R1()).private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    (tmp_path / "key.pem").write_bytes(content)
    with pytest.raises(ConfigError, match=says):
        JwtSettings(issuer=ISSUER, audience=AUDIENCE, key_file=str(tmp_path / "key.pem"))


def test_a_retriever_source_serves_each_reader_only_what_it_showed_that_reader() -> None:
    """Under --retriever, what one caller was shown is not readable by another caller's URI."""
    pytest.importorskip("langchain_core")
    from langchain_core.documents import Document
    from langchain_core.runnables import RunnableLambda

    from recallpack.adapters.mcp import retriever_source

    def search(query: str) -> list[Document]:
        return [
            Document(page_content="The aardvark ledger.", metadata={"source": "a.md", "scope_ids": ["org-a"]}),
            Document(page_content="The bison ledger.", metadata={"source": "b.md", "scope_ids": ["org-b"]}),
        ]

    source = retriever_source(RunnableLambda(search))
    alice = Reader(id="u-a", scopes={"org-a": Scope(name="acme")})
    bob = Reader(id="u-b", scopes={"org-b": Scope(name="bravo")})

    async def both() -> tuple[Any, Any]:
        return await source.recall("ledger", 2048, alice), await source.recall("ledger", 2048, bob)

    for_alice, for_bob = anyio.run(both)
    [a_item], [b_item] = for_alice.evidence, for_bob.evidence
    assert "aardvark" in a_item.text and "bison" in b_item.text
    assert a_item.resource_uri and b_item.resource_uri
    assert source.read(a_item.resource_uri, alice) == a_item.text and source.read(a_item.resource_uri, bob) is None
    assert source.read(b_item.resource_uri, bob) == b_item.text and source.read(b_item.resource_uri, alice) is None


def test_a_tokens_file_alone_guards_the_http_app(tmp_path: Path) -> None:
    """With only a tokens file (no issuer): no token is 401 with the SDK's challenge; the file's token initializes."""
    from starlette.testclient import TestClient

    from recallpack.adapters.mcp import build_server, docs_source, http_app
    from recallpack.adapters.mcp.auth import hash_token

    (tmp_path / "notes.md").write_text("The wombat ledger.\n")
    verifier = ReaderVerifier({hash_token("t-1"): Reader(id="u-1", scopes={})})
    server = build_server(docs_source(str(tmp_path)), per_caller=True)
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    initialize = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}  # fmt: skip
    with TestClient(http_app(server, "127.0.0.1", 8000, verifier), base_url="http://127.0.0.1:8000") as client:
        refused = client.post("/mcp", headers=headers, json=initialize)
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"] == (
            'Bearer error="invalid_token", error_description="Authentication required"'
        )
        served = client.post("/mcp", headers={**headers, "Authorization": "Bearer t-1"}, json=initialize)
        assert served.status_code == 200 and "mcp-session-id" in served.headers


# -- issue 41: the leeway, the scopes claim, and auth files' mistakes at start --------------------


def _served(verifier: ReaderVerifier, tmp_path: Path, token: str) -> int:
    """The HTTP status of an initialize with ``token``, through the SDK's auth middleware."""
    from starlette.testclient import TestClient

    from recallpack.adapters.mcp import build_server, docs_source, http_app

    (tmp_path / "notes.md").write_text("The wombat ledger.\n")
    server = build_server(docs_source(str(tmp_path)), per_caller=True)
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
               "Authorization": f"Bearer {token}"}  # fmt: skip
    initialize = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}  # fmt: skip
    with TestClient(http_app(server, "127.0.0.1", 8000, verifier), base_url="http://127.0.0.1:8000") as client:
        return int(client.post("/mcp", headers=headers, json=initialize).status_code)


def test_the_documented_exp_leeway_reaches_the_http_server(tmp_path: Path) -> None:
    """A JWT 10 s past its exp is served (30 s of leeway, as documented); one 120 s past it gets 401."""
    private = ed25519.Ed25519PrivateKey.generate()
    (tmp_path / "key.pem").write_bytes(_public_pem(private))
    verifier = ReaderVerifier(jwt_settings=JwtSettings(issuer=ISSUER, audience=AUDIENCE, key_file=str(tmp_path / "key.pem")))
    now = int(time.time())
    late = jwt.encode(_claims(exp=now - 10, scope_ids=["org-a"]), private, "EdDSA")
    expired = jwt.encode(_claims(exp=now - 120, scope_ids=["org-a"]), private, "EdDSA")
    assert _served(verifier, tmp_path, late) == 200
    assert _served(verifier, tmp_path, expired) == 401


def test_a_jwt_without_the_scopes_claim_is_refused(tmp_path: Path) -> None:
    """A JWT that lacks the scopes claim is refused (docs/mcp.md); an empty list of scopes is a reader with none."""
    private = ed25519.Ed25519PrivateKey.generate()
    (tmp_path / "key.pem").write_bytes(_public_pem(private))
    verifier = ReaderVerifier(jwt_settings=JwtSettings(issuer=ISSUER, audience=AUDIENCE, key_file=str(tmp_path / "key.pem")))
    assert _verify(verifier, jwt.encode(_claims(), private, "EdDSA")) is None
    assert _verify(verifier, jwt.encode(_claims(scope_ids=[]), private, "EdDSA")).reader == Reader(id="u-dana", scopes={})


def _serve_exit(tmp_path: Path, capsys: pytest.CaptureFixture[str], *flags: str) -> tuple[int, str]:
    """``recallpack serve``'s exit status and stderr; a server that would start returns at once."""
    from recallpack.adapters import mcp as mcp_adapter
    from recallpack.cli import main

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(mcp_adapter, "serve", lambda source, **kw: None)
        return _serve_main(tmp_path, capsys, main, *flags)


def _serve_main(tmp_path: Path, capsys: pytest.CaptureFixture[str], main: Any, *flags: str) -> tuple[int, str]:
    (tmp_path / "docs").mkdir(exist_ok=True)
    (tmp_path / "docs" / "notes.md").write_text("The wombat ledger.\n")
    code = main(["serve", "--docs", str(tmp_path / "docs"), "--transport", "http", *flags])
    return code, capsys.readouterr().err


def test_a_tokens_file_that_is_not_utf8_is_one_line_at_start(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A --tokens file in Latin-1 is one clear line and exit 2 at start, not an internal error."""
    (tmp_path / "tokens.yaml").write_bytes("tokens:\n  - sha256: x\n    reader: jos\xe9\n".encode("latin-1"))
    code, err = _serve_exit(tmp_path, capsys, "--tokens", str(tmp_path / "tokens.yaml"))
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith("recallpack: error: --tokens") and "not UTF-8" in err and "internal error" not in err


@pytest.mark.parametrize("kind", ["a shared secret", "a private key"])
def test_a_jwks_without_a_public_key_is_one_line_at_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    """A --jwks holding only a symmetric (oct) or only a private key is one clear line and exit 2 at start."""
    if kind == "a shared secret":
        key = {"kty": "oct", "k": "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0", "kid": "h-1"}
    else:
        key = {**json.loads(jwt.algorithms.ECAlgorithm.to_jwk(ec.generate_private_key(ec.SECP256R1()))), "kid": "k-1"}
    (tmp_path / "jwks.json").write_text(json.dumps({"keys": [key]}))
    code, err = _serve_exit(
        tmp_path, capsys, "--jwks", str(tmp_path / "jwks.json"), "--issuer", ISSUER, "--audience", AUDIENCE
    )
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith("recallpack: error: --jwks") and kind in err, err
