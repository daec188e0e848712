"""``recallpack serve``: its flags, checked in their own words, and the server it starts
(recallpack/adapters/mcp/server.py does the work)."""

from __future__ import annotations

import argparse
import logging
import math
import os
import sys
import textwrap
from typing import Any

from recallpack import ConfigError, Reader, Scope
from recallpack._cli_input import UsageError, add_budget_flags, budget_settings, check_encoding, whole_number
from recallpack.allowance import resolve_key
from recallpack.packing.choosing.policies import policy_help, policy_names
from recallpack.packing.tokenizers import DEFAULT_ENCODING

__all__ = ["serve_parser", "hash_token_parser"]

#: The addresses only this machine reaches (recallpack.adapters.mcp.LOOPBACK, which needs the extra).
LOOPBACK = ("127.0.0.1", "localhost", "::1")
#: The flags that say who may call over HTTP, by their argparse names.
AUTH_FLAGS = {"tokens": "--tokens", "jwt_key": "--jwt-key", "jwks": "--jwks"}
JWT_FLAGS = {"issuer": "--issuer", "audience": "--audience", "reader_claim": "--reader-claim",
             "scopes_claim": "--scopes-claim"}  # fmt: skip


def serve_parser(commands: Any) -> None:
    """``recallpack serve``: the recall tool over MCP (recallpack/adapters/mcp/server.py does the work)."""
    serve = commands.add_parser(
        "serve",
        help="serve the recall tool over MCP, on a docs folder or your own retriever",
        description=textwrap.fill(
            "Serve an MCP server with one tool, recall(query, max_tokens), whose result is an "
            "evidence block that fits the budget, over the text and Markdown files of --docs DIR "
            "or the retriever --retriever module:factory returns. Needs the mcp extra.", 88
        ),
        epilog="""example MCP client configuration (the command and its arguments):
  {"command": "recallpack", "args": ["serve", "--docs", "/path/to/docs"]}

a team over HTTP, each caller reading as itself (see docs/mcp.md, "Serve a team"):
  recallpack serve --docs DIR --transport http --host 0.0.0.0 --tokens tokens.yaml

with RECALLPACK_RECEIPT_KEY set, every result carries a keyed receipt of its block.""",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    what = serve.add_mutually_exclusive_group(required=True)
    what.add_argument("--docs", metavar="DIR", help="serve the text and Markdown files under DIR (BM25)")
    what.add_argument(
        "--retriever", metavar="MODULE:FACTORY",
        help="serve the LangChain or LlamaIndex retriever that FACTORY() returns (imported as "
        "python -m would, from the current folder)",
    )
    _serve_packing_arguments(serve)
    _serve_more_arguments(serve)
    serve.set_defaults(run=_serve)


def _serve_packing_arguments(serve: argparse.ArgumentParser) -> None:
    add_budget_flags(
        serve,
        "the budget of a call that gives no max_tokens (default: %(default)s)",
        ("--max-tokens-ceiling", "--ceiling"),
        "the largest max_tokens a call may ask for (default: %(default)s)",
    )
    serve.add_argument(
        "--policy", choices=policy_names(), default="passages",
        help=f"what is kept when not everything fits: {policy_help()} (default: %(default)s)",
    )
    serve.add_argument(
        "--encoding", "--tokenizer", dest="encoding", default=None, metavar="NAME",
        help=f"what counts tokens: an encoding, a model name, or chars (default: {DEFAULT_ENCODING}; "
        "a LlamaIndex retriever: Settings.tokenizer when set)",
    )
    serve.add_argument("--reader", metavar="ID", help="the reader's own id: items in scope ID are theirs")
    serve.add_argument(
        "--scope", action="append", default=[], metavar="ID=NAME[:DESCRIPTION]",
        help="a scope the reader may read, shown as NAME; repeatable (default: none)",
    )
    serve.add_argument(
        "--show-scoped", action="store_true",
        help="show every item whatever its scopes, for a corpus that is not per reader "
        "(default: items with scopes the reader does not hold are withheld)",
    )


def _serve_more_arguments(serve: argparse.ArgumentParser) -> None:
    docs = serve.add_argument_group("--docs")
    docs.add_argument(
        "--window-tokens", type=whole_number("--window-tokens"), default=None, metavar="N",
        help="tokens per window the files are cut into (default: 200)",
    )
    docs.add_argument(
        "--overlap-tokens", type=whole_number("--overlap-tokens", 0), default=None, metavar="N",
        help="tokens a window repeats of the one before it (default: 20)",
    )
    docs.add_argument(
        "--fetch-k", type=whole_number("--fetch-k"), default=None, metavar="N",
        help="rank at most the N best windows (default: enough to fill 4 budgets, at least 10)",
    )
    docs.add_argument(
        "--language", default=None, metavar="CODE",
        help="how words are read for the search: auto (read from the folder's text), an ISO 639-1 "
        "code with a Snowball stemmer (en, ru, de...), or none (words as written; Chinese, "
        "Japanese and Thai are read by pairs of characters either way) (default: auto)",
    )
    docs.add_argument(
        "--progress", action="store_true", default=None,
        help="show the index build's progress on stderr (default: when stderr is a terminal)",
    )
    docs.add_argument(
        "--index", default=None, metavar="DIR",
        help="keep the index in DIR (a new or empty folder, or one it made), so that a restart "
        "indexes again only the files that changed, were added or removed (a change of encoding, "
        "window sizes or --language rebuilds it; an index that cannot be read is rebuilt, with a warning; "
        "default: index at every start, keep nothing)",
    )
    http = serve.add_argument_group("transport")
    http.add_argument(
        "--transport", choices=("stdio", "http"), default="stdio",
        help="stdio for a client that starts the server; http for MCP's streamable HTTP at "
        "http://HOST:PORT/mcp (default: %(default)s)",
    )
    http.add_argument("--host", default=None, help="with --transport http: the address (default: 127.0.0.1)")
    http.add_argument(
        "--port", type=whole_number("--port"), default=None, help="with --transport http (default: 8000)"
    )
    http.add_argument(
        "--public", action="store_true",
        help="serve a --host other than the loopback addresses without authentication: the data is "
        "public, and anyone who reaches it reads what the reader may",
    )
    http.add_argument(
        "--max-sessions-per-caller", type=whole_number("--max-sessions-per-caller"), default=None,
        metavar="N", help="with --transport http: the open sessions one caller (a token's reader; without "
        "authentication, an address) may hold; one more gets HTTP 429 (default: 32)",
    )
    http.add_argument(
        "--session-idle-timeout", type=_seconds, default=None, metavar="SECONDS",
        help="with --transport http: close a session that has had no request in flight for this long "
        "(default: 900)",
    )
    serve.add_argument(
        "--log-level", choices=LOG_LEVELS, default="info",
        help="what the server logs on stderr: info writes one line per HTTP request and one per "
        "refusal (never a token or a text), warning only refusals and problems (default: %(default)s)",
    )
    _serve_auth_arguments(serve)


#: ``--log-level``'s choices, for the ``recallpack`` logger.
LOG_LEVELS = ("debug", "info", "warning", "error")


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text} must be a positive number of seconds")
    return value


