"""LangChain's BudgetedRetriever: what a call may not change is a ConfigError naming it, not a TypeError."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("langchain_core")

from langchain_core.documents import Document

from recallpack import ConfigError, Reader, Scope
from recallpack.adapters.langchain import BudgetedRetriever
from tests.test_reader_held import Agreeable


def _fetched() -> tuple[BudgetedRetriever, list[str]]:
    asked: list[str] = []

    def upstream(query: str) -> list[Document]:
        asked.append(query)
        return [
            Document(page_content="Alice works at Initech."),
            Document(page_content="Team plan: the merger closes on Friday.", metadata={"scope_ids": ["org-2"]}),
        ]

    return BudgetedRetriever(upstream, max_tokens=200, reader=Reader(id="u-7")), asked


CALLS = {
    "invoke": lambda r, kw: r.invoke("who works where", **kw),
    "ainvoke": lambda r, kw: asyncio.run(r.ainvoke("who works where", **kw)),
    "recall": lambda r, kw: r.recall("who works where", **kw),
    "arecall": lambda r, kw: asyncio.run(r.arecall("who works where", **kw)),
}
BUILT = {
    "retriever": lambda: (lambda q: [Document(page_content="x")]),
    "lanes": lambda: {"facts": lambda q: []},
    "weights": lambda: {"facts": 2.0},
    "rrf_k": lambda: 10,
}


@pytest.mark.parametrize("call", sorted(CALLS))
@pytest.mark.parametrize("field", sorted(BUILT))
def test_a_per_call_upstream_is_a_config_error_naming_it(call: str, field: str) -> None:
    """invoke(q, retriever=...) and the other built-only fields are refused by name, before any fetch."""
    retriever, asked = _fetched()
    kwargs: dict[str, Any] = {field: BUILT[field]()}
    with pytest.raises(ConfigError, match=f"{field}= is set when a BudgetedRetriever is built") as raised:
        CALLS[call](retriever, kwargs)
    assert raised.value.field == field and asked == []


@pytest.mark.parametrize("call", sorted(CALLS))
def test_a_lying_reader_per_call_is_refused(call: str) -> None:
    """A Reader subclass whose __eq__ agrees with everything cannot open a retriever's reader up."""
    retriever, asked = _fetched()
    for liar in (Agreeable(open=True), Agreeable(id="u-7", scopes={"org-2": Scope(name="merger")})):
        with pytest.raises(ConfigError, match="per-call reader cannot replace it") as raised:
            CALLS[call](retriever, {"reader": liar})
        assert raised.value.field == "reader"
    assert asked == []
