"""What recallpack reads of LlamaIndex's objects, by their shape (LlamaIndex is not imported): an
LLM's window, a ``BaseEmbedding``'s methods. (A LlamaIndex tokenizer is a plain callable, which
the core reads itself.)

The core's host table (:mod:`recallpack.packing.hosts`) names this module; the core imports it
the first time it meets an object it does not know itself.
"""

from __future__ import annotations

from typing import Any, cast

from recallpack.adapters.shared.depth import llamaindex_depth
from recallpack.adapters.shared.embeddings import HOST_ACCEPTS, embedding_of
from recallpack.adapters.shared.served import Served, comes_from
from recallpack.adapters.shared.sizing import llm_window
from recallpack.packing.choosing.embedding import Similarity

__all__ = ["EMBEDDINGS", "read_embedding", "read_model", "read_depth", "read_retriever"]

#: What :func:`read_embedding` takes, in an error message's words.
EMBEDDINGS = HOST_ACCEPTS["llamaindex"]
#: A LlamaIndex LLM's window, for ``budget_for``.
read_model = llm_window
#: A LlamaIndex retriever's own depth (its ``similarity_top_k``).
read_depth = llamaindex_depth


def read_embedding(obj: object) -> Similarity | None:
    """A Similarity over a LlamaIndex ``BaseEmbedding``; None for anything else."""
    return embedding_of("llamaindex", obj)


def read_retriever(obj: object) -> Served | None:
    """How ``recallpack serve`` wraps a LlamaIndex retriever (a class from ``llama_index``)."""
    if not comes_from(obj, "llama_index"):
        return None

    def wrap(**settings: Any) -> Any:
        from recallpack.adapters.llamaindex import BudgetedRetriever

        return BudgetedRetriever(cast(Any, obj), **settings)

    return Served("LlamaIndex", wrap)
