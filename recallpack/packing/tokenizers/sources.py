"""Where an encoding's files come from: tiktoken's cache and the copies recallpack ships.

A source is a value (a directory, a package resource) with a ``read``; the resolution is given
its sources instead of reading globals, so a test or an application can say exactly where
files may come from (``EncodingRegistry(sources=[...])`` in ``resolve``). Reading a cache file
and checking its SHA-256 is tiktoken's own ``tiktoken.load``; what is recallpack's is the order
of the sources and that a copy failing the check is reported and never used.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Protocol

from recallpack.packing import encodings as shipped
from recallpack.packing.encodings import SourceUnavailable

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

__all__ = [
    "SHIPPED_LABEL",
    "FileReader",
    "ShippedCopies",
    "EncodingSource",
    "SourceUnavailable",
    "TiktokenCache",
    "bound_label",
    "cache_key",
    "default_sources",
    "tiktoken_cache_dir",
]

SHIPPED_LABEL = "recallpack's shipped copy, SHA-256 verified"


class EncodingSource(Protocol):
    """Somewhere an encoding's files may be. ``read`` raises ``SourceUnavailable`` when it holds
    no copy of ``url`` (the next source is tried) and ``ValueError`` when its copy is unreadable."""

    @property
    def label(self) -> str: ...

    def read(self, url: str) -> bytes: ...


def cache_key(url: str) -> str:
    """The file name tiktoken's cache gives ``url``: the SHA-1 of the URL."""
    return hashlib.sha1(url.encode()).hexdigest()


def tiktoken_cache_dir() -> str | None:
    """The cache directory tiktoken would use now, or None when caching is off."""
    for var in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if var in os.environ:
            return os.environ[var] or None  # tiktoken treats "" as "no cache"
    return os.path.join(tempfile.gettempdir(), "data-gym-cache")


@dataclass(frozen=True)
class TiktokenCache:
    """A tiktoken cache directory, read only: nothing is written, moved or deleted in it."""

    directory: str

    @property
    def label(self) -> str:
        return f"tiktoken cache {self.directory}"

    def read(self, url: str) -> bytes:
        from tiktoken.load import read_file

        path = os.path.join(self.directory, cache_key(url))
        try:
            return read_file(path)  # a path, not a URL: tiktoken opens it, nothing is fetched
        except OSError:
            raise SourceUnavailable(path) from None


@dataclass(frozen=True)
class ShippedCopies:
    """The vocabularies in ``recallpack.packing.encodings`` (or in ``data``, a copy of them)."""

    data: Traversable | None = None
    label: ClassVar[str] = SHIPPED_LABEL

    def read(self, url: str) -> bytes:
        return shipped.read_shipped(url, self.data)


def default_sources() -> tuple[EncodingSource, ...]:
    """tiktoken's cache as the environment names it now, then the shipped copies."""
    cache = tiktoken_cache_dir()
    return (*([TiktokenCache(cache)] if cache is not None else []), ShippedCopies())


def bound_label(encoding: str) -> str:
    return f"UTF-8 bytes, an upper bound for {encoding}"


class FileReader:
    """Reads an encoding's files from the first source holding a copy that passes tiktoken's
    SHA-256 check, and remembers which source served it and which copies were refused."""

    def __init__(self, sources: Sequence[EncodingSource]) -> None:
        self.sources = tuple(sources)
        self.served: list[str] = []
        self.refused: list[str] = []

    def load(self, url: str, expected_hash: str | None = None) -> dict[bytes, int]:
        filename = url.rsplit("/", 1)[-1]
        for source in self.sources:
            label = source.label
            try:
                data = source.read(url)
            except SourceUnavailable:
                continue
            except ValueError as exc:
                self.refused.append(f"{label}: {exc}")
                continue
            shipped_file = shipped.SHIPPED_FILES.get(url)
            expected = expected_hash or (shipped_file.sha256 if shipped_file else None)
            if expected is not None and not shipped.sha256_matches(data, expected):
                self.refused.append(f"{label}: {filename} fails the SHA-256 check tiktoken expects, not used")
                continue
            if label not in self.served:
                self.served.append(label)
            return shipped.parse_tiktoken_bpe(data, f"{label}/{filename}")
        raise SourceUnavailable(url)

    def describe_exact(self) -> str:
        return "; ".join([" and ".join(self.served), *self.refused])

    def describe_fallback(self, encoding: str) -> str:
        reasons = self.refused or [
            f"no copy of {encoding} in "
            + (" or ".join(source.label for source in self.sources) or "any source (all are off)")
        ]
        return "; ".join([*reasons, f"counting {bound_label(encoding)}"])
