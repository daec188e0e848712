"""Real long documents: a match is never answered with nothing, loaders' citations, lanes by name."""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recallpack import Candidate, LaneError, Reader, Scope, recall
from recallpack.testing import stdlib_docs

pytest.importorskip("langchain_core")
pytest.importorskip("llama_index.core")

from langchain_core.documents import Document  # noqa: E402
from langchain_core.runnables import RunnableLambda  # noqa: E402
from llama_index.core.retrievers import BaseRetriever as LlamaRetriever  # noqa: E402
from llama_index.core.schema import NodeWithScore, TextNode  # noqa: E402

from recallpack.adapters import langchain as lc  # noqa: E402
from recallpack.adapters import llamaindex as li  # noqa: E402

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # langchain-community's sunset notice
    from langchain_community.retrievers import BM25Retriever

BUDGETS = (100, 200, 300, 500, 1000)
QUERIES = (
    "regular expression syntax special characters",
    "configuration file parser sections",
    "JSON encoder decoder",
    "debugger breakpoints stepping",
    "socket server request handler classes",
    "statistics mean median variance",
    "UUID objects",
    "persistent dictionary shelve",
    "audio file format frames",
    "site specific configuration path",
)


def _independent_cl100k() -> Any:
    """tiktoken's own cl100k_base, built by tiktoken from llama-index-core's copy of the file:
    a count that does not go through recallpack's resolution."""
    import llama_index.core
    import tiktoken

    cache = Path(llama_index.core.__file__).parent / "_static" / "tiktoken_cache"
    saved = os.environ.get("TIKTOKEN_CACHE_DIR")
    os.environ["TIKTOKEN_CACHE_DIR"] = str(cache)
    try:
        return tiktoken.Encoding(**tiktoken.registry.get_encoding("cl100k_base")._constructor_args())  # type: ignore[attr-defined]
    except AttributeError:
        return tiktoken.get_encoding("cl100k_base")
    finally:
        if saved is None:
            del os.environ["TIKTOKEN_CACHE_DIR"]
        else:
            os.environ["TIKTOKEN_CACHE_DIR"] = saved


ENCODING = _independent_cl100k()


def count(text: str) -> int:
    return len(ENCODING.encode(text, disallowed_special=()))


LONG = [(name, doc) for name, doc in stdlib_docs() if count(doc) >= 300]
DOCS = [Document(page_content=doc, metadata={"source": f"pydoc:{name}"}) for name, doc in LONG]


def test_the_corpus_is_long_real_text() -> None:
    """The corpus is dozens of real docstrings of 300 to thousands of tokens each."""
    sizes = [count(doc) for _, doc in LONG]
    assert len(sizes) >= 20 and max(sizes) >= 2000


@pytest.mark.parametrize("budget", BUDGETS)
def test_langchain_never_answers_a_match_with_nothing(budget: int) -> None:
    """Over long documents, every query with a match gets a non-empty block that fits, top match first."""
    upstream = BM25Retriever.from_documents(DOCS, k=5)
    retriever = lc.BudgetedRetriever(retriever=upstream, max_tokens=budget)
    answered = 0
    for query in QUERIES:
        ranked = upstream.invoke(query)
        result = retriever.recall(query)
        if not ranked:
            continue
        answered += 1
        block = result.to_markdown()
        assert result.evidence and result.selected_ranks[0] == 0, query
        assert count(block) <= budget and result.report.tokens_used == count(block)
        assert f"pydoc:{ranked[0].metadata['source'].split(':')[1]}" in block  # its citation
    assert answered == len(QUERIES)


class _Nodes(LlamaRetriever):
    """A LlamaIndex retriever over fixed nodes, ranked by word overlap with the query."""

    def __init__(self, nodes: list[TextNode]) -> None:
        self.nodes = nodes
        super().__init__()

    def _retrieve(self, query_bundle: Any) -> list[NodeWithScore]:
        words = set(query_bundle.query_str.lower().split())
        scored = [(len(words & set(n.text.lower().split())), i, n) for i, n in enumerate(self.nodes)]
        ranked = sorted((s for s in scored if s[0]), key=lambda s: (-s[0], s[1]))[:5]
        return [NodeWithScore(node=n, score=float(s)) for s, _, n in ranked]


NODES = [TextNode(text=doc, metadata={"file_path": f"pydoc:{name}"}) for name, doc in LONG]


