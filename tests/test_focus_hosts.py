"""Focus cuts through the hosts: the adapters know the query, so a long top match keeps its answer."""

from __future__ import annotations

from typing import Any

import pytest

from recallpack import ConfigError, Packer, recall
from recallpack.testing import hashed_bag_of_words
from tests.test_cuts_real_docs import answered, cases, tiktoken_count

pytest.importorskip("langchain_core")
pytest.importorskip("llama_index.core")

from langchain_core.documents import Document  # noqa: E402
from langchain_core.runnables import RunnableLambda  # noqa: E402
from llama_index.core.retrievers import BaseRetriever as LlamaRetriever  # noqa: E402
from llama_index.core.schema import NodeWithScore, TextNode  # noqa: E402

from recallpack.adapters import langchain as lc  # noqa: E402
from recallpack.adapters import llamaindex as li  # noqa: E402

BUDGET = 300


def _hosts(doc: str, module: str, **settings: Any) -> tuple[Any, Any]:
    """The same top document behind a LangChain and a LlamaIndex retriever (policy='prefix', so
    its one cut is the floor's focus cut, unless ``settings`` say otherwise)."""
    settings.setdefault("policy", "prefix")
    metadata = {"source": f"pydoc:{module}"}
    langchain = lc.BudgetedRetriever(
        retriever=RunnableLambda(lambda q: [Document(page_content=doc, metadata=metadata)]),
        max_tokens=BUDGET,
        **settings,
    )

    class One(LlamaRetriever):
        def _retrieve(self, query_bundle: Any) -> list[NodeWithScore]:
            return [NodeWithScore(node=TextNode(text=doc, metadata={"file_path": f"pydoc:{module}"}), score=1.0)]

    return langchain, li.BudgetedRetriever(One(), max_tokens=BUDGET, **settings)


def test_both_hosts_keep_the_answer_by_focus_and_agree_byte_for_byte() -> None:
    """Over known-item queries, both adapters keep the answer in >= 80% of cases, with the same bytes."""
    _, ranked_first = cases()
    focus_hits = head_hits = 0
    for case in ranked_first:
        langchain, llamaindex = _hosts(case.doc, case.module)
        block = langchain.recall(case.query).to_markdown()
        assert block == llamaindex.recall(case.query).to_markdown(), case.query
        assert tiktoken_count(block) <= BUDGET
        result = langchain.recall(case.query)
        assert result.report.floor_applied and result.report.cut == "focus" and result.trace[0].kept_spans
        focus_hits += answered(case, block)
        head, _ = _hosts(case.doc, case.module, cut="head")
        head_hits += answered(case, head.recall(case.query).to_markdown())
    n = len(ranked_first)
    assert focus_hits >= 0.8 * n and head_hits <= 0.3 * n, (focus_hits, head_hits, n)


def test_the_trace_says_which_ranges_a_focus_cut_kept() -> None:
    """The kept spans are ranges of the original text, in order, and their text is in the block."""
    case = cases()[1][0]
    result = recall([{"text": case.doc}], max_tokens=BUDGET, query=case.query)
    entry = result.trace[0]
    assert entry.cut == "focus" and entry.truncated
    starts = [start for start, _ in entry.kept_spans]
    assert starts == sorted(starts) and all(0 <= s < e <= len(case.doc) for s, e in entry.kept_spans)
    for start, end in entry.kept_spans:
        assert " ".join(case.doc[start:end].split()) in " ".join(result.evidence[0].text.split())


def test_without_a_query_the_cut_is_a_head_cut() -> None:
    """recall() without a query cuts by head; cut='focus' without one is refused."""
    case = cases()[1][0]
    assert recall([{"text": case.doc}], max_tokens=BUDGET).report.cut == "head"
    with pytest.raises(ConfigError, match="needs the query") as refused:
        Packer(cut="focus").recall([{"text": case.doc}])
    assert refused.value.field == "cut"


class _Words:
    """A deterministic embedding from each host's point of view: hashed bags of words."""

    @staticmethod
    def langchain() -> Any:
        from recallpack.testing import HashingEmbeddings

        return HashingEmbeddings()

    @staticmethod
    def llamaindex() -> Any:
        from recallpack.testing import HashingEmbedding

        return HashingEmbedding()


def test_embedding_scored_focus_from_each_host_gives_the_same_cut() -> None:
    """A LangChain Embeddings and a LlamaIndex embedding (the same words hashed) cut alike."""
    case = cases()[1][0]
    via_langchain, _ = _hosts(case.doc, case.module, embed=_Words.langchain())
    _, via_llamaindex = _hosts(case.doc, case.module, embed=_Words.llamaindex())
    callable_embed = lambda texts: [hashed_bag_of_words(t) for t in texts]  # noqa: E731
    plain = recall([{"text": case.doc, "metadata": {"source": f"pydoc:{case.module}"}}], max_tokens=BUDGET,
                   query=case.query, embed=callable_embed)  # fmt: skip
    block = via_langchain.recall(case.query).to_markdown()
    assert block == via_llamaindex.recall(case.query).to_markdown() == plain.to_markdown()
    assert plain.report.cut == "focus" and tiktoken_count(block) <= BUDGET


def test_a_bad_embed_is_refused_at_construction() -> None:
    """embed= that is no embedding names the setting, in the core and in both adapters."""
    for build in (lambda: Packer(embed=42), lambda: lc.BudgetCompressor(embed="nope"),
                  lambda: li.BudgetPostprocessor(embed=object())):  # fmt: skip
        with pytest.raises(ConfigError, match="embed"):
            build()
