"""An MCP host for the tests: the SDK's own client, over stdio, driving ``recallpack serve``.

The client runs in a blocking portal's event loop (one thread, stopped when the block ends), so
that one server can be started per test module and used by plain test functions. Every request
is bounded in time: a hang fails its test rather than blocking CI.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any, TypeVar

import anyio
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import ClientSession, StdioServerParameters, stdio_client, types

REPO = Path(__file__).resolve().parents[2]
#: Seconds for the server to start (imports, indexing) and for one request.
STARTUP_TIMEOUT = 90.0
CALL_TIMEOUT = 60.0
T = TypeVar("T")


def log_text(log: Any) -> str:
    """What a server has written so far to ``log``, the file given it as its stderr. The server
    holds the same open file, so they share its offset: a seek here would move where the server
    writes next, and a line written between a seek and a read would land over the file's start.
    So it is read with ``os.pread``, which moves no offset."""
    fd = log.fileno()
    return os.pread(fd, os.fstat(fd).st_size, 0).decode("utf-8", errors="replace")


def wait_listening(process: subprocess.Popen[bytes], port: int, log: Any = None,
                   timeout: float = STARTUP_TIMEOUT) -> None:
    """Until a server started as ``process`` listens on ``port`` of 127.0.0.1; its ``log`` (a file
    it writes its stderr to) is shown if it exits or takes longer than ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            said = "" if log is None else log_text(log)
            assert process.poll() is None and time.monotonic() < deadline, said
            time.sleep(0.2)


def serve_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "recallpack", "serve", *args]


class Host:
    """A connected client session; each method is one bounded request."""

    def __init__(self, portal: BlockingPortal, session: ClientSession, errlog: Any) -> None:
        self.portal = portal
        self.session = session
        self.errlog = errlog

    def run(self, call: Callable[..., Awaitable[T]], *args: Any, timeout: float = CALL_TIMEOUT) -> T:
        async def bounded() -> T:
            with anyio.fail_after(timeout):
                return await call(*args)

        return self.portal.call(bounded)

    def recall(self, arguments: dict[str, Any] | None) -> types.CallToolResult:
        result = self.run(self.session.call_tool, "recall", arguments)
        assert isinstance(result, types.CallToolResult)
        return result

    def stderr(self) -> str:
        self.errlog.flush()
        return Path(self.errlog.name).read_text(errors="replace")


@asynccontextmanager
async def _session(params: StdioServerParameters, errlog: Any):  # type: ignore[no-untyped-def]
    async with (
        stdio_client(params, errlog=errlog) as (read, write),
        ClientSession(read, write, read_timeout_seconds=CALL_TIMEOUT) as session,
    ):
        with anyio.fail_after(STARTUP_TIMEOUT):
            await session.initialize()
        yield session


@contextmanager
def connect(*serve_args: str, env: dict[str, str] | None = None) -> Iterator[Host]:
    """Start ``recallpack serve *serve_args`` as an MCP host does and yield its session."""
    command = serve_command(*serve_args)
    params = StdioServerParameters(command=command[0], args=command[1:], env=env, cwd=str(REPO))
    with (
        tempfile.NamedTemporaryFile("w+", suffix=".log") as errlog,
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(_session(params, errlog)) as session,
    ):
        yield Host(portal, session, errlog)


class RawServer:
    """``recallpack serve`` on plain pipes, for what the SDK's client never sends: malformed
    lines, and a client that goes away in the middle of a call."""

    def __init__(self, *serve_args: str, env: dict[str, str] | None = None) -> None:
        self.errlog = tempfile.TemporaryFile("w+")  # noqa: SIM115 - closed by close()
        self.process = subprocess.Popen(
            serve_command(*serve_args), cwd=REPO, env=env, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self.errlog, text=True, encoding="utf-8",
        )
        # A thread reads the server's output, so that a wait for a message can time out.
        self.lines: queue.Queue[str] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        try:
            for line in self.process.stdout:
                self.lines.put(line)
        except (OSError, ValueError):  # the test closed the pipe, as a client that goes away does
            pass
        self.lines.put("")  # end of output

    def send(self, message: dict[str, Any] | str) -> None:
        assert self.process.stdin is not None
        line = message if isinstance(message, str) else json.dumps(message)
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def receive(self, timeout: float = STARTUP_TIMEOUT) -> dict[str, Any]:
        """The next message from the server, within ``timeout`` seconds."""
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no message in {timeout} s; stderr:\n{self.stderr()}") from None
        assert line, f"the server closed its output; stderr:\n{self.stderr()}"
        message: dict[str, Any] = json.loads(line)
        return message

    def initialize(self) -> None:
        self.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw-test-client", "version": "0"}}})  # fmt: skip
        assert self.receive()["id"] == 0
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def stderr(self) -> str:
        return log_text(self.errlog)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=30)
        self._reader.join(timeout=30)
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):  # a pipe the server already left
                    stream.close()
        self.errlog.close()
