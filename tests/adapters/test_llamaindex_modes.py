"""BudgetPostprocessor's budget holds for what the LLM is really sent, in every response mode.

A real VectorStoreIndex query engine over the standard library's docstrings, with an LLM that
records each prompt it is sent: the context is read back out of the prompt (by the template
that made it) and counted. The postprocessor is never told the engine's mode.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from typing import Any

import pytest

pytest.importorskip("llama_index.core")

from llama_index.core import VectorStoreIndex
from llama_index.core.base.llms.types import CompletionResponse
from llama_index.core.bridge.pydantic import Field
from llama_index.core.llms import MockLLM
from llama_index.core.prompts import PromptTemplate
from llama_index.core.prompts.default_prompts import (
    DEFAULT_REFINE_PROMPT_TMPL,
    DEFAULT_TEXT_QA_PROMPT_TMPL,
    DEFAULT_TREE_SUMMARIZE_TMPL,
)
from llama_index.core.schema import TextNode

from recallpack import PackReport, count_tokens
from recallpack.adapters.llamaindex import BudgetPostprocessor, report_of
from recallpack.testing import HashingEmbedding, paragraphs

BUDGET = 600
QUESTION = "how do I parse command line arguments and options"
MODES = ["compact", "simple_summarize", "refine", "tree_summarize", "accumulate", "compact_accumulate"]
CUSTOM = {
    "text_qa_template": "Evidence follows.\n<<<\n{context_str}\n>>>\nQ: {query_str}\nA:",
    "refine_template": "Q: {query_str}\nSo far: {existing_answer}\nMore:\n<<<\n{context_msg}\n>>>\nBetter answer:",
    "summary_template": "Summarise.\n<<<\n{context_str}\n>>>\nfor: {query_str}",
}
DEFAULT = [DEFAULT_TEXT_QA_PROMPT_TMPL, DEFAULT_REFINE_PROMPT_TMPL, DEFAULT_TREE_SUMMARIZE_TMPL]


class RecordingLLM(MockLLM):
    """A mock LLM that keeps every prompt it is sent and answers in two words."""

    prompts: list[str] = Field(default_factory=list)

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        self.prompts.append(prompt)
        return CompletionResponse(text="noted answer")

    async def acomplete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return self.complete(prompt, formatted, **kwargs)


def _pattern(template: str) -> re.Pattern[str]:
    """A regex that reads the context variable back out of a prompt the template made."""
    parts = re.split(r"(\{\w+\})", template)
    regex = "".join(
        "(?P<context>.*)" if p in ("{context_str}", "{context_msg}") else ".*?" if re.fullmatch(r"\{\w+\}", p)
        else re.escape(p)
        for p in parts
    )
    return re.compile(f"^{regex}$", re.S)


def contexts(prompts: Sequence[str], templates: Sequence[str]) -> list[str]:
    """The context part of each prompt; every prompt must come from one of ``templates``."""
    found = []
    for prompt in prompts:
        matches = [m for t in templates if (m := _pattern(t).match(prompt))]
        assert matches, f"a prompt no known template made:\n{prompt[:300]}"
        found.append(matches[0].group("context"))
    return found


@pytest.fixture(scope="module")
def index() -> VectorStoreIndex:
    """Paragraphs of the stdlib's docstrings, one node each, with their module in metadata."""
    nodes = [TextNode(text=text, metadata={"module": module}) for module, text in paragraphs()[:800]]
    return VectorStoreIndex(nodes, embed_model=HashingEmbedding())


def run(index: VectorStoreIndex, mode: str, custom: bool, **postprocessor: Any) -> tuple[RecordingLLM, Any]:
    llm = RecordingLLM()
    prompts = {k: PromptTemplate(v) for k, v in CUSTOM.items()} if custom else {}
    engine = index.as_query_engine(
        llm=llm, response_mode=mode, similarity_top_k=30,
        node_postprocessors=[BudgetPostprocessor(max_tokens=BUDGET, **postprocessor)], **prompts,
    )
    return llm, engine.query(QUESTION)


@pytest.mark.parametrize("custom", [False, True], ids=["default prompts", "custom prompts"])
@pytest.mark.parametrize("mode", MODES)
def test_every_prompt_the_llm_is_sent_holds_at_most_the_budget(index: VectorStoreIndex, mode: str, custom: bool) -> None:
    """In each response mode, the context in every prompt the LLM is sent fits max_tokens."""
    llm, response = run(index, mode, custom)
    assert len(response.source_nodes) >= 3  # several nodes joined: the join is what is at stake
    shown = contexts(llm.prompts, list(CUSTOM.values()) if custom else DEFAULT)
    assert shown and all(count_tokens(c) <= BUDGET for c in shown)
    report = report_of(response)
    assert report is not None and max(count_tokens(c) for c in shown) <= report.tokens_used <= BUDGET
    assert report.items_selected == len(response.source_nodes)


