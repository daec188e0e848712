"""What the core knows of an embedding: a similarity function, and how the caller's loop is used.

A focus or passages cut scores sentences with an :data:`EmbedFn` (``(query, texts) -> one
similarity per text``). The core makes one from a plain callable (``list[str] -> vectors``)
itself; an embedding object of a host framework is read by that host's reader, found in the
core's host table (:mod:`recallpack.packing.hosts`) and imported when such an object first
comes, which names the host's methods and hands the core a :class:`Similarity` over them. The
core never names a host's method. A caller's own kind of embedding object can be taught with
:func:`accept_embeddings`.

>>> similarity = embed_function(lambda texts: [[len(t), 1.0] for t in texts])
>>> [round(s, 3) for s in similarity("abc", ["xyz", "a"])]
[1.0, 0.894]
"""

from __future__ import annotations

import asyncio
import inspect
import math
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from recallpack.packing.errors import ConfigError, RecallpackError
from recallpack.packing.hosts import accepted, read_host

__all__ = ["EmbedFn", "Similarity", "CALLER_LOOP", "embed_function", "accept_embeddings", "similarities"]

#: ``(query, texts) -> one similarity per text``; higher means closer to the query.
EmbedFn = Callable[[str, Sequence[str]], Sequence[float]]

#: The event loop of an async call (``Packer.arecall``) whose packing runs in a worker thread;
#: set only in that worker's context. An embedding with async methods is awaited there.
CALLER_LOOP: ContextVar[asyncio.AbstractEventLoop | None] = ContextVar("recallpack_caller_loop", default=None)


def _shown(value: object) -> str:
    """``value`` as an error message shows it: its repr, at most 80 characters, or its type when
    it has none that can be made (an int of more than 4,300 digits has none)."""
    try:
        return f"{value!r:.80}"
    except Exception:  # the caller's object: whatever its __repr__ raises
        return f"a {type(value).__name__}"


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = math.fsum(x * y for x, y in zip(a, b))
    norm = math.sqrt(math.fsum(x * x for x in a)) * math.sqrt(math.fsum(y * y for y in b))
    return dot / norm if norm else 0.0


@dataclass(frozen=True)
class Similarity:
    """Cosine similarity of the query's embedding with each text's, from an embedding object.

    ``methods`` names the object's methods for (the query's vector, the texts' vectors); None:
    the object is a callable ``list[str] -> vectors``, called once for the query and the texts.
    ``async_methods`` names their coroutine versions, awaited on the caller's loop when the
    packing of an async call runs in a worker thread. It holds the object and the names (no
    closures), so it pickles whenever the object does.
    """

    source: Any
    methods: tuple[str, str] | None = None
    async_methods: tuple[str, str] | None = None

    def __call__(self, query: str, texts: Sequence[str]) -> list[float]:
        if not texts:
            return []
        loop = CALLER_LOOP.get()
        try:
            if loop is not None and self._async() is not None:
                target, vectors = asyncio.run_coroutine_threadsafe(self._aembed(query, texts), loop).result()
            else:
                target, vectors = self._embed(query, texts)
        except RecallpackError:
            raise
        except Exception as exc:  # the caller's code (a client, a model): keep what it raised
            raise ConfigError(
                f"embed ({type(self.source).__name__}) raised {type(exc).__name__} embedding the "
                f"query and {len(texts)} sentences: {exc}"
            ) from exc
        return self._cosines(target, vectors, len(texts))

    def _async(self) -> tuple[Callable[..., Any], Callable[..., Any]] | None:
        if self.async_methods is None:
            return None
        of_query, of_texts = (getattr(self.source, name, None) for name in self.async_methods)
        if inspect.iscoroutinefunction(of_query) and inspect.iscoroutinefunction(of_texts):
            return of_query, of_texts
        return None

    async def _aembed(self, query: str, texts: Sequence[str]) -> tuple[Any, list[Any]]:
        methods = self._async()
        assert methods is not None
        return await methods[0](query), list(await methods[1](list(texts)))

    def _cosines(self, target: Any, vectors: list[Any], expected: int) -> list[float]:
        if len(vectors) != expected:
            raise ConfigError(
                f"embed ({type(self.source).__name__}) returned {len(vectors)} vectors for "
                f"{expected} texts; it must return one per text"
            )
        try:
            if any(len(vector) != len(target) for vector in vectors):
                raise TypeError("vectors of different lengths")
            return [_cosine(target, vector) for vector in vectors]
        except TypeError as exc:  # strings, None, ragged rows: zip() would quietly truncate those
            raise ConfigError(
                f"embed ({type(self.source).__name__}) returned vectors that are not lists of "
                f"numbers of one length ({exc})", field="embed"
            ) from None
        except (ArithmeticError, ValueError) as exc:  # 10**400, inf and -inf in one sum, a Decimal sNaN
            raise ConfigError(
                f"embed ({type(self.source).__name__}) returned numbers that cannot be used as "
                f"floats ({exc}); it must return lists of finite floats, one list per text",
                field="embed",
            ) from None

    def _embed(self, query: str, texts: Sequence[str]) -> tuple[Any, list[Any]]:
        """The query's vector and the texts', as the embedding returns them (lists, or a NumPy
        array: sentence-transformers returns one, whose rows iterate as vectors)."""
        if self.methods is not None:
            of_query, of_texts = (getattr(self.source, name) for name in self.methods)
            return of_query(query), list(of_texts(list(texts)))
        rows = self.source([query, *texts])  # one call for the query and the texts together
        listed = [] if rows is None else list(rows)
        return (listed[0], listed[1:]) if listed else ([], [])