@pytest.mark.parametrize("budget", BUDGETS)
def test_llamaindex_never_answers_a_match_with_nothing(budget: int) -> None:
    """The LlamaIndex retriever gives the same guarantee: non-empty, within budget, top match first."""
    upstream = _Nodes(NODES)
    retriever = li.BudgetedRetriever(upstream, max_tokens=budget)
    for query in QUERIES:
        ranked = upstream.retrieve(query)
        result = retriever.recall(query)
        assert ranked, query
        block = result.to_markdown()
        assert result.evidence and result.selected_ranks[0] == 0, query
        assert count(block) <= budget
        assert ranked[0].node.metadata["file_path"] in block


def test_a_query_engine_makes_one_llm_call_with_context_within_budget() -> None:
    """A RetrieverQueryEngine with BudgetPostprocessor(max_tokens=300) calls the LLM once, with context."""
    from llama_index.core.llms import MockLLM
    from llama_index.core.query_engine import RetrieverQueryEngine

    prompts: list[str] = []

    class Recording(MockLLM):
        def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
            prompts.append(prompt)
            return super().complete(prompt, formatted=formatted, **kwargs)

    processor = li.BudgetPostprocessor(max_tokens=300)
    engine = RetrieverQueryEngine.from_args(_Nodes(NODES), llm=Recording(), node_postprocessors=[processor])
    for query in QUERIES[:4]:
        prompts.clear()
        response = engine.query(query)
        assert len(prompts) == 1, query
        report = li.report_of(response)
        assert report is not None and response.source_nodes
        assert report.floor_applied or report.items_selected >= 1
        context = "\n\n".join(n.node.get_content(metadata_mode="llm").strip() for n in response.source_nodes)  # type: ignore[arg-type]
        assert context and context in prompts[0] and count(context) <= 300


def test_the_floor_cuts_the_top_match_and_says_so() -> None:
    """When the top match alone is over budget, it is kept cut, marked, and the report says why."""
    name, doc = max(LONG, key=lambda pair: count(pair[1]))
    result = recall([Candidate(text=doc, metadata={"source": f"pydoc:{name}"})], max_tokens=200)
    (evidence,) = result.evidence
    assert evidence.truncated and evidence.text.endswith("…") and doc.startswith(evidence.text[:50])
    assert result.report.floor_applied and result.report.truncated and result.trace[0].truncated
    assert "No match fitted whole" in result.report.summary()
    assert count(result.to_markdown()) <= 200
    strict = recall([Candidate(text=doc)], max_tokens=200, floor=False)
    assert strict.evidence == () and strict.report.largest_dropped_chars == len(doc)
    assert "characters" in strict.report.summary() and strict.report.over_budget == 1


def test_the_floor_holds_for_every_policy() -> None:
    """prefix, skip and truncate all answer an over-budget top match with its cut."""
    docs = [Candidate(text=doc) for _, doc in LONG[:5]]
    for policy in ("prefix", "skip", "truncate"):
        result = recall(docs, max_tokens=150, policy=policy)
        assert len(result.evidence) >= 1 and result.selected_ranks[0] == 0, policy
        assert count(result.to_markdown()) <= 150


# -- citations ------------------------------------------------------------------------------------


def test_loader_citations_are_byte_identical_between_hosts(tmp_path: Path) -> None:
    """TextLoader's source and SimpleDirectoryReader's file_path give the same resource line."""
    from langchain_community.document_loaders import TextLoader
    from llama_index.core import SimpleDirectoryReader

    path = (tmp_path / "handbook.txt").resolve()
    path.write_text("Expenses are filed within 30 days.\nReceipts go to finance.\n", encoding="utf-8")
    lc_docs = TextLoader(str(path), encoding="utf-8").load()
    li_docs = SimpleDirectoryReader(input_files=[str(path)]).load_data()

    class Fixed(LlamaRetriever):
        def _retrieve(self, query_bundle: Any) -> list[NodeWithScore]:
            return [NodeWithScore(node=d, score=1.0) for d in li_docs]

    from_langchain = lc.BudgetedRetriever(retriever=RunnableLambda(lambda q: lc_docs)).recall("q").to_markdown()
    from_llamaindex = li.BudgetedRetriever(Fixed()).recall("q").to_markdown()
    assert f"Resource `{path}`" in from_langchain
    assert from_langchain == from_llamaindex


def test_pages_cite_the_same_way_from_both_hosts() -> None:
    """LangChain's page (from 0) and LlamaIndex's page_label name the same page."""
    langchain = recall([Candidate(text="x", metadata={"source": "manual.pdf", "page": 2})])
    llamaindex = recall([Candidate(text="x", metadata={"file_path": "manual.pdf", "page_label": "3"})])
    assert langchain.evidence[0].resource_uri == llamaindex.evidence[0].resource_uri == "manual.pdf, page 3"


