"""The CLI: doctor and pack, and every error as one line on stderr with exit status 2."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import recallpack.cli as cli
import recallpack.packing.encodings as shipped
from recallpack import Candidate, CandidateError, count_tokens
from recallpack.cli import main
from recallpack.packing.tokenizers import EncodingRegistry, TiktokenCache, using_registry

ROOT = Path(__file__).resolve().parent.parent
LINES = "\n".join(
    json.dumps(item)
    for item in [
        {"text": "Alice works at Initech.", "lane": "facts", "score": 0.9},
        {"text": "Meeting notes: the launch moved to Tuesday.", "lane": "working_memory"},
        {"text": "The handbook says expenses need a receipt. " * 40},
    ]
)
#: What a shell user must never read: Python's words for things the CLI names as flags.
PYTHON_WORDING = ("Traceback", "candidates[", "max_tokens", "max_items", "callable", "None", "str -> int")


def run(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *argv: str, stdin: str = "") -> tuple[int, str, str]:
    monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code: int, out: str, err: str) -> None:
    assert code == 2 and out == "", (code, out, err)
    assert err.startswith("recallpack: error: ") and err.count("\n") == 1 and err.endswith("\n"), err
    assert not [word for word in PYTHON_WORDING if word in err], err


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


def test_pack_reads_utf8_with_a_byte_order_mark_and_crlf(monkeypatch, capsys, tmp_path) -> None:
    """A file saved by a Windows editor (BOM, CRLF line ends) packs like any other."""
    path = tmp_path / "windows.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + LINES.replace("\n", "\r\n").encode())
    code, out, err = run(monkeypatch, capsys, "pack", str(path), "--max-tokens", "120")
    assert code == 0 and "kept 2 of 3" in err and "Initech" in out


# -- the table: each bad input or flag, one line, exit 2, the file's line number or the flag --------

FLAG_ERRORS = [
    (["--max-tokens", "0"], ["--max-tokens must be at least 1"]),
    (["--max-tokens", "lots"], ["--max-tokens", "'lots' is not a whole number"]),
    (["--max-tokens", "99999"], ["--max-tokens 99999", "add --max-tokens-ceiling 99999"]),
    (["--max-tokens-ceiling", "0"], ["--max-tokens-ceiling must be at least 1"]),
    (["--max-items", "0"], ["--max-items must be at least 1"]),
    (["--encoding", "nope"], ["--encoding 'nope'", "cl100k_base", "chars"]),
    (["--policy", "shortest"], ["--policy", "prefix"]),
    (["--format", "yaml"], ["--format", "markdown"]),
    (["--no-such-flag"], ["--no-such-flag"]),
]


@pytest.mark.parametrize(("flags", "says"), FLAG_ERRORS, ids=[" ".join(f) for f, _ in FLAG_ERRORS])
def test_bad_flag_is_one_line_naming_the_flag(monkeypatch, capsys, flags, says) -> None:
    """A bad flag value: one line naming the flag and what it takes, exit 2, before any input is read."""
    code, out, err = run(monkeypatch, capsys, "pack", *flags, stdin=LINES)
    assert_one_line_error(code, out, err)
    assert all(part in err for part in says), err


INPUT_ERRORS = [
    ("text not a string", b'{"text": 5}', ["<stdin>:1:", '"text" must be a string, not a number']),
    ("unknown lane", b'{"text": "x", "lane": "notes"}', ["<stdin>:1:", "'notes'", "working_memory"]),
    ("not JSON", b"not json", ["<stdin>:1: not valid JSON", "Expecting value at column 1"]),
    ("bad JSON on line 2, whole detail",
     b'{"text": "a"}\n{"text": "b",}', ["<stdin>:2: not valid JSON", "Expecting property name enclosed in double quotes at column 14"]),
    ("missing text on line 3 after a blank line",
     b'{"text": "a"}\n\n{"lane": "facts"}\n', ['<stdin>:3: no "text" field', '{"text": ']),
    ("a misspelt field", b'{"txt": "a"}', ['<stdin>:1: unknown field "txt"', 'did you mean "text"']),
    ("a JSON string line", b'"just text"', ["<stdin>:1:", "this one is a string"]),
    ("a JSON array file", b'[{"text": "a"},\n {"text": "b"}]', ["<stdin>:1:", "one JSON array", "jq -c"]),
    ("pretty-printed object", b'{\n  "text": "a"\n}', ["<stdin>:1:", "one JSON object spread over several lines"]),
    ("score is text", b'{"text": "a", "score": "high"}', ["<stdin>:1:", '"score" must be a number, not a string']),
    ("score is true", b'{"text": "a", "score": true}', ['"score" must be a number, not true']),
    ("metadata a list", b'{"text": "a", "metadata": []}', ['"metadata" must be an object, not an array']),
    ("not UTF-8 on line 2", b'{"text": "a"}\n{"text": "caf\xe9"}', ["<stdin>:2: is not UTF-8", "0xe9", "save the file as UTF-8"]),
    ("binary garbage", bytes(range(256)) * 4, ["<stdin>: is a binary file"]),
    ("UTF-16 from PowerShell", '{"text": "a"}\n'.encode("utf-16"), ["<stdin>: is UTF-16 text", "UTF-8"]),
    ("a 5,000-digit number", b'{"text": "a", "score": ' + b"9" * 5000 + b"}", ["<stdin>:1: not usable JSON"]),
    ("nesting 100,000 deep", b'{"text": "a", "metadata": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
     ["<stdin>:1: not usable JSON (nested too deeply)"]),
]  # fmt: skip


@pytest.mark.parametrize(("data", "says"), [(d, s) for _, d, s in INPUT_ERRORS], ids=[i for i, _, _ in INPUT_ERRORS])
def test_bad_input_is_one_line_naming_the_line(monkeypatch, capsys, data, says) -> None:
    """A bad line: one line naming <file>:<physical line number> and the fix, exit 2, nothing on stdout."""
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(data)))
    code = main(["pack"])
    out, err = capsys.readouterr()
    assert_one_line_error(code, out, err)
    assert all(part in err for part in says), err


def test_file_errors_name_the_file(monkeypatch, capsys, tmp_path) -> None:
    """A missing file, a directory, an unreadable file: one line naming it, exit 2."""
    cases = {str(tmp_path / "gone.jsonl"): "no such file", str(tmp_path): "is a directory"}
    for path, says in cases.items():
        code, out, err = run(monkeypatch, capsys, "pack", path)
        assert_one_line_error(code, out, err)
        assert err.startswith(f"recallpack: error: {path}: {says}"), err

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(cli, "open", refuse, raising=False)  # root reads any file: simulate it
    code, out, err = run(monkeypatch, capsys, "pack", str(tmp_path / "locked.jsonl"))
    assert_one_line_error(code, out, err)
    assert "locked.jsonl: permission denied" in err


def test_bad_line_in_a_file_names_file_and_line(monkeypatch, capsys, tmp_path) -> None:
    """Errors in a named file say file:line, with the line as an editor numbers it."""
    path = tmp_path / "c.jsonl"
    path.write_text('{"text": "a"}\n\n\n{"text": "b", "lane": "x"}\n')
    code, out, err = run(monkeypatch, capsys, "pack", str(path))
    assert_one_line_error(code, out, err)
    assert f"{path}:4:" in err


def test_core_errors_are_reworded_for_the_shell(monkeypatch, capsys) -> None:
    """A core message's candidates[i] becomes <file>:<line> and its keywords become flags."""

    def fail(candidates: list[Candidate], **_settings: object) -> None:
        raise CandidateError(
            "candidates[1]: too large; pass max_tokens_ceiling=5 or a tokenizer=, or a callable str -> int",
            index=1,
        )

    monkeypatch.setattr(cli, "recall", fail)
    code, out, err = run(monkeypatch, capsys, "pack", stdin='{"text": "a"}\n\n{"text": "b"}\n')
    assert_one_line_error(code, out, err)
    assert "<stdin>:3: too large; add --max-tokens-ceiling 5 or a --encoding " in err


