"""Who is calling ``recallpack serve --transport http``: bearer tokens, verified through the MCP
SDK's own auth (a :class:`~mcp.server.auth.provider.TokenVerifier` and its ``AuthSettings``), each
becoming the :class:`~recallpack.Reader` that call packs for.

Two sources of identity, either or both:

- a **tokens file** (YAML or JSON) that holds each token's SHA-256, never the token, with the
  reader id it stands for and that reader's scopes (names and descriptions for the block's
  header)::

      tokens:
        - sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
          reader: u-alice
          scopes:
            org-acme: {name: acme, description: Acme's shared notes}
            org-book: book-club

- **JWTs from an OAuth/OIDC issuer**, verified with PyJWT against a configured public key (PEM)
  or JWKS file, for one issuer and one audience; the reader id is a claim (``sub``) and its
  scopes another (``scope_ids``: a list of ids, or a mapping of id to name or to
  ``{name, description}``). As in seed 000, the caller's own id is its ``private`` scope.

A token that neither knows is refused, and the SDK's middleware answers 401 with its standard
``WWW-Authenticate``. Needs the ``mcp`` extra (PyYAML, PyJWT).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from recallpack.adapters._extras import require

require("mcp", extra="mcp", feature=__name__)
jwt = require("jwt", extra="mcp", feature=__name__)
yaml = require("yaml", extra="mcp", feature=__name__)

from cryptography.hazmat.primitives.serialization import load_pem_public_key
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from pydantic import AnyHttpUrl

from recallpack import ConfigError, Reader, Scope

__all__ = [
    "ReaderToken",
    "ReaderVerifier",
    "JwtSettings",
    "hash_token",
    "load_tokens",
    "caller",
    "auth_settings",
]

logger = logging.getLogger("recallpack.mcp")

#: What an issuer may sign with: public-key algorithms only, so a public key can never be
#: taken for a shared HMAC secret.
ALGORITHMS = {
    "RSA": ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512"],
    "EC": ["ES256", "ES384", "ES512"],
    "OKP": ["EdDSA"],
}
#: Seconds of clock difference allowed between the issuer and this server.
LEEWAY = 30
_HEX64 = re.compile(r"[0-9a-f]{64}")


class ReaderToken(AccessToken):
    """An access token the SDK's middleware carries into each request, with the reader it is."""

    reader: Reader


def hash_token(token: str) -> str:
    """The hex SHA-256 of a bearer token: what a tokens file holds in its place."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _scopes(value: object, where: str) -> dict[str, Scope]:
    """A reader's scopes: a list of ids, or a mapping of id to a name or to {name, description}."""
    if isinstance(value, list) and all(isinstance(v, str) and v.strip() for v in value):
        return {v: Scope(name=v) for v in value}
    if not isinstance(value, Mapping):
        raise ConfigError(
            f"{where} must be a list of scope ids or a mapping of scope id to name, got {value!r:.60}"
        )
    scopes = {}
    for scope_id, named in value.items():
        if isinstance(named, str):
            named = {"name": named}
        if not isinstance(scope_id, str) or not scope_id.strip() or not isinstance(named, Mapping):
            raise ConfigError(
                f"{where}[{scope_id!r:.40}] must map a scope id to a name or to {{name, description}}"
            )
        unknown = set(named) - {"name", "description"}
        if unknown or not isinstance(named.get("name", scope_id), str):
            raise ConfigError(
                f"{where}[{scope_id!r:.40}] may have name and description (strings), got {dict(named)!r:.80}"
            )
        scopes[scope_id] = Scope(
            name=named.get("name", scope_id), description=str(named.get("description", ""))
        )
    return scopes