#: ``resolve(obj)``: a Similarity over ``obj`` when it is an embedding the resolver knows, else None.
Resolver = Callable[[object], "Similarity | None"]
#: The resolvers registered by callers, with what each accepts (for the error message).
_RESOLVERS: list[tuple[Resolver, str]] = []


def accept_embeddings(resolve: Resolver, accepts: str) -> None:
    """Let ``embed=`` take the embedding objects ``resolve`` knows (``accepts`` says which, in an
    error's words), after the hosts' (:mod:`recallpack.packing.hosts`). Registering the same
    resolver again changes nothing."""
    if all(known is not resolve for known, _ in _RESOLVERS):
        _RESOLVERS.append((resolve, accepts))


def embed_function(obj: object) -> EmbedFn:
    """An :data:`EmbedFn` from an embedding object an adapter knows (a LangChain ``Embeddings``,
    a LlamaIndex ``BaseEmbedding``), a callable ``list[str] -> list[list[float]]`` (cosine
    similarity of the query to each text), or a :class:`Similarity` (returned as it is)."""
    if isinstance(obj, Similarity):
        return obj
    found: Similarity | None = read_host("embedding", obj)
    if found is not None:
        return found
    for resolve, _ in _RESOLVERS:
        found = resolve(obj)
        if found is not None:
            return found
    if callable(obj):
        return Similarity(obj)
    takes = "".join(f"{accepts}, " for accepts in [*accepted("EMBEDDINGS"), *(a for _, a in _RESOLVERS)])
    raise ConfigError(
        f"embed={obj!r} is not an embedding recallpack can use; pass {takes}or a callable "
        "list[str] -> list[list[float]]",
        field="embed",
    )


def similarities(embed: EmbedFn, query: str, units: list[str]) -> dict[int, float]:
    """``embed(query, units)`` by position, checked: one number per unit, a NaN ranking last (the
    focus cut and the passages policy score a text's sentences with it)."""
    values = list(embed(query, units))
    if len(values) != len(units):
        raise ConfigError(
            f"embed returned {len(values)} scores for {len(units)} sentences; it must return one per text"
        )
    scores: dict[int, float] = {}
    for i, value in enumerate(values):
        try:
            score = float(value)
        except (TypeError, ValueError, ArithmeticError):
            raise ConfigError(
                f"embed returned {_shown(value)} as a similarity; it must return numbers that fit a float",
                field="embed",
            ) from None
        scores[i] = score if score == score else -math.inf  # NaN ranks last, not anywhere
    return scores
