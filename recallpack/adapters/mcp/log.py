"""One log line per request of ``recallpack serve --transport http``, on the
``recallpack.mcp.http`` logger: the caller's reader id, the JSON-RPC method, the tool and the
tokens of its block, the outcome, the HTTP status and the milliseconds; INFO for a request
served, WARNING for one refused (401, 404, 429, 503 ...), with why. A token, a query or any text
of an item is never logged: the tool, the verifier and the session limits report what they did
through :func:`note`, counts and kinds only. Needs the ``mcp`` extra.
"""

from __future__ import annotations

import json
import logging
import time
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

__all__ = ["AccessLog", "RequestNote", "header", "request_note", "note_call"]

#: The bytes of a request body read for its JSON-RPC method (the SDK reads the body itself).
_PEEK_BYTES = 64 * 1024

access_logger = logging.getLogger("recallpack.mcp.http")


@dataclass
class RequestNote:
    """What one HTTP request did, filled in as it is served: by the tool (its name, the tokens of
    its block, its outcome), by the verifier (why a token was refused) and by the limits."""

    tool: str | None = None
    tokens: int | None = None
    outcome: str | None = None
    refused: str | None = None


# The SDK carries a request's context into the task that serves its messages, so the tool's
# handler reaches the note of the HTTP request that carried its call.
_NOTE: ContextVar[RequestNote | None] = ContextVar("recallpack_request_note", default=None)


def request_note() -> RequestNote | None:
    """The note of the HTTP request being served, or None (stdio, or outside a request)."""
    return _NOTE.get()


def note_call(result: Any) -> None:
    """Note the recall tool's call on the request's log line: its block's tokens and ``ok``, or
    the tool error's code (``result`` a ``CallToolResult``), or an unknown tool (None)."""
    written = request_note()
    if written is None:
        return
    if result is None:
        written.tool, written.outcome = "-", "unknown_tool"
        return
    written.tool = "recall"
    report = getattr(result, "report", None)
    if report is not None:
        written.tokens, written.outcome = report.tokens_used, "ok"
    else:
        written.outcome = str((getattr(result, "structured_content", None) or {}).get("error_code", "error"))


def header(headers: Any, name: bytes) -> str | None:
    return next((value.decode("latin-1") for key, value in headers if key.lower() == name), None)


def _reader_id(scope: dict[str, Any]) -> str:
    token = getattr(scope.get("user"), "access_token", None)
    reader = getattr(token, "reader", None)
    return str(getattr(reader, "id", None) or "-")


class AccessLog:
    """ASGI middleware outside everything (the SDK's auth included): one log line per request."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        written = RequestNote()
        reset = _NOTE.set(written)
        started = time.perf_counter()
        statuses: list[int] = []
        body = bytearray()

        async def peek() -> Any:
            message = await receive()
            if message.get("type") == "http.request" and len(body) < _PEEK_BYTES:
                body.extend(message.get("body", b"")[: _PEEK_BYTES - len(body)])
            return message

        async def watch(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                statuses.append(message["status"])
            await send(message)

        try:
            await self.app(scope, peek, watch)
        finally:
            _NOTE.reset(reset)
            ms = (time.perf_counter() - started) * 1000
            _log(scope, statuses[0] if statuses else None, written, _method(bytes(body)), ms)


def _method(body: bytes) -> str:
    """The JSON-RPC method of a request body (``batch`` for an array), or ``-``."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return "-"
    if isinstance(data, list):
        return "batch"
    method = data.get("method") if isinstance(data, dict) else None
    return method[:64] if isinstance(method, str) else "-"


def _clean(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, each unprintable one or space a ``?``: what a caller
    sends (a path, a method, a reader id) can never start a line of its own in the log."""
    return "".join(c if c.isprintable() and not c.isspace() else "?" for c in text[:limit]) or "-"


def _log(scope: dict[str, Any], status: int | None, written: RequestNote, method: str, ms: float) -> None:
    shown = "-" if status is None else str(status)
    fields = [f"{_clean(scope['method'], 16)} {_clean(scope['path'], 200)} {shown}",
              f"reader={_clean(_reader_id(scope), 80)}", f"method={_clean(method, 64)}"]  # fmt: skip
    if written.tool is not None:
        fields += [f"tool={written.tool}", f"tokens={'-' if written.tokens is None else written.tokens}",
                   f"outcome={written.outcome or '-'}"]  # fmt: skip
    if status is not None and status >= 400:
        why = written.refused
        if why is None and status == 401:
            has_token = header(scope["headers"], b"authorization") is not None
            why = "unknown bearer token" if has_token else "no bearer token"
        access_logger.warning("refused %s why=%s %.0f ms", " ".join(fields), why or "-", ms)
    else:
        access_logger.info("%s %.0f ms", " ".join(fields), ms)
