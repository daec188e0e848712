"""Offline stand-ins for a real corpus and a real embedding model, for tests, examples and demos.

Everything here works without network or model downloads, and is deterministic across
processes and machines with the same Python:

* :func:`stdlib_docs`, :func:`paragraphs` and :func:`source_paragraphs` give real English text
  that every Python install has: the standard library's module docstrings and source files.
* :func:`hashed_bag_of_words` is a lexical embedding (texts that share words are near), and
  ``HashingEmbeddings`` / ``HashingEmbedding`` wrap it as a LangChain ``Embeddings`` and a
  LlamaIndex ``BaseEmbedding``, so a real vector store retrieves real neighbours offline.
  Those two need their extra (``recallpack[langchain]``, ``recallpack[llamaindex]``) and are
  built on first use, so importing this module imports neither framework.

>>> from recallpack.testing import hashed_bag_of_words, paragraphs
>>> module, text = paragraphs()[0]
>>> len(hashed_bag_of_words(text))
256
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import sys
import sysconfig
import warnings
import zlib
from functools import lru_cache
from math import sqrt
from pathlib import Path
from typing import Any

from recallpack.packing.errors import ConfigError
from recallpack.packing.reading.analysis import AUTO, Reading, check_language

__all__ = [
    "stdlib_docs",
    "paragraphs",
    "source_paragraphs",
    "hashed_bag_of_words",
]  # HashingEmbeddings and HashingEmbedding too, built on first use (not by import *)

# Modules that print, open windows, or change the process when imported.
_SKIP = {"antigravity", "this", "idlelib", "tkinter", "turtle", "turtledemo", "__main__", "__phello__"}


@lru_cache(maxsize=1)
def stdlib_docs() -> tuple[tuple[str, str], ...]:
    """``(module name, docstring)`` for every importable top-level stdlib module whose docstring
    is longer than 200 characters, sorted by module name."""
    names = sorted(
        name
        for name in getattr(sys, "stdlib_module_names", ())
        if not name.startswith("_") and name not in _SKIP
    )
    if not names:  # an interpreter without stdlib_module_names: walk what is importable
        names = sorted(m.name for m in pkgutil.iter_modules() if not m.name.startswith("_"))
    docs = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in names:
            try:
                module = importlib.import_module(name)
            except Exception:  # noqa: BLE001 - platform-specific modules fail to import elsewhere
                continue
            doc = inspect.cleandoc(module.__doc__ or "")
            if len(doc) > 200:
                docs.append((name, doc))
    return tuple(docs)


def paragraphs(min_chars: int = 80) -> list[tuple[str, str]]:
    """``(module, paragraph)`` pairs: the stdlib docstrings split at blank lines, keeping the
    paragraphs of at least ``min_chars`` characters. A few thousand on CPython 3.11."""
    out = []
    for name, doc in stdlib_docs():
        for block in doc.split("\n\n"):
            block = block.strip()
            if len(block) >= min_chars:
                out.append((name, block))
    return out


def source_paragraphs(limit: int, min_words: int = 8) -> list[tuple[str, int, str]]:
    """Up to ``limit`` ``(file name, position, paragraph)`` of the standard library's own source
    files, blank-line separated, in a fixed order: real, varied English and code, offline."""
    root = Path(sysconfig.get_paths()["stdlib"])
    out: list[tuple[str, int, str]] = []
    for path in sorted(root.glob("*.py")):
        try:
            text = path.read_text("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        for number, paragraph in enumerate(p.strip() for p in text.split("\n\n")):
            if len(paragraph.split()) >= min_words:
                out.append((path.name, number, paragraph))
                if len(out) == limit:
                    return out
    return out


def hashed_bag_of_words(text: str, dim: int = 256, *, language: str | None = None) -> list[float]:
    """A lexical embedding: words hashed into ``dim`` signed buckets, L2-normalised.

    Real retrieval (texts sharing words are near), deterministic across processes (crc32, not
    ``hash()``), and no model to download. Words are read by recallpack's analysis chain, in
    every script: words as written by default, pairs of characters in scripts written without
    spaces (Chinese, Japanese, Thai); ``language`` (an ISO 639-1 code such as ``"ru"``) also
    matches inflections by that language's stemmer. It is the same for the query and the texts,
    so they are read alike (``"auto"`` is refused: a short query and its texts could be read as
    two languages). A text without a letter or a digit embeds as all zeros.

    >>> a, b = hashed_bag_of_words("Berlin office"), hashed_bag_of_words("the Berlin office")
    >>> round(sum(x * y for x, y in zip(a, b)), 2)
    0.82
    """
    vector = [0.0] * dim
    for word in _reading(language).keys(text):
        code = zlib.crc32(word.encode())
        vector[code % dim] += 1.0 if (code >> 16) & 1 else -1.0
    norm = sqrt(sum(v * v for v in vector)) or 1.0
    return [v / norm for v in vector]


@lru_cache(maxsize=64)
def _reading(language: str | None) -> Reading:
    if language == AUTO:
        raise ConfigError(
            "language='auto' would read a query and its texts apart; name the language ('ru') "
            "or pass None (words as written)",
            field="language",
        )
    return Reading(check_language(language))


def _langchain_embeddings() -> type:
    from langchain_core.embeddings import Embeddings

    class HashingEmbeddings(Embeddings):
        """LangChain ``Embeddings`` over :func:`hashed_bag_of_words` (``dim`` buckets).

        LangChain's ``DeterministicFakeEmbedding`` hashes the whole text, so its neighbours are
        random: fine for plumbing, not for a search whose results a reader can check.
        """

        def __init__(self, dim: int = 256, *, language: str | None = None) -> None:
            self.dim = dim
            self.language = _reading(language).language  # checked here, not at the first text

        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return [hashed_bag_of_words(text, self.dim, language=self.language) for text in texts]

        def embed_query(self, text: str) -> list[float]:
            return hashed_bag_of_words(text, self.dim, language=self.language)

    return HashingEmbeddings


def _llamaindex_embedding() -> type:
    from llama_index.core.bridge.pydantic import Field
    from llama_index.core.embeddings import BaseEmbedding

    class HashingEmbedding(BaseEmbedding):
        """LlamaIndex ``BaseEmbedding`` over :func:`hashed_bag_of_words` (``dim`` buckets).

        ``MockEmbedding`` gives every text the same vector, so a vector index retrieves
        nothing in particular with it; this one finds the texts that share the query's words.
        """

        dim: int = Field(default=256, gt=0, description="Number of hash buckets.")
        language: str | None = Field(
            default=None, description="None: words as written; an ISO 639-1 code: its stemmer too."
        )

        @classmethod
        def class_name(cls) -> str:
            return "HashingEmbedding"

        def embed(self, text: str) -> list[float]:
            return hashed_bag_of_words(text, self.dim, language=self.language)

        def _get_query_embedding(self, query: str) -> list[float]:
            return self.embed(query)

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return self.embed(query)

        def _get_text_embedding(self, text: str) -> list[float]:
            return self.embed(text)

    return HashingEmbedding


_HOST_CLASSES = {"HashingEmbeddings": _langchain_embeddings, "HashingEmbedding": _llamaindex_embedding}


def __getattr__(name: str) -> Any:
    # Built on first use so that importing recallpack.testing needs neither framework. The class
    # is stored under its own name here, so pickle and copy find it again.
    if name in _HOST_CLASSES:
        cls = _HOST_CLASSES[name]()
        cls.__module__, cls.__qualname__ = __name__, name
        globals()[name] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
