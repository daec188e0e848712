"""``recallpack serve``: its flags, checked in their own words, and the server it starts
(recallpack/adapters/mcp.py does the work)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import textwrap
from typing import Any

from recallpack import (
    POLICIES,
    Reader,
    Scope,
)
from recallpack._cli_input import UsageError, add_budget_flags, budget_settings, check_encoding, whole_number
from recallpack.allowance import resolve_key
from recallpack.packing.tokenizers import DEFAULT_ENCODING

__all__ = ["serve_parser"]


def serve_parser(commands: Any) -> None:
    """``recallpack serve``: the recall tool over MCP (recallpack/adapters/mcp.py does the work)."""
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
        "--policy", choices=POLICIES, default="passages",
        help="passages spends the budget on the passages that best answer each query, across the "
        "documents; the others as for pack (default: %(default)s)",
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
        help="pack at most the N best matches (default: every match)",
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


def _serve_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The Packer settings of ``serve``'s flags, checked in the flags' own words."""
    settings = budget_settings(args)
    if args.transport != "http" and (args.host is not None or args.port is not None):
        raise UsageError("--host and --port are for --transport http; stdio needs neither")
    docs_only = {"--window-tokens": args.window_tokens, "--overlap-tokens": args.overlap_tokens,
                 "--fetch-k": args.fetch_k}  # fmt: skip
    for flag, value in docs_only.items():
        if value is not None and args.docs is None:
            raise UsageError(f"{flag} is for --docs; a --retriever factory sets up its own retriever")
    settings["reader"] = _serve_reader(args)
    if args.encoding is not None:
        check_encoding(args.encoding)
        settings["tokenizer"] = args.encoding
    return settings


def _serve(args: argparse.Namespace) -> int:
    settings = _serve_settings(args)
    resolve_key()  # a receipt key that cannot be used fails now, not once the server is up
    try:
        from recallpack.adapters import mcp as server
    except ModuleNotFoundError as exc:
        if "recallpack[" not in str(exc):
            raise
        raise UsageError(f"recallpack serve needs the mcp extra: {exc}") from None
    if args.docs is not None:
        window = args.window_tokens or server.DEFAULT_WINDOW_TOKENS
        overlap = server.DEFAULT_OVERLAP_TOKENS if args.overlap_tokens is None else args.overlap_tokens
        if overlap >= window:
            raise UsageError(
                f"--overlap-tokens {overlap} must be less than --window-tokens {window}: a window "
                "repeats only part of the one before it"
            )
        source = server.docs_source(
            args.docs, window_tokens=window, overlap_tokens=overlap, fetch_k=args.fetch_k, **settings
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
    if source.warning is not None:
        print(f"recallpack: warning: {source.warning}", file=sys.stderr)
    if args.transport == "stdio" and sys.stdin.isatty():
        print(
            "recallpack serve: an MCP client starts this command and speaks JSON-RPC on its stdin "
            "and stdout (see recallpack serve --help); end its input (Ctrl-D) to stop it",
            file=sys.stderr,
        )
    if args.transport == "http" and host not in ("127.0.0.1", "localhost", "::1"):
        print(
            f"recallpack: warning: {host} is reachable from other machines and the server has no "
            "authentication: anyone who can reach it reads what the reader may read",
            file=sys.stderr,
        )
    # A server is an application: its log (a failing retriever's traceback) goes to stderr.
    # The library itself adds only a NullHandler, so without this nobody would see it.
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    server.serve(source, transport=args.transport, host=host, port=port)
    return 0
