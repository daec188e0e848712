"""Cutting one long text to a room: head cuts, focus cuts around a query, embeddings."""

from __future__ import annotations

import math
import re
from collections.abc import Callable

import pytest
import regex
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from recallpack.packing.choosing.cuts import (
    MARK,
    MAX_QUERY_TERMS,
    Excerpt,
    cut_focus,
    cut_head,
)
from recallpack.packing.choosing.embedding import embed_function
from recallpack.packing.errors import BudgetError, ConfigError
from recallpack.packing.reading.analysis import Reading
from recallpack.packing.reading.units import fold, is_stray
from recallpack.packing.tokenizers import TiktokenTokenizer, Tokenizer, get_tokenizer

from .conftest import make_tokenizer

CUT_TOKENIZERS = ["cl100k_base", "chars"]

# Characters that make grapheme clusters interesting: combining marks, ZWJ emoji, flags (regional
# indicators), Hangul jamo and syllables, a Devanagari conjunct, a prepended mark, CRLF; and the
# characters that make sentences and lines: terminators, closing quotes, breaks, indentation.
TRICKY = [
    *'abZé中x   \n\n\t.!?">',
    *"\u0301\u0308\u200d👨👩👧🏽🇫🇷🇩🇪",
    *"\u1100\u1161\u11a8한क्ष\u0600\r。…\ufe0f",
    "İ",  # lower-cases to two characters: a focus cut must keep its positions
]
WORDS = ["port", "socket", "alpha", "beta", "gamma", "delta", "x.y", "obj.attr", "Port", "the"]

tricky_texts = st.lists(
    st.sampled_from(TRICKY) | st.sampled_from(WORDS).map(lambda w: f" {w}"), max_size=160
).map("".join)
prose_texts = st.lists(
    st.tuples(
        st.sampled_from(["", "    ", ">>> ", "\t"]),
        st.lists(st.sampled_from(WORDS + TRICKY[:12]), min_size=1, max_size=12).map(" ".join),
        st.sampled_from([".", ". ", "!", "?", "", "\u0301", " 👨‍👩‍👧."]),
        st.sampled_from(["\n", "\n\n", " ", "\r\n", "  \n"]),
    ).map("".join),
    max_size=25,
).map("".join)
texts = tricky_texts | prose_texts
queries = st.lists(st.sampled_from(WORDS + ["zzz", "PORT", "é"]), max_size=4).map(" ".join)


def clusters_ends(text: str) -> set[int]:
    """Every grapheme cluster boundary of ``text``, by the regex module's \\X."""
    ends = {0}
    for match in regex.finditer(r"\X", text):
        ends.add(match.end())
    return ends


def rebuild(text: str, spans: tuple[tuple[int, int], ...]) -> str:
    """The kept slices joined by the mark wherever non-whitespace text lies between them."""
    out, previous = [], 0
    for start, end in spans:
        if text[previous:start].strip():
            out.append(MARK)
        out.append(text[start:end])
        previous = end
    if text[previous:].strip():
        out.append(MARK)
    return "".join(out)


def check_cut(text: str, cut: Excerpt, max_tokens: int, tokenizer: Tokenizer) -> None:
    """The invariants every cut holds."""
    assert tokenizer.count(cut.text) <= max_tokens
    previous = 0
    for start, end in cut.spans:
        assert previous <= start < end <= len(text), cut.spans
        previous = end
    assert cut.text == rebuild(text, cut.spans)
    boundaries = clusters_ends(text)
    for start, end in cut.spans:
        assert start in boundaries and end in boundaries, (cut.spans, text)


def fresh(tokenizer: Tokenizer) -> Tokenizer:
    """An equivalent tokenizer with an empty count cache."""
    if isinstance(tokenizer, TiktokenTokenizer):
        return TiktokenTokenizer(tokenizer.encoding)
    return get_tokenizer(tokenizer.name)


# --- invariants -------------------------------------------------------------------------------


