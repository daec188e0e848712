"""budget_for: an evidence budget sized from the model, for both hosts and for a bare window."""

from __future__ import annotations

import inspect
import json
import logging
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from recallpack import ConfigError, Packer, budget_for, count_tokens

PROMPT = "Answer from the evidence below, citing it.\n\n{context}\n\nQuestion: {question}"


def test_a_window_less_the_reserve_and_the_prompt_times_the_share() -> None:
    """An int window: (window - reserve_output - prompt tokens) * share, rounded down."""
    prompt_tokens = count_tokens(PROMPT)
    assert budget_for(8192, reserve_output=1024) == 7168
    assert budget_for(8192, reserve_output=1024, prompt=PROMPT) == 7168 - prompt_tokens
    assert budget_for(8192, reserve_output=1024, prompt=PROMPT, share=0.25) == (7168 - prompt_tokens) // 4
    assert budget_for(8192) == 8192 - 1024  # the default reserve when nothing says otherwise
    assert budget_for(8192, prompt=PROMPT, tokenizer="chars") == 8192 - 1024 - count_tokens(PROMPT, "chars")


def test_a_langchain_chat_model_by_its_profile() -> None:
    """A LangChain chat model: its profile's max_input_tokens, its own max_tokens reserved, its counter for the prompt."""
    pytest.importorskip("langchain_core")
    from langchain_core.language_models import GenericFakeChatModel

    def words(text: str) -> list[int]:  # the model's own counter: one token per word
        return list(range(len(text.split())))

    model = GenericFakeChatModel(
        messages=iter(["ok"]), profile={"max_input_tokens": 32_000, "max_output_tokens": 8_000},
        custom_get_token_ids=words,
    )
    prompt_tokens = len(PROMPT.split())
    assert prompt_tokens != count_tokens(PROMPT)  # so the test tells the two counters apart
    assert budget_for(model, prompt=PROMPT, share=0.5) == (32_000 - 1024 - prompt_tokens) // 2
    assert budget_for(model, reserve_output=0, ceiling=None) == 32_000

    class WithAnswerLength(GenericFakeChatModel):
        max_tokens: int | None = None  # as ChatOpenAI and ChatAnthropic have

    capped = WithAnswerLength(messages=iter(["ok"]), profile={"max_input_tokens": 32_000}, max_tokens=500)
    assert budget_for(capped, ceiling=None) == 31_500  # a model configured with max_tokens reserves that
    assert Packer(max_tokens=budget_for(model, share=0.25), tokenizer=model).max_tokens == (32_000 - 1024) // 4


def test_a_langchain_model_that_does_not_say_its_window_is_refused_naming_the_fix() -> None:
    """No profile: a ConfigError that says to pass profile= or the window as an int."""
    pytest.importorskip("langchain_core")
    from langchain_core.language_models import GenericFakeChatModel

    with pytest.raises(ConfigError, match=r"does not say its window .*max_input_tokens.*budget_for\(128_000"):
        budget_for(GenericFakeChatModel(messages=iter(["ok"])))
    with pytest.raises(ConfigError, match="does not say its window"):
        budget_for(GenericFakeChatModel(messages=iter(["ok"]), profile={"max_output_tokens": 100}))


def test_a_llamaindex_llm_by_its_metadata() -> None:
    """A LlamaIndex LLM: metadata.context_window, less its num_output (the answer it reserves)."""
    pytest.importorskip("llama_index.core")
    from llama_index.core.llms import MockLLM

    llm = MockLLM(max_tokens=256)  # context_window 3900, num_output 256
    doc = inspect.getdoc(json) or ""
    assert budget_for(llm) == 3900 - 256
    assert budget_for(llm, prompt=doc, share=0.5) == (3900 - 256 - count_tokens(doc)) // 2
    assert budget_for(MockLLM()) == 3900 - 1024  # num_output -1: it does not say, the default applies
    assert budget_for(llm, reserve_output=0) == 3900


def test_a_budget_for_a_large_window_is_capped_at_the_default_ceiling_and_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """128k tokens leave 126,976: capped at 16384 (what a Packer takes as is), with an INFO record naming both."""
    with caplog.at_level(logging.INFO, logger="recallpack"):
        budget = budget_for(128_000)
    assert budget == 16_384 == Packer(max_tokens=budget).max_tokens
    assert [r.levelno for r in caplog.records] == [logging.INFO]
    assert "126976" in caplog.text and "ceiling=16384" in caplog.text and "ceiling=None" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="recallpack"):
        assert budget_for(8192) == 7168  # under the ceiling: nothing capped, nothing said
    assert caplog.records == []


