"""Every command's ``--help`` prints: a help string argparse cannot format (a bare ``%`` in it)
is a crash a new user meets first, and only when they ask for help."""

from __future__ import annotations

import pytest

from recallpack import bench, cli

COMMANDS = [[], ["pack"], ["doctor"], ["serve"], ["hash-token"]]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "recallpack")
def test_each_cli_command_prints_its_help(command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """``recallpack [COMMAND] --help`` exits 0 and describes its options."""
    assert cli.main([*command, "--help"]) == 0
    assert "--help" in capsys.readouterr().out


def test_the_bench_prints_its_help(capsys: pytest.CaptureFixture[str]) -> None:
    """``python -m recallpack.bench --help`` exits 0 and lists every section's flag."""
    with pytest.raises(SystemExit) as ended:
        bench.main(["--help"])
    assert ended.value.code == 0
    out = capsys.readouterr().out
    for flag in ("--quality", "--small-budgets", "--docs-search", "--memory", "--check"):
        assert flag in out, f"bench --help does not list {flag}"