@pytest.mark.parametrize("spec", CUT_TOKENIZERS)
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=texts, query=queries, max_tokens=st.integers(0, 60))
@example(text=" \ufe0f port", query="port", max_tokens=2)  # the text starts inside a cluster
def test_focus_cut_is_ordered_slices_joined_by_the_mark(
    spec: str, text: str, query: str, max_tokens: int
) -> None:
    """A focus cut is slices of the item in order joined by "…", fits, and repeats byte for byte."""
    tokenizer = make_tokenizer(spec)
    cut = cut_focus(text, query, max_tokens, tokenizer)
    again = cut_focus(text, query, max_tokens, fresh(tokenizer))
    assert cut == again
    if cut is None:
        assert cut_head(text, max_tokens, tokenizer) is None
        return
    check_cut(text, cut, max_tokens, tokenizer)
    if cut.kind == "head":
        assert cut == cut_head(text, max_tokens, tokenizer)


@pytest.mark.parametrize("spec", CUT_TOKENIZERS)
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=texts, max_tokens=st.integers(0, 60))
def test_head_cut_never_splits_a_grapheme_cluster(spec: str, text: str, max_tokens: int) -> None:
    """A head cut is a prefix ending on a cluster boundary, without trailing whitespace, that fits."""
    tokenizer = make_tokenizer(spec)
    cut = cut_head(text, max_tokens, tokenizer)
    assert cut == cut_head(text, max_tokens, fresh(tokenizer))
    if cut is None:
        first = min(b for b in clusters_ends(text) if b > 0)
        # Nothing fits, or what fits is terminators alone ("!…" shows nothing of the text).
        stray = is_stray(text, 0, first)
        assert not text[:first].strip() or tokenizer.count(text[:first] + MARK) > max_tokens or stray
        return
    check_cut(text, cut, max_tokens, tokenizer)
    assert cut.kind == "head"
    if cut.text != text:
        ((start, end),) = cut.spans
        assert start == 0 and not text[end - 1].isspace()


def rendered(tokenizer: Tokenizer) -> Callable[[str], int]:
    """What a text costs inside an evidence item: a label line, every line indented four spaces."""

    def measure(text: str) -> int:
        body = "\n".join("    " + line for line in text.split("\n"))
        return tokenizer.count(f"- **Source excerpt** (`doc.md`)\n{body}\n")

    return measure


@pytest.mark.parametrize("spec", CUT_TOKENIZERS)
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=texts, query=queries, max_tokens=st.integers(0, 80))
def test_cuts_are_exact_for_the_callers_measure(spec: str, text: str, query: str, max_tokens: int) -> None:
    """With a measure (the text rendered in its item), both cuts fit it and keep every invariant."""
    tokenizer = make_tokenizer(spec)
    measure = rendered(tokenizer)
    for cut in (
        cut_head(text, max_tokens, tokenizer, measure=measure),
        cut_focus(text, query, max_tokens, tokenizer, measure=measure),
    ):
        if cut is not None:
            assert measure(cut.text) <= max_tokens
            check_cut(text, cut, max_tokens, tokenizer)


# --- head cut ---------------------------------------------------------------------------------


def test_head_cut_returns_a_text_that_fits_whole() -> None:
    """A text within the room comes back whole, with no mark."""
    tokenizer = get_tokenizer("cl100k_base")
    cut = cut_head("Short text.", 50, tokenizer)
    assert cut == Excerpt("Short text.", ((0, 11),), "head")


def test_head_cut_ends_at_a_sentence_end_that_keeps_two_thirds() -> None:
    """A sentence end late in the room is where the head cut ends."""
    tokenizer = get_tokenizer("chars")
    text = "A" * 70 + ". " + "b" * 200
    cut = cut_head(text, 20, tokenizer)  # 80 chars of room, the sentence ends at 71
    assert cut is not None and cut.text == "A" * 70 + ".…"