@pytest.mark.parametrize("stdin", ["", "\n  \n\t\n"], ids=["empty", "blank lines"])
def test_empty_input_says_so_and_exits_0(monkeypatch, capsys, stdin) -> None:
    """No candidates is not an error (a search can find nothing): one note on stderr, exit 0."""
    code, out, err = run(monkeypatch, capsys, "pack", stdin=stdin)
    assert code == 0 and out == ""
    assert err == "recallpack: note: <stdin> has no candidates (it is empty or blank)\n"


def test_closed_stdout_is_quiet(monkeypatch, capsys) -> None:
    """A reader that went away (| head) ends the command quietly, exit 0, no traceback."""

    class Closed(io.StringIO):
        def write(self, text: str) -> int:
            raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr("sys.stdin", io.StringIO(LINES))
    monkeypatch.setattr("sys.stdout", Closed())
    code = main(["pack"])
    assert code == 0 and capsys.readouterr().err == ""


def test_interrupt_is_one_line(monkeypatch, capsys) -> None:
    """Ctrl-C while reading: one line, exit 130, no traceback."""

    class Interrupted(io.StringIO):
        def read(self, *_args: object) -> str:
            raise KeyboardInterrupt

    monkeypatch.setattr("sys.stdin", Interrupted())
    code = main(["pack"])
    assert code == 130 and capsys.readouterr().err == "recallpack: interrupted\n"


