"""What recallpack reads of LangChain's objects, by their shape (LangChain is not imported): a
language model's token counter and window, an ``Embeddings``' methods.

The core's host table (:mod:`recallpack.packing.hosts`) names this module; the core imports it
the first time it meets an object it does not know itself.
"""

from __future__ import annotations

from typing import Any

from recallpack.adapters.shared.depth import langchain_depth
from recallpack.adapters.shared.embeddings import HOST_ACCEPTS, embedding_of
from recallpack.adapters.shared.served import Served, comes_from
from recallpack.adapters.shared.sizing import chat_model_window
from recallpack.adapters.shared.tokenizers import read_language_model
from recallpack.packing.choosing.embedding import Similarity

__all__ = ["EMBEDDINGS", "read_tokenizer", "read_embedding", "read_model", "read_depth", "read_retriever"]

#: What :func:`read_embedding` takes, in an error message's words.
EMBEDDINGS = HOST_ACCEPTS["langchain"]
#: A LangChain language model as a Tokenizer (its ``get_num_tokens``).
read_tokenizer = read_language_model
#: A LangChain chat model's window, for ``budget_for``.
read_model = chat_model_window
#: A LangChain retriever's own depth (``search_kwargs["k"]``, or its ``k``).
read_depth = langchain_depth


def read_embedding(obj: object) -> Similarity | None:
    """A Similarity over a LangChain ``Embeddings``; None for anything else."""
    return embedding_of("langchain", obj)


def read_retriever(obj: object) -> Served | None:
    """How ``recallpack serve`` wraps a LangChain retriever (any ``langchain_core`` Runnable)."""
    if not comes_from(obj, "langchain_core"):
        return None

    def wrap(**settings: Any) -> Any:
        from recallpack.adapters.langchain import BudgetedRetriever

        return BudgetedRetriever(retriever=obj, **settings)

    return Served("LangChain", wrap)
