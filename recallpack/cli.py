"""``recallpack pack`` and ``recallpack doctor``: the library from a shell.

Whatever goes wrong reaches the user as one line on stderr and exit status 2: a file that
cannot be read, a line that is not a candidate (named by the file's own line number), a flag
out of range (named by its flag). The core's error messages are written for Python callers
(``max_tokens_ceiling=``, ``candidates[1]``), so this module checks what it can itself and
rewords the rest in the words of the command line.
"""

from __future__ import annotations

import argparse
import codecs
import json
import logging
import os
import re
import sys
import textwrap
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from recallpack import (
    DEFAULT_MAX_TOKENS,
    MAX_TOKENS_CEILING,
    POLICIES,
    Candidate,
    LaneKind,
    Reader,
    RecallpackError,
    RecallpackWarning,
    Scope,
    get_tokenizer,
    recall,
    resolve_encoding,
)
from recallpack.allowance import resolve_key
from recallpack.packing.tokenizer import DEFAULT_ENCODING, fallback_advice
from recallpack.packing.validation import did_you_mean

__all__ = ["main"]

DOCTOR_ENCODINGS = ("cl100k_base", "o200k_base")
EXAMPLE_LINE = '{"text": "Alice moved to the Berlin office in March.", "lane": "facts", "score": 0.92}'
LANES = ", ".join(kind.value for kind in LaneKind)
#: Every field a JSON Lines candidate may have: (JSON type, what it is). pack --help shows these.
FIELDS: dict[str, tuple[str, str]] = {
    "text": ("string", "the retrieved text (required)"),
    "lane": ("string", f"where it was found: {LANES} (default: sources)"),
    "score": ("number", "the retriever's score, kept in the trace (never rendered)"),
    "artifact_id": ("string", "the document it came from"),
    "artifact_content_id": ("string", "which version or chunk of it (with artifact_id: the resource line)"),
    "citation": ("string", "where it can be found again (a path, a URL), for the resource line"),
    "scope_ids": (
        "array of strings",
        "the scopes (whose memory) it belongs to, at least one (leave it out if none); withheld: no reader",
    ),
    "metadata": ("object", "anything else from the retriever, kept as is"),
    "modality": ("string", 'what the item is (default: "text")'),
    "content": ("string", "its own content when text adds framing around it: duplicates are found by it"),
    "span": (
        "object",
        'where the text sits in the document it was split from, {"parent": "guide.md", "start": 0, '
        '"end": 812}: --policy passages shows overlapping pieces of one document once',
    ),
}
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what shells report for Ctrl-C


class UsageError(Exception):
    """One line for the user; main() prints it and exits 2."""


@dataclass(frozen=True)
class _Line:
    number: int
    fields: dict[str, Any]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # argparse prints its usage block before the message; one line says the same.
        raise UsageError(f"{message}{_suggestion(self, message)} (see {self.prog} --help)")


def _suggestion(parser: argparse.ArgumentParser, message: str) -> str:
    """"; did you mean --format?" for a mistyped flag (the closest flag of any command) or
    command, compared without the dashes, which every flag shares."""
    choice = re.match(r"argument .*: invalid choice: '([^']*)' \(choose from (.*)\)", message)
    if choice:
        wanted, names = choice.group(1), re.findall(r"'([^']*)'", choice.group(2))
        close = did_you_mean(wanted, names, cutoff=0.7)
        return f"; did you mean {close}?" if close else ""
    if not message.startswith("unrecognized arguments:"):
        return ""
    flags = {flag.lstrip("-"): flag for flag in _flags(parser)}
    given = [word for word in message.split(":", 1)[1].split() if word.startswith("--")]
    hints = []
    for word in given:
        close = did_you_mean(word.split("=", 1)[0].lstrip("-"), flags, cutoff=0.7)
        if close:
            hints.append(flags[close] if len(given) == 1 else f"{flags[close]} for {word}")
    return f"; did you mean {', '.join(hints)}?" if hints else ""


def _flags(parser: argparse.ArgumentParser) -> list[str]:
    """Every long flag of ``parser`` and of its commands."""
    flags: list[str] = []
    for action in parser._actions:  # argparse keeps its actions here; there is no public list
        flags += [flag for flag in action.option_strings if flag.startswith("--")]
        if isinstance(action, argparse._SubParsersAction):
            for command in action.choices.values():
                flags += _flags(command)
    return sorted(set(flags))


def _version() -> str:
    try:
        from importlib.metadata import PackageNotFoundError, version

        return version("recallpack")
    except PackageNotFoundError:  # run from a source tree that was never installed
        import recallpack

        return str(getattr(recallpack, "__version__", "unknown"))


