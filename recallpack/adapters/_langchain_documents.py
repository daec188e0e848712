"""LangChain Documents in and out: the upstream's output checked, each read as an Item, the kept
ones copied back; and what every LangChain component shares (``k`` as ``max_items``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.documents import Document
from pydantic import model_validator

from recallpack.adapters._common import PackerComponent
from recallpack.packing.candidate import LaneKind
from recallpack.packing.errors import ConfigError, UpstreamError
from recallpack.packing.fusion import DEFAULT_RRF_K
from recallpack.packing.pipeline import Item, Kept, Pipeline, Source
from recallpack.packing.translate import evidence_metadata, score_from
from recallpack.packing.validation import check_max_items

__all__ = ["LangChainComponent", "LanesSettings", "k_or_max_items", "documents_of",
           "listed", "document_item", "kept_documents"]


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


def document_item(doc: Document, position: int) -> Item:
    """A Document as the core reads it; its score is what the upstream recorded in metadata."""
    return Item(doc.page_content, doc.metadata, score_from(doc.metadata, position))


def kept_documents(kept: Sequence[Kept[Document]]) -> list[Document]:
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


class LangChainComponent(PackerComponent):
    """Documents in, Candidates to the Packer, copies of the kept Documents out."""

    if TYPE_CHECKING:
        # LangChain's name for max_items, so type checkers accept it as validation does; at run
        # time it is not a field: _k_is_max_items moves it to max_items.
        k: int | None = None

    @classmethod
    def _aliases(cls) -> tuple[str, ...]:
        return ("k",)

    @model_validator(mode="before")
    @classmethod
    def _k_is_max_items(cls, data: Any) -> Any:
        # LangChain's retrievers call the number of results ``k``; recallpack calls it max_items.
        if isinstance(data, dict) and "k" in data:
            data = dict(data)
            data["max_items"] = k_or_max_items(data.pop("k"), data.get("max_items", "unset"))
        return data

    def _handed(self, knob: str | None) -> Pipeline[Document]:
        """The pipeline of Documents handed over (not fetched); ``knob`` fetches more of them."""
        return Pipeline([Source()], translate=document_item, items=self._items, knob=knob)


def k_or_max_items(k: object, max_items: object) -> int | None:
    k = check_max_items(k, "k")
    if max_items != "unset" and max_items != k:
        raise ConfigError(f"k={k!r} and max_items={max_items!r} disagree; pass one (k is max_items)")
    return k


class LanesSettings(LangChainComponent):
    """What ``BudgetedRetriever.from_lanes`` takes by keyword (for type checkers)."""

    weights: Mapping[LaneKind | str, float] | None = None
    rrf_k: int = DEFAULT_RRF_K
    fetch_k: int | None = None
    name: str | None = None
    tags: list[str] | None = None
    metadata: dict[str, Any] | None = None
