"""``recallpack serve --transport http``: the MCP SDK's streamable-HTTP app, behind its bearer
auth when callers are authenticated, with limits per caller so that one caller cannot lock out
the rest, and one log line per request (:mod:`.log`).

The SDK bounds the sessions of the whole server (10,000), and one token holder could open them
all, after which every other reader's ``initialize`` got 503 for half an hour.
:class:`SessionLimits` counts each caller's open sessions (a caller is its token's principal,
the reader it stands for; without authentication, the client's address) and answers one more
with HTTP 429 and a JSON-RPC error naming the limit and how to raise it, while every other
caller is served. A session counts until the client ends it (``DELETE``) or it has had no
request in flight for the idle timeout, after which the SDK closes it too. Needs the ``mcp``
extra.
"""

from __future__ import annotations

import json
import math
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from recallpack.adapters.shared.extras import require

require("mcp", extra="mcp", feature=__name__)

from mcp.server import Server
from mcp.server.auth.provider import AccessToken, principal_components
from starlette.middleware import Middleware

from recallpack import ConfigError
from recallpack.adapters.mcp.auth import ReaderVerifier, auth_settings
from recallpack.adapters.mcp.log import AccessLog, header, request_note
from recallpack.packing.validation import check_count

__all__ = [
    "DEFAULT_MAX_SESSIONS_PER_CALLER",
    "DEFAULT_SESSION_IDLE_TIMEOUT",
    "SessionLimits",
    "check_limits",
    "http_app",
]

#: Open sessions one caller may hold at once: a person's few agents and their subagents.
DEFAULT_MAX_SESSIONS_PER_CALLER = 32
#: Seconds a session may go without a request in flight before it is closed (the SDK's own is 1,800).
DEFAULT_SESSION_IDLE_TIMEOUT = 900.0
SESSION_HEADER = b"mcp-session-id"


def http_app(
    server: Server,
    host: str,
    port: int,
    verifier: ReaderVerifier | None,
    *,
    max_sessions_per_caller: int = DEFAULT_MAX_SESSIONS_PER_CALLER,
    session_idle_timeout: float = DEFAULT_SESSION_IDLE_TIMEOUT,
) -> Any:
    """The streamable-HTTP ASGI app of ``server``, behind the SDK's bearer auth when ``verifier``,
    with at most ``max_sessions_per_caller`` open sessions per caller, each closed after
    ``session_idle_timeout`` seconds with no request in flight, and one log line per request on
    the ``recallpack.mcp.http`` logger."""
    check_limits(max_sessions_per_caller, session_idle_timeout)
    if verifier is None:
        app = server.streamable_http_app(host=host, session_idle_timeout=session_idle_timeout)
    else:
        address = f"[{host}]" if ":" in host else host
        settings = auth_settings(verifier, f"http://{address}:{port}/mcp")
        app = server.streamable_http_app(
            host=host, auth=settings, token_verifier=verifier, session_idle_timeout=session_idle_timeout
        )
    # Innermost, after the SDK's auth has named the caller; the log outermost, to see every answer.
    app.user_middleware.append(Middleware(
        SessionLimits, path="/mcp", per_caller=max_sessions_per_caller, idle_timeout=session_idle_timeout,
        authenticated=verifier is not None,
    ))  # fmt: skip
    app.add_middleware(AccessLog)
    return app


def check_limits(max_sessions_per_caller: int, session_idle_timeout: float) -> None:
    """A ConfigError naming the setting, for a limit that is not a positive number."""
    check_count(max_sessions_per_caller, "max_sessions_per_caller", 1, ConfigError)
    if isinstance(session_idle_timeout, bool) or not isinstance(session_idle_timeout, (int, float)) \
            or not (math.isfinite(session_idle_timeout) and session_idle_timeout > 0):  # fmt: skip
        raise ConfigError(
            f"session_idle_timeout={session_idle_timeout!r} must be a positive, finite number of seconds",
            field="session_idle_timeout",
        )


@dataclass
class _Session:
    caller: str
    in_flight: int = 1
    idle_since: float = 0.0