def _whole_number(flag: str, minimum: int = 1) -> Any:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{value} is too small: {flag} must be at least {minimum}")
        return value

    return parse


def _check_encoding(name: str) -> None:
    try:
        get_tokenizer(name)
    except RecallpackError:
        raise UsageError(
            f"--encoding {name!r} is not an encoding or a model name; use cl100k_base, o200k_base, "
            "a model name such as gpt-4o, or chars (recallpack doctor lists what resolves here)"
        ) from None


# -- reading candidates -------------------------------------------------------------------------


def _read_bytes(path: str) -> tuple[str, bytes]:
    """``(name for messages, content)`` of a file, or of stdin for ``-``."""
    if path == "-":
        if sys.stdin.isatty():
            print(
                "recallpack pack: reading candidates from the terminal, one JSON object per line; "
                "end with Ctrl-D (or give a file: recallpack pack FILE)",
                file=sys.stderr,
            )
        buffer = getattr(sys.stdin, "buffer", None)
        data = buffer.read() if buffer is not None else sys.stdin.read().encode("utf-8", "surrogateescape")
        return "<stdin>", data
    try:
        with open(path, "rb") as handle:
            return path, handle.read()
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise UsageError(f"{path}: is a directory; give a JSON Lines file, one candidate per line") from None
    except PermissionError:
        raise UsageError(f"{path}: permission denied; the file is not readable by this user") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot be read ({exc.strerror or exc})") from None


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


def _whole_file_hint(text: str) -> str:
    """A more useful message when the file is JSON, just not JSON Lines."""
    try:
        whole = json.loads(text)
    except (ValueError, RecursionError):
        return ""
    if isinstance(whole, list):
        return "the file is one JSON array: write one object per line, for example with jq -c '.[]'"
    if isinstance(whole, dict):
        return "the file is one JSON object spread over several lines; write each candidate on one line"
    return ""


def _parse_lines(name: str, data: bytes) -> list[_Line]:
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise UsageError(f"{name}: is UTF-16 text; save it as UTF-8")
    if b"\x00" in data:
        raise UsageError(f"{name}: is a binary file (it contains NUL bytes), not JSON Lines text")
    data = data.removeprefix(codecs.BOM_UTF8)
    lines = []
    # JSON Lines separates records by "\n" only; a U+2028 inside a string is not a line break.
    for number, raw in enumerate(data.split(b"\n"), start=1):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise UsageError(
                f"{name}:{number}: is not UTF-8 text (byte 0x{raw[exc.start]:02x} at column "
                f"{exc.start + 1}); save the file as UTF-8"
            ) from None
        if not text.strip():
            continue
        try:
            item = json.loads(text)
        except json.JSONDecodeError as exc:
            hint = _whole_file_hint(data.decode("utf-8", "replace"))
            raise UsageError(
                f"{name}:{number}: not valid JSON ({exc.msg} at column {exc.colno}); "
                + (hint or f"each line must be one JSON object, such as {EXAMPLE_LINE}")
            ) from None
        except (ValueError, RecursionError) as exc:  # a 5,000-digit number, or [[[[...]]]]
            reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
            raise UsageError(f"{name}:{number}: not usable JSON ({reason})") from None
        if not isinstance(item, dict):
            hint = _whole_file_hint(data.decode("utf-8", "replace")) if isinstance(item, list) else ""
            raise UsageError(
                f"{name}:{number}: a line must be one JSON object, such as {EXAMPLE_LINE}; "
                f"this one is {_json_type(item)}" + (f" ({hint})" if hint else "")
            )
        lines.append(_Line(number, item))
    return lines


def _check_fields(where: str, fields: dict[str, Any]) -> None:
    for key in fields:
        if key not in FIELDS:
            close = did_you_mean(key, FIELDS)
            hint = f'did you mean "{close}"? ' if close else ""
            raise UsageError(f'{where}: unknown field "{key}"; {hint}the fields are: {", ".join(FIELDS)}')
    if "text" not in fields:
        raise UsageError(
            f'{where}: no "text" field; every line needs the retrieved text, such as {EXAMPLE_LINE}'
        )
    expected = {
        "text": (str,),
        "lane": (str,),
        "score": (int, float, type(None)),
        "artifact_id": (str, type(None)),
        "artifact_content_id": (str, type(None)),
        "citation": (str, type(None)),
        "scope_ids": (list, str),
        "metadata": (dict,),
        "modality": (str,),
        "content": (str, type(None)),
        "span": (dict, type(None)),
    }
    for key, value in fields.items():
        wrong = not isinstance(value, expected[key]) or (key == "score" and isinstance(value, bool))
        if key == "scope_ids" and isinstance(value, list):
            wrong = not all(isinstance(scope, str) for scope in value)
        if wrong:
            raise UsageError(f'{where}: "{key}" must be {_article(FIELDS[key][0])}, not {_json_type(value)}')
    lane = fields.get("lane")
    if isinstance(lane, str) and lane.strip().lower() not in {kind.value for kind in LaneKind}:
        raise UsageError(f'{where}: "lane" is {lane!r}, which is not a lane; use one of: {LANES}')


