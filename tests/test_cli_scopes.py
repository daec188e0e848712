"""recallpack pack gates each line on its scope fields before anything else of it is read."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recallpack.cli import main

SECRET = "Team plan: the merger closes on Friday."
PUBLIC = {"text": "Alice works at Initech.", "lane": "facts"}
#: What is wrong with a withheld line, besides its scopes; any of it alone stops a line that is read.
FAULTS: dict[str, dict[str, Any]] = {
    "a span longer than its text": {"span": {"parent": "plan.md", "start": 0, "end": 4321}},
    "a span that is not an object": {"span": [0, 4321]},
    "a misspelt field": {"txet": "Friday"},
    "an unknown lane": {"lane": "merger-lane"},
    "text not a string": {"text": 4321},
    "a score that is text": {"score": "4321"},
    "metadata a list": {"metadata": [4321]},
}
#: Scope fields that withhold a line from the shell: well formed (no reader) or malformed.
WITHHOLDING_SCOPES: dict[str, tuple[Any, str]] = {
    "one scope": (["team-1"], "no_reader"),
    "a scope as one string": ("team-1", "no_reader"),
    "numbers": ([1], "malformed_scope"),
    "an empty list": ([], "malformed_scope"),
    "a blank id": ([" "], "malformed_scope"),
    "an object": ({"team": 1}, "malformed_scope"),
}


def pack(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], stdin: str, *flags: str) -> tuple[int, str, str]:
    monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    code = main(["pack", *flags])
    out, err = capsys.readouterr()
    return code, out, err


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    faults=st.lists(st.sampled_from(sorted(FAULTS)), min_size=1, max_size=3, unique=True),
    scope=st.sampled_from(sorted(WITHHOLDING_SCOPES)),
    fmt=st.sampled_from(["markdown", "json"]),
    position=st.integers(0, 2),
)
def test_a_withheld_line_is_never_read_beyond_its_scopes(monkeypatch, capsys, faults, scope, fmt, position) -> None:
    """A withheld line with a bad span or any other fault neither stops the pack nor shows in its output."""
    scope_ids, reason = WITHHOLDING_SCOPES[scope]
    line: dict[str, Any] = {"text": SECRET, "scope_ids": scope_ids}
    for fault in faults:
        line.update(FAULTS[fault])
    rows = [PUBLIC, PUBLIC | {"text": "Bob works at Hooli."}]
    rows.insert(position, line)
    code, out, err = pack(monkeypatch, capsys, "".join(json.dumps(r) + "\n" for r in rows), "--format", fmt)
    assert code == 0, err
    assert "Initech" in out and "Hooli" in out
    said = out + err
    for part in ("Friday", "merger", "4321", "plan.md", "txet", f":{position + 1}"):
        assert part not in said, (part, said)
    assert f"1 {reason}" in err if fmt == "markdown" else json.loads(out)["report"]["reasons"] == {reason: 1}


def test_a_line_the_reader_may_read_is_still_checked(monkeypatch, capsys) -> None:
    """With --show-scoped a scoped line is read, so its bad span is the one-line error it always was."""
    line = {"text": SECRET, "scope_ids": ["team-1"], "span": {"parent": "plan.md", "start": 0, "end": 4321}}
    code, out, err = pack(monkeypatch, capsys, json.dumps(PUBLIC) + "\n" + json.dumps(line) + "\n", "--show-scoped")
    assert code == 2 and out == ""
    assert err.startswith("recallpack: error: <stdin>:2: span says the text holds 4321 characters"), err


def test_malformed_scopes_are_counted_with_the_fix_and_no_line(monkeypatch, capsys) -> None:
    """Lines whose scope_ids cannot be read are withheld even with --show-scoped, and counted with the fix."""
    rows = [PUBLIC, {"text": SECRET, "scope_ids": [1]}, {"text": SECRET, "scope_ids": []}]
    code, out, err = pack(monkeypatch, capsys, "".join(json.dumps(r) + "\n" for r in rows), "--show-scoped")
    assert code == 0 and "Friday" not in out
    assert "2 lines have scope_ids that are not one or more non-empty strings" in err and "fix scope_ids" in err
    assert "<stdin>:2" not in err and "<stdin>:3" not in err
