"""LangChain adapter: a budgeted drop-in retriever, evidence for LCEL prompts, a compressor.

Everything here is translation: LangChain ``Document``s become recallpack ``Candidate``s, a
:class:`~recallpack.Packer` packs them, and the kept evidence is mapped back onto copies of the
Documents. Every Packer setting is taken by the same name (``max_tokens``, ``policy``,
``reader``, ...). Needs the ``langchain`` extra (langchain-core 1.x); ``import recallpack``
never imports this module.

>>> from langchain_core.documents import Document
>>> from langchain_core.runnables import RunnableLambda
>>> upstream = RunnableLambda(lambda q: [Document(page_content="Paris is in France.")])
>>> docs = BudgetedRetriever(retriever=upstream, max_tokens=64).invoke("where is Paris?")
>>> docs[0].metadata["evidence_label"]
'Source excerpt'
"""

from recallpack.adapters.langchain.evidence import (
    REPORT_EVENT,
    BudgetCompressor,
    BudgetedRetriever,
    EvidenceRenderer,
    TokenWindowSplitter,
    render_evidence,
)

__all__ = [
    "REPORT_EVENT",
    "BudgetedRetriever",
    "BudgetCompressor",
    "EvidenceRenderer",
    "render_evidence",
    "TokenWindowSplitter",
]