def test_head_cut_ends_at_a_token_boundary_when_the_sentence_end_is_early() -> None:
    """A sentence end in the first third of the room is passed over for a longer cut."""
    tokenizer = get_tokenizer("chars")
    text = "Short. " + "word " * 100
    cut = cut_head(text, 20, tokenizer)
    assert cut is not None and cut.text.startswith("Short. word") and len(cut.text) > 60


def test_head_cut_ends_at_a_line_end() -> None:
    """A line end counts as a sentence end."""
    tokenizer = get_tokenizer("cl100k_base")
    text = "def f(x):\n    return x + 1\n" * 40
    cut = cut_head(text, 50, tokenizer)
    assert cut is not None and text[cut.spans[0][1]] == "\n"


@pytest.mark.parametrize(
    "cluster",
    ["👨‍👩‍👧‍👦", "🇫🇷", "e\u0301\u0308", "क्ष", "👍🏽"],
    ids=["zwj-family", "flag", "combining", "conjunct", "skin-tone"],
)
def test_head_cut_keeps_or_drops_a_cluster_whole(cluster: str) -> None:
    """Over rooms of every size, the head of a run of clusters is a whole number of them."""
    tokenizer = get_tokenizer("cl100k_base")
    text = cluster * 30
    for room in range(1, tokenizer.count(text)):
        cut = cut_head(text, room, tokenizer)
        if cut is None:
            assert tokenizer.count(cluster + MARK) > room
            continue
        kept = cut.text[: -len(MARK)]
        assert kept == cluster * (len(kept) // len(cluster)), (room, kept)


def test_head_cut_is_none_when_nothing_fits() -> None:
    """No room for a cluster and the mark gives None."""
    tokenizer = get_tokenizer("cl100k_base")
    assert cut_head("Some long text here", 0, tokenizer) is None
    assert cut_head("👨‍👩‍👧‍👦 family", 1, tokenizer) is None


class _Recording:
    """A tiktoken Encoding that records the length of every text it is asked to encode."""

    def __init__(self, encoding: object) -> None:
        self._encoding = encoding
        self.lengths: list[int] = []

    def encode_ordinary(self, text: str) -> list[int]:
        self.lengths.append(len(text))
        return self._encoding.encode_ordinary(text)  # type: ignore[attr-defined, no-any-return]

    def __getattr__(self, name: str) -> object:
        return getattr(self._encoding, name)


def recording_tokenizer() -> tuple[TiktokenTokenizer, _Recording]:
    base = get_tokenizer("cl100k_base")
    assert isinstance(base, TiktokenTokenizer)
    recording = _Recording(base.encoding)
    return TiktokenTokenizer(recording), recording  # type: ignore[arg-type]


def test_head_cut_of_a_huge_text_reads_only_what_the_room_needs() -> None:
    """Cutting 10 MB to 300 tokens encodes only texts the size of the room, never the whole."""
    tokenizer, recording = recording_tokenizer()
    text = "A sentence of a long manual. " * 350_000
    cut = cut_head(text, 300, tokenizer)
    assert cut is not None and tokenizer.count(cut.text) <= 300
    assert max(recording.lengths) < 20_000
    assert sum(recording.lengths) < 100_000


# --- focus cut --------------------------------------------------------------------------------

MANUAL = "\n".join(
    [
        f"Paragraph {i} talks about topic number {i} in general terms. It goes on for a while."
        for i in range(40)
    ]
    + ["The server listens on port 8080 unless PORT is set in the environment."]
    + [f"Closing paragraph {i} repeats the general advice once more." for i in range(40)]
)


@pytest.mark.parametrize("spec", CUT_TOKENIZERS)
def test_focus_keeps_the_passage_that_answers(spec: str) -> None:
    """The sentence matching the query is kept even from deep inside; a head cut loses it."""
    tokenizer = make_tokenizer(spec)
    query = "which port does the server listen on"
    focus = cut_focus(MANUAL, query, 60, tokenizer)
    head = cut_head(MANUAL, 60, tokenizer)
    assert focus is not None and head is not None
    assert focus.kind == "focus"
    assert "The server listens on port 8080 unless PORT is set in the environment." in focus.text
    assert "port 8080" not in head.text
    assert focus.text.startswith(MARK) and focus.text.endswith(MARK)
    check_cut(MANUAL, focus, 60, tokenizer)


def test_focus_grows_neighbours_before_the_next_passage() -> None:
    """The lines around the best match are kept with it, so the passage reads as one."""
    tokenizer = get_tokenizer("cl100k_base")
    cut = cut_focus(MANUAL, "server port environment", 120, tokenizer)
    assert cut is not None
    assert "Paragraph 39 talks" in cut.text and "Closing paragraph 0 repeats" in cut.text


def test_focus_keeps_code_line_by_line() -> None:
    """A matching line of code is kept whole and on its own line, never split at a dot."""
    code = "\n".join(f"    value_{i} = compute(obj.attr. field_{i})" for i in range(60))
    text = "Intro prose. More prose here.\n\n" + code + "\n\nOutro."
    tokenizer = get_tokenizer("cl100k_base")
    cut = cut_focus(text, "field_30", 40, tokenizer)
    assert cut is not None and cut.kind == "focus"
    lines = text.split("\n")
    for line in cut.text.split("\n"):
        line = line.strip(MARK)
        assert not line.strip() or line in lines, line
    assert "\n    value_30 = compute(obj.attr. field_30)" in cut.text


def test_focus_without_a_query_term_is_the_head_cut() -> None:
    """No query word in the text: the head cut, labelled as such."""
    tokenizer = get_tokenizer("cl100k_base")
    cut = cut_focus(MANUAL, "zebra quantum", 50, tokenizer)
    assert cut == cut_head(MANUAL, 50, tokenizer)
    assert cut is not None and cut.kind == "head"


def test_focus_matches_query_words_whole_and_ignoring_case() -> None:
    """The query word "PORT" matches "port", but "port" does not match inside "portable" or "import"."""
    tokenizer = get_tokenizer("chars")
    filler = "\n".join(f"Line {i} is portable and important to import." for i in range(30))
    text = filler + "\nThe PORT is here.\n" + filler
    cut = cut_focus(text, "port", 12, tokenizer)
    assert cut is not None and "The PORT is here." in cut.text


def test_focus_with_a_long_query_scores_the_same_way() -> None:
    """A query of many words (read in one pass over the text) finds the same passage."""
    tokenizer = get_tokenizer("cl100k_base")
    short = "which port does the server listen on"
    long = short + " " + " ".join(f"unrelated{i}" for i in range(30))
    assert cut_focus(MANUAL, long, 60, tokenizer) == cut_focus(MANUAL, short, 60, tokenizer)


FILLERS = [f"unrelated{i}" for i in range(MAX_QUERY_TERMS)]


@pytest.mark.parametrize(
    ("query", "finds"),
    [
        pytest.param(" ".join(["port", *FILLERS]), True, id="answer-first"),
        pytest.param(" ".join([*FILLERS, "port"]), False, id="answer-past-the-cap"),
        pytest.param(" ".join([*FILLERS[:10]] * 500 + ["port"]), True, id="repeats-count-once"),
        pytest.param(" ".join(["PORT", "Port", "port"] * 1000 + FILLERS), True, id="case-repeats-count-once"),
        pytest.param("w" * 1_000_000 + " port " + "v" * 129, True, id="huge-words-are-no-terms"),
        pytest.param("port" * 33, False, id="a-word-past-the-term-length"),
    ],
)
def test_focus_scores_the_first_distinct_words_of_a_query(query: str, finds: bool) -> None:
    """The query is end-user input: only its first MAX_QUERY_TERMS distinct words are scored, a
    repeated word (in any case) counting once, so a long query costs what a short one does."""
    tokenizer = get_tokenizer("cl100k_base")
    cut = cut_focus(MANUAL, query, 60, tokenizer)
    assert cut is not None
    assert ("listens on port 8080" in cut.text) is finds
    if not finds:
        assert cut == cut_head(MANUAL, 60, tokenizer)


@pytest.mark.parametrize(
    ("written", "query"),
    [
        ("İSTANBUL", "istanbul"),
        ("istanbul", "İstanbul"),
        ("İstanbul", "İSTANBUL"),
        ("Istanbul", "İstanbul"),
    ],
)
def test_focus_folds_the_dotted_capital_i_and_keeps_positions(written: str, query: str) -> None:
    """"İ" lower-cases to two characters; folded to "i", it matches either way, and the kept
    passage is the one that holds the word, wherever "İ" occurs before it."""
    tokenizer = get_tokenizer("chars")
    filler = "\n".join(f"Line {i} mentions İzmir and İ alone, then more words." for i in range(40))
    text = filler + f"\nThe ferry leaves {written} at noon.\n" + filler
    cut = cut_focus(text, query, 14, tokenizer)
    assert cut is not None and cut.kind == "focus"
    assert f"The ferry leaves {written} at noon." in cut.text
    check_cut(text, cut, 14, tokenizer)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from([*TRICKY, "İ", "ß", "Σ", "ǅ", "K", "ﬁ"]), max_size=60))
