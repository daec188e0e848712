"""``recallpack doctor`` and ``recallpack pack``. Errors become one line and exit code 2."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Sequence
from typing import Any, TextIO

from recallpack.packing.errors import CandidateError, RecallpackError
from recallpack.packing.limits import DEFAULT_MAX_TOKENS, MAX_TOKENS_CEILING, POLICIES
from recallpack.packing.packer import recall
from recallpack.packing.tokenizer import DEFAULT_ENCODING, resolve_encoding

__all__ = ["main"]

DOCTOR_ENCODINGS = ("cl100k_base", "o200k_base")


def _doctor(args: argparse.Namespace) -> int:
    fallback = False
    for name in args.encoding or DOCTOR_ENCODINGS:
        resolution = resolve_encoding(name)
        fallback |= not resolution.exact
        status = "exact" if resolution.exact else "FALLBACK"
        label = name if name == resolution.encoding else f"{name} -> {resolution.encoding}"
        print(f"{label}: {status} ({resolution.source})")
    if fallback and args.require_exact:
        print(
            "recallpack doctor: an encoding falls back to the heuristic (--require-exact)",
            file=sys.stderr,
        )
        return 1
    return 0


def _read_candidates(stream: TextIO) -> Iterator[dict[str, Any]]:
    for number, line in enumerate(stream, start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CandidateError(
                f"line {number}: not JSON ({exc.msg}); give one candidate object per line"
            ) from None
        if not isinstance(item, dict):
            raise CandidateError(
                f"line {number}: a candidate must be a JSON object, got {type(item).__name__}"
            )
        yield item


def _pack(args: argparse.Namespace) -> int:
    if args.file == "-":
        candidates = list(_read_candidates(sys.stdin))
    else:
        try:
            with open(args.file, encoding="utf-8") as handle:
                candidates = list(_read_candidates(handle))
        except FileNotFoundError:
            raise CandidateError(f"file {args.file!r}: no such file") from None
    result = recall(
        candidates,
        max_tokens=args.max_tokens,
        max_items=args.max_items,
        policy=args.policy,
        tokenizer=args.encoding,
        max_tokens_ceiling=args.max_tokens_ceiling,
    )
    if args.format == "json":
        print(json.dumps(result.to_dict(), ensure_ascii=False, indent=2))
    else:
        sys.stdout.write(result.to_markdown())
        print(result.report.summary(), file=sys.stderr)
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="recallpack", description="Fit retrieved context to a token budget."
    )
    commands = parser.add_subparsers(dest="command", required=True)

    doctor = commands.add_parser("doctor", help="say how each tokenizer encoding resolves offline")
    doctor.add_argument("--encoding", action="append", help="an encoding or model name (repeatable)")
    doctor.add_argument("--require-exact", action="store_true", help="exit 1 if any encoding falls back")
    doctor.set_defaults(run=_doctor)

    pack = commands.add_parser("pack", help="pack JSON Lines candidates into an evidence block")
    pack.add_argument("file", nargs="?", default="-", help="JSON Lines file of candidates (default: stdin)")
    pack.add_argument("--max-tokens", type=int, default=DEFAULT_MAX_TOKENS)
    pack.add_argument(
        "--max-tokens-ceiling",
        type=int,
        default=MAX_TOKENS_CEILING,
        help=f"raise this (default {MAX_TOKENS_CEILING}) to allow a larger --max-tokens",
    )
    pack.add_argument("--max-items", type=int, default=None)
    pack.add_argument("--policy", choices=POLICIES, default="prefix")
    pack.add_argument("--encoding", default=DEFAULT_ENCODING, help="encoding, model name, or 'chars'")
    pack.add_argument("--format", choices=("markdown", "json"), default="markdown")
    pack.set_defaults(run=_pack)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        code: int = args.run(args)
    except RecallpackError as exc:
        print(f"recallpack: error: {exc}", file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":
    raise SystemExit(main())
