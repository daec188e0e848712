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
  ``{name, description}``), :mod:`.jwt` reading them. As in seed 000, the caller's own id
  is its ``private`` scope.

A token that neither knows is refused, and the SDK's middleware answers 401 with its standard
``WWW-Authenticate``. Needs the ``mcp`` extra (PyYAML, PyJWT).
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Mapping
from pathlib import Path

from recallpack.adapters.shared.extras import require

require("mcp", extra="mcp", feature=__name__)
yaml = require("yaml", extra="mcp", feature=__name__)

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from pydantic import AnyHttpUrl

from recallpack import ConfigError, Reader
from recallpack.adapters.mcp.jwt import LEEWAY, JwtSettings, scopes_of
from recallpack.adapters.mcp.log import request_note

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

#: What a tokens file's sha256 is: 64 hex digits.
_HEX64 = re.compile(r"[0-9a-f]{64}")


class ReaderToken(AccessToken):
    """An access token the SDK's middleware carries into each request, with the reader it is."""

    reader: Reader


def hash_token(token: str) -> str:
    """The hex SHA-256 of a bearer token: what a tokens file holds in its place."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


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
            id=reader_id, scopes=scopes_of(entry.get("scopes", []), f"{at}.scopes")
        )
    return readers


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
            # Why a token was refused, never the token nor its claims: on the request's log line.
            written = request_note()
            if written is not None:
                written.refused = f"bearer token refused ({type(exc).__name__})"
            else:
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
