"""Which kept item a candidate is a copy of: what the ledger finds duplicates by.

A candidate whose content and scopes are those of a kept item is dropped in its favour (the kept
item then stands for it, citation and all). The kept texts are found by their length and scopes
first and compared in place, so no text is hashed (hashing a 10 MB text reads all of it, while
texts of another length can never be equal). Past a few kept texts of one length (log lines,
fixed-width rows) they are looked up by hash instead: compared one by one, every later candidate
of that length would cost as many comparisons as there were kept.
"""

from __future__ import annotations

from typing import Generic, TypeVar

from recallpack.packing.candidate import Candidate

__all__ = ["KeptTexts", "compared_text", "dedupe_key"]

K = TypeVar("K")
#: Kept texts of one length and scopes compared one by one with a candidate; past this many,
#: they are looked up by hash.
LISTED_TEXTS = 8

Key = tuple[int, tuple[str, ...]]


def compared_text(c: Candidate) -> str:
    """What duplicates are found by: the item's own content (not a host's framing of it, such
    as a LlamaIndex node's metadata lines, and never its citation)."""
    return c.text if c.content is None else c.content


def dedupe_key(c: Candidate, text: str) -> Key:
    """Which kept texts ``text`` is compared with: those of its length and scopes. The scope ids
    as a set: the same ids in another order are the same readers, while any other scopes are
    other readers, so those items are never merged."""
    return len(text), (tuple(sorted(set(c.scope_ids))) if c.scope_ids else ())


class KeptTexts(Generic[K]):
    """The kept items by their content and scopes; the first kept of a text stands for it."""

    __slots__ = ("_by_key",)

    def __init__(self) -> None:
        self._by_key: dict[Key, list[tuple[str, K]] | dict[str, K]] = {}

    def __bool__(self) -> bool:
        return bool(self._by_key)

    def find(self, c: Candidate) -> K | None:
        """The kept item identical to ``c`` (its content and scopes), if any."""
        text = compared_text(c)
        found = self._by_key.get(dedupe_key(c, text))
        if found is None:
            return None
        if isinstance(found, dict):
            return found.get(text)
        for seen, kept in found:
            if seen == text:
                return kept
        return None

    def add(self, c: Candidate, kept: K) -> None:
        """Let later copies of ``c`` find ``kept``, unless an earlier kept item has its text."""
        text = compared_text(c)
        key = dedupe_key(c, text)
        found = self._by_key.get(key)
        if found is None:
            self._by_key[key] = [(text, kept)]
        elif isinstance(found, dict):
            found.setdefault(text, kept)
        elif len(found) < LISTED_TEXTS:
            found.append((text, kept))
        else:  # each text is hashed once, in C; reversed, so that the first kept of a text stays
            by_text = {seen: earlier for seen, earlier in reversed(found)}
            self._by_key[key] = by_text
            by_text.setdefault(text, kept)