class SessionLimits:
    """ASGI middleware inside the SDK's auth (it reads the verified caller) and around its session
    manager: at most ``per_caller`` open sessions for each caller."""

    def __init__(
        self, app: Any, *, path: str, per_caller: int, idle_timeout: float, authenticated: bool
    ) -> None:
        self.app = app
        self.path = path
        self.per_caller = per_caller
        self.idle_timeout = idle_timeout
        self.authenticated = authenticated
        self._sessions: dict[str, _Session] = {}
        self._opening: Counter[str] = Counter()

    def _caller(self, scope: dict[str, Any]) -> str | None:
        """Who is calling: the token's principal, or without authentication the client's address;
        None for a request the SDK refuses anyway (no valid token)."""
        token = getattr(scope.get("user"), "access_token", None)
        if isinstance(token, AccessToken):
            return "token " + json.dumps(principal_components(token))
        if self.authenticated:
            return None
        client = scope.get("client")
        return f"address {client[0] if client else '?'}"

    def open_sessions(self, caller: str) -> int:
        """``caller``'s sessions still open (a session idle for the timeout is closed by the SDK)."""
        now = time.monotonic()
        for session_id, session in list(self._sessions.items()):
            if not session.in_flight and now - session.idle_since >= self.idle_timeout:
                del self._sessions[session_id]
        return sum(1 for s in self._sessions.values() if s.caller == caller) + self._opening[caller]

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"].rstrip("/") != self.path.rstrip("/"):
            await self.app(scope, receive, send)
            return
        caller = self._caller(scope)
        session_id = header(scope["headers"], SESSION_HEADER)
        if caller is None or (session_id is None and scope["method"] != "POST"):
            await self.app(scope, receive, send)  # the SDK answers these (401, 400)
        elif session_id is None:
            await self._open(caller, scope, receive, send)
        else:
            await self._use(caller, session_id, scope, receive, send)

    async def _open(self, caller: str, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if self.open_sessions(caller) >= self.per_caller:
            await self._refuse(caller, scope, receive, send)
            return
        self._opening[caller] += 1  # held from now: callers' concurrent opens count at once
        opened: list[str] = []

        async def watch(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start" and not opened:
                session_id = header(message.get("headers", []), SESSION_HEADER)
                opened.append(session_id or "")
                if message["status"] < 400 and session_id:
                    self._sessions[session_id] = _Session(caller)
                self._release(caller)
            await send(message)

        try:
            await self.app(scope, receive, watch)
        finally:
            if not opened:
                self._release(caller)
            self._done(opened[0] if opened else "", None)

    def _release(self, caller: str) -> None:
        self._opening[caller] -= 1
        if self._opening[caller] <= 0:
            del self._opening[caller]

    def _done(self, session_id: str, gone: bool | None) -> None:
        session = self._sessions.get(session_id)
        if session is None:
            return
        session.in_flight -= 1
        session.idle_since = time.monotonic()
        if gone:
            del self._sessions[session_id]

    async def _use(
        self, caller: str, session_id: str, scope: dict[str, Any], receive: Any, send: Any
    ) -> None:
        session = self._sessions.get(session_id)
        if session is None or session.caller != caller:
            await self.app(scope, receive, send)  # the SDK's (404 for another's session)
            return
        session.in_flight += 1
        statuses: list[int] = []

        async def watch(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                statuses.append(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, watch)
        finally:
            status = statuses[0] if statuses else None
            # Ended by the client (DELETE), or already gone from the SDK (404).
            gone = status == 404 or (scope["method"] == "DELETE" and status is not None and status < 300)
            self._done(session_id, gone)

    async def _refuse(self, caller: str, scope: dict[str, Any], receive: Any, send: Any) -> None:
        now = time.monotonic()
        idle = [s.idle_since + self.idle_timeout - now for s in self._sessions.values()
                if s.caller == caller and not s.in_flight]  # fmt: skip
        retry = max(1, math.ceil(min(idle, default=self.idle_timeout)))
        timeout = f"{self.idle_timeout:g}"
        message = (
            f"too many sessions: this caller already has {self.per_caller} open, the most this server "
            f"allows one caller (recallpack serve --max-sessions-per-caller {self.per_caller}); end one "
            f"(HTTP DELETE with its mcp-session-id), or retry once one has been idle for {timeout} s "
            "(--session-idle-timeout), or ask the server's operator to raise --max-sessions-per-caller"
        )
        written = request_note()
        if written is not None:
            written.refused = f"max-sessions-per-caller {self.per_caller}"
        error = {"code": -32000, "message": message,
                 "data": {"limit": "max_sessions_per_caller", "value": self.per_caller}}  # fmt: skip
        body = json.dumps({"jsonrpc": "2.0", "id": None, "error": error}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                   (b"retry-after", str(retry).encode())]  # fmt: skip
        await send({"type": "http.response.start", "status": 429, "headers": headers})
        await send({"type": "http.response.body", "body": body})


