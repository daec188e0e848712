"""LangChain Documents in and out: the upstream's output checked, the kept ones copied back."""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.documents import Document

from recallpack.packing.errors import UpstreamError
from recallpack.packing.result import RecallResult
from recallpack.packing.translate import evidence_metadata

__all__ = ["documents_of", "listed", "kept_documents"]


def documents_of(output: object, source: str) -> list[Document]:
    """``output`` as a list of Documents, or an UpstreamError naming the position and type."""
    if not isinstance(output, (list, tuple)):
        raise UpstreamError(f"{source} returned a {type(output).__name__}; expected a list of Documents")
    for position, item in enumerate(output):
        if not isinstance(item, Document):
            raise UpstreamError(
                f"{source} returned a {type(item).__name__} at position {position}; expected a "
                "langchain_core.documents.Document (wrap plain texts as Document(page_content=...))"
            )
    return list(output)


def listed(documents: object) -> object:
    """A sequence of documents as a list; anything else as is, for documents_of to name."""
    if isinstance(documents, Sequence) and not isinstance(documents, str):
        return list(documents)
    return documents


def kept_documents(docs: Sequence[Document], result: RecallResult) -> list[Document]:
    """Copies of the kept Documents, in evidence order, with recallpack's fields added.

    Copies, because upstream Documents may be shared (a vector store hands out its own objects).
    A cut text becomes the copy's page_content.
    """
    kept = []
    for rank, evidence in zip(result.selected_ranks, result.evidence, strict=True):
        doc = docs[rank]
        content = evidence.text if evidence.truncated else doc.page_content
        metadata = {**doc.metadata, **evidence_metadata(evidence)}
        kept.append(doc.model_copy(update={"page_content": content, "metadata": metadata}))
    return kept
