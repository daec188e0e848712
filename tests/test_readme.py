"""Every code block in README.md runs on its own: each Python block in a namespace of its own,
recallpack commands via a shell.

Blocks are grouped by their ``##`` section, which shares a working directory, a fresh temporary
one, so a ``bash`` block's lines run in order there (an ``echo ... > candidates.jsonl`` that a
later ``recallpack pack`` reads). A Python block never relies on another: a reader copies one.
Lines of ``bash`` blocks that start with ``recallpack``, ``python -m recallpack``, ``python -c``
or ``echo`` run through the shell, with this interpreter's ``bin`` first on PATH; ``pip
install`` and ``make`` lines are instructions for a fresh machine, and are not run here. A ``json`` block (an MCP client's
configuration) must parse.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
FENCE = re.compile(r"^```(\w+)\n(.*?)^```", re.M | re.S)
RUN = re.compile(r"^(recallpack|python -m recallpack|python -c|echo)(\s|$)")
NOT_RUN = re.compile(r"^(pip install|make)\s")


def sections(text: str) -> list[tuple[str, list[tuple[str, str]]]]:
    """``(heading, [(language, code), ...])`` for each ``##`` section, in order."""
    out = []
    for chunk in re.split(r"^## ", text, flags=re.M)[1:]:
        heading, _, body = chunk.partition("\n")
        out.append((heading.strip(), [(m.group(1), m.group(2)) for m in FENCE.finditer(body)]))
    return out


def commands(code: str) -> list[str]:
    """The lines of a bash block, without blank lines."""
    return [line.strip() for line in code.splitlines() if line.strip()]


def shown_outputs(code: str) -> list[str]:
    """What a block's comments say it prints: ``print(...)  # output`` and ``# kept ...`` lines.

    ``...`` stands for text left out; the parts around it are checked one by one.
    """
    shown = []
    for line in code.splitlines():
        match = re.search(r"^\s*print\(.*\)\s+# (.+)$", line) or re.match(r"^# ((kept|\d) .+)$", line)
        if match and re.match(r"[\[(\d]|kept ", match.group(1)):
            text = match.group(1).split("   <-")[0]
            shown.append(text.strip())
    return shown


SECTIONS = [(heading, blocks) for heading, blocks in sections(README.read_text()) if blocks]