def test_case_folding_keeps_every_position(text: str) -> None:
    """The folded text has the original's length, so a match found in it is at the same place."""
    folded = fold(text)
    assert len(folded) == len(text)
    assert all(len(fold(char)) == 1 for char in text)
    terms = Reading(None).terms(text)
    assert terms == list(dict.fromkeys(terms))
    assert len(Reading(None).terms(" ".join(f"w{i}" for i in range(1000)) + text)) == MAX_QUERY_TERMS


def test_focus_cut_of_a_best_sentence_larger_than_the_room_keeps_its_head() -> None:
    """A matching sentence longer than the room is cut inside, still marked on both sides."""
    tokenizer = get_tokenizer("cl100k_base")
    long_sentence = "The needle " + "and more words " * 80 + "end."
    text = "Intro sentence here.\n" + long_sentence + "\nOutro sentence there."
    cut = cut_focus(text, "needle", 12, tokenizer)
    assert cut is not None and cut.kind == "focus"
    assert cut.text.startswith(MARK + "\nThe needle") and cut.text.endswith(MARK)
    check_cut(text, cut, 12, tokenizer)


def test_focus_fills_the_room_the_measure_leaves() -> None:
    """With an item's framing and indentation to pay for, the focus cut still fits and uses most of the room."""
    tokenizer = get_tokenizer("cl100k_base")
    measure = rendered(tokenizer)
    code = "\n".join(f"value_{i} = compute(field_{i})  # step {i}" for i in range(200))
    cut = cut_focus(code, "field_120", 150, tokenizer, measure=measure)
    assert cut is not None and "value_120 = compute(field_120)" in cut.text
    assert 130 <= measure(cut.text) <= 150
    assert cut_focus(code, "field_120", 11, tokenizer, measure=measure) is None  # framing and mark: 12


