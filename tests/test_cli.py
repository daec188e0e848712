"""The CLI: doctor and pack, with one-line errors and exit code 2."""

from __future__ import annotations

import io
import json

import pytest

import recallpack.packing.tokenizer as tk
from recallpack import count_tokens
from recallpack.cli import main

LINES = "\n".join(
    json.dumps(item)
    for item in [
        {"text": "Alice works at Initech.", "lane": "facts", "score": 0.9},
        {"text": "Meeting notes: the launch moved to Tuesday.", "lane": "working_memory"},
        {"text": "The handbook says expenses need a receipt. " * 40},
    ]
)


def run(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *argv: str, stdin: str = "") -> tuple[int, str, str]:
    monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_pack_markdown_from_stdin(monkeypatch, capsys) -> None:
    """pack reads JSON Lines and prints a block within --max-tokens."""
    code, out, err = run(monkeypatch, capsys, "pack", "--max-tokens", "120", stdin=LINES)
    assert code == 0 and "Derived memory" in out and "Recent session memory" in out
    assert count_tokens(out) <= 120 and "kept 2 of 3" in err


def test_pack_json_from_file(monkeypatch, capsys, tmp_path) -> None:
    """--format json gives the evidence and the report."""
    path = tmp_path / "c.jsonl"
    path.write_text(LINES)
    code, out, _ = run(monkeypatch, capsys, "pack", str(path), "--format", "json", "--max-items", "1")
    payload = json.loads(out)
    assert code == 0 and len(payload["evidence"]) == 1
    assert payload["report"]["reasons"] == {"over_item_cap": 2}


@pytest.mark.parametrize(
    ("argv", "stdin", "message"),
    [
        (["pack", "--max-tokens", "0"], LINES, "max_tokens=0"),
        (["pack", "--max-tokens", "99999"], LINES, "ceiling"),
        (["pack", "--encoding", "nope"], LINES, "cl100k_base"),
        (["pack"], '{"text": 5}', "candidates[0]"),
        (["pack"], '{"text": "x", "lane": "x"}', "working_memory"),
        (["pack"], "not json", "line 1"),
        (["pack", "/no/such/file.jsonl"], "", "no such file"),
    ],
)
def test_errors_are_one_line_and_exit_2(monkeypatch, capsys, argv, stdin, message) -> None:
    """Bad input gives exit 2 and one line naming the problem, never a traceback."""
    code, out, err = run(monkeypatch, capsys, *argv, stdin=stdin)
    assert code == 2 and out == ""
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_doctor_reports_exact(monkeypatch, capsys) -> None:
    """doctor says each encoding resolves exactly and from where."""
    code, out, _ = run(monkeypatch, capsys, "doctor", "--require-exact")
    assert code == 0 and "cl100k_base: exact" in out and "o200k_base: exact" in out


def test_doctor_require_exact_fails_on_fallback(monkeypatch, capsys, tmp_path) -> None:
    """--require-exact exits non-zero when an encoding falls back."""
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(tk, "_bundled_cache_dir", lambda: None)
    monkeypatch.setattr(tk, "_fallback_warned", True)
    tk._resolved.cache_clear()
    try:
        code, out, err = run(monkeypatch, capsys, "doctor", "--require-exact", "--encoding", "gpt-4o")
    finally:
        tk._resolved.cache_clear()
    assert code == 1 and "gpt-4o -> o200k_base: FALLBACK" in out and "--require-exact" in err


def test_ceiling_is_raised_only_on_purpose(monkeypatch, capsys) -> None:
    """--max-tokens past 16384 needs --max-tokens-ceiling too."""
    code, _, err = run(monkeypatch, capsys, "pack", "--max-tokens", "20000", stdin=LINES)
    assert code == 2 and "max_tokens_ceiling" in err
    code, out, _ = run(
        monkeypatch, capsys, "pack", "--max-tokens", "20000", "--max-tokens-ceiling", "20000", stdin=LINES
    )
    assert code == 0 and "Source excerpt" in out
