"""policy="passages": the budget goes to the passages that answer the query, across the candidates."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from recallpack import (
    Candidate,
    CandidateError,
    ConfigError,
    Packer,
    Reader,
    Scope,
    count_tokens,
    recall,
    recall_many,
    split_token_windows,
)
from recallpack.packing.candidate import Span
from recallpack.packing.choosing.cuts import MARK
from recallpack.packing.counting.windows import token_windows
from recallpack.packing.results.result import Outcome
from recallpack.testing import paragraphs, stdlib_docs

from .conftest import TOKENIZER_SPECS, make_tokenizer
from .test_recall import assert_accounted

DOCS = dict(stdlib_docs())


def pieces_of(evidence_text: str) -> list[str]:
    """The kept pieces of an evidence text: what lies between its elision marks."""
    return [p.strip() for p in evidence_text.split(MARK) if p.strip()]


def test_the_answer_in_the_third_document_survives_where_prefix_loses_it() -> None:
    """Three long manuals ranked first, the one that answers last: passages keeps its passage."""
    ranked = [Candidate(text=DOCS[name], metadata={"source": name}) for name in ("argparse", "json", "csv")]
    question = "when does QUOTE_NONNUMERIC put quotes around fields?"
    prefix = recall(ranked, max_tokens=400, query=question)
    passages = recall(ranked, max_tokens=400, query=question, policy="passages")
    assert "QUOTE_NONNUMERIC" not in prefix.to_markdown()
    assert passages.report.policy == "passages" and passages.report.tokens_used <= 400
    assert "csv" in [e.resource_uri for e in passages.evidence]
    csv_item = next(e for e in passages.evidence if e.resource_uri == "csv")
    assert "QUOTE_NONNUMERIC means that quotes are always placed around" in " ".join(csv_item.text.split())
    assert count_tokens(passages.to_markdown()) == passages.report.tokens_used


def test_documents_stay_in_rank_order_and_passages_in_text_order() -> None:
    """Each item is pieces of its own candidate's text, in order; items follow the ranks."""
    names = ["argparse", "json", "pickle", "csv", "sqlite3"]
    ranked = [Candidate(text=DOCS[n]) for n in names]
    result = recall(ranked, max_tokens=600, query="write rows with a dialect and a delimiter", policy="passages")
    assert list(result.selected_ranks) == sorted(result.selected_ranks)
    for rank, evidence in zip(result.selected_ranks, result.evidence):
        text, at = ranked[rank].text, 0
        for piece in pieces_of(evidence.text):
            found = text.find(piece, at)
            assert found >= at, piece[:60]
            at = found + len(piece)
    csv_rank = names.index("csv")
    assert csv_rank in result.selected_ranks


def test_the_trace_says_which_spans_of_each_document_were_kept() -> None:
    """kept_spans are ranges of the candidate's own text, and together they are what was shown."""
    ranked = [Candidate(text=DOCS[n]) for n in ("argparse", "json", "csv")]
    result = recall(ranked, max_tokens=500, query="json.tool pretty-print from the shell", policy="passages")
    for rank, evidence in zip(result.selected_ranks, result.evidence):
        entry = result.trace[rank]
        assert entry.outcome is Outcome.SELECTED and entry.cut == "passages" and entry.truncated
        shown = [ranked[rank].text[s:e].strip() for s, e in entry.kept_spans]
        assert [s for s in shown if s] == pieces_of(evidence.text)
    for entry in result.trace:
        if entry.outcome is not Outcome.SELECTED:
            assert entry.reason is not None and entry.kept_spans == ()


def test_what_fits_whole_is_kept_whole_as_prefix_would() -> None:
    """When everything reached fits, nothing is cut: the same bytes as prefix."""
    ranked = [Candidate(text=t) for _, t in paragraphs()[:4]]
    question = "what does this module provide"
    passages = recall(ranked, max_tokens=4000, query=question, policy="passages")
    prefix = recall(ranked, max_tokens=4000, query=question)
    assert passages.to_markdown() == prefix.to_markdown() and not passages.report.truncated