def load_tokens(path: str | Path) -> dict[str, Reader]:
    """The readers of a tokens file, by token hash; a ConfigError naming the entry and the fix."""
    where = str(path)
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))  # JSON is YAML too
    except OSError as exc:
        raise ConfigError(f"--tokens {where!r} cannot be read ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"--tokens {where!r} is not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset "
            f"{exc.start}); save it as UTF-8"
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" (line {mark.line + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or type(exc).__name__
        raise ConfigError(f"--tokens {where!r} is not YAML or JSON{line}: {problem}") from None
    entries = data.get("tokens") if isinstance(data, dict) else None
    if not isinstance(entries, list) or not entries:
        raise ConfigError(f"--tokens {where!r} must hold a non-empty list under 'tokens:' (see docs/mcp.md)")
    readers: dict[str, Reader] = {}
    for number, entry in enumerate(entries):
        at = f"--tokens {where!r}: tokens[{number}]"
        if not isinstance(entry, dict) or "token" in entry:
            raise ConfigError(
                f"{at} must be a mapping of sha256, reader and scopes; a file holds each token's "
                "SHA-256, never the token (recallpack hash-token prints it)"
            )
        unknown = set(entry) - {"sha256", "reader", "scopes"}
        digest, reader_id = entry.get("sha256"), entry.get("reader")
        if unknown:
            raise ConfigError(
                f"{at} has unknown keys {sorted(map(str, unknown))}; it takes sha256, reader and scopes"
            )
        if not isinstance(digest, str) or not _HEX64.fullmatch(digest.lower()):
            raise ConfigError(
                f"{at}.sha256 must be 64 hex digits, the SHA-256 of the token (recallpack hash-token)"
            )
        if not isinstance(reader_id, str) or not reader_id.strip():
            raise ConfigError(f"{at}.reader must be the reader's id, a non-empty string")
        if digest.lower() in readers:
            raise ConfigError(f"{at}.sha256 is given twice; each token stands for one reader")
        readers[digest.lower()] = Reader(
            id=reader_id, scopes=_scopes(entry.get("scopes", []), f"{at}.scopes")
        )
    return readers


class JwtSettings:
    """How to verify an issuer's JWTs: its key (a PEM public key or a JWKS file), the issuer and
    audience they must name, and the claims that hold the reader's id and scopes."""

    def __init__(
        self,
        *,
        issuer: str,
        audience: str,
        key_file: str | None = None,
        jwks_file: str | None = None,
        reader_claim: str = "sub",
        scopes_claim: str = "scope_ids",
    ) -> None:
        if (key_file is None) == (jwks_file is None):
            raise ConfigError(
                "give one of --jwt-key FILE (a PEM public key) or --jwks FILE (a JSON Web Key Set)"
            )
        self.issuer, self.audience = issuer, audience
        self.reader_claim, self.scopes_claim = reader_claim, scopes_claim
        self._key: Any = None
        self._jwks: Any = None
        flag, path = ("--jwt-key", key_file) if key_file is not None else ("--jwks", str(jwks_file))
        try:
            data = Path(path).read_bytes()
            if key_file is not None:
                self._key = load_pem_public_key(data)
                _algorithms(self._key)
            else:
                self._jwks = jwt.PyJWKSet.from_dict(json.loads(data))
                _check_public(self._jwks, path)
        except OSError as exc:
            raise ConfigError(f"{flag} {path!r} cannot be read ({exc.strerror or exc})") from None
        except ConfigError:
            raise
        except (ValueError, TypeError, jwt.PyJWTError) as exc:
            what = "a PEM public key (the issuer's, not a private key)" if key_file else "a JSON Web Key Set"
            raise ConfigError(f"{flag} {path!r} is not {what}: {exc}") from None

    def _signing_key(self, token: str) -> Any:
        if self._jwks is None:
            return self._key
        kid = jwt.get_unverified_header(token).get("kid")
        keys = [k for k in self._jwks.keys if kid is None or k.key_id == kid]
        if len(keys) != 1:
            raise jwt.InvalidKeyError("no single key of the key set matches the token's kid")
        return keys[0].key

    def reader(self, token: str) -> tuple[Reader, int | None]:
        """The token's reader and expiry, or a ``jwt.PyJWTError``/ConfigError saying why not."""
        key = self._signing_key(token)
        claims = jwt.decode(
            token,
            key,
            algorithms=_algorithms(key),
            audience=self.audience,
            issuer=self.issuer,
            leeway=LEEWAY,
            # A token without the scopes claim is refused, not read as no scopes: an issuer that
            # was not configured to send them would otherwise serve every caller as scopeless.
            options={"require": ["exp", "iss", "aud", self.reader_claim, self.scopes_claim]},
        )
        reader_id = claims.get(self.reader_claim)
        if not isinstance(reader_id, str) or not reader_id.strip():
            raise ConfigError(f"claim {self.reader_claim} must be the reader's id, a non-empty string")
        scopes = _scopes(claims[self.scopes_claim], f"claim {self.scopes_claim}")
        return Reader(id=reader_id, scopes=scopes), claims.get("exp")


def _check_public(jwks: Any, path: str) -> None:
    """Every key of the set is a public key an issuer signs with: a shared secret (``oct``) or a
    private key means the wrong file was saved, and would refuse every token without a word."""
    from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa

    private = (rsa.RSAPrivateKey, ec.EllipticCurvePrivateKey, ed25519.Ed25519PrivateKey, ed448.Ed448PrivateKey)
    for number, key in enumerate(jwks.keys):
        named = f"key {key.key_id!r}" if key.key_id else f"key {number}"
        kind = type(key.key).__name__.lstrip("_")
        if isinstance(key.key, bytes):
            raise ConfigError(
                f"--jwks {path!r}: {named} is a shared secret (kty oct), not a public key; give the "
                "issuer's public key set, saved from its jwks_uri"
            )
        if isinstance(key.key, private):
            raise ConfigError(
                f"--jwks {path!r}: {named} is a private key ({kind}); give the issuer's public key "
                "set, saved from its jwks_uri, and keep the private key secret"
            )
        _algorithms(key.key)


def _algorithms(key: object) -> list[str]:
    """The algorithms ``key``'s kind signs with: a token that names another is refused."""
    from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa

    if isinstance(key, rsa.RSAPublicKey):
        return ALGORITHMS["RSA"]
    if isinstance(key, ec.EllipticCurvePublicKey):
        return ALGORITHMS["EC"]
    if isinstance(key, (ed25519.Ed25519PublicKey, ed448.Ed448PublicKey)):
        return ALGORITHMS["OKP"]
    raise ConfigError(f"a {type(key).__name__} is not a public key an issuer signs JWTs with")


class ReaderVerifier:
    """The SDK's ``TokenVerifier`` over a tokens file's hashes and an issuer's JWTs."""

    def __init__(
        self, tokens: Mapping[str, Reader] | None = None, jwt_settings: JwtSettings | None = None
    ) -> None:
        if not tokens and jwt_settings is None:
            raise ConfigError(
                "authentication needs --tokens FILE, or --jwt-key/--jwks with --issuer and --audience"
            )
        self._tokens = dict(tokens or {})
        self._jwt = jwt_settings

    @property
    def issuer(self) -> str | None:
        """The JWT issuer, or None when only a tokens file is read."""
        return None if self._jwt is None else self._jwt.issuer

    async def verify_token(self, token: str) -> AccessToken | None:
        digest = hash_token(token)
        reader = self._tokens.get(digest)
        if reader is not None:
            return ReaderToken(
                token=digest, client_id=reader.id or "", scopes=list(reader.scopes), reader=reader
            )
        if self._jwt is None or token.count(".") != 2:
            return None
        try:
            reader, expires = self._jwt.reader(token)
        except Exception as exc:  # noqa: BLE001 - whatever a token does, it is refused, never a 500
            # Why a token was refused, never the token nor its claims.
            logger.info("a bearer token was refused: %s", type(exc).__name__)
            return None
        return ReaderToken(
            token=digest,
            client_id=reader.id or "",
            subject=reader.id,
            scopes=list(reader.scopes),
            # The SDK's middleware refuses a token past expires_at by itself: the leeway PyJWT
            # allowed must reach it too, or a token 1 s past exp is refused after all.
            expires_at=expires + LEEWAY if isinstance(expires, int) else None,
            claims={"iss": self._jwt.issuer},
            reader=reader,
        )


def auth_settings(verifier: ReaderVerifier, url: str) -> AuthSettings:
    """The SDK's auth settings for a resource server at ``url``: the issuer's, with JWTs; a
    tokens file has no issuer, so the server names itself (no route uses it)."""
    issuer = verifier.issuer or url.rsplit("/", 1)[0]
    resource = AnyHttpUrl(url) if verifier.issuer is not None else None
    # The verifier checks the JWT's audience itself, so the SDK need not compare resources.
    return AuthSettings(
        issuer_url=AnyHttpUrl(issuer), resource_server_url=resource, validate_token_resource=False
    )


def caller() -> Reader:
    """The reader of the request being served, from the token the SDK's middleware verified.

    Raises a ConfigError when there is none: a server that authenticates never packs for no one.
    """
    token = get_access_token()
    if not isinstance(token, ReaderToken):
        raise ConfigError("this request carries no verified reader")
    return token.reader
