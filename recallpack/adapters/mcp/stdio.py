"""``recallpack serve``'s stdio: the MCP SDK's stdio transport, with every line answered.

The SDK's ``stdio_server`` drops a line it cannot validate (it hands the server an exception,
which answers nothing), so a client that sent a malformed request waits forever for its answer.
Here each line is checked first, with the SDK's own validator, and one it would drop is answered
with JSON-RPC's error instead, as the SDK's streamable HTTP answers the same line: ``-32700``
(parse error) when the line is not JSON, ``-32600`` (invalid request) when it is JSON but not a
message (a wrong ``jsonrpc`` version, ``params`` that are not an object, an empty batch, a lone
surrogate), with the request's id when one can be read so that the client's wait ends. The
line is then dropped, and serving goes on.

A JSON-RPC batch (an array of messages on one line, which MCP 2025-03-26 allows and later
versions dropped) is taken apart: each element is checked and served as if it were a line of
its own, so each request is answered by its own id, each answer on a line of its own (never as
one array, which a client of a later version could not read). Needs the ``mcp`` extra.
"""

from __future__ import annotations

import io
import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Any, cast

from recallpack.adapters.shared.extras import require

require("mcp", extra="mcp", feature=__name__)

import anyio
from mcp import types
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from recallpack.packing.validation import is_int

__all__ = ["answered_stdio", "batch_elements", "refusal"]

#: Digits of an integer json.loads reads as one (Python's own limit on int parsing).
_MAX_DIGITS = 4300


class _Unowned(io.TextIOWrapper):
    """A text layer over stdin's buffer that never closes the buffer: it is the process's."""

    def close(self) -> None:
        with suppress(ValueError):
            self.detach()


def _int(digits: str) -> int | str:
    # A number too long to be an int is still JSON: read it as text so that the id can be found.
    return int(digits) if len(digits) <= _MAX_DIGITS else digits


def refusal(line: str) -> types.JSONRPCError | None:
    """The error that answers ``line``, or None when the SDK reads it as a message.

    >>> refusal('{"jsonrpc": "1.0", "id": 7, "method": "tools/list"}').id
    7
    >>> refusal("not JSON").error.code
    -32700
    """
    try:
        types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        return None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"][1:3])
        why = f"{where + ': ' if where else ''}{first['msg']}"[:300]
    try:
        data = json.loads(line, parse_int=_int)
    except (ValueError, RecursionError):
        return _error(None, types.PARSE_ERROR, f"Parse error: the line is not JSON ({why})")
    found = data.get("id") if isinstance(data, dict) else None
    request_id = found if isinstance(found, str) or is_int(found) else None
    message = f"Invalid request: not a JSON-RPC 2.0 message of MCP ({why})"
    return _error(request_id, types.INVALID_REQUEST, message)


def batch_elements(line: str) -> list[str]:
    """The messages of ``line``: each element of a JSON-RPC batch (an array) as a line of its own,
    or the line itself. The SDK reads one message a line, so each request of a batch is served
    and answered by its own id, on its own line; an empty batch stays whole (and is refused).

    >>> batch_elements('[{"jsonrpc": "2.0", "id": 1, "method": "ping"}, {"id": 2}]')
    ['{"jsonrpc": "2.0", "id": 1, "method": "ping"}', '{"id": 2}']
    >>> batch_elements('{"jsonrpc": "2.0", "id": 3, "method": "ping"}')
    ['{"jsonrpc": "2.0", "id": 3, "method": "ping"}']
    """
    if not line.lstrip().startswith("["):
        return [line]
    try:
        data = json.loads(line)
    except (ValueError, RecursionError):
        return [line]  # not JSON: refusal() answers it as a parse error
    if not isinstance(data, list) or not data:
        return [line]
    # Written again by json, which reads back what it wrote (a lone surrogate included, for the
    # SDK's validator to refuse by the element's own id).
    return [json.dumps(element) for element in data]


def _error(request_id: str | int | None, code: int, message: str) -> types.JSONRPCError:
    return types.JSONRPCError(jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=message))


class _CheckedLines:
    """stdin's lines as the SDK reads them, less those it would drop, which are answered here."""

    def __init__(self, lines: Any) -> None:
        self._lines = lines
        self._answers: Any = None
        self._ready = anyio.Event()

    def answer_on(self, write_stream: Any) -> None:
        self._answers = write_stream
        self._ready.set()

    async def __aiter__(self) -> AsyncIterator[str]:
        async for line in self._lines:
            if not line.strip():
                continue  # not a message: nothing to answer
            for message in batch_elements(line):
                error = refusal(message)
                if error is None:
                    yield message
                    continue
                await self._ready.wait()
                await self._answers.send(SessionMessage(error))


@asynccontextmanager
async def answered_stdio() -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's ``stdio_server()`` streams, with each line it would drop answered instead."""
    stdin = _Unowned(sys.stdin.buffer, encoding="utf-8", errors="replace")
    lines = _CheckedLines(anyio.wrap_file(stdin))
    async with stdio_server(stdin=cast(Any, lines)) as (read_stream, write_stream):
        lines.answer_on(write_stream)
        yield read_stream, write_stream