def test_focus_finds_a_word_between_long_runs_of_flags() -> None:
    """A run of flags has no clear place to split; the word between two runs is still found."""
    tokenizer = get_tokenizer("cl100k_base")
    text = "🇫🇷" * 1_000 + " port " + "🇩🇪" * 1_000  # regex's \X is quadratic over a run of flags
    cut = cut_focus(text, "port", 30, tokenizer)
    assert cut is not None and cut.kind == "focus" and "port" in cut.text
    check_cut(text, cut, 30, tokenizer)


def test_focus_returns_a_text_that_fits_whole() -> None:
    """A text within the room comes back whole."""
    tokenizer = get_tokenizer("cl100k_base")
    assert cut_focus("Port 80.", "port", 10, tokenizer) == Excerpt("Port 80.", ((0, 8),), "focus")


def test_focus_cut_of_a_large_document_counts_only_what_it_keeps() -> None:
    """Cutting 1 MB encodes only the sentences it considers, a few times the room, not the document."""
    tokenizer, recording = recording_tokenizer()
    text = MANUAL * 130
    cut = cut_focus(text, "which port does the server listen on", 300, tokenizer)
    assert cut is not None and "port 8080" in cut.text
    assert sum(recording.lengths) < 60_000


# --- errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize("cut", [cut_head, lambda t, n, k: cut_focus(t, "q", n, k)])
def test_bad_arguments_name_the_field(cut: Callable[..., object]) -> None:
    """A negative room, a text that is not a str, or an unresolved tokenizer is refused by name."""
    tokenizer = get_tokenizer("chars")
    with pytest.raises(BudgetError, match="max_tokens"):
        cut("text", -1, tokenizer)
    with pytest.raises(BudgetError, match="max_tokens"):
        cut("text", True, tokenizer)
    with pytest.raises(ConfigError, match="text"):
        cut(b"text", 5, tokenizer)
    with pytest.raises(ConfigError, match="get_tokenizer"):
        cut("text", 5, "cl100k_base")