def _article(kind: str) -> str:
    return ("an " if kind[0] in "aeiou" else "a ") + kind


def _candidates(name: str, lines: list[_Line]) -> list[Candidate]:
    out = []
    for line in lines:
        where = f"{name}:{line.number}"
        _check_fields(where, line.fields)
        try:
            out.append(Candidate(**line.fields))
        except (RecallpackError, ValueError) as exc:  # a check the core has and this module lacks
            raise UsageError(f"{where}: {_shell_words(exc, name, lines)}") from None
    return out


# -- the core's messages, in the command line's words -------------------------------------------

_FLAG_OF = {
    "max_tokens_ceiling": "--max-tokens-ceiling",
    "max_tokens": "--max-tokens",
    "max_items": "--max-items",
    "policy": "--policy",
    "tokenizer": "--encoding",
}


def _shell_words(error: Exception, name: str, lines: Sequence[_Line]) -> str:
    """A core error in a shell user's words: the file line for the candidate it names (its
    ``index``), flags for the settings it names (its ``field``, and the fix it suggests)."""
    message = str(error).replace("invalid Candidate: ", "")
    index, field = getattr(error, "index", None), getattr(error, "field", None)
    if index is not None and index < len(lines):
        where, said = f"{name}:{lines[index].number}", f"candidates[{index}]"
        said_where = message.startswith(said)
        message = where + message.removeprefix(said) if said_where else f"{where}: {message}"
    for spec in (", or a callable str -> int", " or a callable str -> int", " a callable str -> int"):
        message = message.replace(spec, "")  # the shell has --encoding, never a callable
    message = message.replace("must be None (no cap) or an int", "must be a whole number")
    # The field first, then any other setting the fix names (a budget's ceiling, a tokenizer).
    for keyword in sorted(_FLAG_OF, key=lambda setting: (setting != field, -len(setting))):
        flag = _FLAG_OF[keyword]
        message = message.replace(f"pass {keyword}=", f"add {flag} ").replace(f"{keyword}=", f"{flag} ")
    return message


# -- commands -----------------------------------------------------------------------------------


def _doctor(args: argparse.Namespace) -> int:
    fallback = False
    for name in dict.fromkeys(args.encoding or DOCTOR_ENCODINGS):  # each asked once, in order
        if name in ("chars", "heuristic"):  # an estimate by choice: nothing to resolve
            fallback = True
            print(f"{name}: ESTIMATE (characters / 4, rounded up; no vocabulary)")
            continue
        try:
            with warnings.catch_warnings():
                # The fallback's warning says what the FALLBACK line and its fix below say.
                warnings.simplefilter("ignore", RecallpackWarning)
                resolution = resolve_encoding(name)
        except RecallpackError:
            _check_encoding(name)  # says it in the flag's words
            raise
        fallback |= not resolution.exact
        status = "exact" if resolution.exact else "FALLBACK"
        label = name if name == resolution.encoding else f"{name} -> {resolution.encoding}"
        print(f"{label}: {status} ({resolution.source})")
        if not resolution.exact:
            print(f"  to count {resolution.encoding} exactly: {fallback_advice(resolution.encoding)}")
    if fallback and args.require_exact:
        print(
            "recallpack doctor: an encoding falls back to the heuristic (--require-exact)",
            file=sys.stderr,
        )
        return 1
    return 0


