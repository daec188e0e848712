"""The vocabularies recallpack ships, and how an OpenAI encoding is built from verified bytes.

cl100k_base and o200k_base are shipped gzip-compressed (gzip rather than xz: ``zlib`` is in
every CPython build, ``lzma`` is missing from some, and "every install" is the point). A file
is used only when its decompressed bytes have the SHA-256 that tiktoken itself expects for it.

The encoding's split pattern and special tokens come from tiktoken's own constructors in
``tiktoken_ext.openai_public``: a copy of each constructor runs with its file loader swapped
for ours, so nothing global (``os.environ``, tiktoken's modules) is touched and a tiktoken
release that changes a pattern or a hash is followed, not contradicted.
"""

from __future__ import annotations

import base64
import gzip
import types
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

    import tiktoken

__all__ = [
    "BLOB",
    "ENCODING_FILES",
    "SHIPPED_FILES",
    "ShippedFile",
    "SourceUnavailable",
    "build_encoding",
    "parse_tiktoken_bpe",
    "read_shipped",
    "sha256_matches",
    "shipped_encodings",
]

BLOB = "https://openaipublic.blob.core.windows.net/encodings/"

#: Where tiktoken fetches each encoding's files; its cache names them by the sha1 of these URLs.
ENCODING_FILES: Mapping[str, tuple[str, ...]] = {
    "r50k_base": (BLOB + "r50k_base.tiktoken",),
    "p50k_base": (BLOB + "p50k_base.tiktoken",),
    "p50k_edit": (BLOB + "p50k_base.tiktoken",),
    "cl100k_base": (BLOB + "cl100k_base.tiktoken",),
    "o200k_base": (BLOB + "o200k_base.tiktoken",),
    "o200k_harmony": (BLOB + "o200k_base.tiktoken",),
}


@dataclass(frozen=True)
class ShippedFile:
    """One vocabulary in this package: its resource name and the SHA-256 of its content."""

    resource: str
    sha256: str


#: The SHA-256 values are the ones tiktoken 0.7 to 0.14 expect for these URLs.
SHIPPED_FILES: Mapping[str, ShippedFile] = {
    BLOB + "cl100k_base.tiktoken": ShippedFile(
        "cl100k_base.tiktoken.gz", "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
    ),
    BLOB + "o200k_base.tiktoken": ShippedFile(
        "o200k_base.tiktoken.gz", "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
    ),
}


class SourceUnavailable(Exception):
    """A file is not where a source would have it; the next source is tried."""


def shipped_encodings() -> frozenset[str]:
    """Encodings whose every file is shipped here."""
    return frozenset(
        name for name, urls in ENCODING_FILES.items() if all(url in SHIPPED_FILES for url in urls)
    )


def sha256_matches(data: bytes, expected: str) -> bool:
    """The check tiktoken itself makes of a file before it uses it."""
    from tiktoken.load import check_hash

    return bool(check_hash(data, expected))


def data_dir() -> Traversable:
    """Where the shipped files are: this package, also when it is imported from a zip."""
    return resources.files(__name__)


def read_shipped(url: str, directory: Traversable | None = None) -> bytes:
    """The decompressed shipped file for ``url``, unchecked, from this package (or from
    ``directory``, a copy of its data). ``SourceUnavailable`` when it is not shipped or not
    there; ``ValueError`` when it does not decompress."""
    shipped = SHIPPED_FILES.get(url)
    if shipped is None:
        raise SourceUnavailable(url)
    try:
        packed = (directory or data_dir()).joinpath(shipped.resource).read_bytes()
    except OSError as exc:  # a partial install: the package is there, the data file is not
        raise SourceUnavailable(f"{shipped.resource} is missing from this install ({exc})") from None
    try:
        return gzip.decompress(packed)
    except (OSError, EOFError, zlib.error) as exc:
        raise ValueError(f"{shipped.resource} does not decompress ({exc})") from None


def parse_tiktoken_bpe(data: bytes, where: str) -> dict[bytes, int]:
    """The ``.tiktoken`` format: one base64 token and its rank per line (as tiktoken reads it)."""
    ranks: dict[bytes, int] = {}
    for line in data.splitlines():
        if not line:
            continue
        try:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
        except Exception as exc:  # noqa: BLE001  # any malformed line means a bad file
            raise ValueError(f"line {line[:40]!r} of {where} is not 'base64 rank'") from exc
    return ranks


#: Called as ``load(url, expected_hash=sha256)``, the way the constructors call tiktoken's loader.
BpeLoader = Callable[..., dict[bytes, int]]


def _refuse(*_args: Any, **_kwargs: Any) -> Any:
    raise SourceUnavailable("this encoding is not in the .tiktoken format")


def build_encoding(name: str, load_bpe: BpeLoader) -> tiktoken.Encoding:
    """Build ``name`` with tiktoken's own constructor, reading its ranks through ``load_bpe``
    (called exactly as the constructor calls tiktoken's ``load_tiktoken_bpe``).

    Raises ``SourceUnavailable`` when ``load_bpe`` does, ``KeyError`` for an encoding tiktoken
    does not construct from ``.tiktoken`` files."""
    import tiktoken
    from tiktoken_ext import openai_public  # type: ignore[import-untyped]

    if name not in ENCODING_FILES:
        raise KeyError(name)
    constructors = openai_public.ENCODING_CONSTRUCTORS
    # A private namespace: the copies call each other (o200k_harmony calls o200k_base) and
    # load through load_bpe, while tiktoken's module stays exactly as it was.
    namespace: dict[str, Any] = dict(vars(openai_public))
    namespace["load_tiktoken_bpe"] = load_bpe
    namespace["data_gym_to_mergeable_bpe_ranks"] = _refuse
    copies: dict[str, Callable[[], dict[str, Any]]] = {}
    for encoding_name, constructor in constructors.items():
        if not isinstance(constructor, types.FunctionType):
            continue
        copy = types.FunctionType(
            constructor.__code__,
            namespace,
            constructor.__name__,
            constructor.__defaults__,
            constructor.__closure__,
        )
        namespace[constructor.__name__] = copy
        copies[encoding_name] = copy
    if name not in copies:
        raise KeyError(name)
    return tiktoken.Encoding(**copies[name]())