def test_a_dense_text_that_fits_is_kept_whole_though_not_tried_whole_first() -> None:
    """Documents of long words (more than five characters a budget token, so the walk goes
    straight to the choice) that fit are kept whole, the same bytes as prefix."""
    words = re.findall(r"[a-z]{12,}", " ".join(doc.lower() for _, doc in stdlib_docs()))
    words = list(dict.fromkeys(words))[:160]
    ranked = [Candidate(text=" ".join(words[i : i + 40]) + ".") for i in range(0, 160, 40)]
    question = words[3]
    whole = recall(ranked, query=question).report.tokens_used  # no budget: everything, whole
    budget = whole + 40
    assert sum(len(c.text) for c in ranked) > 5 * budget  # denser than a try whole allows
    passages = recall(ranked, max_tokens=budget, query=question, policy="passages")
    prefix = recall(ranked, max_tokens=budget, query=question)
    assert passages.to_markdown() == prefix.to_markdown()
    assert passages.report.items_selected == 4 and not passages.report.truncated


def test_without_a_query_it_packs_as_prefix_and_says_so() -> None:
    """No query, nothing to score: the report names the policy that ran and why."""
    ranked = [Candidate(text=DOCS[n]) for n in ("argparse", "json")]
    result = recall(ranked, max_tokens=300, policy="passages")
    assert result.to_markdown() == recall(ranked, max_tokens=300).to_markdown()
    assert result.report.policy == "prefix"
    assert "needs the query" in result.report.summary()


def test_a_query_that_is_not_a_string_is_refused() -> None:
    """A bytes or int query is a ConfigError naming the field."""
    for query in (b"json", 3, ["json"]):
        with pytest.raises(ConfigError, match="query"):
            recall([Candidate(text="x")], policy="passages", query=query)  # type: ignore[arg-type]


def test_no_matching_word_still_fills_the_budget_in_rank_order() -> None:
    """A query none of whose words occur: the documents' starts, in rank order, fill the room."""
    ranked = [Candidate(text=DOCS[n]) for n in ("argparse", "json")]
    result = recall(ranked, max_tokens=300, query="zzyzx qwfp", policy="passages")
    assert result.evidence and result.report.tokens_used >= 270
    assert result.evidence[0].text.startswith(DOCS["argparse"][:40])


# -- overlap and adjacency -------------------------------------------------------------------------


def windows_of(text: str, size: int, overlap: int) -> list[Candidate]:
    """recallpack's own token windows of one text, as the splitters record them."""
    return [Candidate(text=w.text, metadata=w.metadata()) for w in token_windows(text, size, overlap)]


def test_overlapping_windows_of_one_document_are_one_item_paid_once() -> None:
    """Windows with overlap render as one item whose text is the windows' union, in text order."""
    text = DOCS["argparse"]
    chunks = windows_of(text, 120, 40)[:4]
    shuffled = [chunks[2], chunks[0], chunks[3], chunks[1]]  # the retriever's order, not the text's
    result = recall(shuffled, max_tokens=2000, query="argparse", policy="passages")
    assert len(result.evidence) == 1 and result.selected_ranks == (0,)
    end = chunks[3].metadata["end_char"]
    assert result.evidence[0].text == text[:end]
    reasons = [e.reason.value if e.reason else None for e in result.trace]
    assert reasons == [None, "merged", "merged", "merged"]
    assert [e.merged_into for e in result.trace] == [None, 0, 0, 0]
    separately = sum(count_tokens(c.text) for c in chunks)
    assert result.report.tokens_used < separately


def test_langchain_start_index_and_source_make_pieces_of_one_document() -> None:
    """LangChain's add_start_index records (source, start_index): adjacent chunks merge."""
    from recallpack.packing.translate import candidate_from

    text = DOCS["json"]
    a, b = text[:900], text[700:1600]
    made = [
        candidate_from(a, {"source": "json.txt", "start_index": 0}, position=0),
        candidate_from(b, {"source": "json.txt", "start_index": 700}, position=1),
        candidate_from(b, {"source": "other.txt", "start_index": 700}, position=2),
    ]
    result = recall(made, max_tokens=2000, query="json", policy="passages")
    assert result.evidence[0].text == text[:1600]
    assert [e.reason.value if e.reason else None for e in result.trace] == [None, "merged", "duplicate"]


