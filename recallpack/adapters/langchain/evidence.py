"""LangChain adapter: a budgeted drop-in retriever, evidence for LCEL prompts, a compressor.

Handed on by :mod:`recallpack.adapters.langchain`, the public path, whose docstring introduces them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from recallpack.adapters.shared.extras import require

require("langchain_core", extra="langchain", feature=__name__)

from langchain_core.callbacks import Callbacks
from langchain_core.documents import BaseDocumentCompressor, Document
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.runnables.base import RunnableSerializable

from recallpack.adapters.langchain.documents import apack_documents, pack_documents
from recallpack.adapters.langchain.events import REPORT_EVENT, areport, report
from recallpack.adapters.langchain.retriever import BudgetedRetriever
from recallpack.adapters.langchain.settings import LangChainComponent
from recallpack.adapters.langchain.splitter import TokenWindowSplitter
from recallpack.packing.packer import Packer
from recallpack.packing.results.result import RecallResult

__all__ = [
    "REPORT_EVENT",
    "BudgetedRetriever",
    "BudgetCompressor",
    "EvidenceRenderer",
    "render_evidence",
    "TokenWindowSplitter",
]


class EvidenceRenderer(LangChainComponent, RunnableSerializable[list[Document], str]):
    """A Runnable from ``list[Document]`` (recallpack's or anyone's) to the evidence block.

    For chains that already have documents. The Documents are packed again, in the order
    given, so the block fits ``max_tokens``; recallpack's own Documents keep their labels (their
    ``provenance`` says which), and Documents already packed to this budget all fit again.
    ``render_evidence`` is the default instance; configure another with
    ``EvidenceRenderer(max_tokens=512, reader=...)``.
    """

    name: str | None = "recallpack_render_evidence"
    _KNOB: ClassVar[str | None] = None  # it is handed what it renders, and fetches nothing

    def invoke(self, input: list[Document], config: RunnableConfig | None = None, **kwargs: Any) -> str:
        # Per-call settings (from invoke or .bind) are validated, never silently ignored.
        packer = self._per_call(kwargs)
        return self._call_with_config(lambda docs: self._render(docs, packer), input, config)

    async def ainvoke(
        self, input: list[Document], config: RunnableConfig | None = None, **kwargs: Any
    ) -> str:
        # Packing is pure CPU and quick; a thread hop would cost more than it frees.
        packer = self._per_call(kwargs)

        async def arender(docs: list[Document]) -> str:
            return self._render(docs, packer)

        return await self._acall_with_config(arender, input, config)

    def _render(self, docs: list[Document], packer: Packer) -> str:
        _, result = pack_documents(self._handed, packer, None, [(docs, "render_evidence input")])
        # Into this runnable's own run, which _call_with_config made the current one.
        return report(result, None).to_markdown()


render_evidence: Runnable[list[Document], str] = EvidenceRenderer()
"""``list[Document]`` -> Markdown evidence block, packed to the default budget."""


class BudgetCompressor(LangChainComponent, BaseDocumentCompressor):
    """A document compressor that keeps what fits ``max_tokens``, in the order given.

    For ``ContextualCompressionRetriever`` and ``DocumentCompressorPipeline``: put it last, after
    any reranker, since it cuts in the order it receives. Kept Documents are copies with
    recallpack's metadata added, as from :class:`BudgetedRetriever`; the query steers focus cuts.
    """

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        kept, result = self._compressed(documents, query or None)
        report(result, callbacks)
        return kept

    async def acompress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        # Not LangChain's thread hop: arecall leaves the loop itself if it may call an embedding.
        handed = [(_listed(documents), "compressor input")]
        kept, result = await apack_documents(self._handed, self.packer, query or None, handed)
        await areport(result, callbacks)
        return kept

    def compress(self, documents: Sequence[Document], query: str | None = None) -> RecallResult:
        """The RecallResult of compressing ``documents`` (evidence, report, trace). A compressor
        cannot fetch more than it is handed: a budget left unused names the base retriever's ``k``."""
        return self._compressed(documents, query)[1]

    def _compressed(
        self, documents: Sequence[Document], query: str | None
    ) -> tuple[list[Document], RecallResult]:
        return pack_documents(self._handed, self.packer, query, [(_listed(documents), "compressor input")])


def _listed(documents: object) -> object:
    """A sequence of documents as a list; anything else as is, for the check to name."""
    if isinstance(documents, Sequence) and not isinstance(documents, str):
        return list(documents)
    return documents
