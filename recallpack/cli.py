"""``recallpack pack`` and ``recallpack doctor``: the library from a shell.

Whatever goes wrong reaches the user as one line on stderr and exit status 2: a file that
cannot be read, a line that is not a candidate (named by the file's own line number), a flag
out of range (named by its flag). The core's errors are written for Python callers, so what
``pack`` reads is checked in ``_cli_input`` (which also says a core error in the command line's
words, from its ``field`` and ``index``), and ``serve`` lives in ``_cli_serve``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import textwrap
import warnings
from collections.abc import Sequence
from typing import Any, NoReturn

from recallpack import (
    Reader,
    RecallpackError,
    RecallpackWarning,
    recall,
    resolve_encoding,
)
from recallpack._cli_input import (
    EXAMPLE_LINE,
    FIELDS,
    UsageError,
    add_budget_flags,
    budget_settings,
    check_encoding,
    parse_lines,
    read_candidates,
    shell_words,
)
from recallpack._cli_serve import hash_token_parser, serve_parser
from recallpack.packing.choosing.policies import policy_help, policy_names
from recallpack.packing.tokenizers import DEFAULT_ENCODING, fallback_advice
from recallpack.packing.validation import did_you_mean

__all__ = ["main"]

DOCTOR_ENCODINGS = ("cl100k_base", "o200k_base")
EXIT_INTERRUPTED = 130  # 128 + SIGINT, what shells report for Ctrl-C


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


# -- reading candidates -------------------------------------------------------------------------

#: Why a file cannot be read, in the user's words, for the errors that have a fix to say; any
#: other OSError is said in its own words.
_UNREADABLE: tuple[tuple[type[OSError], str], ...] = (
    (FileNotFoundError, "no such file"),
    (IsADirectoryError, "is a directory; give a JSON Lines file, one candidate per line"),
    (PermissionError, "permission denied; the file is not readable by this user"),
)


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
    except OSError as exc:
        in_its_words = f"cannot be read ({exc.strerror or exc})"
        said = next((said for kind, said in _UNREADABLE if isinstance(exc, kind)), in_its_words)
        raise UsageError(f"{path}: {said}") from None


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
            check_encoding(name)  # says it in the flag's words
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
    settings = budget_settings(args)
    check_encoding(args.encoding)
    name, data = _read_bytes(args.file)
    lines = parse_lines(name, data)
    reader = Reader.everyone() if args.show_scoped else None
    candidates = read_candidates(name, lines, reader)
    try:
        result = recall(
            candidates,
            **settings,
            tokenizer=args.encoding,
            query=args.query,
            language=None if args.language.lower() == "none" else args.language,
            reader=reader,
        )
    except RecallpackError as exc:
        raise UsageError(shell_words(exc, name, lines)) from None
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
    malformed = result.report.reasons.get("malformed_scope", 0)
    if malformed:
        # A count, never a line number: an item whose scopes cannot be read is withheld unread.
        lines_word = "line has" if malformed == 1 else "lines have"
        print(
            f"recallpack: note: {malformed} {lines_word} scope_ids that are not one or more "
            f"non-empty strings, and {'was' if malformed == 1 else 'were'} withheld unread "
            "(fail closed); fix scope_ids, or leave them out for an unscoped line",
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
    commands = parser.add_subparsers(dest="command", required=True, metavar="{pack,doctor,serve,hash-token}")

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
    serve_parser(commands)
    hash_token_parser(commands)
    return parser


def _pack_arguments(pack: argparse.ArgumentParser) -> None:
    """The flags of ``recallpack pack``, each with its default in its help."""
    pack.add_argument(
        "file", nargs="?", default="-", help="JSON Lines file of candidates (default: - , stdin)"
    )
    add_budget_flags(
        pack,
        "the budget: the whole block, header and labels included (default: %(default)s)",
        ("--max-tokens-ceiling",),
        "the largest --max-tokens allowed; raise it on purpose (default: %(default)s)",
    )
    pack.add_argument(
        "--policy", choices=policy_names(), default="prefix",
        help=f"what is kept when not everything fits: {policy_help()} (default: %(default)s)",
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
        "--language", default="auto", metavar="CODE",
        help="how query words match inflected forms: auto reads the language from the query, an "
        "ISO 639-1 code such as ru uses its Snowball stemmer, none matches words as written "
        "(default: %(default)s)",
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
        print(f"recallpack: error: {shell_words(exc, '<input>', [])}", file=sys.stderr)
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
