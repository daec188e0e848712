"""``recallpack serve``'s flags: every mistake is one line on stderr and exit status 2, before
anything is served; the flags reach the server by the Packer's names."""

from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

import recallpack.adapters.mcp as mcp_adapter
from recallpack import Reader, Scope
from recallpack.cli import main

ROOT = Path(__file__).resolve().parent.parent
FACTORIES = "tests.adapters.mcp_factories"


def run(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    code = main(["serve", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(result: tuple[int, str, str], says: str) -> None:
    code, out, err = result
    assert code == 2 and out == "", result
    assert err.startswith("recallpack: error: ") and err.count("\n") == 1 and says in err, err
    assert "Traceback" not in err and "max_tokens" not in err


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Stand in for serve(): record what it would serve instead of serving on this stdin."""
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(mcp_adapter, "serve", lambda source, **kw: calls.append({"source": source, **kw}))
    return calls


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        ((), "one of the arguments --docs --retriever is required"),
        (("--docs", "docs", "--retriever", "a:b"), "not allowed with argument"),
        (("--docs", "docs", "--max-tokens", "20000"), "--max-tokens 20000 is over the ceiling of 16384; add --max-tokens-ceiling 20000"),
        (("--docs", "docs", "--max-tokens", "0"), "--max-tokens must be at least 1"),
        (("--docs", "docs", "--ceiling", "x"), "'x' is not a whole number"),
        (("--docs", "docs", "--policy", "knapsack"), "invalid choice: 'knapsack'"),
        (("--docs", "docs", "--tokenizer", "no-such-encoding"), "--encoding 'no-such-encoding' is not an encoding"),
        (("--docs", "docs", "--host", "0.0.0.0"), "--host and --port are for --transport http"),
        (("--docs", "docs", "--port", "9000"), "--host and --port are for --transport http"),
        (("--retriever", f"{FACTORIES}:slow", "--window-tokens", "100"), "--window-tokens is for --docs"),
        (("--retriever", f"{FACTORIES}:slow", "--fetch-k", "5"), "--fetch-k is for --docs"),
        (("--retriever", f"{FACTORIES}:slow", "--index", "idx"), "--index is for --docs"),
        (("--docs", "docs", "--index", "README.md"), "--index 'README.md' is a file; give a folder"),
        (("--docs", "docs", "--scope", "=team"), "--scope '=team' must be ID, ID=NAME or ID=NAME:DESCRIPTION"),
        (("--docs", "docs", "--scope", "org-1="), "must be ID, ID=NAME or ID=NAME:DESCRIPTION"),
        (("--docs", "docs", "--show-scoped", "--reader", "u-1"), "--show-scoped shows every item"),
        (("--docs", "docs", "--window-tokens", "50", "--overlap-tokens", "50"), "--overlap-tokens 50 must be less than --window-tokens 50"),
        (("--docs", "docs", "--window-tokens", "10"), "--overlap-tokens 20 must be less than --window-tokens 10"),
        (("--docs", "no/such/folder"), "'no/such/folder' is not a folder"),
        (("--docs", "recallpack/_bench"), "has no text or Markdown files (looked for .md"),
        (("--transport", "sse", "--docs", "docs"), "invalid choice: 'sse'"),
        (("--docs", "docs", "--tokens", "t.yaml"), "--tokens is for --transport http"),
        (("--docs", "docs", "--public"), "--public is for --transport http"),
        (("--docs", "docs", "--transport", "http", "--tokens", "t.yaml", "--reader", "u-1"), "drop --reader"),
        (("--docs", "docs", "--transport", "http", "--tokens", "t.yaml", "--public"), "drop --reader, --scope, --show-scoped and --public"),
        (("--docs", "docs", "--transport", "http", "--jwt-key", "k.pem", "--jwks", "k.json"), "give one of --jwt-key and --jwks"),
        (("--docs", "docs", "--transport", "http", "--tokens", "t.yaml", "--issuer", "https://id.example"), "add --jwt-key or --jwks"),
        (("--docs", "docs", "--transport", "http", "--jwt-key", "k.pem", "--issuer", "https://id.example"), "need --issuer URL and --audience AUD"),
        (("--docs", "docs", "--transport", "http", "--tokens", "no/such/tokens.yaml"), "--tokens 'no/such/tokens.yaml' cannot be read"),
        (("--docs", "docs", "--transport", "http", "--tokens", "README.md"), "is not YAML or JSON"),
        (("--docs", "docs", "--transport", "http", "--jwt-key", "README.md", "--issuer", "https://id.example", "--audience", "recall"), "--jwt-key 'README.md' is not a PEM public key"),
        (("--docs", "docs", "--max-sessions-per-caller", "4"), "--max-sessions-per-caller is for --transport http"),
        (("--docs", "docs", "--session-idle-timeout", "60"), "--session-idle-timeout is for --transport http"),
        (("--docs", "docs", "--transport", "http", "--max-sessions-per-caller", "0"), "--max-sessions-per-caller must be at least 1"),
        (("--docs", "docs", "--transport", "http", "--session-idle-timeout", "0"), "must be a positive number of seconds"),
        (("--docs", "docs", "--transport", "http", "--session-idle-timeout", "inf"), "must be a positive number of seconds"),
        (("--docs", "docs", "--log-level", "loud"), "invalid choice: 'loud'"),
    ],
)
def test_flag_mistakes_are_one_line(monkeypatch, capsys, served, argv: tuple[str, ...], says: str) -> None:
    """Each mistake in serve's flags exits 2 with one line naming it; nothing is served."""
    monkeypatch.chdir(ROOT)
    one_line_error(run(monkeypatch, capsys, *argv), says)
    assert served == []


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        (FACTORIES, "must be module:factory"),
        (f"{FACTORIES}:", "must be module:factory"),
        (f"{FACTORIES}:a-b", "must be module:factory"),
        ("no_such_module_here:make", "no module named 'no_such_module_here'; run from the folder that holds it"),
        (f"{FACTORIES}:langchain_bm2", "has no 'langchain_bm2'; did you mean 'langchain_bm25'?"),
        (f"{FACTORIES}:NOT_CALLABLE", "mcp_factories.NOT_CALLABLE is a int, not a function or class to call"),
        (f"{FACTORIES}:raises", "raised ValueError: the factory needs INDEX_PATH set"),
        (f"{FACTORIES}:not_a_retriever", "returned a dict; it must return a LangChain retriever"),
        (f"{FACTORIES}:already_wrapped", "returned a recallpack BudgetedRetriever; return the retriever it wraps"),
    ],
)
def test_a_bad_factory_is_one_line(monkeypatch, capsys, served, spec: str, says: str) -> None:
    """Each way a --retriever spec can be wrong exits 2 with one line that says which."""
    monkeypatch.chdir(ROOT)
    one_line_error(run(monkeypatch, capsys, "--retriever", spec), says)
    assert served == []


def test_flags_reach_the_packer_by_their_names(monkeypatch, capsys, served) -> None:
    """--max-tokens, --ceiling, --max-items, --policy, --tokenizer and the reader reach the Packer."""
    monkeypatch.chdir(ROOT)
    code, out, err = run(
        monkeypatch, capsys, "--docs", "docs", "--max-tokens", "900", "--ceiling", "4000", "--max-items", "3",
        "--policy", "truncate", "--tokenizer", "o200k_base", "--reader", "u-1", "--scope", "org-1=book-club:Book club",
        "--scope", "org-2", "--window-tokens", "80", "--overlap-tokens", "0", "--transport", "http", "--port", "9100",
    )
    assert code == 0 and out == "" and "windows from docs; serving recall on http://127.0.0.1:9100/mcp" in err
    [call] = served
    packer = call["source"].packer
    assert (packer.max_tokens, packer.max_tokens_ceiling, packer.max_items, packer.policy) == (900, 4000, 3, "truncate")
    assert packer.tokenizer_used.name == "o200k_base"
    assert packer.reader == Reader(id="u-1", scopes={"org-1": Scope(name="book-club", description="Book club"),
                                                     "org-2": Scope(name="org-2")})
    assert (call["transport"], call["host"], call["port"]) == ("http", "127.0.0.1", 9100)


def test_session_limits_reach_serve(monkeypatch, capsys, served) -> None:
    """--max-sessions-per-caller and --session-idle-timeout reach serve(); without them, serve's defaults hold."""
    monkeypatch.chdir(ROOT)
    flags = ("--docs", "docs", "--transport", "http")
    assert run(monkeypatch, capsys, *flags, "--max-sessions-per-caller", "5", "--session-idle-timeout", "2.5")[0] == 0
    assert run(monkeypatch, capsys, *flags)[0] == 0
    limited, plain = served
    assert (limited["max_sessions_per_caller"], limited["session_idle_timeout"]) == (5, 2.5)
    assert "max_sessions_per_caller" not in plain and "session_idle_timeout" not in plain


def test_defaults_and_the_open_reader(monkeypatch, capsys, served) -> None:
    """Without flags: 2048 of at most 16384, cl100k_base, prefix, stdio; --show-scoped is everyone."""
    monkeypatch.chdir(ROOT)
    code, _, err = run(monkeypatch, capsys, "--docs", "docs", "--show-scoped")
    packer = served[0]["source"].packer
    assert code == 0 and "serving recall on stdio" in err and served[0]["transport"] == "stdio"
    assert (packer.max_tokens, packer.max_tokens_ceiling, packer.policy) == (2048, 16384, "passages")
    assert packer.tokenizer_used.name == "cl100k_base" and packer.reader == Reader.everyone()


def test_a_receipt_key_too_short_fails_before_serving(monkeypatch, capsys, served) -> None:
    """A $RECALLPACK_RECEIPT_KEY that cannot key a receipt is one line, before anything is built."""
    monkeypatch.setenv("RECALLPACK_RECEIPT_KEY", "short")
    monkeypatch.chdir(ROOT)
    one_line_error(run(monkeypatch, capsys, "--docs", "docs"), "$RECALLPACK_RECEIPT_KEY is 5 bytes")
    assert served == []


def test_an_ipv6_host_is_named_in_brackets(monkeypatch, capsys, served) -> None:
    """--host ::1 is announced as http://[::1]:PORT/mcp, a URL a client can use."""
    monkeypatch.chdir(ROOT)
    code, _, err = run(monkeypatch, capsys, "--docs", "docs", "--transport", "http", "--host", "::1")
    assert code == 0 and "serving recall on http://[::1]:8000/mcp" in err and "warning" not in err


def test_a_reachable_host_needs_auth_or_public(monkeypatch, capsys, served) -> None:
    """--host other than loopback without auth is refused; --public serves it, with a warning."""
    monkeypatch.chdir(ROOT)
    refused = run(monkeypatch, capsys, "--docs", "docs", "--transport", "http", "--host", "0.0.0.0")
    one_line_error(refused, "--host 0.0.0.0 is reachable from other machines, and nothing authenticates")
    assert served == []
    code, _, err = run(monkeypatch, capsys, "--docs", "docs", "--transport", "http", "--host", "0.0.0.0", "--public")
    assert code == 0 and "recallpack: warning: --public: 0.0.0.0 is reachable from other machines" in err
    assert served[0]["host"] == "0.0.0.0" and served[0]["port"] == 8000 and served[0]["public"] is True
    assert served[0]["verifier"] is None


def test_without_the_extra_serve_says_to_install_it(monkeypatch, capsys) -> None:
    """With the MCP SDK missing, serve says which extra installs it (and nothing else fails)."""
    for name in [n for n in sys.modules if n == "mcp" or n.startswith("mcp.")]:
        monkeypatch.setitem(sys.modules, name, None)
    for name in [n for n in sys.modules if n.startswith("recallpack.adapters.mcp")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.delattr("recallpack.adapters.mcp")  # as on an install that never imported it
    monkeypatch.chdir(ROOT)
    one_line_error(run(monkeypatch, capsys, "--docs", "docs"), 'recallpack serve needs the mcp extra: ')
    _, _, err = run(monkeypatch, capsys, "--docs", "docs")
    from recallpack.adapters.shared.extras import install_command

    assert install_command("mcp") in err


def test_help_shows_the_client_configuration(capsys) -> None:
    """serve --help lists the flags and the command an MCP client is configured with."""
    assert main(["serve", "--help"]) == 0
    out = capsys.readouterr().out
    assert '"command": "recallpack", "args": ["serve", "--docs"' in out
    for flag in ("--docs", "--retriever", "--max-tokens", "--ceiling", "--policy", "--tokenizer", "--reader", "--scope"):
        assert flag in out


def test_the_readme_client_configuration_starts_a_server(monkeypatch, capsys, served) -> None:
    """The --docs entry of the README's MCP client configuration is a command serve accepts."""
    import json
    import re

    block = re.search(r"```json\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert block is not None
    config = json.loads(block.group(1))["mcpServers"]["recallpack-docs"]
    args = [("docs" if a == "/path/to/your/docs" else a) for a in config["args"]]
    assert config["command"] == "recallpack" and args[0] == "serve"
    monkeypatch.chdir(ROOT)
    code, _, err = run(monkeypatch, capsys, *args[1:])
    assert code == 0 and served and "serving recall on stdio" in err


def test_hash_token_prints_what_a_tokens_file_holds(monkeypatch, capsys) -> None:
    """hash-token hashes stdin's token; --new makes a token and prints its hash, which load_tokens reads."""
    import hashlib

    monkeypatch.setattr("sys.stdin", io.StringIO("s3cret-token\n"))
    assert main(["hash-token"]) == 0
    assert capsys.readouterr().out == f"sha256: {hashlib.sha256(b's3cret-token').hexdigest()}\n"
    assert main(["hash-token", "--new"]) == 0
    token_line, hash_line = capsys.readouterr().out.splitlines()
    token = token_line.removeprefix("token: ")
    assert len(token) >= 40 and hash_line == f"sha256: {hashlib.sha256(token.encode()).hexdigest()}"
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    assert main(["hash-token"]) == 2
    assert "reads the token from stdin" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("tokens", "says"),
    [
        ("tokens:\n  - token: abc\n    reader: u-1\n", "never the token (recallpack hash-token prints it)"),
        ("tokens:\n  - sha256: abc\n    reader: u-1\n", "tokens[0].sha256 must be 64 hex digits"),
        (f"tokens:\n  - sha256: {'a' * 64}\n", "tokens[0].reader must be the reader's id"),
        (f"tokens:\n  - {{sha256: {'a' * 64}, reader: u-1}}\n  - {{sha256: {'A' * 64}, reader: u-2}}\n", "tokens[1].sha256 is given twice"),
        (f"tokens:\n  - {{sha256: {'a' * 64}, reader: u-1, scope: [x]}}\n", "unknown keys ['scope']"),
        (f"tokens:\n  - {{sha256: {'a' * 64}, reader: u-1, scopes: [1]}}\n", "tokens[0].scopes must be a list of scope ids"),
        (f'{{"tokens": [{{"sha256": "{"a" * 64}", "reader": "u-1", "scopes": {{"org-1": {{"nam": "x"}}}}}}]}}', "may have name and description"),
        ("readers: []\n", "must hold a non-empty list under 'tokens:'"),
    ],
)
def test_a_bad_tokens_file_is_one_line(monkeypatch, capsys, served, tmp_path: Path, tokens: str, says: str) -> None:
    """Each mistake in a --tokens file (YAML or JSON) exits 2 naming the entry; nothing is served."""
    (tmp_path / "tokens.yaml").write_text(tokens)
    monkeypatch.chdir(ROOT)
    result = run(monkeypatch, capsys, "--docs", "docs", "--transport", "http", "--tokens", str(tmp_path / "tokens.yaml"))
    one_line_error(result, says)
    assert served == []


def test_a_tokens_file_reaches_serve_as_its_readers(monkeypatch, capsys, served, tmp_path: Path) -> None:
    """--tokens gives serve() a verifier whose tokens are the file's readers, with their scopes."""
    import hashlib

    import anyio

    digest = hashlib.sha256(b"t-1").hexdigest()
    (tmp_path / "t.json").write_text(
        f'{{"tokens": [{{"sha256": "{digest}", "reader": "u-1", "scopes": {{"org-1": {{"name": "one", "description": "Org one"}}}}}}]}}'
    )
    monkeypatch.chdir(ROOT)
    code, _, err = run(monkeypatch, capsys, "--docs", "docs", "--transport", "http", "--host", "0.0.0.0", "--tokens", str(tmp_path / "t.json"))
    assert code == 0 and "warning" not in err
    verifier = served[0]["verifier"]
    token = anyio.run(verifier.verify_token, "t-1")
    assert token.reader == Reader(id="u-1", scopes={"org-1": Scope(name="one", description="Org one")})
    assert anyio.run(verifier.verify_token, "t-2") is None and served[0]["source"].packer.reader is None