def _serve_auth_arguments(serve: argparse.ArgumentParser) -> None:
    auth = serve.add_argument_group(
        "authentication (--transport http; each call packs for its caller's reader)"
    )
    auth.add_argument(
        "--tokens", metavar="FILE",
        help="a YAML or JSON file of bearer token hashes (SHA-256, never tokens), each with its "
        "reader id and scopes (recallpack hash-token prints a token's hash)",
    )
    auth.add_argument("--jwt-key", metavar="FILE", help="the PEM public key an issuer signs JWTs with")
    auth.add_argument("--jwks", metavar="FILE", help="the issuer's JSON Web Key Set, saved as a file")
    auth.add_argument("--issuer", metavar="URL", help="with --jwt-key/--jwks: the iss a JWT must name")
    auth.add_argument("--audience", metavar="AUD", help="with --jwt-key/--jwks: the aud a JWT must name")
    auth.add_argument(
        "--reader-claim", metavar="NAME", help="the JWT claim with the reader's own id (default: sub)"
    )
    auth.add_argument(
        "--scopes-claim", metavar="NAME",
        help="the JWT claim with the reader's scopes: a list of ids, or ids to names (default: scope_ids)",
    )


def _serve_reader(args: argparse.Namespace) -> Reader | None:
    if args.show_scoped:
        if args.reader or args.scope:
            raise UsageError("--show-scoped shows every item; it cannot be combined with --reader or --scope")
        return Reader.everyone()
    if args.reader is None and not args.scope:
        return None
    scopes = {}
    for given in args.scope:
        scope_id, named, label = given.partition("=")
        name, _, description = label.partition(":") if named else (scope_id, "", "")
        if not scope_id.strip() or not name.strip():
            raise UsageError(
                f"--scope {given!r} must be ID, ID=NAME or ID=NAME:DESCRIPTION, such as org-1=book-club"
            )
        scopes[scope_id] = Scope(name=name, description=description)
    return Reader(id=args.reader, scopes=scopes)