def test_pieces_with_no_offsets_merge_by_their_exact_overlap() -> None:
    """Chunks that repeat the end of the one before (a splitter's overlap) merge with no metadata."""
    text = DOCS["argparse"] + "\n\n" + DOCS["json"]
    size = len(text) // 3
    chunks = [text[0:size + 300], text[size:2 * size + 300], text[2 * size:]]
    result = recall([Candidate(text=c) for c in reversed(chunks)], max_tokens=8000, query="json", policy="passages")
    assert len(result.evidence) == 1 and result.evidence[0].text == text


def test_pieces_without_offsets_merge_only_within_their_own_source() -> None:
    """Exact overlap is looked for among pieces that could be one document: the same chunk from
    another source, ranked first, neither merges nor keeps a piece from the chunk it continues."""
    text = DOCS["argparse"] + "\n\n" + DOCS["json"]
    size = len(text) // 2
    head, tail = text[: size + 300], text[size:]
    ranked = [
        Candidate(text=head, metadata={"source": "mirror.txt"}),
        Candidate(text=head, metadata={"source": "docs.txt"}),
        Candidate(text=tail, metadata={"source": "docs.txt"}),
    ]
    result = recall(ranked, max_tokens=8000, query="json", policy="passages", dedupe=False)
    assert [(e.text == text, e.resource_uri) for e in result.evidence] == [(False, "mirror.txt"), (True, "docs.txt")]
    assert [e.reason.value if e.reason else None for e in result.trace] == [None, None, "merged"]


def test_pieces_in_different_scopes_or_lanes_never_merge() -> None:
    """Merging never changes who may read a text or under which label."""
    text = DOCS["csv"]
    reader = Reader(id="me", scopes={"org": Scope(name="org")})
    first = Candidate(text=text[:800], span=Span(parent="csv", start=0, end=800), scope_ids=("me",))
    second = Candidate(text=text[600:1400], span=Span(parent="csv", start=600, end=1400), scope_ids=("org",))
    third = Candidate(text=text[600:1400], span=Span(parent="csv", start=600, end=1400), lane="facts")
    result = recall([first, second, third], max_tokens=3000, query="csv", policy="passages", reader=reader)
    assert len(result.evidence) == 3
    assert [e.scopes for e in result.evidence] == [("private",), ("org",), ()]


def test_a_span_given_by_hand_that_cannot_be_the_texts_is_an_error_naming_the_field() -> None:
    """A Span built by the caller, longer than its text or backwards: CandidateError when it is built."""
    with pytest.raises(CandidateError, match="only 3"):
        Candidate(text="abc", span=Span(parent="p", start=0, end=10, source="metadata['end_char']"))
    with pytest.raises(CandidateError, match="before start"):
        Span(parent="p", start=10, end=2)


# -- the budget, under every tokenizer -------------------------------------------------------------

WORDS = ["alpha", "beta", "gamma", "delta", "pickle", "protocol", "İstanbul", "ß", "emoji 👩‍👩‍👧", "\n", ". ",
         # every script the analysis reads apart: marks, terminals, phrases, pairs, stems
         "किताबें", "।", "книгами", "книги", "ανθρώπων", "άνθρωπος", "الكتاب", "؟", "北京大学", "。",
         "แมวนอนบนเสื่อ", "ພາສາລາວ", "ភាសាខ្មែរ", "។", "မြန်မာ", "။", "日本語です", "Հայաստան", "։"]
texts = st.lists(st.sampled_from(WORDS), min_size=1, max_size=120).map(" ".join)
scoped = st.builds(
    lambda text, lane, scope_ids: Candidate(text=text, lane=lane, **({"scope_ids": scope_ids} if scope_ids else {})),
    texts,
    st.sampled_from(["sources", "facts", "working_memory"]),
    st.lists(st.sampled_from(["me", "org-1", "org-2"]), max_size=2).map(tuple),
)  # an unscoped item leaves scope_ids out: an empty one is malformed