def test_a_budget_over_the_default_ceiling_is_asked_for_twice() -> None:
    """ceiling=None (or a number) gives the whole room; a Packer then takes it only with max_tokens_ceiling."""
    budget = budget_for(128_000, ceiling=None)
    assert budget == 126_976
    assert budget_for(128_000, ceiling=50_000) == 50_000
    with pytest.raises(ConfigError, match="max_tokens_ceiling=126976"):
        Packer(max_tokens=budget)
    assert Packer(max_tokens=budget, max_tokens_ceiling=budget).max_tokens == budget


def test_a_128k_models_budget_works_as_is_in_both_hosts_retrievers() -> None:
    """budget_for(a 128k LangChain model / LlamaIndex LLM) goes straight into each host's BudgetedRetriever."""
    pytest.importorskip("langchain_core")
    pytest.importorskip("llama_index.core")
    from langchain_core.documents import Document
    from langchain_core.language_models import GenericFakeChatModel
    from langchain_core.runnables import RunnableLambda
    from llama_index.core.base.llms.types import LLMMetadata
    from llama_index.core.llms import MockLLM
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

    from recallpack.adapters import langchain as lc
    from recallpack.adapters import llamaindex as li

    class Large(MockLLM):
        @property
        def metadata(self) -> LLMMetadata:
            return LLMMetadata(context_window=128_000, num_output=4_096)

    class Nodes(BaseRetriever):
        def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
            return [NodeWithScore(node=TextNode(text="Paris is in France."), score=1.0)]

    chat = GenericFakeChatModel(messages=iter(["ok"]), profile={"max_input_tokens": 128_000})
    upstream = RunnableLambda(lambda q: [Document(page_content="Paris is in France.")])
    lc_budget, li_budget = budget_for(chat, prompt=PROMPT, tokenizer="o200k_base"), budget_for(Large())
    assert lc_budget == li_budget == 16_384
    docs = lc.BudgetedRetriever(retriever=upstream, max_tokens=lc_budget).invoke("where is Paris?")
    assert [d.page_content for d in docs] == ["Paris is in France."]
    nodes = li.BudgetedRetriever(Nodes(), max_tokens=li_budget).retrieve("where is Paris?")
    assert [n.node.get_content() for n in nodes] == ["Paris is in France."]
    assert li.BudgetPostprocessor(max_tokens=li_budget).max_tokens == lc.BudgetCompressor(max_tokens=lc_budget).max_tokens


@pytest.mark.parametrize(
    ("call", "names"),
    [
        (lambda: budget_for(0), "window"),
        (lambda: budget_for(-5), "window"),
        (lambda: budget_for(True), "LangChain chat model"),
        (lambda: budget_for("gpt-4o"), "LangChain chat model"),
        (lambda: budget_for(8192, share=0), "share"),
        (lambda: budget_for(8192, share=1.5), "share"),
        (lambda: budget_for(8192, share=float("nan")), "share"),
        (lambda: budget_for(8192, share=True), "share"),
        (lambda: budget_for(8192, reserve_output=-1), "reserve_output"),
        (lambda: budget_for(8192, reserve_output=2.5), "reserve_output"),  # type: ignore[arg-type]
        (lambda: budget_for(8192, prompt=["a"]), "prompt"),  # type: ignore[arg-type]
        (lambda: budget_for(1000, reserve_output=1000), "leaves no room"),
        (lambda: budget_for(1000, reserve_output=990, prompt="word " * 50), "leaves no room"),
        (lambda: budget_for(8192, ceiling=0), "ceiling"),
        (lambda: budget_for(8192, ceiling=2.5), "ceiling"),  # type: ignore[arg-type]
        (lambda: budget_for(8192, ceiling=True), "ceiling"),
    ],
)
def test_bad_values_are_config_errors_naming_the_fix(call: object, names: str) -> None:
    """Every bad value raises a ConfigError that names the setting."""
    with pytest.raises(ConfigError, match=names):
        call()  # type: ignore[operator]


@given(
    window=st.integers(1, 1_000_000), reserve=st.integers(0, 100_000), share=st.floats(0.01, 1.0),
    ceiling=st.none() | st.integers(1, 200_000),
)
def test_the_budget_never_exceeds_what_the_window_leaves(
    window: int, reserve: int, share: float, ceiling: int | None
) -> None:
    """Property: the budget is positive, at most (window - reserve) * share and at most the ceiling, or refused."""
    try:
        budget = budget_for(window, reserve_output=reserve, share=share, ceiling=ceiling)
    except ConfigError:
        assert (window - reserve) * share < 1
        return
    assert 1 <= budget <= (window - reserve) * share
    assert budget == min(math.floor((window - reserve) * share), ceiling or budget)
