"""``python -m recallpack.bench --docs-search``: does ``recallpack serve --docs`` find the answer in
every language, as a new user's folder of notes would be searched?

The dev articles are written as files, **one file per article** (its paragraphs joined by blank
lines, named ``article-01.md``... so that no file name holds an answer): XQuAD's 12 articles in
each of its 12 languages (``benchmarks/data/``, CC BY-SA 4.0), and SQuAD's 12 English dev
articles, whole (``en-squad``). Each folder is served with ``recallpack serve --docs`` and defaults
(``--language auto``), and every question is asked of ``recall`` at 1,024 tokens (cl100k_base):

- ``--client stdio`` (the default): through the MCP Python SDK's own client, over stdio, against
  ``recallpack serve --docs`` in a child process, exactly as an MCP host asks;
- ``--client inprocess``: through :func:`recallpack.adapters.mcp.docs_source`'s ``recall``, the same
  code path the server runs for a call, without the transport (faster; the same outcomes).

An answer is kept when it is in the block's evidence text (its label and resource lines left out),
judged as the languages section judges it (:func:`recallpack._bench.languages.answered`). The
section also times the index build (in process, best of a few) and a call (in process).
"""

from __future__ import annotations

import gzip
import importlib
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from recallpack._bench import quality
from recallpack._bench.languages import DATA, LANGUAGES, answered, load, questions_of
from recallpack._bench.quality import Question

__all__ = ["BUDGET", "SQUAD", "CLIENTS", "evidence", "write_folder", "run"]

BUDGET = 1024
#: SQuAD's English articles, whole: the row English is held to besides XQuAD's.
SQUAD = "en-squad"
CLIENTS = ("stdio", "inprocess")
_THROUGH = {"stdio": "the MCP SDK's client over stdio", "inprocess": "the server's recall, in process"}
#: ``recallpack serve``'s policy (the library's default is ``prefix``).
_SERVE_POLICY = "passages"
#: Calls timed in process when the answers are asked through the client.
_TIMED = 50
#: Seconds for a server to start and for one call.
_START_TIMEOUT = 120.0
_CALL_TIMEOUT = 60.0


def write_folder(articles: Sequence[dict[str, Any]], root: Path) -> Path:
    """``articles`` as files under ``root``, one an article."""
    root.mkdir(parents=True, exist_ok=True)
    for i, article in enumerate(articles):
        text = "\n\n".join(p["text"] for p in article["paragraphs"])
        (root / f"article-{i + 1:02d}.md").write_text(text + "\n", encoding="utf-8")
    return root


def evidence(block: str) -> str:
    """The evidence text of a rendered block: its items' indented lines, without the resource lines."""
    kept = []
    for line in block.splitlines():
        if line.startswith("    ") and not line.lstrip().startswith("Resource `"):
            kept.append(line[4:])
    return "\n".join(kept)


def _squad() -> tuple[list[dict[str, Any]], list[Question]]:
    with gzip.open(quality.DATA, "rt", encoding="utf-8") as handle:
        articles: list[dict[str, Any]] = json.load(handle)["articles"]
    return articles, questions_of(articles, "en")


def _ask_inprocess(folder: Path, queries: Sequence[str]) -> tuple[list[str], float, float]:
    """Each query's block through docs_source's recall; the index build's best seconds and the
    median seconds of a call."""
    import anyio

    from recallpack.adapters.mcp import docs_source

    builds = []
    for _ in range(3):
        started = time.perf_counter()
        source = docs_source(str(folder), max_tokens=BUDGET, policy=_SERVE_POLICY)
        builds.append(time.perf_counter() - started)
    blocks, times = [], []
    for query in queries:
        started = time.perf_counter()
        result = anyio.run(source.recall, query, BUDGET, None)
        times.append(time.perf_counter() - started)
        blocks.append(result.to_markdown())
    return blocks, min(builds), statistics.median(times) if times else 0.0


def _ask_stdio(folder: Path, queries: Sequence[str]) -> list[str]:
    """Each query's block through the MCP SDK's client, against ``recallpack serve --docs``."""
    import anyio
    from mcp import ClientSession, StdioServerParameters, stdio_client, types

    async def ask() -> list[str]:
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "recallpack", "serve", "--docs", str(folder)]
        )
        blocks = []
        with tempfile.TemporaryFile("w+") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                with anyio.fail_after(_START_TIMEOUT):
                    await session.initialize()
                for query in queries:
                    with anyio.fail_after(_CALL_TIMEOUT):
                        result = await session.call_tool("recall", {"query": query, "max_tokens": BUDGET})
                    content = result.content[0] if result.content else None
                    text = content.text if isinstance(content, types.TextContent) else ""
                    blocks.append("" if result.is_error else text)
        return blocks

    return anyio.run(ask)


