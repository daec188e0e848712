"""Retriever factories for ``recallpack serve --retriever tests.adapters.mcp_factories:NAME``.

Real retrievers over real text: BM25 (LangChain's and LlamaIndex's) over the docstrings of a
few standard library modules, plus two scoped notes, one for a scope the test reader holds
and one for a scope it does not. The rest misbehave on purpose, as users' factories can.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import warnings
from typing import Any

MODULES = ("argparse", "bisect", "contextlib", "csv", "difflib", "functools", "heapq", "json",
           "logging", "pathlib", "shutil", "statistics", "string", "textwrap", "unittest")  # fmt: skip
#: Scoped notes: the words in them occur nowhere else, so a search for them finds only them.
READABLE_NOTE = "The wombat roster for the quarterly offsite lists every organiser by team."
SECRET_NOTE = "The quokka ledger records the merger negotiations and their undisclosed terms."
READABLE_SCOPE, SECRET_SCOPE = "org-a", "org-secret"


def paragraphs() -> list[tuple[str, int, str]]:
    """``(module, index, paragraph)`` of the modules' docstrings (``inspect.getdoc``)."""
    out = []
    for name in MODULES:
        doc = inspect.getdoc(importlib.import_module(name)) or ""
        blocks = [b.strip() for b in doc.split("\n\n") if len(b.strip()) > 60]
        out.extend((name, index, block) for index, block in enumerate(blocks))
    return out


def _metadata(module: str, index: int) -> dict[str, Any]:
    return {"artifact_id": f"stdlib/{module}", "artifact_content_id": str(index), "source": module}


def langchain_bm25() -> Any:
    """LangChain's BM25Retriever (rank-bm25) over the docstrings and the two notes."""
    from langchain_core.documents import Document

    with warnings.catch_warnings():  # langchain-community announces its own sunset on import
        warnings.simplefilter("ignore")
        from langchain_community.retrievers import BM25Retriever

    docs = [Document(page_content=text, metadata=_metadata(m, i)) for m, i, text in paragraphs()]
    docs.append(Document(page_content=READABLE_NOTE, metadata={"scope_ids": [READABLE_SCOPE], "source": "notes/a"}))
    docs.append(Document(page_content=SECRET_NOTE, metadata={"scope_ids": [SECRET_SCOPE], "artifact_id": "notes/secret", "artifact_content_id": "1"}))
    return BM25Retriever.from_documents(docs, k=20)


def llamaindex_bm25() -> Any:
    """LlamaIndex's BM25Retriever (bm25s) over the same docstrings."""
    from llama_index.core.schema import TextNode
    from llama_index.retrievers.bm25 import BM25Retriever

    nodes = [TextNode(text=text, metadata=_metadata(m, i)) for m, i, text in paragraphs()]
    return BM25Retriever.from_defaults(nodes=nodes, similarity_top_k=20)


def slow() -> Any:
    """A LangChain Runnable that takes 30 s for a query with "slow" in it, answers others at once."""
    from langchain_core.documents import Document
    from langchain_core.runnables import RunnableLambda

    def sync(query: str) -> list[Document]:
        raise AssertionError("the server calls retrievers asynchronously")

    async def search(query: str) -> list[Document]:
        if "slow" in query:
            await asyncio.sleep(30)
        return [Document(page_content=f"An answer about {query}.", metadata={"source": "slow"})]

    return RunnableLambda(sync, afunc=search)


def failing() -> Any:
    """A LangChain Runnable whose every search fails, as an index that went offline does."""
    from langchain_core.runnables import RunnableLambda

    async def search(query: str) -> list[Any]:
        raise RuntimeError("the index is offline")

    return RunnableLambda(lambda q: [], afunc=search)


def not_a_retriever() -> Any:
    return {"retriever": "nope"}


def raises() -> Any:
    raise ValueError("the factory needs INDEX_PATH set")


def already_wrapped() -> Any:
    from recallpack.adapters.langchain import BudgetedRetriever

    return BudgetedRetriever(retriever=langchain_bm25())


NOT_CALLABLE = 42
