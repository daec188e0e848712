"""The vocabularies recallpack ships, and how an OpenAI encoding is built from verified bytes.

cl100k_base and o200k_base are shipped gzip-compressed (gzip rather than xz: ``zlib`` is in
every CPython build, ``lzma`` is missing from some, and "every install" is the point). A file
is used only when its decompressed bytes have the SHA-256 that tiktoken itself expects for it.

An encoding is built through tiktoken's public seams only: ``tiktoken.Encoding`` from the
definition in ``ENCODINGS`` (the split pattern and special tokens tiktoken publishes for the
name, checked against tiktoken's own constructors by tests/test_encodings.py), with the ranks
read, verified and parsed in memory. Nothing of tiktoken's is patched, copied or re-run in a
private namespace, and ``tiktoken.get_encoding`` is left exactly as it was.

Why the ranks are not read by ``tiktoken.load.load_tiktoken_bpe``: it takes a path, never
bytes, and reads it through ``read_file_cached``, which writes a copy of every path it has not
cached into ``TIKTOKEN_CACHE_DIR`` (or ``$TMPDIR/data-gym-cache``), deletes a cached copy that
fails its hash, and fetches a URL it has no copy of. Shipping the files in the cache's own
format (raw, named by the SHA-1 of the URL) would not help: tiktoken finds a cache only through
that environment variable, which is the whole process's. A library must not write or fetch
unasked, nor set the environment, so the
shipped bytes are parsed here by the ``.tiktoken`` format (one ``base64 rank`` pair per line,
:func:`parse_tiktoken_bpe`); the reading and the hash check are tiktoken's own
(``tiktoken.load.read_file``, ``tiktoken.load.check_hash``).
"""

from __future__ import annotations

import base64
import gzip
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

    import tiktoken

__all__ = [
    "BLOB",
    "ENCODINGS",
    "ENCODING_FILES",
    "SHIPPED_FILES",
    "EncodingSpec",
    "ShippedFile",
    "SourceUnavailable",
    "build_encoding",
    "parse_tiktoken_bpe",
    "read_shipped",
    "sha256_matches",
    "shipped_encodings",
]

BLOB = "https://openaipublic.blob.core.windows.net/encodings/"


@dataclass(frozen=True)
class EncodingSpec:
    """What ``tiktoken.Encoding`` is built from for one name, but the ranks: where its ranks
    file is (tiktoken's URL, which also names it in tiktoken's cache), the SHA-256 tiktoken
    expects of that file, the split pattern and the special tokens."""

    ranks_url: str
    ranks_sha256: str
    pat_str: str
    special_tokens: Mapping[str, int]
    explicit_n_vocab: int | None = None


_ENDOFTEXT = "<|endoftext|>"
_FIM = {"<|fim_prefix|>": 0, "<|fim_middle|>": 1, "<|fim_suffix|>": 2}
_ENDOFPROMPT = "<|endofprompt|>"

# The patterns and ids are tiktoken's (tiktoken_ext/openai_public.py, 0.8 to 0.14; 0.7 wrote
# r50k's and cl100k's without possessive quantifiers, which match the same pieces).
_R50K_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""
_CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|"""
    r"""\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
_O200K_PATTERN = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
_R50K_SHA256 = "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930"
_P50K_SHA256 = "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069"
_CL100K_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
_O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
_O200K_SPECIALS = {_ENDOFTEXT: 199999, _ENDOFPROMPT: 200018}
# o200k_harmony: o200k_base's tokens, eight named ones, and every other id up to 201087 reserved.
_HARMONY_NAMED = {
    "<|startoftext|>": 199998, "<|return|>": 200002, "<|constrain|>": 200003, "<|channel|>": 200005,
    "<|start|>": 200006, "<|end|>": 200007, "<|message|>": 200008, "<|call|>": 200012,
}
_HARMONY_SPECIALS = {
    **_O200K_SPECIALS,
    **_HARMONY_NAMED,
    **{f"<|reserved_{i}|>": i for i in range(200000, 201088) if i not in _HARMONY_NAMED.values()},
}

#: The encodings recallpack builds itself from ``.tiktoken`` files (tiktoken's own loading
#: serves any other name; gpt2's files are in another format).
ENCODINGS: Mapping[str, EncodingSpec] = {
    "r50k_base": EncodingSpec(
        BLOB + "r50k_base.tiktoken", _R50K_SHA256, _R50K_PATTERN, {_ENDOFTEXT: 50256}, 50257
    ),
    "p50k_base": EncodingSpec(
        BLOB + "p50k_base.tiktoken", _P50K_SHA256, _R50K_PATTERN, {_ENDOFTEXT: 50256}, 50281
    ),
    "p50k_edit": EncodingSpec(
        BLOB + "p50k_base.tiktoken",
        _P50K_SHA256,
        _R50K_PATTERN,
        {_ENDOFTEXT: 50256, **{token: 50281 + offset for token, offset in _FIM.items()}},
    ),
    "cl100k_base": EncodingSpec(
        BLOB + "cl100k_base.tiktoken",
        _CL100K_SHA256,
        _CL100K_PATTERN,
        {
            _ENDOFTEXT: 100257,
            **{token: 100258 + offset for token, offset in _FIM.items()},
            _ENDOFPROMPT: 100276,
        },
    ),
    "o200k_base": EncodingSpec(BLOB + "o200k_base.tiktoken", _O200K_SHA256, _O200K_PATTERN, _O200K_SPECIALS),
    "o200k_harmony": EncodingSpec(
        BLOB + "o200k_base.tiktoken", _O200K_SHA256, _O200K_PATTERN, _HARMONY_SPECIALS
    ),
}

#: Where tiktoken fetches each encoding's files; its cache names them by the sha1 of these URLs.
ENCODING_FILES: Mapping[str, tuple[str, ...]] = {name: (spec.ranks_url,) for name, spec in ENCODINGS.items()}


@dataclass(frozen=True)
class ShippedFile:
    """One vocabulary in this package: its resource name and the SHA-256 of its content."""

    resource: str
    sha256: str


#: The SHA-256 values are the ones tiktoken 0.7 to 0.14 expect for these URLs.
SHIPPED_FILES: Mapping[str, ShippedFile] = {
    BLOB + "cl100k_base.tiktoken": ShippedFile("cl100k_base.tiktoken.gz", _CL100K_SHA256),
    BLOB + "o200k_base.tiktoken": ShippedFile("o200k_base.tiktoken.gz", _O200K_SHA256),
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
    """The ``.tiktoken`` format, from bytes in memory: one base64 token and its rank per line
    (what ``load_tiktoken_bpe`` makes of a file, without its cache; see the module's note)."""
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


#: Called as ``load(url, expected_hash=sha256)``, the way tiktoken's constructors call its loader.
BpeLoader = Callable[..., dict[bytes, int]]


def build_encoding(name: str, load_bpe: BpeLoader) -> tiktoken.Encoding:
    """Build ``name`` by ``tiktoken.Encoding`` from its definition in ``ENCODINGS``, reading its
    ranks through ``load_bpe`` (called as ``load_bpe(url, expected_hash=sha256)``).

    Raises ``SourceUnavailable`` when ``load_bpe`` does, ``KeyError`` for an encoding recallpack
    does not build from ``.tiktoken`` files."""
    import tiktoken

    spec = ENCODINGS[name]
    return tiktoken.Encoding(
        name,
        pat_str=spec.pat_str,
        mergeable_ranks=load_bpe(spec.ranks_url, expected_hash=spec.ranks_sha256),
        special_tokens=dict(spec.special_tokens),
        explicit_n_vocab=spec.explicit_n_vocab,
    )