@pytest.mark.parametrize("spec", TOKENIZER_SPECS)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    candidates=st.lists(scoped, max_size=12),
    budget=st.integers(30, 500),
    cap=st.none() | st.integers(1, 4),
    lanes=st.none() | st.fixed_dictionaries({"facts": st.integers(0, 200)}),
    query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=6).map(" ".join),
)
def test_the_block_never_exceeds_the_budget(
    spec: str, candidates: list[Candidate], budget: int, cap: int | None, lanes: dict[str, int] | None, query: str
) -> None:
    """Exact on the rendered block, every candidate accounted for, caps held, unreadable never shown."""
    tokenizer = make_tokenizer(spec)
    reader = Reader(id="me", scopes={"org-1": Scope(name="one", description="first org")})
    kwargs = dict(max_tokens=budget, policy="passages", tokenizer=tokenizer, reader=reader, max_items=cap,
                  lane_budgets=lanes, query=query)
    result = recall(candidates, **kwargs)  # type: ignore[arg-type]
    rendered = result.to_markdown()
    assert tokenizer.count(rendered) == result.report.tokens_used <= budget
    assert cap is None or len(result.evidence) <= cap
    if lanes is not None:
        facts = sum(e.token_count for r, e in zip(result.selected_ranks, result.evidence)
                    if candidates[r].lane.value == "facts")
        assert facts <= lanes["facts"]
    assert_accounted(result, len(candidates))
    assert list(result.selected_ranks) == sorted(result.selected_ranks)
    for rank in result.selected_ranks:
        assert "org-2" not in candidates[rank].scope_ids
    assert recall(candidates, **kwargs).to_markdown() == rendered  # type: ignore[arg-type]


@settings(max_examples=30, deadline=None)
@given(budget=st.integers(40, 1500), start=st.integers(0, 30))
def test_windows_with_overlap_never_overflow_or_repeat_text(budget: int, start: int) -> None:
    """Overlapping windows of one document, in any order: exact budget, and no sentence twice."""
    text = DOCS["argparse"] + "\n\n" + DOCS["json"]
    chunks = windows_of(text, 200, 60)
    picked = chunks[start % len(chunks):][:8][::-1]
    result = recall(picked, max_tokens=budget, query="parse json arguments", policy="passages")
    assert count_tokens(result.to_markdown()) == result.report.tokens_used <= budget
    shown = [p for e in result.evidence for p in pieces_of(e.text)]
    sentences = [s for p in shown for s in re.split(r"(?<=[.!?])\s+", p) if len(s) > 40]
    assert len(sentences) == len(set(sentences))


# -- every host packs the same bytes -----------------------------------------------------------------


def test_recall_many_and_the_allowance_give_the_same_bytes() -> None:
    """recall_many and a recall under an allowance's Remaining pack passages as recall does."""
    from recallpack.allowance import Allowance

    ranked = [Candidate(text=DOCS[n]) for n in ("argparse", "json", "pickle")]
    question = "pickle protocol"
    one = recall(ranked, max_tokens=300, query=question, policy="passages")
    many = recall_many([ranked, ranked], queries=[question, question], max_tokens=300, policy="passages")
    assert [r.to_markdown() for r in many] == [one.to_markdown()] * 2
    allowed = recall(ranked, query=question, policy="passages", allowance=Allowance(max_tokens=300))
    assert allowed.to_markdown() == one.to_markdown()


def test_the_cli_packs_passages_with_a_query(tmp_path, capsys) -> None:
    """recallpack pack --policy passages --query prints the same block as recall."""
    from recallpack.cli import main

    ranked = [{"text": DOCS[n]} for n in ("argparse", "json", "pickle")]
    path = tmp_path / "candidates.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in ranked) + "\n", encoding="utf-8")
    code = main(["pack", str(path), "--max-tokens", "300", "--policy", "passages", "--query", "pickle protocol"])
    out = capsys.readouterr().out
    expected = recall([Candidate(**r) for r in ranked], max_tokens=300, query="pickle protocol", policy="passages")
    assert code == 0 and out.rstrip("\n") == expected.to_markdown().rstrip("\n")


