"""How deep an upstream searches, read where it says, and how to ask it for more without changing it.

Shared by both adapters, and duck-typed, so it imports no host framework: a LangChain
``VectorStoreRetriever`` says its depth in ``search_kwargs["k"]``, LangChain's ``BM25Retriever``
in its ``k`` field, a LlamaIndex retriever (vector index, BM25) in ``similarity_top_k``. Which
of these a retriever is, the host table says (each host's reader's ``read_depth``), not a switch
here. How much
to ask for is the core's pipeline's (:meth:`recallpack.packing.pipeline.Pipeline.depths`).
"""

from __future__ import annotations

import copy
import inspect
from typing import Any, Literal, TypeVar

from recallpack.packing.hosts import read_host
from recallpack.packing.validation import is_int

__all__ = [
    "Forward", "forwarding", "own_depth", "langchain_depth", "llamaindex_depth", "search_kwargs_for",
    "corpus_size", "with_top_k", "deepened",
]

#: How a depth reaches a LangChain retriever: a per-call ``k=``, a copy with its ``k`` set, or not.
Forward = Literal["kwarg", "copy", "none"]

R = TypeVar("R")

#: What LangChain's vector stores return when ``search_kwargs`` sets no ``k``.
VECTOR_STORE_K = 4
#: What LangChain's vector stores fetch before an MMR rerank when ``search_kwargs`` sets no ``fetch_k``.
VECTOR_STORE_MMR_FETCH_K = 20


def _positive(value: object) -> int | None:
    return value if is_int(value, 1) else None


def _is_vector_store_retriever(upstream: object) -> bool:
    return isinstance(getattr(upstream, "search_kwargs", None), dict) and hasattr(upstream, "vectorstore")


def own_depth(upstream: object) -> int | None:
    """How many results ``upstream`` returns by its own settings, when it says (else None): what
    the first host in the host table whose reader knows it says (its ``read_depth``)."""
    depth = read_host("depth", upstream)
    return depth if isinstance(depth, int) else None


def langchain_depth(upstream: object) -> int | None:
    """A LangChain retriever's depth: a vector store retriever's ``search_kwargs["k"]`` (4 when
    unset), or a ``k`` field (BM25Retriever)."""
    if _is_vector_store_retriever(upstream):
        return _positive(getattr(upstream, "search_kwargs").get("k", VECTOR_STORE_K))  # noqa: B009
    return _positive(getattr(upstream, "k", None))


def llamaindex_depth(upstream: object) -> int | None:
    """A LlamaIndex retriever's depth: its ``similarity_top_k``."""
    return _positive(getattr(upstream, "similarity_top_k", None))


def forwarding(retriever: object) -> Forward:
    """How a depth reaches a LangChain ``BaseRetriever`` as its ``k``: as a per-call ``k=`` to one
    whose ``_get_relevant_documents`` takes it (or ``**kwargs``, as VectorStoreRetriever does); on
    a shallow copy of one with a ``k`` field (BM25Retriever), so the caller's object is never
    changed; or not at all."""
    params = inspect.signature(type(retriever)._get_relevant_documents).parameters  # type: ignore[attr-defined]
    if "k" in params:
        return "kwarg"
    if "k" in getattr(type(retriever), "model_fields", {}):
        return "copy"
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return "kwarg"
    return "none"


def search_kwargs_for(upstream: object, depth: int) -> dict[str, Any]:
    """The per-call keywords that ask ``upstream`` (a retriever taking ``k`` per call) for
    ``depth`` results; for a vector store's MMR search, its candidate pool grows with it."""
    kwargs: dict[str, Any] = {"k": depth}
    if _is_vector_store_retriever(upstream) and getattr(upstream, "search_type", None) == "mmr":
        pool = getattr(upstream, "search_kwargs").get("fetch_k", VECTOR_STORE_MMR_FETCH_K)  # noqa: B009
        kwargs["fetch_k"] = max(depth, pool if isinstance(pool, int) else depth)
    return kwargs


def corpus_size(retriever: object) -> int | None:
    """How many nodes a LlamaIndex BM25 retriever holds (it refuses a top-k above that)."""
    scores = getattr(getattr(retriever, "bm25", None), "scores", None)
    return _positive(scores.get("num_docs")) if isinstance(scores, dict) else None


def with_top_k(retriever: R, depth: int) -> R:
    """A shallow copy of a LlamaIndex retriever asking for ``depth`` results (at most what a BM25
    retriever holds); the caller's keeps its own, and the copy shares the index and callbacks."""
    size = corpus_size(retriever)
    copied = copy.copy(retriever)
    copied.similarity_top_k = depth if size is None else min(depth, size)  # type: ignore[attr-defined]
    return copied


def deepened(retriever: R, depth: int | None) -> R:
    """``retriever``, or a shallow copy of it asking for ``depth`` results: the caller's keeps its
    own top-k, and the copy shares the index, store and callbacks."""
    if depth is None or depth == own_depth(retriever):
        return retriever
    return with_top_k(retriever, depth)