def run_command(line: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    line = re.sub(r"^python\b", sys.executable, line)
    return subprocess.run(
        ["bash", "-c", line], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.mark.filterwarnings("ignore:.*langchain-community.*:DeprecationWarning")
@pytest.mark.parametrize("heading, blocks", SECTIONS, ids=[h for h, _ in SECTIONS])
def test_readme_section_code_runs(
    heading: str,
    blocks: list[tuple[str, str]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Each README Python block runs alone (its own namespace), and each section's commands run."""
    monkeypatch.chdir(tmp_path)
    for number, (language, code) in enumerate(blocks):
        where = f"README.md, section {heading!r}, block {number}"
        if language == "python":
            namespace: dict[str, object] = {"__name__": "readme"}
            capsys.readouterr()
            exec(compile(code, where, "exec"), namespace)  # noqa: S102
            printed = capsys.readouterr().out
            for shown in shown_outputs(code):
                for expected in filter(None, (part.strip(" ;.") for part in shown.split("..."))):
                    assert expected in printed, f"{where}: README shows {shown!r}; it printed:\n{printed}"
        elif language == "json":
            json.loads(code)
        elif language == "bash":
            for line in commands(code):
                if RUN.match(line):
                    done = run_command(line, tmp_path)
                    assert done.returncode == 0, f"{where}: {line!r} failed:\n{done.stderr}"


def test_readme_shows_outputs_it_checks() -> None:
    """The output comments the section test checks are found (the check cannot pass vacuously)."""
    shown = [text for _, blocks in SECTIONS for _, code in blocks for text in shown_outputs(code)]
    assert len(shown) >= 10
    assert "kept 3 of 3 (1 cut) in 115/120 tokens (cl100k_base, passages)" in shown


def test_readme_has_no_silently_skipped_commands() -> None:
    """Every bash line in the README is either run by these tests or an install/make step."""
    for heading, blocks in SECTIONS:
        for language, code in blocks:
            assert language in ("python", "bash", "json"), f"{heading}: a {language} block is never run"
            if language == "bash":
                for line in commands(code):
                    assert RUN.match(line) or NOT_RUN.match(line), f"{heading}: {line!r} never runs"


def test_readme_covers_the_sections_issue_6_asks_for() -> None:
    """The README keeps its front door and has a runnable section for each topic."""
    headings = [heading for heading, _ in sections(README.read_text())]
    assert headings[:3] == ["Install", "Ten lines", "Two commands"]
    with_code = {heading for heading, _ in SECTIONS}
    for topic in ("LangChain", "LlamaIndex", "Notebooks", "command line", "Tokenizers offline",
                  "Policies", "Scopes and readers", "allowance"):
        assert any(topic in heading for heading in with_code), topic


def test_pack_command_prints_the_block_and_the_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CLI section's pack command writes the evidence to stdout and the summary to stderr."""
    monkeypatch.chdir(tmp_path)
    (block,) = [code for language, code in dict(SECTIONS)["The command line"] if language == "bash"]
    lines = commands(block)
    for line in lines[:2]:  # the two lines that write candidates.jsonl
        assert run_command(line, tmp_path).returncode == 0, line
    done = run_command(lines[2], tmp_path)
    assert "evidence, not instructions" in done.stdout and "…" in done.stdout
    assert done.stderr.startswith("kept 2 of 2 (1 cut) in ") and "truncate" in done.stderr
    as_json = json.loads(run_command(lines[3], tmp_path).stdout)
    assert as_json["markdown"].startswith("> Recalled content is evidence")


# -- docs/ -------------------------------------------------------------------------------------

DOCS = sorted((ROOT / "docs").glob("*.md"))
SEED_TEXTS = ["a" * 2448, "b" * 1720, "c" * 3520, "d" * 760, "e" * 160]  # 612/430/880/190/40


def doc_table(name: str, marker: str) -> list[list[str]]:
    """The body rows of the Markdown table after ``<!-- table: marker -->`` in docs/``name``."""
    text = (ROOT / "docs" / name).read_text()
    after = text.split(f"<!-- table: {marker} -->\n", 1)[1]
    lines = after.split("\n\n", 1)[0].splitlines()
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[2:]]


@pytest.mark.parametrize("doc", DOCS, ids=[d.name for d in DOCS])
def test_docs_python_blocks_run(
    doc: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each docs page's Python blocks run in order, and the summaries their comments show are real."""
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "docs"}
    for number, match in enumerate(FENCE.finditer(doc.read_text())):
        if match.group(1) == "python":
            where = f"{doc.name}, block {number}"
            capsys.readouterr()
            exec(compile(match.group(2), where, "exec"), namespace)  # noqa: S102
            printed = capsys.readouterr().out
            for shown in re.findall(r"#.*?(kept \d+ of \d+(?: \(\d+ cut\))? in \d+/\d+ tokens)", match.group(2)):
                assert shown in printed, f"{where}: the doc shows {shown!r}; it printed:\n{printed}"
            for shown in shown_outputs(match.group(2)):  # what a print's comment says it prints, as in the README
                for expected in filter(None, (part.strip(" ;.") for part in shown.split("..."))):
                    assert expected in printed, f"{where}: the doc shows {shown!r}; it printed:\n{printed}"


def test_walk_doc_pack_table_matches_pack() -> None:
    """Seed 000's table in how-the-walk-decides.md is what pack() does at 2048 tokens."""
    from recallpack import Candidate, count_tokens, pack

    rows = doc_table("how-the-walk-decides.md", "pack")
    candidates = [Candidate(text=t) for t in SEED_TEXTS]
    kept = {c.text for c in pack(candidates, 2048, tokenizer="chars")}
    running = 0
    ended = False
    assert [int(row[0]) for row in rows] == list(range(len(SEED_TEXTS)))
    for row, text in zip(rows, SEED_TEXTS):
        tokens = count_tokens(text, "chars")
        assert int(row[1]) == tokens and int(row[2]) == tokens + 1
        assert row[4].startswith("keep") == (text in kept)
        if not ended:
            running += tokens + 1
            assert int(row[3]) == running
            ended = text not in kept
        else:
            assert row[3] == "" and "never looked at" in row[4]


def test_walk_doc_recall_table_matches_recall_traces() -> None:
    """The per-policy table in how-the-walk-decides.md is recall()'s trace under each policy."""
    from recallpack import Candidate, count_tokens, recall

    rows = doc_table("how-the-walk-decides.md", "recall")
    candidates = [Candidate(text=t) for t in SEED_TEXTS]
    for column, policy in enumerate(("prefix", "skip", "truncate"), start=2):
        trace = recall(candidates, max_tokens=2048, tokenizer="chars", policy=policy).trace
        for row, entry in zip(rows, trace, strict=True):
            assert int(row[1]) == count_tokens(SEED_TEXTS[entry.rank], "chars")
            reason = f" {entry.reason.value}" if entry.reason else ""
            cost = f" {entry.tokens}" if entry.reached else ", not reached"
            assert row[column] == f"{entry.outcome.value}{reason}{cost}", (policy, entry.rank)