def test_an_embedding_scores_the_passages() -> None:
    """embed= replaces lexical scoring: a callable that likes one sentence gets that sentence kept."""
    target = "Pretty printing"

    def embed(texts: list[str]) -> list[list[float]]:  # the query first, then every unit
        return [[1.0, 0.0] if i == 0 or target in t else [0.0, 1.0] for i, t in enumerate(texts)]

    ranked = [Candidate(text=DOCS[n]) for n in ("argparse", "json")]
    result = recall(ranked, max_tokens=120, query="anything", policy="passages", embed=embed)
    assert target in result.to_markdown()


def test_a_packer_with_passages_is_reusable_and_pickles() -> None:
    """Packer(policy='passages') packs many queries and survives pickling."""
    import pickle

    packer = Packer(max_tokens=300, policy="passages")
    ranked = [Candidate(text=DOCS[n]) for n in ("argparse", "json")]
    first = packer.recall(ranked, query="pickle").to_markdown()
    assert pickle.loads(pickle.dumps(packer)).recall(ranked, query="pickle").to_markdown() == first


def test_split_windows_as_plain_strings_still_merge_by_overlap() -> None:
    """split_token_windows' strings carry no metadata: the exact overlap still finds them."""
    text = DOCS["argparse"]
    pieces = split_token_windows(text, 150, 50, "cl100k_base")[:3]
    result = recall([Candidate(text=p) for p in pieces], max_tokens=3000, query="argparse", policy="passages")
    assert len(result.evidence) == 1 and text.startswith(result.evidence[0].text)


# -- through the hosts ------------------------------------------------------------------------------


def test_every_langchain_and_llamaindex_path_packs_the_same_passages() -> None:
    """With their default policy (passages), both retrievers, as_evidence, the compressor and the
    postprocessor keep the same passages of the same documents."""
    pytest.importorskip("langchain_core")
    pytest.importorskip("llama_index.core")
    from langchain_core.documents import Document
    from langchain_core.runnables import RunnableLambda
    from llama_index.core.retrievers import BaseRetriever as LlamaRetriever
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

    from recallpack.adapters import langchain as lc
    from recallpack.adapters import llamaindex as li

    names = ("argparse", "json", "csv")
    question = "when does QUOTE_NONNUMERIC put quotes around fields?"
    docs = [Document(page_content=DOCS[n], metadata={"source": n}) for n in names]

    class Manuals(LlamaRetriever):
        def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
            return [NodeWithScore(node=TextNode(text=DOCS[n], metadata={"file_path": n}), score=1.0) for n in names]

    expected = recall([Candidate(text=DOCS[n], citation=n) for n in names], max_tokens=400, query=question,
                      policy="passages")
    # Every kept document is cut to its passages (json's do not make the cut), the answer among them.
    assert expected.report.items_cut == len(expected.evidence) == 2
    assert "QUOTE_NONNUMERIC means" in expected.to_markdown()
    langchain = lc.BudgetedRetriever(RunnableLambda(lambda q: docs), max_tokens=400)
    llamaindex = li.BudgetedRetriever(Manuals(), max_tokens=400)
    assert langchain.recall(question).to_markdown() == expected.to_markdown()
    assert llamaindex.recall(question).to_markdown() == expected.to_markdown()
    assert langchain.as_evidence().invoke(question) == expected.to_markdown()
    compressed = lc.BudgetCompressor(max_tokens=400).compress_documents(docs, question)
    assert [d.page_content for d in compressed] == [e.text for e in expected.evidence]
    nodes = Manuals().retrieve(question)
    kept = li.BudgetPostprocessor(max_tokens=400).postprocess_nodes(nodes, query_str=question)
    assert all(MARK in k.node.get_content() for k in kept) and len(kept) == 2


