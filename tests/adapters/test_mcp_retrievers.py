"""``recallpack serve --retriever module:factory``: a user's LangChain or LlamaIndex retriever
behind the recall tool, driven by the SDK's own client; and clients that go away mid-call.

The factories are in tests/adapters/mcp_factories.py: BM25 over standard library docstrings,
and retrievers that are slow or fail on purpose.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")
pytest.importorskip("langchain_core")

import anyio
from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

import recallpack
from recallpack import count_tokens
from recallpack.packing.limits import fetch_depth
from tests.adapters import mcp_factories
from tests.adapters.mcp_host import (
    CALL_TIMEOUT,
    REPO,
    STARTUP_TIMEOUT,
    Host,
    RawServer,
    connect,
    serve_command,
)

FACTORIES = "tests.adapters.mcp_factories"


def _text(result: types.CallToolResult) -> str:
    assert len(result.content) == 1 and isinstance(result.content[0], types.TextContent)
    return result.content[0].text


@pytest.fixture(scope="module")
def langchain_host():  # type: ignore[no-untyped-def]
    with connect("--retriever", f"{FACTORIES}:langchain_bm25", "--reader", "u-1", "--scope", "org-a=team-a") as host:
        yield host


# -- LangChain -------------------------------------------------------------------------------


@pytest.mark.parametrize("budget", [80, 400, 3000])
def test_langchain_retriever_block_fits_each_calls_budget(langchain_host: Host, budget: int) -> None:
    """The wrapped BM25Retriever's block counts at most the call's max_tokens, as reported."""
    result = langchain_host.recall({"query": "parse command line arguments and options", "max_tokens": budget})
    text, data = _text(result), result.structured_content
    assert text and count_tokens(text) == data["context_tokens_used"] <= budget
    # The adapter asks the BM25 retriever (k=20 of its own) for enough to fill the budget.
    assert data["report"]["max_tokens"] == budget and data["report"]["candidates"] == fetch_depth(budget, own=20)
    assert "receipt" not in data  # no key configured


def test_langchain_retriever_reader_scopes(langchain_host: Host) -> None:
    """The note in the reader's scope is shown under its name; the other org's is withheld."""
    shown = langchain_host.recall({"query": "wombat roster quarterly offsite organiser"})
    assert mcp_factories.READABLE_NOTE in _text(shown) and "from scope `team-a`" in _text(shown)
    hidden = langchain_host.recall({"query": "quokka ledger merger negotiations undisclosed"})
    assert "quokka" not in _text(hidden) and hidden.structured_content["report"]["items_withheld"] == 1


def test_langchain_resources_are_what_was_shown_to_this_reader(langchain_host: Host) -> None:
    """A shown item's URI reads back its text; the withheld note's URI reads like no URI at all."""
    result = langchain_host.recall({"query": "heap queue priority algorithm", "max_tokens": 600})
    item = result.structured_content["items"][0]
    assert item["citation"].startswith("recallpack://artifacts/stdlib%2F")
    read = langchain_host.run(langchain_host.session.read_resource, item["citation"])
    lines = [line for line in read.contents[0].text.splitlines() if line.strip()]
    assert len(lines) > 1 and all(f"    {line}" in _text(result) for line in lines)  # as indented in the block
    messages = []
    for uri in ("recallpack://artifacts/notes%2Fsecret/contents/1", "recallpack://artifacts/no/contents/0"):
        with pytest.raises(MCPError) as caught:
            langchain_host.run(langchain_host.session.read_resource, uri)
        messages.append((caught.value.code, caught.value.message.replace(uri, "URI")))
    assert messages[0] == messages[1]


# -- LlamaIndex ------------------------------------------------------------------------------


def test_llamaindex_retriever_each_budget_is_its_own() -> None:
    """A LlamaIndex BM25Retriever: two budgets in one session, each block fits its own."""
    pytest.importorskip("llama_index.retrievers.bm25")
    with connect("--retriever", f"{FACTORIES}:llamaindex_bm25", "--max-tokens", "300") as host:
        tool = host.run(host.session.list_tools).tools[0]
        assert (tool.description or "").startswith("Search the LlamaIndex BM25Retriever for evidence")
        assert tool.input_schema["properties"]["max_tokens"]["default"] == 300
        used = {}
        for budget in (None, 120, 1200, 120):
            arguments = {"query": "read and write CSV files"} | ({} if budget is None else {"max_tokens": budget})
            data = host.recall(arguments).structured_content
            assert data["report"]["max_tokens"] == (budget or 300) >= data["context_tokens_used"] > 0
            used[budget] = data["context_tokens_used"]
        assert used[120] < used[None] < used[1200]


# -- failures and clients that go away -------------------------------------------------------


def test_a_failing_retriever_fails_each_call_not_the_server() -> None:
    """A retriever that raises gives recall_failed tool errors; the server keeps answering."""
    with connect("--retriever", f"{FACTORIES}:failing") as host:
        for _ in range(2):
            result = host.recall({"query": "anything"})
            assert result.is_error and result.structured_content == {
                "status": "error", "error_code": "recall_failed",
                "error_message": "the search failed (RuntimeError); the server's log has the details",
            }
            assert "offline" not in _text(result)
        assert host.recall({"query": ""}).structured_content["error_code"] == "invalid_input"
        assert [t.name for t in host.run(host.session.list_tools).tools] == ["recall"]
        assert "RuntimeError: the index is offline" in host.stderr()


def test_a_call_cancelled_mid_search_leaves_the_session_working() -> None:
    """The client gives up on a slow call (notifications/cancelled); the next call is answered."""
    with connect("--retriever", f"{FACTORIES}:slow") as host:

        async def give_up() -> bool:
            with anyio.move_on_after(1.5) as scope:
                await host.session.call_tool("recall", {"query": "a slow question"})
            return scope.cancelled_caught

        started = time.monotonic()
        assert host.run(give_up)
        result = host.recall({"query": "a quick question"})
        assert "An answer about a quick question." in _text(result)
        assert time.monotonic() - started < 20  # the slow search was not waited for


def test_a_client_that_disconnects_mid_call_leaves_a_clean_exit() -> None:
    """Pipes closed while a search runs: the server ends on its own, status 0, no traceback."""
    raw = RawServer("--retriever", f"{FACTORIES}:slow")
    try:
        raw.initialize()
        raw.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                  "params": {"name": "recall", "arguments": {"query": "a slow question"}}})  # fmt: skip
        time.sleep(1.0)
        assert raw.process.stdin is not None and raw.process.stdout is not None
        raw.process.stdin.close()
        raw.process.stdout.close()
        assert raw.process.wait(timeout=20) == 0
        assert "Traceback" not in raw.stderr()
    finally:
        raw.close()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_http_server_on_loopback_outlives_a_client_that_leaves_mid_call() -> None:
    """--transport http on 127.0.0.1: one client leaves mid-call, the next is served."""
    port = _free_port()
    process = subprocess.Popen(
        serve_command("--retriever", f"{FACTORIES}:slow", "--transport", "http", "--port", str(port)),
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    url = f"http://127.0.0.1:{port}/mcp"

    async def session_call(arguments: dict[str, Any], give_up_after: float | None = None) -> Any:
        async with (
            streamable_http_client(url) as (read, write),
            ClientSession(read, write, read_timeout_seconds=CALL_TIMEOUT) as session,
        ):
            await session.initialize()
            if give_up_after is None:
                return await session.call_tool("recall", arguments)
            with anyio.move_on_after(give_up_after):
                await session.call_tool("recall", arguments)
            return None

    async def scenario() -> Any:
        with anyio.fail_after(STARTUP_TIMEOUT):
            while True:  # until the server listens
                try:
                    await (await anyio.connect_tcp("127.0.0.1", port)).aclose()
                    break
                except OSError:
                    assert process.poll() is None, process.stderr.read() if process.stderr else ""
                    await anyio.sleep(0.2)
        with anyio.fail_after(CALL_TIMEOUT):
            await session_call({"query": "a slow question"}, give_up_after=1.0)
            return await session_call({"query": "after the other left"})

    try:
        result = anyio.run(scenario)
        assert "An answer about after the other left." in _text(result)
        assert process.poll() is None  # still serving
    finally:
        process.terminate()
        process.wait(timeout=30)
        assert process.stderr is not None
        log = process.stderr.read()
        process.stderr.close()
    # The SDK logs the response it could not send to the client that left; nothing of ours fails:
    # a traceback may pass through recallpack's middleware (the log line, the session limits wrap
    # every send), but none is raised in recallpack's own code.
    assert f"serving recall on {url}" in log
    package = str(Path(recallpack.__file__).parent) + os.sep
    for traceback in log.split("serving recall", 1)[1].split("Traceback (most recent call last):")[1:]:
        frames = re.findall(r'File "([^"]+)"', traceback)
        assert frames and not frames[-1].startswith(package), traceback


# -- where a factory is found ---------------------------------------------------------------


def test_the_factory_module_is_found_from_the_current_folder() -> None:
    """Without PYTHONPATH, the factory's module is imported from the folder serve runs in."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(serve_command("--retriever", f"{FACTORIES}:not_a_retriever"), cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=STARTUP_TIMEOUT, stdin=subprocess.DEVNULL)  # fmt: skip
    assert done.returncode == 2 and "returned a dict; it must return a LangChain retriever" in done.stderr