def _check_auth_flags(args: argparse.Namespace) -> bool:
    """Whether callers are authenticated; each mix of flags that cannot work is a UsageError."""
    given = [flag for name, flag in {**AUTH_FLAGS, **JWT_FLAGS}.items() if getattr(args, name) is not None]
    if args.transport != "http":
        if given or args.public:
            raise UsageError(
                f"{(given or ['--public'])[0]} is for --transport http; stdio serves the one client that "
                "starts it, as the reader --reader names"
            )
        return False
    authenticated = any(getattr(args, name) is not None for name in AUTH_FLAGS)
    if authenticated and (args.reader or args.scope or args.show_scoped or args.public):
        raise UsageError(
            "with --tokens, --jwt-key or --jwks each caller reads as its token's reader; drop --reader, "
            "--scope, --show-scoped and --public"
        )
    if args.jwt_key is not None and args.jwks is not None:
        raise UsageError("give one of --jwt-key and --jwks, the issuer's key or its key set")
    jwt_key = args.jwt_key or args.jwks
    if jwt_key is None and any(getattr(args, name) is not None for name in JWT_FLAGS):
        raise UsageError("--issuer, --audience and the claim flags are for JWTs: add --jwt-key or --jwks")
    if jwt_key is not None and (not args.issuer or not args.audience):
        raise UsageError("--jwt-key and --jwks need --issuer URL and --audience AUD, which a JWT must name")
    host = args.host or "127.0.0.1"
    if not authenticated and not args.public and host not in LOOPBACK:
        raise UsageError(
            f"--host {host} is reachable from other machines, and nothing authenticates callers: add "
            "--tokens FILE or --jwt-key/--jwks (each caller reads as itself), or --public if the data "
            "is public"
        )
    return authenticated