def test_llamaindex_sentence_splitter_chunks_merge_by_their_offsets() -> None:
    """LlamaIndex's SentenceSplitter nodes of one document (start/end_char_idx) are one item."""
    pytest.importorskip("llama_index.core")
    from llama_index.core import Document as LlamaDocument
    from llama_index.core.node_parser import SentenceSplitter
    from llama_index.core.retrievers import BaseRetriever as LlamaRetriever
    from llama_index.core.schema import NodeWithScore, QueryBundle

    from recallpack.adapters import llamaindex as li

    text = DOCS["argparse"] + "\n\n" + DOCS["json"] + "\n\n" + DOCS["csv"]
    chunks = SentenceSplitter(chunk_size=256, chunk_overlap=64).get_nodes_from_documents([LlamaDocument(text=text)])
    assert len(chunks) >= 4 and chunks[1].start_char_idx < chunks[0].end_char_idx  # they overlap

    class Chunks(LlamaRetriever):
        def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
            return [NodeWithScore(node=n, score=1.0) for n in reversed(chunks[:4])]

    result = li.BudgetedRetriever(Chunks(), max_tokens=4000).recall("json")
    assert len(result.evidence) == 1 and result.evidence[0].text == text[: chunks[3].end_char_idx]
    assert [e.reason.value if e.reason else None for e in result.trace] == [None, "merged", "merged", "merged"]


@pytest.mark.parametrize("shape", ["letters", "words", "sentences"])
def test_a_huge_candidate_is_read_only_as_far_as_the_walk_reaches(shape: str) -> None:
    """A 50 MB text under passages: read up to the reach, well under 5 MB allocated, cut and marked."""
    import gc
    import tracemalloc

    big = {"letters": "z" * 50_000_000, "words": "word " * 10_000_000,
           "sentences": "The port is set by PORT. " * 2_000_000}[shape]
    candidates = [Candidate(text=DOCS["json"]), Candidate(text=big + " needle at the end")]
    recall(candidates[:1], max_tokens=1024, query="port", policy="passages")  # loads the encoding
    gc.collect()
    tracemalloc.start()
    try:
        result = recall(candidates, max_tokens=1024, query="which port? needle", policy="passages")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 5_000_000, peak
    assert count_tokens(result.to_markdown()) == result.report.tokens_used <= 1024
    assert "needle" not in result.to_markdown()  # past the reach: never read
    if 1 in result.selected_ranks:
        assert result.evidence[list(result.selected_ranks).index(1)].text.endswith(MARK)


@pytest.mark.parametrize(
    "query",
    ["x" * 1_000_000, "word " * 200_000, " ".join(f"w{i}" for i in range(100_000)), "İ" * 1000 + " port"],
)
def test_a_hostile_query_costs_about_one_pass(query: str) -> None:
    """A megabyte-long word, a repeated word, 100,000 distinct words, a case-folding letter: the
    query's terms are bounded and the packing is exact."""
    from recallpack.packing.reading.analysis import MAX_TERMS, Reading

    assert len(Reading.of("auto", query, "").terms(query)) <= MAX_TERMS
    ranked = [Candidate(text=DOCS[n] * 20) for n in ("argparse", "json")]
    result = recall(ranked, max_tokens=500, query=query, policy="passages")
    assert count_tokens(result.to_markdown()) == result.report.tokens_used <= 500


def test_an_embedding_that_raises_is_the_cause_of_a_recallpack_error() -> None:
    """A failing embed= (a client timing out) surfaces as a ConfigError whose cause is its error."""

    def embed(texts: list[str]) -> list[list[float]]:
        raise TimeoutError("the embedding service did not answer")

    ranked = [Candidate(text=DOCS[n]) for n in ("argparse", "json")]
    with pytest.raises(ConfigError, match="embed .* raised TimeoutError") as caught:
        recall(ranked, max_tokens=200, query="json", policy="passages", embed=embed)
    assert isinstance(caught.value.__cause__, TimeoutError)