def _rows(
    name: str, articles: Sequence[dict[str, Any]], asked: Sequence[Question], language: str, client: str,
    root: Path,
) -> dict[str, Any]:
    folder = write_folder(articles, root / name)
    queries = [q.text for q in asked]
    # In process, every query is asked (or, before the client asks them all, the first ones, to time a call).
    blocks, build, call = _ask_inprocess(folder, queries if client == "inprocess" else queries[:_TIMED])
    if client == "stdio":
        blocks = _ask_stdio(folder, queries)
    outcomes = [answered(evidence(b), q.answers, language) for b, q in zip(blocks, asked)]
    return {
        "language": name, "asked": len(asked), "kept": sum(outcomes),
        "share": sum(outcomes) / max(1, len(asked)), "build_ms": build * 1e3, "call_ms": call * 1e3,
        "kept_by_question": "".join("1" if kept else "0" for kept in outcomes),
    }


def markdown(rows: Sequence[dict[str, Any]], client: str) -> str:
    """The section's table."""
    head = [f"| language | answer kept % at {BUDGET} | questions | index build ms | ms per call |",
            "|---|---|---|---|---|"]
    return "\n".join(head + [
        f"| {r['language']} | {r['share']:.1%} | {r['asked']} | {r['build_ms']:.0f} | {r['call_ms']:.1f} |"
        for r in rows
    ]) + f"\n\n(asked through {_THROUGH[client]})"


def run(
    languages: Sequence[str] = LANGUAGES, limit: int | None = None, client: str = "stdio",
    squad: bool = True, as_markdown: bool = False, json_path: Path | None = None,
) -> list[str]:
    """The section's lines: answer kept % a language, the target, and the Markdown when asked."""
    if not DATA.exists() or not quality.DATA.exists():
        return [f"docs search: skipped ({DATA.parent} is not there: run from a checkout of recallpack)"]
    try:
        for module in ("mcp", "bm25s"):
            importlib.import_module(module)
    except ImportError as exc:
        return [f"docs search: skipped ({exc}; pip install -e '.[mcp]')"]
    data = load()
    positions = quality.sample(list(range(len(questions_of(data[languages[0]], languages[0])))), limit)
    lines = [
        f"docs search: recallpack serve --docs, one file an article, {BUDGET} tokens, asked through "
        f"{_THROUGH[client]}; {len(positions)} "
        "XQuAD questions a language (CC BY-SA 4.0)",
        f"  {'language':<10} {'kept':>7} {'asked':>6} {'build ms':>9} {'ms/call':>8}",
    ]
    rows = []
    with tempfile.TemporaryDirectory(prefix="recallpack-docs-bench-") as where:
        root = Path(where)
        todo: list[tuple[str, list[dict[str, Any]], list[Question], str]] = []
        for language in languages:
            every = questions_of(data[language], language)
            todo.append((language, data[language], [every[i] for i in positions], language))
        if squad:
            articles, every = _squad()
            todo.append((SQUAD, articles, quality.sample(every, len(positions)), "en"))
        for name, articles, asked, language in todo:
            row = _rows(name, articles, asked, language, client, root)
            rows.append(row)
            lines.append(
                f"  {name:<10} {row['share']:>7.1%} {row['asked']:>6} {row['build_ms']:>9.0f} "
                f"{row['call_ms']:>8.1f}"
            )
    english = next((r["share"] for r in rows if r["language"] == "en"), None)
    if english is not None:
        lines.append("targets:")
        for row in rows:
            ok = "ok  " if row["share"] >= english - 0.10 else "MISS"
            lines.append(
                f"  {ok} {row['language']} within 10 points of English: {row['share']:.1%} vs {english:.1%}"
            )
    if as_markdown:
        lines.append(markdown(rows, client))
    if json_path is not None:
        json_path.write_text(json.dumps({"budget": BUDGET, "client": client, "rows": rows}, indent=1) + "\n")
        lines.append(f"every row written to {json_path}")
    return lines