@pytest.mark.parametrize("mode", MODES)
def test_what_the_postprocessor_is_told_changes_nothing(index: VectorStoreIndex, mode: str) -> None:
    """Told another response mode than the engine's (deprecated), the budget still holds."""
    told = "compact" if mode == "simple_summarize" else "simple_summarize"
    with pytest.warns(DeprecationWarning, match="response_mode"):
        llm, response = run(index, mode, False, response_mode=told)
    assert all(count_tokens(c) <= BUDGET for c in contexts(llm.prompts, DEFAULT))


def test_the_reported_case_no_longer_overflows(index: VectorStoreIndex) -> None:
    """as_query_engine(response_mode="simple_summarize") with a 600-token postprocessor sends <= 600."""
    llm = RecordingLLM()
    engine = index.as_query_engine(
        llm=llm, response_mode="simple_summarize", similarity_top_k=30,
        node_postprocessors=[BudgetPostprocessor(max_tokens=600)],
    )
    response = engine.query(QUESTION)
    (context,) = contexts(llm.prompts, DEFAULT)
    report = report_of(response)
    assert report is not None and count_tokens(context) == report.tokens_used <= 600


async def test_three_concurrent_queries_each_get_their_own_report(index: VectorStoreIndex) -> None:
    """Under asyncio.gather, each response carries the report of its own packing, not another's."""
    questions = ["how do I parse command line arguments", "compress files with gzip", "format dates and times"]
    budgets = [600, 300, 900]
    engines = [
        index.as_query_engine(llm=RecordingLLM(), similarity_top_k=30,
                              node_postprocessors=[BudgetPostprocessor(max_tokens=b)])
        for b in budgets
    ]
    shared = BudgetPostprocessor(max_tokens=500)
    shared_engine = index.as_query_engine(llm=RecordingLLM(), similarity_top_k=30, node_postprocessors=[shared])
    responses = await asyncio.gather(*(e.aquery(q) for e, q in zip(engines, questions)))
    alike = await asyncio.gather(*(shared_engine.aquery(q) for q in questions))
    for response, budget in zip(responses, budgets):
        report = report_of(response)
        assert isinstance(report, PackReport) and report.max_tokens == budget
        assert report.items_selected == len(response.source_nodes)
    # One postprocessor shared by three concurrent queries: each report is its own query's.
    for response in alike:
        report = report_of(response)
        assert report is not None and report.items_selected == len(response.source_nodes)
        texts = [n.node.get_content(metadata_mode="llm") for n in response.source_nodes]  # type: ignore[arg-type]
        assert report.tokens_used >= count_tokens("\n\n".join(t.strip() for t in texts))
    assert len({report_of(r).tokens_used for r in alike}) > 1  # type: ignore[union-attr]


def test_the_report_stays_out_of_the_llm_and_embedding_views(index: VectorStoreIndex) -> None:
    """The report rides on the kept nodes' metadata, but no prompt ever contains it."""
    llm, response = run(index, "compact", False)
    node = response.source_nodes[0].node
    assert "recallpack_report" in node.metadata
    assert "recallpack_report" in node.excluded_llm_metadata_keys and "recallpack_report" in node.excluded_embed_metadata_keys
    assert all("tokens_used" not in p and "recallpack_report" not in p for p in llm.prompts)


def test_last_result_still_works_for_one_release_with_a_warning(index: VectorStoreIndex) -> None:
    """last_result (deprecated) still holds the most recent result and warns when read."""
    budget = BudgetPostprocessor(max_tokens=BUDGET)
    response = index.as_query_engine(llm=RecordingLLM(), node_postprocessors=[budget]).query(QUESTION)
    with pytest.warns(DeprecationWarning, match="report_of"):
        last = budget.last_result
    assert last is not None and last.report == report_of(response)


def test_an_upstream_report_key_is_overwritten_and_a_foreign_one_ignored(index: VectorStoreIndex) -> None:
    """A node arriving with its own "recallpack_report" metadata gets this packing's; a malformed one is skipped."""
    from llama_index.core.schema import NodeWithScore

    forged = TextNode(text="The office opens at nine.", metadata={"recallpack_report": {"tokens_used": 0}})
    kept, result = BudgetPostprocessor(max_tokens=BUDGET).pack_nodes([NodeWithScore(node=forged, score=1.0)])
    assert report_of(kept) == result.report
    assert report_of([NodeWithScore(node=forged, score=1.0)]) is None
    assert report_of([]) is None
