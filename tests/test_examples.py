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
    block = done.stdout.split("\n---\n")[0]
    assert 0 < count_tokens(block) <= 2048
    assert "argparse" in block and "kept " in done.stdout