def _serve_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The Packer settings of ``serve``'s flags, checked in the flags' own words."""
    settings = budget_settings(args)
    if args.transport != "http" and (args.host is not None or args.port is not None):
        raise UsageError("--host and --port are for --transport http; stdio needs neither")
    limits = {"--max-sessions-per-caller": args.max_sessions_per_caller,
              "--session-idle-timeout": args.session_idle_timeout}  # fmt: skip
    for flag, value in limits.items():
        if value is not None and args.transport != "http":
            raise UsageError(f"{flag} is for --transport http; stdio serves one client in one session")
    _check_auth_flags(args)
    docs_only = {"--window-tokens": args.window_tokens, "--overlap-tokens": args.overlap_tokens,
                 "--fetch-k": args.fetch_k, "--index": args.index, "--language": args.language,
                 "--progress": args.progress}  # fmt: skip
    for flag, value in docs_only.items():
        if value is not None and args.docs is None:
            raise UsageError(f"{flag} is for --docs; a --retriever factory sets up its own retriever")
    if args.language is not None and args.language.lower() != "none":
        _check_language(args.language)
    settings["reader"] = _serve_reader(args)
    if args.encoding is not None:
        check_encoding(args.encoding)
        settings["tokenizer"] = args.encoding
    return settings


def _check_language(value: str) -> None:
    """``--language``: auto, or a language with a Snowball stemmer (none is read before)."""
    from recallpack.packing.reading.languages import STEMMED_LANGUAGES, check_language

    try:
        check_language(value)
    except ConfigError:
        raise UsageError(
            f"--language {value!r} is not auto, none or a language with a Snowball stemmer: give one "
            f"of {', '.join(sorted(STEMMED_LANGUAGES))} (none reads words as written)"
        ) from None


def _serve(args: argparse.Namespace) -> int:
    settings = _serve_settings(args)
    resolve_key()  # a receipt key that cannot be used fails now, not once the server is up
    try:
        from recallpack.adapters import mcp as server
    except ModuleNotFoundError as exc:
        if "recallpack[" not in str(exc):
            raise
        raise UsageError(f"recallpack serve needs the mcp extra: {exc}") from None
    verifier = _verifier(args)
    if args.docs is not None:
        window = args.window_tokens or server.DEFAULT_WINDOW_TOKENS
        overlap = server.DEFAULT_OVERLAP_TOKENS if args.overlap_tokens is None else args.overlap_tokens
        if overlap >= window:
            raise UsageError(
                f"--overlap-tokens {overlap} must be less than --window-tokens {window}: a window "
                "repeats only part of the one before it"
            )
        language = args.language or "auto"
        source = server.docs_source(
            args.docs, window_tokens=window, overlap_tokens=overlap, fetch_k=args.fetch_k,
            index_dir=args.index, language=None if language.lower() == "none" else language,
            show_progress=sys.stderr.isatty() if args.progress is None else args.progress, **settings,
        )
    else:
        # As python -m does: the factory's module is found from the current folder.
        if os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
        source = server.retriever_source(server.load_factory(args.retriever), **settings)
    host, port = args.host or "127.0.0.1", args.port or 8000
    address = f"[{host}]" if ":" in host else host  # an IPv6 address, as a URL writes it
    where = f"http://{address}:{port}/mcp" if args.transport == "http" else "stdio"
    print(f"recallpack serve: {source.summary}; serving recall on {where}", file=sys.stderr)
    for warning in (source.warning or "").splitlines():
        print(f"recallpack: warning: {warning}", file=sys.stderr)
    if args.transport == "stdio" and sys.stdin.isatty():
        print(
            "recallpack serve: an MCP client starts this command and speaks JSON-RPC on its stdin "
            "and stdout (see recallpack serve --help); end its input (Ctrl-D) to stop it",
            file=sys.stderr,
        )
    if args.public and host not in LOOPBACK:
        print(
            f"recallpack: warning: --public: {host} is reachable from other machines and nothing "
            "authenticates callers: anyone who can reach it reads what the reader may read",
            file=sys.stderr,
        )
    # A server is an application: its log (a failing retriever's traceback) goes to stderr.
    # The library itself adds only a NullHandler, so without this nobody would see it.
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    # Only recallpack's own records follow --log-level: other libraries' stay at WARNING.
    logging.getLogger("recallpack").setLevel(args.log_level.upper())
    limits = {}
    if args.max_sessions_per_caller is not None:
        limits["max_sessions_per_caller"] = args.max_sessions_per_caller
    if args.session_idle_timeout is not None:
        limits["session_idle_timeout"] = args.session_idle_timeout
    server.serve(
        source, transport=args.transport, host=host, port=port, verifier=verifier, public=args.public,
        **limits,
    )
    return 0


def _verifier(args: argparse.Namespace) -> Any:
    """The bearer-token verifier of the auth flags (None without them), its files read now."""
    if args.tokens is None and args.jwt_key is None and args.jwks is None:
        return None
    from recallpack.adapters.mcp import auth as mcp_auth

    jwt = None
    if args.jwt_key is not None or args.jwks is not None:
        jwt = mcp_auth.JwtSettings(
            issuer=args.issuer, audience=args.audience, key_file=args.jwt_key, jwks_file=args.jwks,
            reader_claim=args.reader_claim or "sub", scopes_claim=args.scopes_claim or "scope_ids",
        )
    tokens = mcp_auth.load_tokens(args.tokens) if args.tokens is not None else None
    return mcp_auth.ReaderVerifier(tokens, jwt)


def hash_token_parser(commands: Any) -> None:
    """``recallpack hash-token``: what a tokens file holds in place of a bearer token."""
    hashing = commands.add_parser(
        "hash-token",
        help="print the SHA-256 of a bearer token (read from stdin) for serve's --tokens file",
        description="Read a bearer token from stdin (one line) and print its SHA-256, the hash a "
        "--tokens file holds in its place; or, with --new, make a new random token and print both.",
    )
    hashing.add_argument("--new", action="store_true", help="make a new random token and print it too")
    hashing.set_defaults(run=_hash_token)


def _hash_token(args: argparse.Namespace) -> int:
    import hashlib
    import secrets

    if args.new:
        token = secrets.token_urlsafe(32)
        print(f"token: {token}")
    else:
        token = sys.stdin.readline().rstrip("\r\n")
        if not token.strip():
            raise UsageError("hash-token reads the token from stdin: echo \"$TOKEN\" | recallpack hash-token")
    print(f"sha256: {hashlib.sha256(token.encode('utf-8')).hexdigest()}")
    return 0