def test_focus_refuses_a_query_that_is_not_text() -> None:
    """The query must be a str."""
    with pytest.raises(ConfigError, match="query"):
        cut_focus("text", None, 5, get_tokenizer("chars"))  # type: ignore[arg-type]


# --- embeddings -------------------------------------------------------------------------------

CONCEPTS = {"car": 0, "automobile": 0, "vehicle": 0, "bank": 1, "money": 1, "loan": 1, "river": 2, "water": 2}


def concept_vector(text: str) -> list[float]:
    """A bag of concepts: synonyms share a dimension, so similarity is meaningful offline."""
    vector = [0.0, 0.0, 0.0, 0.01]
    for word in re.findall(r"\w+", text.lower()):
        if word in CONCEPTS:
            vector[CONCEPTS[word]] += 1.0
    return vector


SYNONYM_DOC = "\n".join(
    [f"Filler sentence {i} about nothing in particular." for i in range(30)]
    + ["She drove the car to the coast."]
    + [f"More filler {i} about nothing at all." for i in range(30)]
)


def langchain_concepts() -> object:
    embeddings = pytest.importorskip("langchain_core.embeddings")

    class ConceptEmbeddings(embeddings.Embeddings):  # type: ignore[misc, name-defined]
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return [concept_vector(t) for t in texts]

        def embed_query(self, text: str) -> list[float]:
            return concept_vector(text)

    return ConceptEmbeddings()


def llamaindex_concepts() -> object:
    base = pytest.importorskip("llama_index.core.embeddings")

    class ConceptEmbedding(base.BaseEmbedding):  # type: ignore[misc, name-defined]
        def _get_query_embedding(self, query: str) -> list[float]:
            return concept_vector(query)

        def _get_text_embedding(self, text: str) -> list[float]:
            return concept_vector(text)

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return concept_vector(query)

    return ConceptEmbedding()


@pytest.mark.parametrize(
    "make",
    [langchain_concepts, llamaindex_concepts, lambda: lambda texts: [concept_vector(t) for t in texts]],
    ids=["langchain", "llamaindex", "callable"],
)
def test_semantic_focus_keeps_the_sentence_the_embedding_ranks_best(make: Callable[[], object]) -> None:
    """With an embedding, "automobile" finds the sentence about a car, which no query word matches."""
    tokenizer = get_tokenizer("cl100k_base")
    embed = embed_function(make())
    lexical = cut_focus(SYNONYM_DOC, "automobile", 30, tokenizer)
    semantic = cut_focus(SYNONYM_DOC, "automobile", 30, tokenizer, embed=embed)
    assert lexical is not None and lexical.kind == "head" and "car" not in lexical.text
    assert semantic is not None and semantic.kind == "focus"
    assert "She drove the car to the coast." in semantic.text
    check_cut(SYNONYM_DOC, semantic, 30, tokenizer)


