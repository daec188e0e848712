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

import ast
import builtins
import contextlib
import io
import json
import os
import re
import subprocess
import sys
import tokenize
import types
from pathlib import Path
from typing import Any, NamedTuple

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


class Claim(NamedTuple):
    """What an example's comment says a line prints: ``text`` (``...`` for text left out) and
    the line it is written on."""

    line: int
    text: str


def claim_text(comment: str) -> str:
    """A comment's claim: its text after ``#``, without an explanation after ``<-``."""
    return comment.lstrip("#").split("<-")[0].strip()


def comments_by_line(code: str) -> dict[int, str]:
    """Line number -> the comment on that line (tokenize's, so a ``#`` in a string is not one)."""
    tokens = tokenize.generate_tokens(io.StringIO(code).readline)
    return {t.start[0]: t.string for t in tokens if t.type == tokenize.COMMENT}


def print_claims(tree: ast.Module, comments: dict[int, str]) -> dict[tuple[int, int], Claim]:
    """Each ``print(...)`` call with a comment on its last line: (first line, last line) -> claim.

    Every such comment is a claim of what that call prints, each time it runs; an explanation
    goes after ``<-`` (``print(n)  # 3   <- the third``), or on a line of its own."""
    claims = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
            end = node.end_lineno or node.lineno
            if end in comments and claim_text(comments[end]):
                claims[(node.lineno, end)] = Claim(end, claim_text(comments[end]))
    return claims


def block_claim(statement: ast.stmt, lines: list[str], comments: dict[int, str]) -> Claim | None:
    """The run of comment-only lines right under a top-level statement whose own last line has no
    comment, as a claim of everything it prints, one comment line per printed line."""
    end = statement.end_lineno or statement.lineno
    if end in comments:
        return None
    shown = []
    for number in range(end + 1, len(lines) + 1):
        if not lines[number - 1].lstrip().startswith("#"):
            break
        shown.append(claim_text(lines[number - 1]))
    return Claim(end + 1, "\n".join(shown)) if shown else None


def matches(claim: str, printed: str) -> bool:
    """``printed`` is what ``claim`` says, ``...`` standing for any text (none, too; line breaks
    too, and the spaces around it)."""
    pattern = ".*?".join(re.escape(part.strip()) for part in claim.split("..."))
    return re.fullmatch(pattern, printed.strip(), re.S) is not None


def run_and_check(code: str, where: str, namespace: dict[str, object]) -> int:
    """Run ``code`` in ``namespace`` one top-level statement at a time, and assert that each
    claim of its comments is what its line printed. Returns how many claims were checked.

    Two claims: ``print(x)  # 3`` (each time that call runs, it prints ``3``), and a run of
    comment lines right under a top-level statement that printed something (all it printed,
    line by line). A comment under a statement that printed nothing explains it."""
    tree = ast.parse(code)
    lines = code.splitlines()
    comments = comments_by_line(code)
    calls = print_claims(tree, comments)
    by_call: dict[tuple[int, int], list[str]] = {span: [] for span in calls}

    def recording_print(*args: object, sep: str | None = " ", end: str | None = "\n", **kw: Any) -> None:
        if kw.get("file") not in (None, sys.stdout):
            builtins.print(*args, sep=sep, end=end, **kw)
            return
        text = io.StringIO()
        builtins.print(*args, sep=sep, end=end, file=text)
        caller = sys._getframe(1)
        if caller.f_code.co_filename == where:
            spans = [span for span in calls if span[0] <= caller.f_lineno <= span[1]]
            for span in spans[:1]:
                by_call[span].append(text.getvalue())
        sys.stdout.write(text.getvalue())

    namespace["print"] = recording_print
    checked = 0
    for statement in tree.body:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(ast.Module([statement], []), where, "exec"), namespace)  # noqa: S102
        claim = block_claim(statement, lines, comments)
        if claim is not None and out.getvalue():
            assert matches(claim.text, out.getvalue()), (
                f"{where}, line {claim.line}: the comments say\n{claim.text}\nit printed:\n{out.getvalue()}"
            )
            checked += 1
    for span, claim in calls.items():
        assert by_call[span], f"{where}, line {claim.line}: this print never ran, its comment says {claim.text!r}"
        for printed in by_call[span]:
            assert matches(claim.text, printed), (
                f"{where}, line {claim.line}: the comment says {claim.text!r}; it printed {printed.strip()!r}"
            )
        checked += 1
    return checked


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
            run_and_check(code, where, {"__name__": "readme"})
        elif language == "json":
            json.loads(code)
        elif language == "bash":
            for line in commands(code):
                if RUN.match(line):
                    done = run_command(line, tmp_path)
                    assert done.returncode == 0, f"{where}: {line!r} failed:\n{done.stderr}"


