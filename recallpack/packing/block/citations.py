"""An item's resource line: its artifact URI, else its citation, else where its host's loader
says it came from.
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from typing import Any, Protocol
from urllib.parse import quote

from recallpack.packing.candidate import Candidate, clean_text
from recallpack.packing.errors import ConfigError
from recallpack.packing.validation import is_int

__all__ = ["resource_of", "citation_from", "check_uri_template"]


class CitingSettings(Protocol):
    """What a resource line is made with: the walk settings' two fields of it."""

    @property
    def resource_uri_template(self) -> str: ...
    @property
    def citation_keys(self) -> tuple[str, ...]: ...


_URI_FIELDS = frozenset({"artifact_id", "artifact_content_id"})


def check_uri_template(template: str) -> None:
    """``resource_uri_template`` can be filled by :func:`resource_of`, or a ConfigError says why."""
    # Plain fields only: a format spec ("{artifact_id:>100000000}") would pad every item's
    # resource line to any size, and "{artifact_id.__class__}" reaches past the value.
    try:
        parsed = [(name, spec, conv) for _, name, spec, conv in string.Formatter().parse(template)]
        plain = all(n is None or (n in _URI_FIELDS and not (spec or conv)) for n, spec, conv in parsed)
        problem = "" if plain else "a field that is not plain {artifact_id} or {artifact_content_id}"
    except ValueError as exc:  # an unmatched brace
        problem = str(exc)
    if problem:
        raise ConfigError(
            f"resource_uri_template={template!r:.80} cannot be filled ({problem}); "
            "use {artifact_id} and {artifact_content_id} as its only fields, with no format spec"
        )


def resource_of(c: Candidate, settings: CitingSettings) -> str | None:
    """The resource line of ``c``: its artifact URI, else its citation, else the metadata's."""
    if c.artifact_id and c.artifact_content_id:
        return settings.resource_uri_template.format(
            artifact_id=quote(c.artifact_id, safe=""),
            artifact_content_id=quote(c.artifact_content_id, safe=""),
        )
    if c.citation:
        return c.citation
    return citation_from(c.metadata, settings.citation_keys) if c.metadata else None  # most have none


def citation_from(metadata: Mapping[str, Any], keys: Sequence[str]) -> str | None:
    """Where a host's loader says an item came from: the first of ``keys`` it recorded, with its
    page when it has one (``page_label`` as the document prints it, else ``page`` counted from 0).
    """
    for key in keys:
        value = metadata.get(key)
        if isinstance(value, str) and value.strip():
            return clean_text(value.strip() + _page_of(metadata))
    return None


def _page_of(metadata: Mapping[str, Any]) -> str:
    label = metadata.get("page_label")
    if (isinstance(label, str) or is_int(label)) and str(label).strip():
        return f", page {str(label).strip()}"
    page = metadata.get("page")
    if is_int(page, 0):
        return f", page {page + 1}"
    return ""
