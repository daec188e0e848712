"""Who reads the evidence and whose memory each item is: ``Reader`` and ``Scope``.

Inputs of a recall, not parts of its result: a Packer holds a Reader, the walk asks it which
scope ids an item's reader holds, and the block's header shows the Scopes it resolves to.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated

from pydantic import AfterValidator, ConfigDict, Field, StrictStr, ValidationError

from recallpack.packing.candidate import clean_text
from recallpack.packing.errors import RecallpackError
from recallpack.packing.validation import CheckedModel, recallpack_error

__all__ = ["Scope", "Reader", "PRIVATE"]

#: The name the reader's own scope id is shown by.
PRIVATE = "private"


class _Setting(CheckedModel):
    """A Reader or Scope: bad input is a ConfigError naming each field."""

    @classmethod
    def _invalid(cls, exc: ValidationError) -> RecallpackError:
        return recallpack_error(cls.__name__, exc, fields=cls.model_fields)


class Scope(_Setting):
    """Whose memory an item is: a name the reader knows it by, and what that means."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # Both are rendered in the block's header: a lone surrogate (a scope table read from JSON)
    # would make the block unencodable as UTF-8 downstream, so it is repaired here.
    name: Annotated[str, AfterValidator(clean_text)] = Field(strict=True)
    description: Annotated[str, AfterValidator(clean_text)] = Field(default="", strict=True)


class Reader(_Setting):
    """Who reads the evidence: their own id (rendered as scope ``private``) and the other scope
    ids they may read, each mapped to its Scope. Anything else is withheld.

    >>> reader = Reader(id="u-7", scopes={"org-1": Scope(name="book-club")})
    >>> reader.scope_names(("u-7", "org-1"))
    ('private', 'book-club')
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str | None = Field(default=None, strict=True)
    scopes: Mapping[StrictStr, Scope] = Field(default_factory=dict)
    #: True only for :meth:`everyone`: every scope is readable (scope ids become their names).
    open: bool = Field(default=False, strict=True)

    @classmethod
    def everyone(cls) -> Reader:
        """The explicitly open reader: every item is shown, whatever its scopes.

        Without any reader, items that carry scopes are withheld; choose this on purpose when
        the evidence is not per user (a public corpus, an offline evaluation).
        """
        return cls(open=True)

    def scope_for(self, scope_id: str) -> Scope | None:
        if scope_id == self.id:
            return Scope(name=PRIVATE)
        found = self.scopes.get(scope_id)
        if found is None and self.open:
            return Scope(name=scope_id)
        return found

    def can_read(self, scope_ids: Sequence[str]) -> bool:
        if self.open:
            return True
        return all(scope_id == self.id or scope_id in self.scopes for scope_id in scope_ids)

    def scope_names(self, scope_ids: Sequence[str]) -> tuple[str, ...]:
        return tuple(self.resolve(scope_ids)[i].name for i in range(len(scope_ids)))

    def resolve(self, scope_ids: Sequence[str]) -> tuple[Scope, ...]:
        scopes = []
        for scope_id in scope_ids:
            scope = self.scope_for(scope_id)
            scopes.append(scope if scope is not None else Scope(name=scope_id))
        return tuple(scopes)


def replaces_reader(given: object, held: Reader | None) -> bool:
    """Whether a per-call reader ``given`` would replace the configured ``held``: False when none
    is configured, or when ``given`` is ``held`` (the same object, or a plain Reader with the same
    id, scopes and openness, compared by their values). Never compared by ``==``: a subclass's
    ``__eq__`` or ``__ne__`` could say anything, and a reader passing for ``held`` would lift its
    scopes."""
    if held is None or given is held:
        return False
    if type(given) is not Reader or type(held) is not Reader:
        return True
    return given.model_dump() != held.model_dump()
