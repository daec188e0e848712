"""Ask ``recallpack serve`` for evidence as an MCP host does, offline, in a few seconds.

Starts ``recallpack serve --docs docs`` (this repository's own documentation, cut into token
windows and searched with BM25) as a subprocess, connects to it over stdio with the official MCP
SDK's client, lists its tool, calls ``recall`` and prints the evidence block the tool returned,
its diagnostics, and one kept item read back as an MCP resource (under ``--docs``, each file is
one item, citing the file and the ranges of it that the item was cut from: the resource reads
back as those ranges).

    python examples/mcp_client.py ["your question"] [--max-tokens N] [--docs DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.types import TextContent

from recallpack import count_tokens

DOCS = Path(__file__).resolve().parent.parent / "docs"


async def ask(question: str, max_tokens: int, docs: Path) -> None:
    # The command and arguments an MCP client's configuration names.
    server = StdioServerParameters(
        command=sys.executable, args=["-m", "recallpack", "serve", "--docs", str(docs)]
    )
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tool = (await session.list_tools()).tools[0]
        print(f"tool {tool.name}: {tool.description}\n")
        result = await session.call_tool("recall", {"query": question, "max_tokens": max_tokens})
        assert isinstance(result.content[0], TextContent) and isinstance(result.structured_content, dict)
        block, data = result.content[0].text, result.structured_content
        print(block)
        print("---")
        print(json.dumps({k: v for k, v in data.items() if k != "report"}, indent=2))
        # The bytes the tool returned are the bytes it counted, within the budget asked for.
        assert count_tokens(block) == data["context_tokens_used"] <= max_tokens
        if data["items"]:
            first = data["items"][0]["citation"]
            ranges = (await session.read_resource(first)).contents[0]
            print(f"---\n{first} reads back as the ranges it names ({len(getattr(ranges, 'text', ''))} characters)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("question", nargs="?", default="how does the floor keep a match when nothing fits")
    parser.add_argument("--max-tokens", type=int, default=600)
    parser.add_argument("--docs", type=Path, default=DOCS)
    args = parser.parse_args()
    anyio.run(ask, args.question, args.max_tokens, args.docs)


if __name__ == "__main__":
    main()
