"""budget_for: an evidence budget sized from the model, for both hosts and for a bare window."""

from __future__ import annotations

import inspect
import json

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
    assert budget_for(model, reserve_output=0) == 32_000

    class WithAnswerLength(GenericFakeChatModel):
        max_tokens: int | None = None  # as ChatOpenAI and ChatAnthropic have

    capped = WithAnswerLength(messages=iter(["ok"]), profile={"max_input_tokens": 32_000}, max_tokens=500)
    assert budget_for(capped) == 31_500  # a model configured with max_tokens reserves that
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


def test_a_budget_for_a_large_window_is_not_capped_silently() -> None:
    """128k tokens give 126,976: a Packer then needs its ceiling raised, and says so."""
    budget = budget_for(128_000)
    assert budget == 126_976
    with pytest.raises(ConfigError, match="max_tokens_ceiling=126976"):
        Packer(max_tokens=budget)
    assert Packer(max_tokens=budget, max_tokens_ceiling=budget).max_tokens == budget


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
    ],
)
def test_bad_values_are_config_errors_naming_the_fix(call: object, names: str) -> None:
    """Every bad value raises a ConfigError that names the setting."""
    with pytest.raises(ConfigError, match=names):
        call()  # type: ignore[operator]


@given(window=st.integers(1, 1_000_000), reserve=st.integers(0, 100_000), share=st.floats(0.01, 1.0))
def test_the_budget_never_exceeds_what_the_window_leaves(window: int, reserve: int, share: float) -> None:
    """Property: the budget is positive and at most (window - reserve) * share, or refused."""
    try:
        budget = budget_for(window, reserve_output=reserve, share=share)
    except ConfigError:
        assert (window - reserve) * share < 1
        return
    assert 1 <= budget <= (window - reserve) * share