def test_readme_shows_outputs_it_checks() -> None:
    """The README's print comments are found as claims (the section test cannot pass vacuously)."""
    claims = [
        claim.text
        for _, blocks in SECTIONS
        for language, code in blocks
        if language == "python"
        for claim in print_claims(ast.parse(code), comments_by_line(code)).values()
    ]
    assert len(claims) >= 20
    assert "kept 3 of 3 (1 cut) in 115/120 tokens (cl100k_base, passages)" in claims


@pytest.mark.parametrize(
    ("code", "checked"),
    [
        ("print(1 + 1)  # 2", 1),
        ("print(1 + 1)  # 2   <- one and one", 1),
        ("print('a b c')  # a ... c", 1),
        ("for i in range(2):\n    print(i)\n# 0\n# 1   <- the last", 1),
        ("x = 2\n# an explanation, not output: nothing was printed", 0),
        ("def f() -> None:\n    print(7)  # 7\n\nf()\nf()", 1),
    ],
)
def test_the_claim_check_passes_what_each_line_prints(code: str, checked: int) -> None:
    """A claim that is what its line printed passes, counted once per claim."""
    assert run_and_check(code, "example", {}) == checked


@pytest.mark.parametrize(
    "code",
    [
        "print(3)  # 2",  # the README's chat example: said 2, printed 3
        "print(1)\nprint(2)  # 1",  # another line's output does not count
        "print('kept 1 of 3. More')  # kept 1 of 3",  # the whole output, not a prefix of it
        "print(1)  # the number one",  # prose where the output goes
        "if False:\n    print(1)  # 1",  # a claim whose print never runs
        "for i in range(2):\n    print(i)  # 0",  # each run of the line
        "for i in range(3):\n    print(i)\n# 0\n# 1",
    ],
)
def test_the_claim_check_fails_what_a_line_does_not_print(code: str) -> None:
    """A comment that says something else than its line printed fails the check."""
    with pytest.raises(AssertionError):
        run_and_check(code, "example", {})


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
    # The blocks run as a module of their own, as a script would: a dataclass (agent-memory.md's
    # context schema) looks its module up in sys.modules.
    module = types.ModuleType("docs")
    monkeypatch.setitem(sys.modules, "docs", module)
    namespace: dict[str, object] = module.__dict__
    for number, match in enumerate(FENCE.finditer(doc.read_text())):
        if match.group(1) == "python":
            run_and_check(match.group(2), f"{doc.name}, block {number}", namespace)


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


def test_the_notebook_says_to_open_it_with_its_own_extra() -> None:
    """The quickstart's first cell names `make notebook` and the notebook extra, which has Jupyter (dev has none)."""
    tomllib = pytest.importorskip("tomllib" if sys.version_info >= (3, 11) else "tomli")
    cell = "".join(json.loads((ROOT / "examples" / "quickstart.ipynb").read_text())["cells"][0]["source"])
    assert "make notebook" in cell and "'.[notebook]'" in cell
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(req.startswith("jupyterlab") for req in extras["notebook"])
    assert not any(req.startswith(("jupyterlab", "notebook", "jupyter")) for req in extras["dev"])
