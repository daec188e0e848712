"""What ``recallpack pack`` reads, and the command line's words for what goes wrong.

JSON Lines candidates are checked here field by field, each problem named by the file's own
line number; a core error is said in the shell's words from the error's ``field`` (a flag) and
``index`` (a line of the file). A ``UsageError`` is one line for the user: the command line
prints it and exits 2.
"""

from __future__ import annotations

import argparse
import codecs
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from recallpack import (
    DEFAULT_MAX_TOKENS,
    MAX_TOKENS_CEILING,
    Candidate,
    LaneKind,
    Reader,
    RecallpackError,
    get_tokenizer,
)
from recallpack.packing.choosing.ledger import withheld
from recallpack.packing.validation import check_known, json_type

__all__ = [
    "EXAMPLE_LINE",
    "FIELDS",
    "FLAG_OF",
    "Line",
    "UsageError",
    "check_encoding",
    "check_budget",
    "add_budget_flags",
    "budget_settings",
    "parse_lines",
    "read_candidates",
    "shell_words",
    "whole_number",
]

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
        "string or array of strings",
        "the scopes (whose memory) it belongs to, at least one (leave it out if none); "
        "withheld, as the shell has no reader; so is a line whose scope_ids are malformed, unread",
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


class UsageError(Exception):
    """One line for the user; main() prints it and exits 2."""


@dataclass(frozen=True)
class Line:
    number: int
    fields: dict[str, Any]


def whole_number(flag: str, minimum: int = 1) -> Any:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{value} is too small: {flag} must be at least {minimum}")
        return value

    return parse


def check_encoding(name: str) -> None:
    try:
        get_tokenizer(name)
    except RecallpackError:
        raise UsageError(
            f"--encoding {name!r} is not an encoding or a model name; use cl100k_base, o200k_base, "
            "a model name such as gpt-4o, or chars (recallpack doctor lists what resolves here)"
        ) from None




def check_budget(max_tokens: int, ceiling: int) -> None:
    """A UsageError when ``--max-tokens`` is over ``--max-tokens-ceiling``, naming both flags."""
    if max_tokens > ceiling:
        raise UsageError(
            f"--max-tokens {max_tokens} is over the ceiling of {ceiling}; add "
            f"--max-tokens-ceiling {max_tokens} if one request should really take that much"
        )


def budget_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The Packer settings of the flags pack and serve share (:func:`add_budget_flags`'s and
    ``--policy``), checked first with :func:`check_budget`."""
    check_budget(args.max_tokens, args.max_tokens_ceiling)
    return {
        "max_tokens": args.max_tokens,
        "max_tokens_ceiling": args.max_tokens_ceiling,
        "max_items": args.max_items,
        "policy": args.policy,
    }


def add_budget_flags(
    parser: argparse.ArgumentParser, budget: str, ceiling: tuple[str, ...], limit: str
) -> None:
    """``--max-tokens`` (its help: ``budget``), the ceiling (flags ``ceiling``, help ``limit``) and
    ``--max-items``, which pack and serve share."""
    parser.add_argument(
        "--max-tokens", type=whole_number("--max-tokens"), default=DEFAULT_MAX_TOKENS, metavar="N",
        help=budget,
    )  # fmt: skip
    parser.add_argument(
        *ceiling, dest="max_tokens_ceiling", type=whole_number("--max-tokens-ceiling"),
        default=MAX_TOKENS_CEILING, metavar="N", help=limit,
    )  # fmt: skip
    parser.add_argument(
        "--max-items", type=whole_number("--max-items"), default=None, metavar="N",
        help="keep at most N items (default: no cap)",
    )  # fmt: skip


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


def parse_lines(name: str, data: bytes) -> list[Line]:
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
                f"this one is {json_type(item)}" + (f" ({hint})" if hint else "")
            )
        lines.append(Line(number, item))
    return lines


def _check_fields(where: str, fields: dict[str, Any]) -> None:
    check_known(fields, FIELDS, lambda key, close: UsageError(
        f'{where}: unknown field "{key}"; ' + (f'did you mean "{close}"? ' if close else "")
        + f'the fields are: {", ".join(FIELDS)}'
    ))
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
            raise UsageError(f'{where}: "{key}" must be {_article(FIELDS[key][0])}, not {json_type(value)}')
    lane = fields.get("lane")
    if isinstance(lane, str) and lane.strip().lower() not in {kind.value for kind in LaneKind}:
        raise UsageError(f'{where}: "lane" is {lane!r}, which is not a lane; use one of: {LANES}')


def _article(kind: str) -> str:
    return ("an " if kind[0] in "aeiou" else "a ") + kind


def read_candidates(
    name: str, lines: list[Line], reader: Reader | None = None
) -> list[Candidate | Mapping[str, Any]]:
    """One entry per line, in order: a line ``reader`` may read, checked field by field and
    built as a Candidate; a withheld one, gated on its scope fields first as the core gates it,
    as those fields alone. Nothing else of a withheld line is read, checked or named: a bad
    span or a misspelt field in it neither stops the call nor shows in any message."""
    out: list[Candidate | Mapping[str, Any]] = []
    for line in lines:
        if withheld(line.fields, reader) is not None:
            # The core gates this mapping again, by the same fields, and counts why.
            out.append({key: line.fields[key] for key in _SCOPE_FIELDS if key in line.fields})
            continue
        where = f"{name}:{line.number}"
        _check_fields(where, line.fields)
        try:
            out.append(Candidate(**line.fields))
        except (RecallpackError, ValueError) as exc:  # a check the core has and this module lacks
            raise UsageError(f"{where}: {shell_words(exc, name, lines)}") from None
    return out


#: What the gate reads of a line (as the core's ``withheld`` does), and nothing more.
_SCOPE_FIELDS = ("scope_ids", "scope_error")


# -- the core's messages, in the command line's words -------------------------------------------

FLAG_OF = {
    "max_tokens_ceiling": "--max-tokens-ceiling",
    "max_tokens": "--max-tokens",
    "max_items": "--max-items",
    "policy": "--policy",
    "tokenizer": "--encoding",
}


def shell_words(error: Exception, name: str, lines: Sequence[Line]) -> str:
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
    for keyword in sorted(FLAG_OF, key=lambda setting: (setting != field, -len(setting))):
        flag = FLAG_OF[keyword]
        message = message.replace(f"pass {keyword}=", f"add {flag} ").replace(f"{keyword}=", f"{flag} ")
    return message