class NumpyConcepts:
    """An embedding that returns NumPy arrays, as sentence-transformers' encode does."""

    def __call__(self, texts: list[str]) -> object:
        import numpy as np

        return np.array([concept_vector(t) for t in texts], dtype=np.float32)

    def embed_query(self, text: str) -> object:
        import numpy as np

        return np.array(concept_vector(text), dtype=np.float32)

    def embed_documents(self, texts: list[str]) -> object:
        return self(texts)


@pytest.mark.parametrize("kind", ["callable returning an array", "LangChain-style returning arrays"])
def test_an_embedding_returning_numpy_arrays_works(kind: str) -> None:
    """embed= may return a 2-D NumPy array (or 1-D arrays): it ranks as the lists would."""
    tokenizer = get_tokenizer("cl100k_base")
    source = NumpyConcepts()
    embed = embed_function(source.__call__ if kind.startswith("callable") else source)
    semantic = cut_focus(SYNONYM_DOC, "automobile", 30, tokenizer, embed=embed)
    assert semantic is not None and "She drove the car to the coast." in semantic.text
    as_lists = cut_focus(SYNONYM_DOC, "automobile", 30, tokenizer, embed=embed_function(lambda texts: [concept_vector(t) for t in texts]))
    assert semantic == as_lists


def test_langchain_deterministic_fake_embedding_picks_its_own_best() -> None:
    """LangChain's DeterministicFakeEmbedding is accepted; its best-ranked sentence is kept."""
    embeddings = pytest.importorskip("langchain_core.embeddings")
    fake = embeddings.DeterministicFakeEmbedding(size=32)
    sentences = [f"Sentence number {i} of the fake corpus." for i in range(40)]
    query = "anything at all"
    target = fake.embed_query(query)
    vectors = fake.embed_documents(sentences)
    best = max(
        range(40),
        key=lambda i: (
            sum(a * b for a, b in zip(target, vectors[i])) / (sum(a * a for a in vectors[i]) ** 0.5),
            -i,
        ),
    )
    cut = cut_focus("\n".join(sentences), query, 20, get_tokenizer("cl100k_base"), embed=embed_function(fake))
    assert cut is not None and sentences[best] in cut.text


def test_llamaindex_mock_embedding_is_accepted() -> None:
    """LlamaIndex's MockEmbedding scores every sentence alike: the cut starts at the first."""
    base = pytest.importorskip("llama_index.core.embeddings")
    embed = embed_function(base.MockEmbedding(embed_dim=8))
    assert embed("q", ["a", "b"]) == pytest.approx([1.0, 1.0])
    cut = cut_focus(MANUAL, "q", 30, get_tokenizer("cl100k_base"), embed=embed)
    assert cut is not None and cut.text.startswith("Paragraph 0 talks")


def test_embed_function_refuses_what_it_cannot_use() -> None:
    """An object that is no embedding raises a ConfigError naming embed and what is accepted."""
    with pytest.raises(
        ConfigError, match=r"embed=.*LangChain Embeddings.*LlamaIndex BaseEmbedding.*callable"
    ):
        embed_function(42)


def test_embed_function_checks_the_number_of_vectors() -> None:
    """An embedding returning the wrong number of vectors is reported, not zipped short."""
    embed = embed_function(lambda texts: [[1.0, 0.0]])
    with pytest.raises(ConfigError, match="embed"):
        embed("q", ["a", "b"])


def test_a_similarity_function_is_checked_sentence_by_sentence() -> None:
    """An EmbedFn giving too few scores or a non-number is a ConfigError; a NaN score ranks last."""
    text = "Alpha is first. Beta is second. Gamma is third. Delta is fourth."
    tok = get_tokenizer("chars")
    with pytest.raises(ConfigError, match="embed returned 1 scores for 4 sentences"):
        cut_focus(text, "q", 6, tok, embed=lambda query, texts: [1.0])
    with pytest.raises(ConfigError, match="embed returned 'high' as a similarity"):
        cut_focus(text, "q", 6, tok, embed=lambda query, texts: ["high"] * len(texts))
    best_first = cut_focus(text, "q", 6, tok, embed=lambda query, texts: [0.95, 0.1, 0.2, 0.9])
    nan_first = cut_focus(text, "q", 6, tok, embed=lambda query, texts: [math.nan, 0.1, 0.2, 0.9])
    assert best_first is not None and best_first.text == "Alpha is first.…"
    assert nan_first is not None and nan_first.text == "… Delta is fourth."


