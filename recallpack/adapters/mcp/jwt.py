"""JWTs from an OAuth/OIDC issuer for ``recallpack serve --transport http``: verified with PyJWT
against a configured public key (PEM) or JWKS file, for one issuer and one audience, each
becoming a :class:`~recallpack.Reader`: its id is a claim (``sub``) and its scopes another
(``scope_ids``: a list of ids, or a mapping of id to name or to ``{name, description}``). A
token without either claim is refused; so is a key set that holds a shared secret or a private
key, at start. :mod:`.auth` verifies the bearer tokens with it. Needs the ``mcp`` extra.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from recallpack.adapters.shared.extras import require

jwt = require("jwt", extra="mcp", feature=__name__)

from cryptography.hazmat.primitives.serialization import load_pem_public_key

from recallpack import ConfigError, Reader, Scope

__all__ = ["ALGORITHMS", "LEEWAY", "JwtSettings", "scopes_of"]

#: What an issuer may sign with: public-key algorithms only, so a public key can never be
#: taken for a shared HMAC secret.
ALGORITHMS = {
    "RSA": ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512"],
    "EC": ["ES256", "ES384", "ES512"],
    "OKP": ["EdDSA"],
}
#: Seconds of clock difference allowed between the issuer and this server.
LEEWAY = 30


def scopes_of(value: object, where: str) -> dict[str, Scope]:
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
        scopes = scopes_of(claims[self.scopes_claim], f"claim {self.scopes_claim}")
        return Reader(id=reader_id, scopes=scopes), claims.get("exp")


def _check_public(jwks: Any, path: str) -> None:
    """Every key of the set is a public key an issuer signs with: a shared secret (``oct``) or a
    private key means the wrong file was saved, and would refuse every token without a word."""
    from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa

    private = (
        rsa.RSAPrivateKey, ec.EllipticCurvePrivateKey, ed25519.Ed25519PrivateKey, ed448.Ed448PrivateKey
    )
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