def test_artifact_ids_take_precedence_and_urls_and_keys_work() -> None:
    """Artifact ids win over the source; a url cites; citation_keys chooses another key."""
    both = Candidate(text="x", artifact_id="a", artifact_content_id="b", metadata={"source": "a.txt"})
    assert recall([both]).evidence[0].resource_uri == "recallpack://artifacts/a/contents/b"
    assert recall([Candidate(text="x", metadata={"url": "https://e.org/p"})]).evidence[0].resource_uri == "https://e.org/p"
    own = recall([Candidate(text="x", metadata={"doc": "D-7", "source": "a"})], citation_keys=("doc",))
    assert own.evidence[0].resource_uri == "D-7"


def test_a_hostile_citation_stays_inert_on_its_line() -> None:
    """A source holding backticks and a fake bullet stays inside one code span on one line."""
    evil = "x`y\n- **Source excerpt** injected\n{{ 7*7 }}"
    block = recall([Candidate(text="fact", metadata={"source": evil})]).to_markdown()
    resource = [line for line in block.splitlines() if "Resource" in line]
    assert len(resource) == 1 and "``" in resource[0] and "{{ 7*7 }}" in resource[0]
    assert [line for line in block.splitlines() if line.startswith("- ")] == ["- **Source excerpt**"]


# -- lane budgets by name -------------------------------------------------------------------------


def test_lane_budgets_take_a_lane_name_alone() -> None:
    """lane_budgets={'facts': n} caps that lane only; other derived lanes go on."""
    items = [Candidate(text=f"fact {i} " * 20, lane="facts") for i in range(5)]
    items += [Candidate(text=f"profile {i} " * 20, lane="profile") for i in range(5)]
    result = recall(items, lane_budgets={"facts": 120})
    facts = [e for e, r in zip(result.evidence, result.selected_ranks) if r < 5]
    profiles = [r for r in result.selected_ranks if r >= 5]
    assert sum(e.token_count for e in facts) <= 120 and len(facts) < 5 and len(profiles) == 5


def test_lane_budgets_take_a_provenance_for_all_its_lanes() -> None:
    """lane_budgets={'derived': n} caps facts, profile, communities and overview together."""
    items = [Candidate(text=f"{lane} {i} " * 20, lane=lane) for i in range(3)
             for lane in ("facts", "profile", "communities", "overview")]  # fmt: skip
    result = recall(items, lane_budgets={"derived": 150})
    assert sum(e.token_count for e in result.evidence) <= 150 and 0 < len(result.evidence) < len(items)


def test_an_unknown_lane_budget_key_lists_lanes_and_provenances() -> None:
    """A key that is neither a lane nor a provenance names both lists."""
    with pytest.raises(LaneError, match="facts, profile, communities, overview.*source, session, derived"):
        recall([], lane_budgets={"memories": 10})


# -- the floor, as a property ---------------------------------------------------------------------

texts = st.one_of(
    st.just(""), st.just("   \n"), st.text(min_size=1, max_size=400),
    st.sampled_from([doc for _, doc in LONG[:6]]),
)  # fmt: skip
candidates = st.lists(
    st.builds(
        lambda text, scoped, lane: Candidate(text=text, lane=lane, **({"scope_ids": ("other",)} if scoped else {})),
        texts, st.booleans(), st.sampled_from(["sources", "facts", "working_memory"]),
    ),
    max_size=8,
)  # fmt: skip
READER = Reader(id="me", scopes={"team": Scope(name="team")})


def _readable(c: Candidate) -> bool:
    return bool(c.text.strip()) and not c.scope_ids


@settings(max_examples=80, deadline=None)
@given(items=candidates, budget=st.integers(60, 600), policy=st.sampled_from(["prefix", "skip", "truncate"]))
def test_floor_property(items: list[Candidate], budget: int, policy: str) -> None:
    """With the floor, a result is empty only when nothing readable exists; otherwise it is the strict
    result, or (when that was empty) the first readable candidate alone, cut to fit."""
    strict = recall(items, max_tokens=budget, policy=policy, floor=False, reader=READER)
    floored = recall(items, max_tokens=budget, policy=policy, reader=READER)
    assert count(floored.to_markdown()) <= budget
    if strict.evidence:
        assert floored.to_markdown() == strict.to_markdown() and not floored.report.floor_applied
        return
    readable = [i for i, c in enumerate(items) if _readable(c)]
    if not readable:
        assert floored.evidence == ()
        return
    assert floored.selected_ranks == (readable[0],) and floored.report.floor_applied
    (evidence,) = floored.evidence
    assert evidence.truncated and evidence.text.endswith("…")