def _pack(args: argparse.Namespace) -> int:
    if args.max_tokens > args.max_tokens_ceiling:
        raise UsageError(
            f"--max-tokens {args.max_tokens} is over the ceiling of {args.max_tokens_ceiling}; add "
            f"--max-tokens-ceiling {args.max_tokens} if one request should really take that much"
        )
    _check_encoding(args.encoding)
    name, data = _read_bytes(args.file)
    lines = _parse_lines(name, data)
    candidates = _candidates(name, lines)
    try:
        result = recall(
            candidates,
            max_tokens=args.max_tokens,
            max_items=args.max_items,
            policy=args.policy,
            tokenizer=args.encoding,
            max_tokens_ceiling=args.max_tokens_ceiling,
            query=args.query,
            reader=Reader.everyone() if args.show_scoped else None,
        )
    except RecallpackError as exc:
        raise UsageError(_shell_words(exc, name, lines)) from None
    if args.format == "json":
        # The block is what tokens_used counts: the same bytes the markdown format prints.
        output = {**result.to_dict(), "markdown": result.to_markdown()}
        sys.stdout.write(json.dumps(output, ensure_ascii=False, indent=2) + "\n")
    else:
        sys.stdout.write(result.to_markdown())
    sys.stdout.flush()
    if not candidates:
        print(f"recallpack: note: {name} has no candidates (it is empty or blank)", file=sys.stderr)
    elif args.format != "json":
        print(result.report.summary(), file=sys.stderr)
    scoped = result.report.reasons.get("no_reader", 0)
    if scoped:
        lines_word = "line carries" if scoped == 1 else "lines carry"
        print(
            f"recallpack: note: {scoped} {lines_word} scope_ids and {'was' if scoped == 1 else 'were'} "
            "withheld (the shell has no reader); add --show-scoped to show them",
            file=sys.stderr,
        )
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="recallpack",
        description="Fit retrieved context to a token budget: pack candidates into an evidence block.",
        epilog="Exit status: 0 done, 1 doctor --require-exact found a fallback, 2 bad input or flag "
        "(one line on stderr), 130 interrupted.",
    )
    parser.add_argument("--version", action="version", version=f"recallpack {_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="{pack,doctor,serve}")

    fields = "\n".join(
        textwrap.fill(f"{kind}: {what}", 88, initial_indent=f"  {key:<21}", subsequent_indent=" " * 23)
        for key, (kind, what) in FIELDS.items()
    )
    pack = commands.add_parser(
        "pack",
        help="pack JSON Lines candidates into an evidence block",
        description=textwrap.fill(
            "Pack candidates, best first, into a Markdown evidence block that fits --max-tokens: "
            "the block on stdout, a one-line report on stderr.", 88
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=f"""input: JSON Lines, one candidate per line, best first (blank lines are skipped).
fields of a line (only "text" is required):
{fields}
example line:
  {EXAMPLE_LINE}

exit status: 0 packed; also 0 for an input with no candidates (a note on stderr says so)
and when stdout closes early (as with | head); 2 bad input or flag, said in one line on
stderr with the file and line or the flag; 130 interrupted.""",
    )
    _pack_arguments(pack)
    pack.set_defaults(run=_pack)

    doctor = commands.add_parser(
        "doctor",
        help="say how each tokenizer encoding resolves offline",
        description="Say, for each encoding, whether it counts exactly here or falls back to an "
        "estimate, and where its vocabulary comes from.",
    )
    doctor.add_argument(
        "--encoding", action="append", metavar="NAME",
        help=f"an encoding or model name, repeatable (default: {' and '.join(DOCTOR_ENCODINGS)})",
    )
    doctor.add_argument(
        "--require-exact", action="store_true", help="exit 1 if any encoding falls back (default: off)"
    )
    doctor.set_defaults(run=_doctor)
    _serve_parser(commands)
    return parser


def _pack_arguments(pack: argparse.ArgumentParser) -> None:
    """The flags of ``recallpack pack``, each with its default in its help."""
    pack.add_argument(
        "file", nargs="?", default="-", help="JSON Lines file of candidates (default: - , stdin)"
    )
    pack.add_argument(
        "--max-tokens", type=_whole_number("--max-tokens"), default=DEFAULT_MAX_TOKENS, metavar="N",
        help="the budget: the whole block, header and labels included (default: %(default)s)",
    )
    pack.add_argument(
        "--max-tokens-ceiling", type=_whole_number("--max-tokens-ceiling"), default=MAX_TOKENS_CEILING,
        metavar="N", help="the largest --max-tokens allowed; raise it on purpose (default: %(default)s)",
    )
    pack.add_argument(
        "--max-items", type=_whole_number("--max-items"), default=None, metavar="N",
        help="keep at most N items (default: no cap)",
    )
    pack.add_argument(
        "--policy", choices=POLICIES, default="prefix",
        help="the first item that does not fit: prefix stops there, skip passes over it, "
        "truncate cuts it to the room left; passages (with --query) cuts every item to the "
        "passages that best answer the query (default: %(default)s)",
    )
    pack.add_argument(
        "--encoding", default=DEFAULT_ENCODING, metavar="NAME",
        help="what counts tokens: an encoding, a model name such as gpt-4o, or chars "
        "(default: %(default)s)",
    )
    pack.add_argument(
        "--query", default=None, metavar="TEXT",
        help="the question the candidates answer: an item that must be cut keeps the passages "
        "that match it instead of its start (default: none, cut at the start)",
    )
    pack.add_argument(
        "--show-scoped", action="store_true",
        help="show candidates that carry scope_ids to whoever reads the output; without it they "
        "are withheld, as the shell has no reader (default: withheld)",
    )
    pack.add_argument(
        "--format", choices=("markdown", "json"), default="markdown",
        help="markdown: the block; json: evidence, report and the block (\"markdown\") as one JSON "
        "object (default: %(default)s)",
    )



# -- recallpack serve ---------------------------------------------------------------------------


def _serve_parser(commands: Any) -> None:
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
    serve.add_argument(
        "--max-tokens", type=_whole_number("--max-tokens"), default=DEFAULT_MAX_TOKENS, metavar="N",
        help="the budget of a call that gives no max_tokens (default: %(default)s)",
    )
    serve.add_argument(
        "--max-tokens-ceiling", "--ceiling", dest="max_tokens_ceiling", default=MAX_TOKENS_CEILING,
        type=_whole_number("--max-tokens-ceiling"), metavar="N",
        help="the largest max_tokens a call may ask for (default: %(default)s)",
    )
    serve.add_argument(
        "--max-items", type=_whole_number("--max-items"), default=None, metavar="N",
        help="keep at most N items (default: no cap)",
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
        "--window-tokens", type=_whole_number("--window-tokens"), default=None, metavar="N",
        help="tokens per window the files are cut into (default: 200)",
    )
    docs.add_argument(
        "--overlap-tokens", type=_whole_number("--overlap-tokens", 0), default=None, metavar="N",
        help="tokens a window repeats of the one before it (default: 20)",
    )
    docs.add_argument(
        "--fetch-k", type=_whole_number("--fetch-k"), default=None, metavar="N",
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
        "--port", type=_whole_number("--port"), default=None, help="with --transport http (default: 8000)"
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
    if args.max_tokens > args.max_tokens_ceiling:
        raise UsageError(
            f"--max-tokens {args.max_tokens} is over the ceiling of {args.max_tokens_ceiling}; add "
            f"--max-tokens-ceiling {args.max_tokens} if one request should really take that much"
        )
    if args.transport != "http" and (args.host is not None or args.port is not None):
        raise UsageError("--host and --port are for --transport http; stdio needs neither")
    docs_only = {"--window-tokens": args.window_tokens, "--overlap-tokens": args.overlap_tokens,
                 "--fetch-k": args.fetch_k}  # fmt: skip
    for flag, value in docs_only.items():
        if value is not None and args.docs is None:
            raise UsageError(f"{flag} is for --docs; a --retriever factory sets up its own retriever")
    settings: dict[str, Any] = {
        "max_tokens": args.max_tokens,
        "max_tokens_ceiling": args.max_tokens_ceiling,
        "max_items": args.max_items,
        "policy": args.policy,
        "reader": _serve_reader(args),
    }
    if args.encoding is not None:
        _check_encoding(args.encoding)
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


def _silence_stdout() -> None:
    # The reader went away (| head): point stdout at /dev/null so the interpreter's last flush
    # does not raise again, as the Python documentation recommends for SIGPIPE.
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # a stdout without a file descriptor (tests)
        pass


def _warning_line(message: Warning | str, *_where: Any, **_source: Any) -> None:
    print(f"recallpack: warning: {str(message).removeprefix('recallpack: ')}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default: ``sys.argv[1:]``) and return the exit status."""
    shown, warnings.showwarning = warnings.showwarning, _warning_line  # one line, no source line
    try:
        return _main(argv)
    finally:
        warnings.showwarning = shown


def _main(argv: Sequence[str] | None) -> int:
    try:
        try:
            args = _parser().parse_args(argv)
        except SystemExit as exc:  # --help and --version print, then exit 0
            return exc.code if isinstance(exc.code, int) else 0
        code: int = args.run(args)
        return code
    except UsageError as exc:
        print(f"recallpack: error: {exc}", file=sys.stderr)
        return 2
    except RecallpackError as exc:
        print(f"recallpack: error: {_shell_words(exc, '<input>', [])}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        _silence_stdout()
        return 0
    except KeyboardInterrupt:
        print("recallpack: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - a bug of ours still reaches the user as one line
        if os.environ.get("RECALLPACK_DEBUG"):
            raise
        print(
            f"recallpack: internal error: {type(exc).__name__}: {exc} (a bug: please report it; "
            "RECALLPACK_DEBUG=1 shows the traceback)",
            file=sys.stderr,
        )
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
