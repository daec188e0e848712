"""Every packing setting a host takes by name, declared once (:class:`PackerSettings`), and the
few a call may change as plain values (:data:`BOUNDS`), checked as the settings check them.

:class:`~recallpack.packing.packer.Packer` adds ``join`` and resolves them into a walk's plan;
the adapters' components inherit these same fields, so a type checker sees one signature
everywhere.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BeforeValidator,
    ConfigDict,
    Field,
    StrictStr,
    ValidationError,
    create_model,
    field_validator,
)

from recallpack.packing import validation
from recallpack.packing.choosing.policies import check_policy
from recallpack.packing.choosing.walk import lane_targets
from recallpack.packing.errors import TemplateError
from recallpack.packing.limits import DEFAULT_MAX_TOKENS, MAX_TOKENS_CEILING
from recallpack.packing.reading.analysis import AUTO, check_language
from recallpack.packing.results.result import DEFAULT_RESOURCE_URI_TEMPLATE
from recallpack.packing.scopes import Reader
from recallpack.packing.validation import CheckedModel, check_max_tokens

__all__ = ["PackerSettings", "CutMode", "DEFAULT_CITATION_KEYS", "BOUNDS", "checked_bounds"]

CutMode = Literal["auto", "head", "focus"]
#: Metadata keys a citation is read from, in order: LangChain loaders record ``source`` (a path
#: or URL); LlamaIndex readers record ``file_path``, ``url`` and ``file_name``.
DEFAULT_CITATION_KEYS: tuple[str, ...] = ("source", "file_path", "url", "file_name")
def _one_or_many(value: object) -> object:
    if isinstance(value, str):
        return (value,)  # one key needs no tuple around it
    return tuple(value) if isinstance(value, list) else value


def _checked_lane_budgets(value: object) -> object:
    """Each key a lane or provenance, each budget an int as given: pydantic's lax ints would
    read True as 1 and "5" as 5."""
    lane_targets(value)
    return value


class PackerSettings(CheckedModel):
    """Every packing setting a host takes by name, declared once: :class:`Packer` adds ``join``
    (what the model is shown, which each host decides), and the adapter components inherit these
    same fields, so a type checker sees one signature everywhere."""

    model_config = ConfigDict(arbitrary_types_allowed=True, use_attribute_docstrings=True)

    max_tokens: int = Field(default=DEFAULT_MAX_TOKENS, strict=True, ge=1)
    """The token budget for what the model is shown: the whole rendered block by default."""
    max_items: int | None = Field(default=None, strict=True, ge=1)
    """At most this many items, whatever room the budget leaves (None: no cap)."""
    policy: Annotated[str, BeforeValidator(check_policy)] = "prefix"
    """An item that does not fit: ``prefix`` ends the walk, ``skip`` passes over it,
    ``truncate`` cuts it to the room left and ends the walk. ``passages`` (with a query) spends
    the budget on the passages that best answer it, across every item. Or the name of a policy
    registered with ``recallpack.packing.choosing.policies.register_policy``."""
    floor: bool = Field(default=True, strict=True)
    """A match is never answered with nothing: if nothing fits whole, the top readable match is
    kept, cut to the room. False gives the strict prefix."""
    cut: CutMode = "auto"
    """How an item is cut: ``head`` keeps its start, ``focus`` the passages that match the
    query; ``auto`` is focus when the call gives a query, head otherwise."""
    language: Annotated[str | None, BeforeValidator(check_language)] = AUTO
    """How query words match the texts' words in their inflected forms: ``"auto"`` reads the
    language from the query's script and letters, an ISO 639-1 code (``"ru"``) uses that
    language's Snowball stemmer, None matches words as written. Scripts written without spaces
    (Chinese, Japanese, Thai...) are matched by pairs of characters whatever this is."""
    embed: Any = None
    """For focus cuts: a LangChain Embeddings, a LlamaIndex embedding or a callable, used to
    score the passages of the one item being cut (None: lexical scoring)."""
    tokenizer: Any = None
    """An encoding or model name, ``"chars"``, a Tokenizer, a ``str -> int`` (None: cl100k_base)."""
    reader: Reader | None = None
    """Who reads: items in scopes they do not hold are withheld. With no reader, items that carry
    scopes are withheld too, unless this is ``Reader.everyone()``."""
    lane_budgets: Annotated[Mapping[str, int] | None, BeforeValidator(_checked_lane_budgets)] = None
    """Tokens per lane (``"facts"``) or per provenance (``"derived"``: all its lanes)."""
    dedupe: bool = Field(default=True, strict=True)
    """Drop an item whose text and scopes equal a kept one's."""
    template: str | Path | None = None
    """Template source (a str) or a template file (a Path); None: the default block."""
    resource_uri_template: str = Field(default=DEFAULT_RESOURCE_URI_TEMPLATE, strict=True)
    """The resource line for items with ``artifact_id`` and ``artifact_content_id``."""
    citation_keys: Annotated[tuple[StrictStr, ...], BeforeValidator(_one_or_many)] = DEFAULT_CITATION_KEYS
    """Metadata keys a resource line is read from when an item has no artifact ids."""
    max_tokens_ceiling: int = Field(default=MAX_TOKENS_CEILING, strict=True, ge=1)
    """Raise it to allow a max_tokens above 16384."""

    @field_validator("template", mode="before")
    @classmethod
    def _template_kind(cls, value: object) -> object:
        if value is not None and not isinstance(value, (str, os.PathLike)):
            raise TemplateError(
                f"template={value!r} must be template source (a str), a pathlib.Path to a "
                "template file, or None for the default"
            )
        return value


#: The settings a call may change as plain values (a reader only where none is configured):
#: the Packer's plan holds as it is, and the walk takes them from the call.
BOUNDS = frozenset({"max_tokens", "max_items", "reader"})
#: Those settings as the Packer declares them, to check a per-call value with the same errors.
_BOUND_FIELDS: dict[str, Any] = {
    name: (field.annotation, field) for name, field in PackerSettings.model_fields.items() if name in BOUNDS
}
_Bounds = create_model("Packer", **_BOUND_FIELDS)


def checked_bounds(owner: str, bounds: Mapping[str, Any], max_tokens: int, ceiling: int) -> int:
    """Per-call ``bounds`` checked as a new Packer checks them (the same errors); the call's
    max_tokens (``max_tokens`` when they do not change it)."""
    try:
        _Bounds(**bounds)
    except ValidationError as exc:
        raise validation.recallpack_error(owner, exc) from None
    return check_max_tokens(bounds.get("max_tokens", max_tokens), ceiling)
