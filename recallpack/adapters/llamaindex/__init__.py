"""recallpack for LlamaIndex: a token budget as a node postprocessor, a retriever, a query engine.

Three ways in, each native to LlamaIndex:

- :class:`BudgetPostprocessor` goes in ``node_postprocessors=[...]`` of any query or chat engine.
  It counts what the LLM is shown (each node in ``metadata_mode``, joined as the response mode
  that shows the most joins them), so the context the synthesizer builds fits ``max_tokens`` in
  every ``response_mode``. Each kept node carries its query's report (:func:`report_of`).
- :class:`BudgetedRetriever` wraps any LlamaIndex retriever (or several, fused by reciprocal rank
  fusion) and packs what it returns; ``recall(query)`` gives the whole
  :class:`~recallpack.RecallResult`. It budgets the rendered Markdown evidence block, exactly as
  the LangChain adapter does, so both hosts give the same bytes for the same upstream items.
- :class:`EvidenceQueryEngine` puts that rendered block itself into the prompt.

All three take every :class:`~recallpack.Packer` setting by name. They hand the core only
Candidates, and never mutate the caller's nodes: kept nodes are copies carrying the five public
evidence fields in metadata hidden from the LLM and embedding views. When the user set
``Settings.tokenizer``, it is what counts, unless ``tokenizer=`` says otherwise.

>>> from llama_index.core.schema import NodeWithScore, TextNode
>>> nodes = [NodeWithScore(node=TextNode(text="Paris is the capital of France."), score=0.9)]
>>> kept = BudgetPostprocessor(max_tokens=64).postprocess_nodes(nodes)
>>> kept[0].node.metadata["evidence_label"], kept[0].score
('Source excerpt', 0.9)
"""

from recallpack.adapters.llamaindex.postprocessor import (
    REPORT_KEY,
    RESPONSE_MODES,
    BudgetedRetriever,
    BudgetPostprocessor,
    EvidenceQueryEngine,
    RecallPackedEvent,
    TokenWindowNodeParser,
    report_of,
)

__all__ = [
    "BudgetPostprocessor",
    "BudgetedRetriever",
    "EvidenceQueryEngine",
    "RecallPackedEvent",
    "RESPONSE_MODES",
    "REPORT_KEY",
    "report_of",
    "TokenWindowNodeParser",
]
