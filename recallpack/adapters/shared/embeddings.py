"""Host embeddings as the core's similarity function: the one place that names their methods.

A LangChain ``Embeddings`` has ``embed_query`` and ``embed_documents`` (and, optionally, their
``a``-prefixed coroutines); a LlamaIndex ``BaseEmbedding`` has ``get_query_embedding`` and
``get_text_embedding_batch`` (and ``aget_*``). Duck-typed, so it imports neither framework:
:func:`embedding_of` makes a :class:`~recallpack.packing.choosing.embedding.Similarity` over either.
The hosts' readers (named in the core's host table, ``recallpack.packing.hosts``) call it, so
the core's ``embed=`` takes these objects, in ``recall()`` and in every adapter alike.
"""

from __future__ import annotations

from typing import Any

from recallpack.packing.choosing.embedding import EmbedFn, Similarity, embed_function

__all__ = ["HOST_EMBEDDINGS", "HOST_ACCEPTS", "embedding_of", "as_embed_fn"]

#: Per host: (the query's method, the texts' method), and their coroutine versions.
HOST_EMBEDDINGS: dict[str, tuple[tuple[str, str], tuple[str, str]]] = {
    "langchain": (("embed_query", "embed_documents"), ("aembed_query", "aembed_documents")),
    "llamaindex": (
        ("get_query_embedding", "get_text_embedding_batch"),
        ("aget_query_embedding", "aget_text_embedding_batch"),
    ),
}
#: Per host: what :func:`embedding_of` accepts, in an error message's words.
HOST_ACCEPTS = {
    "langchain": "a LangChain Embeddings (embed_query and embed_documents)",
    "llamaindex": "a LlamaIndex BaseEmbedding (get_query_embedding and get_text_embedding_batch)",
}


def embedding_of(host: str, obj: object) -> Similarity | None:
    """A Similarity over ``obj`` when it has ``host``'s two embedding methods, else None."""
    methods, async_methods = HOST_EMBEDDINGS[host]
    if all(callable(getattr(obj, name, None)) for name in methods):
        return Similarity(obj, methods, async_methods)
    return None


def as_embed_fn(embed: Any) -> EmbedFn | None:
    """An adapter's ``embed=`` (a host embedding, a callable, or None) as what the core takes (a
    host embedding is read by its host's reader, through the core's host table)."""
    return None if embed is None else embed_function(embed)