@pytest.mark.parametrize("filler", ["日本語の文です。 ", "a. ", "x… "])
def test_a_document_that_counts_far_denser_than_the_match_still_fills_the_budget(filler: str) -> None:
    """The tokens per character learned from the best match (English prose) can be a quarter
    of the rest's (Chinese, one-letter sentences): the exact count then turns what it gives back
    and adds into the estimate's terms, so the block fills the budget instead of ending empty."""
    dense = filler * 20_000
    ranked = [Candidate(text=dense), Candidate(text=DOCS["json"]), Candidate(text=filler[::-1] * 5_000)]
    result = recall(ranked, max_tokens=2000, query="serialize objects to json", policy="passages")
    assert 1800 <= result.report.tokens_used == count_tokens(result.to_markdown()) <= 2000
    assert_accounted(result, len(ranked))


def _as_a_transcript(text: str) -> str:
    """``text`` as speech-to-text gives it: lower case, no punctuation, one line."""
    return " ".join(re.sub(r"[^\w\s]", " ", text).lower().split())


def test_a_transcript_without_sentence_ends_is_cut_into_small_passages() -> None:
    """Three manuals as transcripts (no sentence ends: every unit is a piece of a long run): at
    150 tokens the passage naming the query's words is kept and the room is used. Cut in slabs
    of 600 characters, the run around the answer was more than the budget could take."""
    ranked = [Candidate(text=_as_a_transcript(DOCS[n])) for n in ("argparse", "json", "csv")]
    result = recall(ranked, max_tokens=150, query="quote nonnumeric quotes around fields", policy="passages")
    assert_accounted(result, 3)
    block = result.to_markdown()
    assert "quote_nonnumeric" in block and result.report.tokens_used >= 120
    assert count_tokens(block) == result.report.tokens_used <= 150


def test_a_long_run_of_chinese_without_sentence_ends_still_fills_the_budget() -> None:
    """A Chinese text with no 。 (a character costs about 1.4 tokens, an English letter 0.23):
    its long run is cut in pieces of bytes, not characters, and of a quarter of a small budget,
    so the room is used. Pieces of 250 characters (about 350 tokens) left a fifth of 1,024
    free; pieces of 250 bytes at 256 tokens, two of which do not fit together, left 40%. Since
    the query's characters match (by pairs), the room goes to matching pieces apart, each after
    its mark: at 256 tokens one piece's worth (about 12%) stays free."""
    zen = "优美胜于丑陋明了胜于晦涩简洁胜于复杂复杂胜于凌乱扁平胜于嵌套间隔胜于紧凑可读性很重要"
    for budget, used in ((256, 0.85), (1024, 0.85)):
        result = recall([Candidate(text=zen * 400)], max_tokens=budget, query="可读性 简洁", policy="passages")
        assert used * budget <= result.report.tokens_used <= budget
        assert "可读性" in result.to_markdown()
        assert count_tokens(result.to_markdown()) == result.report.tokens_used


@given(
    st.integers(min_value=0, max_value=40).flatmap(
        lambda n: st.tuples(st.just(n), st.integers(min_value=60, max_value=300))
    )
)
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# Two kept passages, one ending at a mark line and one starting at the next, once showed both.
@example((16, 87))
def test_a_text_joined_by_mark_lines_is_never_marked_twice_beside_one(drawn: tuple[int, int]) -> None:
    """A text whose pieces are joined by a line that is the mark alone (as the docs server joins
    a file's ranges) is cut without a second mark beside that line: no "……" and no mark line next
    to a mark, whichever passages are kept."""
    start, budget = drawn
    pieces = [text for _, text in paragraphs()[start : start + 4]]
    joined = f"\n{MARK}\n".join(pieces)
    result = Packer(max_tokens=budget, policy="passages").recall(
        [Candidate(text=joined)], query="the return value of the function"
    )
    for item in result.evidence:
        assert MARK * 2 not in item.text
        lines = [line.strip() for line in item.text.splitlines()]
        assert not any(a.endswith(MARK) and b == MARK or a == MARK and b.startswith(MARK)
                       for a, b in zip(lines, lines[1:]))
