"""LangChain Documents in and out: the upstream's output checked, each read as an Item, packed
by the core's pipeline, the kept ones copied back, all in one call (:func:`pack_documents`), so
the pipeline never calls back here. What every LangChain component shares is
:mod:`recallpack.adapters.langchain.settings`."""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.documents import Document

from recallpack.packing.errors import UpstreamError
from recallpack.packing.pipeline import Item, KeptObject, Packs, Pipeline, Returned
from recallpack.packing.results.result import RecallResult
from recallpack.packing.translate import evidence_metadata, recorded_score
from recallpack.packing.validation import check_each

__all__ = ["checked_documents", "document_item", "kept_documents", "pack_documents", "apack_documents"]


def checked_documents(output: object, source: str) -> list[Document]:
    """``output`` as a list of Documents, or an UpstreamError naming the position and type."""
    if not isinstance(output, (list, tuple)):
        raise UpstreamError(f"{source} returned a {type(output).__name__}; expected a list of Documents")
    check_each(output, Document, lambda position, item: UpstreamError(
        f"{source} returned a {type(item).__name__} at position {position}; expected a "
        "langchain_core.documents.Document (wrap plain texts as Document(page_content=...))"
    ))
    return list(output)


def document_item(doc: Document, position: int) -> Item:
    """A Document as the core reads it; its score is what the upstream recorded in metadata
    (checked with the rest of it, after its scopes)."""
    score, field = recorded_score(doc.metadata)
    return Item(doc.page_content, doc.metadata, score, score_field=field)


def kept_documents(kept: Sequence[KeptObject[Document]]) -> list[Document]:
    """Copies of the kept Documents, in evidence order, with recallpack's fields added.

    Copies, because upstream Documents may be shared (a vector store hands out its own objects).
    A cut text becomes the copy's page_content.
    """
    copies = []
    for item in kept:
        doc, evidence = item.original, item.evidence
        content = evidence.text if evidence.truncated else doc.page_content
        metadata = {**doc.metadata, **evidence_metadata(evidence)}
        copies.append(doc.model_copy(update={"page_content": content, "metadata": metadata}))
    return copies


#: Per source: what it returned (checked here) and how an error names it.
Outputs = Sequence[tuple[object, str]]


def _read(outputs: Outputs, depths: Sequence[int | None] | None) -> Returned[Document]:
    docs = [checked_documents(output, name) for output, name in outputs]
    items = [[document_item(doc, i) for i, doc in enumerate(listed)] for listed in docs]
    return Returned(docs, items, depths)


def pack_documents(
    pipeline: Pipeline[Document], packs: Packs, query: str | None, outputs: Outputs,
    depths: Sequence[int | None] | None = None,
) -> tuple[list[Document], RecallResult]:
    """One pack of what each source returned (checked, read as Items), by ``pipeline`` once: the
    copies of the kept Documents and the result. ``depths``: what the sources were asked for
    (None: the Documents were handed over)."""
    outcome = pipeline.packed(packs, query, _read(outputs, depths))
    return kept_documents(outcome.kept), outcome.result


async def apack_documents(
    pipeline: Pipeline[Document], packs: Packs, query: str | None, outputs: Outputs,
    depths: Sequence[int | None] | None = None,
) -> tuple[list[Document], RecallResult]:
    """:func:`pack_documents` for async code, packed by ``packs.arecall``."""
    outcome = await pipeline.apacked(packs, query, _read(outputs, depths))
    return kept_documents(outcome.kept), outcome.result
