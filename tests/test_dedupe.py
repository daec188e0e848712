"""Identical texts are kept once, the kept one standing for the others; scopes are never merged.

Real retrievers over real text: a LangChain InMemoryVectorStore and a LlamaIndex VectorStoreIndex
holding the same standard-library docstrings under different sources, as a corpus indexed
twice (a mirror, a copied file) does.
"""

from __future__ import annotations

import inspect
import json
import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recallpack import Candidate, Reader, Reason, Scope, recall

DOCS = {name: inspect.getdoc(module) or "" for name, module in [("json", json), ("textwrap", textwrap), ("inspect", inspect)]}


def test_identical_texts_from_two_sources_are_kept_once_citing_both() -> None:
    """The same docstring under two sources: one item, whose evidence cites both; the trace says so."""
    text = DOCS["textwrap"]
    ranked = [
        Candidate(text=text, metadata={"source": "lib/textwrap.py"}),
        Candidate(text=DOCS["json"][:400], metadata={"source": "lib/json/__init__.py"}),
        Candidate(text=text, metadata={"source": "mirror/textwrap.py"}),
        Candidate(text=text, metadata={"source": "lib/textwrap.py"}),
    ]
    result = recall(ranked, max_tokens=2000)
    assert [e.resource_uri for e in result.evidence] == ["lib/textwrap.py", "lib/json/__init__.py"]
    first = result.evidence[0]
    assert first.duplicates == 2 and first.citations == ("lib/textwrap.py", "mirror/textwrap.py")
    assert result.evidence[1].duplicates == 0 and result.evidence[1].citations == ()
    assert result.to_markdown().count(text.splitlines()[0]) == 1
    twins = [e for e in result.trace if e.reason is Reason.DUPLICATE]
    assert [(e.rank, e.duplicate_of, e.citation) for e in twins] == [(2, 0, "mirror/textwrap.py"), (3, 0, "lib/textwrap.py")]
    assert result.report.reasons == {"duplicate": 2}


def test_dedupe_false_keeps_every_copy() -> None:
    """dedupe=False keeps identical texts as they come."""
    ranked = [Candidate(text=DOCS["json"], metadata={"source": s}) for s in ("a", "b")]
    assert len(recall(ranked, max_tokens=4000, dedupe=False).evidence) == 2


def test_items_in_other_scopes_are_never_merged() -> None:
    """The same text in scopes that make other readers is kept twice; the same scopes in another order, once."""
    reader = Reader(id="u-1", scopes={"org-1": Scope(name="team"), "org-2": Scope(name="club")})
    text = DOCS["textwrap"]
    ranked = [
        Candidate(text=text, scope_ids=("u-1", "org-1")),
        Candidate(text=text, scope_ids=("org-1", "u-1")),  # the same readers: merged
        Candidate(text=text, scope_ids=("org-1",)),  # more readers than the first: kept apart
        Candidate(text=text, scope_ids=("org-2",)),
        Candidate(text=text),  # unscoped: everyone
    ]
    result = recall(ranked, max_tokens=4000, reader=reader)
    assert [e.scopes for e in result.evidence] == [("private", "team"), ("team",), ("club",), ()]
    assert result.evidence[0].duplicates == 1 and result.report.reasons == {"duplicate": 1}


def test_the_langchain_vector_store_answer_holds_a_duplicated_docstring_once() -> None:
    """InMemoryVectorStore with a docstring indexed under two sources: one kept Document, citing both."""
    pytest.importorskip("langchain_core")
    from langchain_core.documents import Document
    from langchain_core.vectorstores import InMemoryVectorStore

    from recallpack.adapters.langchain import BudgetedRetriever
    from recallpack.testing import HashingEmbeddings

    docs = [Document(page_content=text, metadata={"source": f"lib/{name}.py"}) for name, text in DOCS.items()]
    docs.append(Document(page_content=DOCS["textwrap"], metadata={"source": "vendored/textwrap.py"}))
    store = InMemoryVectorStore.from_documents(docs, HashingEmbeddings())
    kept = BudgetedRetriever(store.as_retriever(), max_tokens=4000).invoke("wrap and fill paragraphs of text")
    wrapped = [d for d in kept if d.page_content == DOCS["textwrap"]]
    assert len(wrapped) == 1 and wrapped[0].metadata["duplicates"] == 1
    assert sorted(wrapped[0].metadata["citations"]) == ["lib/textwrap.py", "vendored/textwrap.py"]