def test_version(monkeypatch, capsys) -> None:
    """--version prints the installed version and exits 0."""
    code, out, _ = run(monkeypatch, capsys, "--version")
    assert code == 0 and re.fullmatch(r"recallpack \d+\.\d+\S*\n", out)


def test_pack_help_documents_every_flag_and_field(monkeypatch, capsys) -> None:
    """pack --help gives each flag's default, each JSONL field, and an example line that packs."""
    code, out, _ = run(monkeypatch, capsys, "pack", "--help")
    assert code == 0
    options = re.split(r"\n  (?=-)", out.split("options:")[1].split("\n\n")[0])[1:]
    for option in options:
        if not option.startswith("-h"):
            assert "(default: " in " ".join(option.split()), option
    assert len(options) == 10
    for default in ("(default: 2048)", "(default: 16384)", "(default: no cap)", "(default: prefix)",
                    "(default: cl100k_base)", "(default: markdown)", "(default: auto)"):
        assert default in " ".join(out.split())
    for field in set(Candidate.model_fields) - {"scope_error"}:  # set by adapters, not by users
        assert re.search(rf"^  {field} ", out, re.M), f"pack --help does not describe the {field!r} field"
    example = re.search(r"example line:\n  (.+)\n", out)
    assert example
    code, block, _ = run(monkeypatch, capsys, "pack", stdin=example.group(1))
    assert code == 0 and "Berlin" in block


def test_doctor_reports_exact(monkeypatch, capsys) -> None:
    """doctor says each encoding resolves exactly and from where."""
    code, out, _ = run(monkeypatch, capsys, "doctor", "--require-exact")
    assert code == 0 and "cl100k_base: exact" in out and "o200k_base: exact" in out


def test_doctor_unknown_encoding_names_the_flag(monkeypatch, capsys) -> None:
    """doctor --encoding with an unknown name: one line naming --encoding, exit 2."""
    code, out, err = run(monkeypatch, capsys, "doctor", "--encoding", "nope")
    assert_one_line_error(code, out, err)
    assert "--encoding 'nope'" in err


def test_doctor_require_exact_fails_on_fallback(monkeypatch, capsys, tmp_path) -> None:
    """--require-exact exits non-zero when an encoding falls back."""
    with using_registry(EncodingRegistry([TiktokenCache(str(tmp_path))], warn=False)):
        code, out, err = run(monkeypatch, capsys, "doctor", "--require-exact", "--encoding", "gpt-4o")
    assert code == 1 and "gpt-4o -> o200k_base: FALLBACK" in out and "--require-exact" in err


def test_ceiling_is_raised_only_on_purpose(monkeypatch, capsys) -> None:
    """--max-tokens past 16384 needs --max-tokens-ceiling too."""
    code, _, err = run(monkeypatch, capsys, "pack", "--max-tokens", "20000", stdin=LINES)
    assert code == 2 and "--max-tokens-ceiling 20000" in err
    code, out, _ = run(
        monkeypatch, capsys, "pack", "--max-tokens", "20000", "--max-tokens-ceiling", "20000", stdin=LINES
    )
    assert code == 0 and "Source excerpt" in out


# -- anything at all on stdin: a block or one line, never a traceback ----------------------------

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)
LINE_OBJECTS = st.dictionaries(st.sampled_from([*cli.FIELDS, "txt"]), JSON_VALUES, max_size=4)
INPUTS = st.one_of(
    st.binary(max_size=300),
    st.lists(LINE_OBJECTS.map(json.dumps), max_size=5).map(lambda lines: "\n".join(lines).encode()),
    st.lists(st.text(max_size=40), max_size=5).map(lambda ts: "\n".join(json.dumps({"text": t}) for t in ts).encode()),
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=INPUTS)
def test_any_input_gives_a_block_or_one_line(data: bytes) -> None:
    """Whatever bytes arrive, pack exits 0 or 2 and an error is one line: never an internal error."""
    stdin, err = sys.stdin, io.StringIO()
    sys.stdin = io.TextIOWrapper(io.BytesIO(data))
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            code = main(["pack", "--max-tokens", "200"])
    finally:
        sys.stdin = stdin
    assert code in (0, 2) and "internal error" not in err.getvalue()
    if code == 2:
        assert err.getvalue().count("\n") == 1