def concept_vectors(texts: list[str]) -> list[list[float]]:
    return [concept_vector(t) for t in texts]


def test_embed_function_pickles_for_workers() -> None:
    """An adapted embedding pickles (it holds the embedding, no closure) and scores the same after."""
    import pickle

    embed = embed_function(concept_vectors)
    copy = pickle.loads(pickle.dumps(embed))
    assert copy("automobile", ["a car", "a loan"]) == embed("automobile", ["a car", "a loan"])
    assert copy("automobile", ["a car", "a loan"])[0] > 0.9


def test_embed_function_is_idempotent() -> None:
    """Adapting an adapted embedding returns it unchanged."""
    embed = embed_function(lambda texts: [[1.0] for _ in texts])
    assert embed_function(embed) is embed


def test_embed_function_from_its_old_home_warns_and_still_works() -> None:
    """recallpack.packing.choosing.cuts.embed_function (moved to packing.embedding) warns, naming the new place."""
    from recallpack.packing.choosing import cuts, embedding

    with pytest.warns(DeprecationWarning, match=r"recallpack\.packing\.choosing\.embedding\.embed_function"):
        moved = cuts.embed_function
    assert moved is embedding.embed_function
    with pytest.raises(AttributeError):
        cuts.no_such_name  # noqa: B018


def test_an_adapter_hands_the_core_a_similarity_not_the_host_embedding() -> None:
    """A LangChain component given a host embedding keeps it as given; its Packer holds the
    similarity the adapters made of it, which the core calls without naming a host method."""
    pytest.importorskip("langchain_core")
    from recallpack.adapters.langchain import BudgetCompressor
    from recallpack.packing.choosing.embedding import Similarity
    from recallpack.testing import HashingEmbeddings

    model = HashingEmbeddings()
    compressor = BudgetCompressor(embed=model)
    assert compressor.embed is model
    assert isinstance(compressor.packer.embed, Similarity) and compressor.packer.embed.source is model
    assert compressor.packer.embed("a car", ["a car", "a loan"])[0] == pytest.approx(1.0)


def test_docstring_examples_run() -> None:
    """The >>> examples in the cuts module and in the units module it cuts by pass."""
    import doctest

    from recallpack.packing.choosing import cuts
    from recallpack.packing.reading import units

    outcomes = {module.__name__: doctest.testmod(module) for module in (cuts, units)}
    assert all(o.failed == 0 and o.attempted > 0 for o in outcomes.values()), outcomes


query_words = st.sampled_from(["port", "PORT", "İstanbul", "istanbul", "the", "server", "x", "ß", "ǅ", "8080"])


@settings(max_examples=60, deadline=None)
@given(
    words=st.lists(query_words | st.text(alphabet="abİıIi", min_size=1, max_size=6), min_size=1, max_size=300),
    repeat=st.integers(min_value=1, max_value=20),
)
def test_a_long_or_repetitive_query_cuts_as_its_first_distinct_words(words: list[str], repeat: int) -> None:
    """The query is end-user input: however long or repetitive, a focus cut is a valid cut, and
    the same as the cut for the query's first MAX_QUERY_TERMS distinct words."""
    tokenizer = get_tokenizer("cl100k_base")
    text = "İ " + MANUAL.replace("port 8080", "İstanbul port 8080")
    query = " ".join(words * repeat)
    cut = cut_focus(text, query, 50, tokenizer)
    assert cut is not None
    check_cut(text, cut, 50, tokenizer)
    terms = Reading.of("auto", query, text).terms(query)
    assert len(terms) <= MAX_QUERY_TERMS
    assert cut == cut_focus(text, " ".join(terms), 50, tokenizer)
