"""Offsets from someone else's loader are hints: pieces whose offsets contradict their texts are
separate documents, the report says so, and no call ever raises for them."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recallpack import Candidate, count_tokens, recall
from recallpack.packing.candidate import Span
from recallpack.packing.results.result import Outcome, Reason
from recallpack.packing.translate import candidate_from

from .test_recall import assert_accounted

#: A small table whose answer is in one row of many: each row's notes are long enough to be split.
PEOPLE = [
    ("Alice", "Paris", "Alice keeps the archive of the printing guild and restores old type cases."),
    ("Bruno", "Rome", "Bruno tunes church organs in the old quarter and repairs their bellows."),
    ("Chen", "Osaka", "Chen builds wooden boats for the river festival every spring."),
    ("Dara", "Dublin", "Dara teaches evening classes on the history of the harbour."),
    ("Zoe", "Lisbon", "Zoe maps the tram lines and paints the stops she likes best."),
]
QUESTION = "Which city does Zoe live in?"


def test_pieces_whose_offsets_lie_about_the_text_are_separate_documents() -> None:
    """Two pieces of one source whose offsets overlap but whose texts differ: both kept, apart, and noted."""
    lying = [
        candidate_from("alpha beta gamma delta " * 20, {"source": "a.txt", "start_index": 0}, position=0),
        candidate_from("omega psi chi phi " * 20, {"source": "a.txt", "start_index": 100}, position=1),
    ]
    result = recall(lying, max_tokens=500, query="alpha omega", policy="passages")
    assert [e.text for e in result.evidence] == [c.text for c in lying]
    assert [e.reason for e in result.trace] == [None, None]
    assert result.report.notes == (
        "offsets (metadata['start_index']) put candidate 1 inside another piece of their document, "
        "but their texts differ there: each was packed as a document of its own",
    )


def test_pieces_that_agree_still_merge_beside_pieces_that_do_not() -> None:
    """A stale chunk between two agreeing pieces of one source is set apart; the two still merge."""
    text = "one two three four five six seven eight nine ten " * 6
    new = [candidate_from(text[s:e], {"source": "a.txt", "start_index": s}, position=i)
           for i, (s, e) in enumerate([(0, 180), (150, 300)])]
    stale = candidate_from("stale words from the version before " * 4, {"source": "a.txt", "start_index": 100},
                           position=2)
    result = recall([new[0], stale, new[1]], max_tokens=2000, query="three stale", policy="passages")
    assert [e.text for e in result.evidence] == [text[:300], stale.text]
    assert [e.reason.value if e.reason else None for e in result.trace] == [None, None, "merged"]
    assert "candidate 1 inside another piece" in result.report.notes[0]


def test_offsets_that_cannot_be_the_texts_are_ignored_not_refused() -> None:
    """A window's end before its start, or longer than its text, reads as no offsets at all."""
    backwards = candidate_from("a text", {"parent_hash": "p", "start_char": 9, "end_char": 2}, position=0)
    too_long = candidate_from("a text", {"parent_hash": "p", "start_char": 0, "end_char": 90}, position=1)
    assert backwards.span is None and too_long.span is None
    assert recall([backwards, too_long], query="text", policy="passages", dedupe=False).report.items_selected == 2


# -- any offsets, any texts ------------------------------------------------------------------------

WORDS = ["alpha", "beta", "gamma", "row", "Zoe", "Lisbon", "\n", ". ", "ß", "👩‍👩‍👧"]
texts = st.lists(st.sampled_from(WORDS), min_size=1, max_size=40).map(" ".join)
offset = st.none() | st.integers(-3, 400) | st.sampled_from(["12", 1.5, True])
metadata = st.fixed_dictionaries(
    {},
    optional={
        "source": st.sampled_from(["a.csv", "b.md", "", 7]),
        "start_index": offset,
        "parent_hash": st.sampled_from(["h1", "h2", ""]),
        "start_char": offset,
        "end_char": offset,
    },
)


@st.composite
def spanned(draw: Any) -> Candidate:
    """A candidate with a span any loader could have recorded (within its text's length)."""
    text = draw(texts)
    start = draw(st.integers(0, 300))
    length = draw(st.integers(0, len(text)))
    parent = draw(st.sampled_from(["doc", "other"]))
    lane = draw(st.sampled_from(["sources", "facts"]))
    return Candidate(text=text, lane=lane, span=Span(parent=parent, start=start, end=start + length))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    items=st.lists(st.tuples(texts, metadata), max_size=14),
    direct=st.lists(spanned(), max_size=6),
    budget=st.integers(40, 900),
    dedupe=st.booleans(),
)
def test_any_offsets_and_sources_never_raise(
    items: list[tuple[str, dict[str, Any]]], direct: list[Candidate], budget: int, dedupe: bool
) -> None:
    """Whatever offsets and sources loaders record: no error, every candidate accounted, the budget exact."""
    candidates = [candidate_from(text, meta, position=i) for i, (text, meta) in enumerate(items)]
    candidates += direct
    result = recall(candidates, max_tokens=budget, query="Zoe Lisbon row", policy="passages", dedupe=dedupe)
    assert_accounted(result, len(candidates))
    assert count_tokens(result.to_markdown()) == result.report.tokens_used <= budget
    if result.report.items_cut == 0:  # all of it fitted whole: every piece shown is in its item, intact
        kept = [e.text for e in result.evidence]
        for entry in result.trace:
            if entry.outcome is Outcome.SELECTED or entry.reason is Reason.MERGED:
                c = candidates[entry.rank]
                own = c.text if c.span is None else c.text[len(c.text) - (c.span.end - c.span.start) :]
                assert any(own in text for text in kept)


