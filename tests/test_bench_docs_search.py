"""The bench's ``serve --docs`` section (``--docs-search``): the dev articles as files, asked through
the MCP client and in process, answer kept in every language."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")
pytest.importorskip("bm25s")

from recallpack import Candidate, bench, recall
from recallpack._bench import docs_search

SLICE = ("zh", "hi")  # one without spaces between words, one with vowel signs
ASKED = 4


def _run(tmp_path: Path, client: str) -> dict[str, Any]:
    out = tmp_path / f"{client}.json"
    code = bench.main(["--docs-search", "--languages", ",".join(SLICE), "--questions", str(ASKED),
                       "--client", client, "--json", str(out)])
    assert code == 0
    rows: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return rows


def test_the_mcp_client_and_the_servers_recall_keep_the_same_answers(tmp_path: Path) -> None:
    """On a slice, the SDK's stdio client against serve --docs and the in-process recall keep the
    answer of the same questions; one row a language, each question's outcome recorded."""
    stdio, inprocess = _run(tmp_path, "stdio"), _run(tmp_path, "inprocess")
    assert [r["language"] for r in stdio["rows"]] == list(SLICE) == [r["language"] for r in inprocess["rows"]]
    for a, b in zip(stdio["rows"], inprocess["rows"]):
        assert a["asked"] == ASKED == len(a["kept_by_question"]) and a["kept"] == a["kept_by_question"].count("1")
        assert a["kept_by_question"] == b["kept_by_question"], a["language"]
    assert stdio["budget"] == docs_search.BUDGET and stdio["client"] == "stdio"


def test_articles_are_written_one_file_each_under_neutral_names(tmp_path: Path) -> None:
    """Each article is one file, its paragraphs joined by a blank line, named by its position only."""
    articles = [{"title": "Super Bowl 50", "paragraphs": [{"text": "One."}, {"text": "Two."}]},
                {"title": "Warsaw", "paragraphs": [{"text": "Three."}]}]
    folder = docs_search.write_folder(articles, tmp_path / "docs")
    assert sorted(p.name for p in folder.iterdir()) == ["article-01.md", "article-02.md"]
    assert (folder / "article-01.md").read_text() == "One.\n\nTwo.\n"


def test_only_evidence_text_is_judged() -> None:
    """The judged text of a block is its items' text: no header, label or resource line."""
    result = recall([Candidate(text="The answer is 1957.", citation="recallpack://artifacts/a-1957.md")],
                    max_tokens=200)
    shown = docs_search.evidence(result.to_markdown())
    assert shown == "The answer is 1957." and "a-1957" in result.to_markdown()
