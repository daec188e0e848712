"""A docs file's scopes, read from its YAML front matter by PyYAML's safe loader, failing closed.

A file that opens with a ``---`` line (after any byte-order mark or blank lines) has front
matter, up to the next ``---`` or ``...`` line; any line ends count (LF, CRLF, CR, and the other
Unicode line breaks). Its ``scope_ids`` are the scopes of the file's windows. Whatever cannot be
read for certain withholds the file from every reader, with the reason, rather than show it to
everyone:

- front matter that opens but never closes, is not YAML, repeats a key, or is not a mapping;
- a key that only looks like ``scope_ids`` (``Scope_IDs``, ``"scope ids"``, ``scope-id``,
  ``scopes``: any key that starts with ``scope`` once case, spaces and punctuation are set
  aside) is read as ``scope_ids``, together with every other such key;
- a ``scope_ids`` that is not a non-empty list of non-empty strings (or one string of ids
  separated by commas);
- TOML front matter (``+++``), which is not read at all;
- anything else that fails while reading it (a key that is a list or a mapping, nesting deeper
  than Python's recursion limit, an alias bomb): one file never stops the server.

No front matter, or front matter with no scope key: the file is unscoped. Needs the ``mcp``
extra (PyYAML).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Hashable
from typing import Any

from recallpack.adapters.shared.extras import require

yaml = require("yaml", extra="mcp", feature=__name__)

__all__ = ["SCOPE_KEY", "FrontMatter", "front_matter_scopes"]

SCOPE_KEY = "scope_ids"
_FENCES = ("---", "...")
#: What a file may hold before its front matter's opening line: byte-order marks and blank lines.
_LEADING = re.compile(r"[\ufeff\s]*")
#: One line and its end: any of the line breaks str.splitlines knows, CRLF as one.
_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
_LINE = re.compile(f"[^{_BREAKS}]*(?:\r\n|[{_BREAKS}]|\\Z)")
#: An opening line: ``---`` (or TOML's ``+++``), alone or followed by a space and more YAML.
_OPENING = re.compile(r"(---|\+\+\+)(?:[ \t]+(.*))?")


#: libyaml's parser when PyYAML was built with it (about 10x faster); the same safe constructor.
_SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _StrictLoader(_SafeLoader):  # type: ignore[misc, valid-type]
    """The safe loader, refusing a key given twice: otherwise the last ``scope_ids`` would win
    silently, and a second, wider one could open a file its first one closed."""

    def construct_mapping(self, node: Any, deep: bool = False) -> dict[Hashable, Any]:
        seen: set[object] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if not isinstance(key, Hashable):
                break  # a list or mapping as a key: PyYAML's own check below names it
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    "while reading front matter", node.start_mark, f"the key {key!r:.40} is given twice",
                    key_node.start_mark,
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)  # type: ignore[no-any-return]


FrontMatter = tuple[int, tuple[str, ...], "str | None"]


def front_matter_scopes(text: str) -> FrontMatter:
    """``(where the body starts, scope ids, why the file is withheld)`` of a file's text.

    >>> front_matter_scopes("---\\nscope_ids: [org-1, org-2]\\n---\\nHello")
    (34, ('org-1', 'org-2'), None)
    >>> front_matter_scopes("---\\r'Scope_IDs':\\r  - org-1\\r---\\rHello")
    (31, ('org-1',), None)
    >>> front_matter_scopes("Hello")
    (0, (), None)
    >>> front_matter_scopes("---\\nscope_ids: []\\n---\\nHello")[2]
    'front matter scope_ids is an empty list; give the scope ids, such as [org-acme]'

    Whatever goes wrong while reading withholds the file (this never raises): a file anyone can
    write to a shared folder must not stop a server that serves the others.
    """
    try:
        return _front_matter(text)
    except Exception as exc:  # noqa: BLE001 - any failure withholds this one file, and only it
        # The kind of failure only: its message could quote the file's text.
        why = f"front matter cannot be read ({type(exc).__name__})"
        return 0, (), f"{why}; simplify it to plain keys and lists"


def _front_matter(text: str) -> FrontMatter:
    start = _LEADING.match(text).end()  # type: ignore[union-attr]
    # Lines one at a time: the front matter is read, not the whole file.
    lines = (found.group() for found in _LINE.finditer(text, start))
    first = next(lines, "")
    opening = _OPENING.fullmatch(first.strip())
    if opening is None:
        return 0, (), None
    if opening.group(1) == "+++":
        return 0, (), "TOML front matter (+++) is not read; write it as YAML between --- lines"
    end = start + len(first)
    # YAML may go on on the opening line itself ("--- {scope_ids: [a]}"): it is read too.
    source = [opening.group(2) or ""]
    for line in lines:
        if not line:  # the end of the text
            break
        if line.rstrip() in _FENCES:
            # One line end for YAML, which itself knows only LF, CRLF and CR.
            return end + len(line), *_scopes("\n".join(source))
        source.append((line.splitlines() or [""])[0])
        end += len(line)
    return 0, (), "front matter opens with --- but never closes; end it with a --- line"


def _scopes(source: str) -> tuple[tuple[str, ...], str | None]:
    try:
        data = yaml.load(source, Loader=_StrictLoader)
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" (line {where.line + 1})" if where is not None else ""  # the opening line is line 1
        problem = getattr(exc, "problem", None) or type(exc).__name__
        return (), f"front matter is not readable YAML{line}: {problem}"
    if data is None:
        return (), None
    if not isinstance(data, dict):
        return (), f"front matter is a YAML {type(data).__name__}, not a mapping of keys to values"
    nested = _nested_scope_key(data)
    if nested is not None:
        where = f"front matter has a scope key {nested:.40} inside another value"
        return (), f"{where}; put scope_ids at the top level"
    ids: list[str] = []
    for key, value in data.items():
        if not _looks_like_scope_key(key):
            continue
        found, why = _ids(value)
        if why is not None:
            return (), f"front matter {str(key)[:40]} {why}"
        ids.extend(i for i in found if i not in ids)
    return tuple(ids), None


def _nested_scope_key(data: dict[Any, Any]) -> str | None:
    """A scope-like key below the top level, if any: each shared YAML node looked at once, and
    without recursion, so that nesting of any depth is read rather than failing."""
    seen = {id(data)}
    stack: list[object] = list(data.values())
    while stack:
        value = stack.pop()
        if id(value) in seen or not isinstance(value, (dict, list)):
            continue
        seen.add(id(value))
        if isinstance(value, list):
            stack.extend(value)
            continue
        for key, inner in value.items():
            if _looks_like_scope_key(key):
                return repr(key)
            stack.append(inner)
    return None


def _looks_like_scope_key(key: object) -> bool:
    # Case, width, spaces, quotes and punctuation set aside: "Scope IDs", "scope-id", "scopes".
    folded = unicodedata.normalize("NFKC", str(key)).casefold()
    return re.sub(r"[\W_]+", "", folded).startswith("scope")


def _ids(value: object) -> tuple[tuple[str, ...], str | None]:
    if isinstance(value, str):
        value = value.split(",")
    elif not isinstance(value, list):
        kind = "empty" if value is None else f"a {type(value).__name__}"
        return (), f"is {kind}; give a list of scope ids, such as [org-acme]"
    if not value:
        return (), "is an empty list; give the scope ids, such as [org-acme]"
    ids = []
    for item in value:
        if not isinstance(item, str) or not item.strip():
            shown = f"a {type(item).__name__}" if not isinstance(item, str) else "an empty string"
            return (), f"holds {shown}; every scope id is a non-empty string (quote a number: '42')"
        ids.append(item.strip())
    return tuple(ids), None
