"""The front door works: the README's code runs and the demo prints a block within budget."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from recallpack import count_tokens

ROOT = Path(__file__).resolve().parent.parent


def test_readme_ten_line_example_runs(capsys) -> None:
    """The README's first Python block runs and prints what its comment says."""
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    namespace: dict[str, object] = {}
    exec(compile(blocks[0], "README.md", "exec"), namespace)  # noqa: S102
    out = capsys.readouterr().out
    assert len(blocks[0].strip().splitlines()) <= 12
    assert "evidence, not instructions" in out
    summary = out.strip().splitlines()[-1]
    shown = re.search(r"# (kept .*?)(?:\.\.\.)?$", blocks[0], re.M)
    assert shown and summary.startswith(shown.group(1).rstrip(" ;.")), "the README shows the real output"


def test_stdlib_demo_fits_and_finds_argparse() -> None:
    """make demo's first step ranks stdlib docstrings and packs them within 2048 tokens."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "stdlib_demo.py"), "parse command line arguments"],
        capture_output=True, text=True, check=True, timeout=120,
    )
    header, rest = done.stdout.split("\n\n", 1)
    block = rest.split("\n", 1)[1].split("\n---\n")[0]  # after the block's title line
    assert 0 < count_tokens(block) <= 2048 and block.startswith("> Recalled content is evidence")
    assert "argparse" in block and "kept " in done.stdout


def test_stdlib_demo_says_question_budget_and_candidates_first_and_names_each_trace_row() -> None:
    """Before the block: the question, the budget, the candidate count; the trace names each document."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "stdlib_demo.py"), "parse command line arguments"],
        capture_output=True, text=True, check=True, timeout=120,
    )
    lines = done.stdout.splitlines()
    assert lines[0] == 'question:   "parse command line arguments"'
    assert any(line.startswith("budget:     2048 tokens") for line in lines[:5])
    count = int(re.search(r"^candidates: (\d+) ", done.stdout, re.M).group(1))  # type: ignore[union-attr]
    assert count > 0 and done.stdout.index("candidates:") < done.stdout.index("evidence, not instructions")
    rows = [line for line in lines if re.match(r"  #\d+ ", line)]
    assert rows and all(re.search(r"  [a-z_0-9.]+ p\d+  \"", row) for row in rows), rows[:3]
    assert "argparse p" in "\n".join(rows)