# -- the real command: no traceback reaches a shell -----------------------------------------------


def shell(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    return subprocess.run(
        ["bash", "-o", "pipefail", "-c", command.replace("python ", f"{sys.executable} ", 1)],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=120,
    )


@pytest.mark.parametrize(
    ("command", "code", "says"),
    [
        ("python -m recallpack pack latin1.jsonl", 2, "latin1.jsonl:2: is not UTF-8"),
        ("python -m recallpack pack .", 2, ".: is a directory"),
        ("python -m recallpack pack /bin/sh", 2, "/bin/sh: is a binary file"),
        ("python -m recallpack pack --max-tokens 0 < latin1.jsonl", 2, "--max-tokens must be at least 1"),
        ("python -m recallpack pack < /dev/null", 0, "has no candidates"),
        ("python -m recallpack --version", 0, ""),
    ],
)
def test_real_command_never_shows_a_traceback(tmp_path, command, code, says) -> None:
    """Through python -m recallpack: the exit status and one line, no traceback."""
    (tmp_path / "latin1.jsonl").write_bytes(b'{"text": "a"}\n{"text": "caf\xe9"}\n')
    done = shell(command, tmp_path)
    assert done.returncode == code, done.stderr
    assert says in done.stderr and "Traceback" not in done.stderr
    assert done.stderr.count("\n") == (1 if says else 0)


def test_real_command_piped_to_head_is_quiet(tmp_path) -> None:
    """recallpack pack ... | head: the pipeline succeeds and stderr has only the report."""
    lines = "\n".join(json.dumps({"text": f"paragraph {n}: " + "words and more words " * 200}) for n in range(60))
    (tmp_path / "big.jsonl").write_text(lines)
    command = "python -m recallpack pack big.jsonl --max-tokens 60000 --max-tokens-ceiling 60000 | head -c 100"
    done = shell(command, tmp_path)
    assert done.returncode == 0 and len(done.stdout) == 100
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr


def test_terminal_stdin_gets_a_hint(monkeypatch, capsys) -> None:
    """pack with no file at a terminal says it is reading stdin and how to end, then packs."""

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr("sys.stdin", Terminal(LINES))
    code = main(["pack", "--max-tokens", "120"])
    err = capsys.readouterr().err
    assert code == 0 and err.startswith("recallpack pack: reading candidates from the terminal") and "Ctrl-D" in err


def test_fallback_tokenizer_warning_is_one_line(monkeypatch, capsys, tmp_path) -> None:
    """recallpack's own warning (no exact encoding offline) reaches a shell user as one line."""
    with using_registry(EncodingRegistry([TiktokenCache(str(tmp_path))])):
        code, _, err = run(monkeypatch, capsys, "pack", "--encoding", "gpt-4o", "--max-tokens", "120", stdin=LINES)
    warning_lines = [line for line in err.splitlines() if "warning" in line.lower()]
    assert code == 0 and len(warning_lines) == 1 and warning_lines[0].startswith("recallpack: warning: "), err
    assert "upper bound" in warning_lines[0] and "recallpack: warning: recallpack:" not in err


def test_doctor_chars_is_an_estimate(monkeypatch, capsys) -> None:
    """doctor --encoding chars says it is an estimate, and --require-exact refuses it."""
    code, out, _ = run(monkeypatch, capsys, "doctor", "--encoding", "chars")
    assert code == 0 and out.startswith("chars: ESTIMATE")
    code, _, err = run(monkeypatch, capsys, "doctor", "--encoding", "chars", "--require-exact")
    assert code == 1 and "--require-exact" in err


def test_scoped_candidates_are_withheld_unless_shown_on_purpose(monkeypatch, capsys) -> None:
    """The shell has no reader: scoped lines are withheld, and --show-scoped shows them."""
    scoped = json.dumps({"text": "Team plan: ship on Friday.", "scope_ids": ["team-1"]}) + "\n"
    code, out, err = run(monkeypatch, capsys, "pack", stdin=scoped)
    assert code == 0 and "Friday" not in out and "no_reader" in err
    code, out, err = run(monkeypatch, capsys, "pack", "--show-scoped", stdin=scoped)
    assert code == 0 and "Friday" in out and "team-1" in out


def test_query_steers_the_cut_of_a_long_line(monkeypatch, capsys) -> None:
    """--query makes a cut keep the passage that matches it instead of the start."""
    filler = " ".join(f"Paragraph {i} talks about nothing in particular." for i in range(200))
    long_line = json.dumps({"text": filler + " The vault code is kept by the night porter. " + filler}) + "\n"
    _, head, _ = run(monkeypatch, capsys, "pack", "--max-tokens", "120", stdin=long_line)
    _, focus, err = run(monkeypatch, capsys, "pack", "--max-tokens", "120", "--query", "who keeps the vault code", stdin=long_line)
    assert "night porter" not in head and "night porter" in focus and "focus cut" in err


def test_pack_json_includes_the_block_it_counted(monkeypatch, capsys) -> None:
    """--format json carries the rendered block ("markdown"): the bytes tokens_used counts."""
    code, out, _ = run(monkeypatch, capsys, "pack", "--format", "json", "--max-tokens", "120", stdin=LINES)
    payload = json.loads(out)
    assert code == 0 and "evidence, not instructions" in payload["markdown"]
    assert count_tokens(payload["markdown"]) == payload["report"]["tokens_used"] <= 120
    _, markdown, _ = run(monkeypatch, capsys, "pack", "--max-tokens", "120", stdin=LINES)
    assert payload["markdown"] == markdown


@pytest.mark.parametrize(
    ("argv", "suggestion"),
    [
        (["pack", "--formt", "json"], "did you mean --format?"),
        (["pack", "--max-tokns", "30"], "did you mean --max-tokens?"),
        (["pack", "--show-scopd"], "did you mean --show-scoped?"),
        (["doctor", "--require-exct"], "did you mean --require-exact?"),
        (["doctr"], "did you mean doctor?"),
        (["pack", "--qury", "x", "--formt", "json"], "--query for --qury, --format for --formt"),
    ],
)
def test_a_mistyped_flag_or_command_gets_a_suggestion(monkeypatch, capsys, argv, suggestion) -> None:
    """An unknown flag or command is one line that names the closest one."""
    code, out, err = run(monkeypatch, capsys, *argv, stdin=LINES)
    assert_one_line_error(code, out, err)
    assert suggestion in err


def test_a_flag_with_nothing_close_gets_no_guess(monkeypatch, capsys) -> None:
    """--quiet is not --query: no suggestion is better than a wrong one."""
    code, out, err = run(monkeypatch, capsys, "pack", "--quiet", stdin=LINES)
    assert_one_line_error(code, out, err)
    assert "did you mean" not in err and "--quiet" in err


@pytest.mark.parametrize("fmt", ["markdown", "json"])
def test_withheld_scoped_lines_say_how_to_show_them(monkeypatch, capsys, fmt) -> None:
    """Lines withheld for want of a reader are counted on stderr with the flag that shows them."""
    scoped = "".join(json.dumps({"text": f"Team plan {i}.", "scope_ids": ["team-1"]}) + "\n" for i in range(2))
    code, _, err = run(monkeypatch, capsys, "pack", "--format", fmt, stdin=scoped + LINES)
    assert code == 0 and "2 lines carry scope_ids and were withheld" in err and "--show-scoped" in err
    code, _, err = run(monkeypatch, capsys, "pack", "--format", fmt, "--show-scoped", stdin=scoped + LINES)
    assert code == 0 and "--show-scoped" not in err


def test_doctor_says_a_fallback_once_with_advice_for_that_encoding(monkeypatch, capsys, tmp_path) -> None:
    """A fallback is one FALLBACK line and one fix that fits it (no warning repeating it): a
    reinstall for a shipped encoding, a prewarmed cache for any other; a repeated name is said once."""
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))  # tiktoken's own loading of gpt2 finds nothing
    monkeypatch.setattr(shipped, "shipped_encodings", lambda: frozenset({"cl100k_base", "o200k_base"}))
    with using_registry(EncodingRegistry([TiktokenCache(str(tmp_path))])):
        code, out, err = run(monkeypatch, capsys, "doctor", "--encoding", "gpt-4o", "--encoding", "gpt2",
                             "--encoding", "gpt2")
    lines = out.splitlines()
    assert code == 0 and err == "", err
    assert [line.split(":")[0] for line in lines if not line.startswith(" ")] == ["gpt-4o -> o200k_base", "gpt2"]
    assert "reinstall recallpack" in lines[1] and "tiktoken.get_encoding" not in lines[1]
    assert "tiktoken.get_encoding('gpt2')" in lines[3] and "reinstall" not in lines[3]
    assert out.count("upper bound") == 2