def test_the_llamaindex_prompt_holds_a_duplicated_docstring_once() -> None:
    """A VectorStoreIndex with a docstring under two file names: the LLM is shown it once."""
    pytest.importorskip("llama_index.core")
    from llama_index.core import VectorStoreIndex
    from llama_index.core.llms import MockLLM
    from llama_index.core.schema import TextNode

    from recallpack.adapters.llamaindex import BudgetPostprocessor, report_of
    from recallpack.testing import HashingEmbedding

    nodes = [TextNode(text=text, metadata={"file_name": f"{name}.py"}) for name, text in DOCS.items()]
    nodes.append(TextNode(text=DOCS["textwrap"], metadata={"file_name": "copy_of_textwrap.py"}))
    index = VectorStoreIndex(nodes, embed_model=HashingEmbedding())
    prompts: list[str] = []

    class Recording(MockLLM):
        def complete(self, prompt: str, formatted: bool = False, **kwargs: object) -> object:  # type: ignore[override]
            prompts.append(prompt)
            return super().complete(prompt, formatted=formatted)

    engine = index.as_query_engine(llm=Recording(max_tokens=4), similarity_top_k=4,
                                   node_postprocessors=[BudgetPostprocessor(max_tokens=4000)])
    response = engine.query("wrap and fill paragraphs of text")
    first_line = DOCS["textwrap"].splitlines()[0]
    assert len(prompts) == 1 and prompts[0].count(first_line) == 1
    report = report_of(response)
    assert report is not None and report.reasons.get("duplicate") == 1
    (wrapped,) = [n for n in response.source_nodes if n.node.get_content() == DOCS["textwrap"]]
    assert sorted(wrapped.node.metadata["citations"]) == ["copy_of_textwrap.py", "textwrap.py"]


_TEXTS = st.sampled_from(["alpha beta", "gamma", "alpha beta ", "delta epsilon zeta"])
_SCOPES = st.sampled_from([(), ("u",), ("o",), ("u", "o"), ("o", "u")])


@settings(max_examples=60, deadline=None)
@given(items=st.lists(st.tuples(_TEXTS, _SCOPES, st.sampled_from(["s1", "s2", None])), max_size=12))
def test_no_two_kept_items_share_text_and_scopes(items: list[tuple[str, tuple[str, ...], str | None]]) -> None:
    """Property: kept items differ in text or scope set; every duplicate points at a kept twin; counts add up."""
    reader = Reader(id="u", scopes={"o": Scope(name="org")})
    ranked = [  # an unscoped item leaves scope_ids out (an empty one is malformed)
        Candidate(text=t, metadata={"source": c} if c else {}, **({"scope_ids": s} if s else {}))
        for t, s, c in items
    ]
    result = recall(ranked, max_tokens=4000, reader=reader)
    keys = [(ranked[r].text, frozenset(ranked[r].scope_ids)) for r in result.selected_ranks]
    assert len(keys) == len(set(keys))
    kept = set(result.selected_ranks)
    for entry in result.trace:
        if entry.reason is Reason.DUPLICATE:
            assert entry.duplicate_of in kept
            twin = ranked[entry.duplicate_of]  # type: ignore[index]
            assert (twin.text, frozenset(twin.scope_ids)) == (ranked[entry.rank].text, frozenset(ranked[entry.rank].scope_ids))
    assert sum(e.duplicates for e in result.evidence) == result.report.reasons.get("duplicate", 0)
    report = result.report
    assert report.items_selected + report.items_dropped + report.items_withheld == len(ranked)