# -- real loaders, through both hosts --------------------------------------------------------------


def write_people(path: Path) -> Path:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["name", "city", "notes"])
        writer.writerows(PEOPLE)
    return path


def test_langchain_csv_rows_split_with_start_index_answer_under_the_default(tmp_path: Path) -> None:
    """CSVLoader rows -> RecursiveCharacterTextSplitter(add_start_index=True) -> BM25: the answer is kept."""
    pytest.importorskip("langchain_community")
    from langchain_community.document_loaders import CSVLoader
    from langchain_community.retrievers import BM25Retriever
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    from recallpack.adapters import langchain as lc

    rows = CSVLoader(str(write_people(tmp_path / "people.csv"))).load()
    chunks = RecursiveCharacterTextSplitter(chunk_size=60, chunk_overlap=20, add_start_index=True).split_documents(rows)
    # The family that used to raise: one source, and every row's offsets counting from its own start.
    assert len({c.metadata["source"] for c in chunks}) == 1
    assert sum(c.metadata["start_index"] == 0 for c in chunks) == len(PEOPLE)
    retriever = lc.BudgetedRetriever(retriever=BM25Retriever.from_documents(chunks, k=len(chunks)), max_tokens=300)
    result = retriever.recall(QUESTION)
    assert result.report.policy == "passages"
    assert "Lisbon" in result.to_markdown()
    assert_accounted(result, result.report.candidates)
    assert any("each was packed as a document of its own" in note for note in result.report.notes)
    docs = retriever.invoke(QUESTION)
    assert any("Lisbon" in d.page_content for d in docs)


def test_langchain_reingested_source_answers_with_the_new_text() -> None:
    """Stale and new chunks of one source in one store: the new answer is kept, the stale is no error."""
    pytest.importorskip("langchain_community")
    from langchain_community.retrievers import BM25Retriever
    from langchain_core.documents import Document
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    from recallpack.adapters import langchain as lc

    old = "The release train leaves on Mondays. " * 6 + "The support desk is in building A, room 12. " * 3
    new = "The release train leaves on Thursdays. " * 6 + "The support desk moved to building C, room 40. " * 3
    splitter = RecursiveCharacterTextSplitter(chunk_size=120, chunk_overlap=30, add_start_index=True)
    store = [*splitter.split_documents([Document(page_content=old, metadata={"source": "handbook.md"})]),
             *splitter.split_documents([Document(page_content=new, metadata={"source": "handbook.md"})])]
    upstream = BM25Retriever.from_documents(store, k=len(store))
    result = lc.BudgetedRetriever(retriever=upstream, max_tokens=400).recall("where did the support desk move?")
    assert "building C, room 40" in result.to_markdown()
    assert_accounted(result, len(store))
    assert any("each was packed as a document of its own" in note for note in result.report.notes)


def test_llamaindex_two_versions_of_one_document_answer_under_the_default() -> None:
    """Two versions of one ref_doc_id (same offsets), and CSV rows sharing one id: the answer is kept."""
    pytest.importorskip("llama_index.retrievers.bm25")
    from llama_index.core import Document as LlamaDocument
    from llama_index.core.node_parser import SentenceSplitter
    from llama_index.retrievers.bm25 import BM25Retriever

    from recallpack.adapters import llamaindex as li

    old = "The release train leaves on Mondays. The support desk is in building A, room 12."
    new = "The release train leaves on Fridays. The support desk is in building C, room 40."
    parser = SentenceSplitter(chunk_size=40, chunk_overlap=10)
    nodes = [*parser.get_nodes_from_documents([LlamaDocument(text=old, id_="handbook")]),
             *parser.get_nodes_from_documents([LlamaDocument(text=new, id_="handbook")])]
    assert len({n.ref_doc_id for n in nodes}) == 1
    assert {(n.start_char_idx, n.end_char_idx) for n in nodes[: len(nodes) // 2]} == {
        (n.start_char_idx, n.end_char_idx) for n in nodes[len(nodes) // 2 :]}
    rows = [LlamaDocument(text=f"name: {name}\ncity: {city}\nnotes: {notes}", id_="people.csv")
            for name, city, notes in PEOPLE]
    nodes += SentenceSplitter(chunk_size=30, chunk_overlap=5).get_nodes_from_documents(rows)
    upstream = BM25Retriever.from_defaults(nodes=nodes, similarity_top_k=len(nodes))
    retriever = li.BudgetedRetriever(upstream, max_tokens=400)
    for question, answer in [("where is the support desk, building C?", "building C, room 40"), (QUESTION, "Lisbon")]:
        result = retriever.recall(question)
        assert answer in result.to_markdown(), question
        assert_accounted(result, result.report.candidates)
    kept = li.BudgetPostprocessor(max_tokens=400).postprocess_nodes(upstream.retrieve(QUESTION), query_str=QUESTION)
    assert any("Lisbon" in k.node.get_content() for k in kept)
