"""Quality section of ``python -m recallpack.bench --quality``: does the answer survive packing?

Real, public questions with gold answers (12 articles of the SQuAD v1.1 development set,
``benchmarks/data/``, CC BY-SA 4.0) are asked of a BM25 retriever over three shapes of document
that real pipelines hand a packer:

- ``paragraphs``: each paragraph a document (top 10), budgets 256, 512 and 1024;
- ``chunks``: LlamaIndex's default ``SentenceSplitter(chunk_size=1024, chunk_overlap=200)`` over
  each article (top 10), budgets 512, 1024 and 2048;
- ``articles``: whole articles, as a loader returns them before splitting (top 5), budgets 1024,
  2048 and 4096.

For each question, shape and budget it prints the share of questions whose answer is still in
what the model is shown, for every recallpack policy (with the query, and without it where the
policy can run without one), and in the same run for the retrieval ceiling (the answer is in some
retrieved document: no packer can do better), LangChain's ``max_tokens_limit`` reduce (drop
documents from the end until the sum fits) and LlamaIndex's ``simple_summarize`` truncation (every
document cut to an equal share). A question is answered by a text when one of its answers,
normalized the SQuAD way (lower case, no punctuation, no articles, single spaces), is a substring
of the normalized text. It also prints the tokens used and the milliseconds per query, and under
the targets the time of the reading floor (units split, scored and ranked, as much text as the
budget holds encoded, nothing else) as a ratio to the reduce: what no lexical packer saves.

The retriever and the chunker are what the hosts ship (rank-bm25, llama-index-core), so this
section needs the ``demo`` extra.
"""

from __future__ import annotations

import gc
import gzip
import json
import re
import string
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from recallpack.packing.candidate import Candidate, Span
from recallpack.packing.choosing.scoring import combined, layout_of, lexical
from recallpack.packing.packer import Packer
from recallpack.packing.progress import Advance, no_steps, progress
from recallpack.packing.reading.analysis import AUTO, Reading
from recallpack.packing.results.result import RecallResult
from recallpack.packing.tokenizers import TiktokenTokenizer, get_tokenizer

__all__ = ["run", "DATA", "load_questions", "Shape", "shapes", "evaluate", "answered"]

DATA = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "squad-v1.1-dev-12-articles.json.gz"
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)
_WORDS = re.compile(r"\w+")
#: English function words the bench's BM25 retriever ignores, as most BM25 setups do.
_STOPWORDS = frozenset(
    (
        "a", "an", "and", "are", "as", "at", "be", "been", "but", "by", "for", "from", "had", "has",
        "have", "he", "her", "his", "how", "i", "in", "into", "is", "it", "its", "of", "on", "or",
        "she", "that", "the", "their", "them", "they", "this", "to", "was", "were", "what", "when",
        "where", "which", "who", "whom", "why", "will", "with", "would", "you", "did", "do", "does",
    )
)


def normalize(text: str) -> str:
    """SQuAD's answer normalization: lower case, no punctuation, no articles, single spaces."""
    text = text.lower().translate(_PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def answered(text: str, answers: Sequence[str]) -> bool:
    """Whether one of ``answers`` (already normalized) is in ``text``."""
    shown = normalize(text)
    return any(answer in shown for answer in answers)


@dataclass(frozen=True)
class Question:
    text: str
    answers: tuple[str, ...]  # normalized
    article: int


@dataclass
class Shape:
    """Documents of one shape, the retriever over them, how many it returns, the budgets."""

    name: str
    texts: list[str]
    metadata: list[dict[str, Any]]
    k: int
    budgets: tuple[int, ...]
    spans: list[Span | None] = field(default_factory=list, repr=False)
    index: Any = field(default=None, repr=False)
    #: The retriever's analysis of a query (the index was built with the same): words a user of
    #: the documents' language would search by.
    analyze: Callable[[str], list[str]] = field(default_factory=lambda: _terms, repr=False)

    def candidate(self, i: int) -> Candidate:
        span = self.spans[i] if self.spans else None
        return Candidate(text=self.texts[i], metadata=self.metadata[i], span=span)

    def retrieve(self, query: str) -> list[int]:
        scores = self.index.get_scores(self.analyze(query))
        order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
        return order[: self.k]


def _terms(text: str) -> list[str]:
    return [w for w in _WORDS.findall(text.lower()) if w not in _STOPWORDS]


def load_questions(path: Path = DATA) -> tuple[list[dict[str, Any]], list[Question]]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        data = json.load(handle)
    articles = data["articles"]
    questions = [
        Question(qa["question"], tuple(normalize(a) for a in qa["answers"]), i)
        for i, article in enumerate(articles)
        for paragraph in article["paragraphs"]
        for qa in paragraph["qas"]
    ]
    return articles, questions


def shapes(articles: Sequence[dict[str, Any]]) -> list[Shape]:
    """The three shapes of document, each with a BM25 retriever built over it."""
    from llama_index.core import Document
    from llama_index.core.node_parser import SentenceSplitter
    from rank_bm25 import BM25Okapi

    from recallpack.adapters.llamaindex.nodes import node_span

    paragraphs: list[str] = []
    paragraph_meta: list[dict[str, Any]] = []
    chunks: list[str] = []
    chunk_meta: list[dict[str, Any]] = []
    chunk_spans: list[Span | None] = []
    whole: list[str] = []
    whole_meta: list[dict[str, Any]] = []
    splitter = SentenceSplitter(chunk_size=1024, chunk_overlap=200)
    for article in articles:
        title = article["title"]
        texts = [p["text"] for p in article["paragraphs"]]
        text = "\n\n".join(texts)
        for number, paragraph in enumerate(texts):
            paragraphs.append(paragraph)
            paragraph_meta.append({"file_name": f"{title}.txt", "paragraph": number})
        document = Document(text=text, id_=title, metadata={"file_name": f"{title}.txt"})
        for node in splitter.get_nodes_from_documents([document]):
            chunks.append(node.get_content())
            chunk_meta.append(dict(node.metadata))
            # What the LlamaIndex adapter hands the core for a node: where in its source
            # document it sits.
            chunk_spans.append(node_span(node, node.get_content()))
        whole.append(text)
        whole_meta.append({"file_name": f"{title}.txt"})
    made = [
        Shape("paragraphs", paragraphs, paragraph_meta, 10, (256, 512, 1024)),
        Shape("chunks", chunks, chunk_meta, 10, (512, 1024, 2048), chunk_spans),
        Shape("articles", whole, whole_meta, 5, (1024, 2048, 4096)),
    ]
    for shape in made:
        shape.index = BM25Okapi([_terms(t) for t in shape.texts])
    return made


#: ``method(candidates, query, budget) -> (the text the model is shown, its tokens)``
Method = Callable[[Sequence[Candidate], str, int], tuple[str, int]]


def _encode(tok: TiktokenTokenizer, text: str) -> list[int]:
    return tok.encoding.encode_ordinary(text)


def langchain_reduce(tok: TiktokenTokenizer) -> Method:
    """LangChain's ``max_tokens_limit``: count every document, drop from the end until the sum fits."""

    def method(candidates: Sequence[Candidate], query: str, budget: int) -> tuple[str, int]:
        counts = [len(_encode(tok, c.text)) for c in candidates]
        n = len(candidates)
        while n and sum(counts[:n]) > budget:
            n -= 1
        return "\n\n".join(c.text for c in candidates[:n]), sum(counts[:n])

    return method


def llamaindex_equal_share(tok: TiktokenTokenizer) -> Method:
    """LlamaIndex's ``simple_summarize``: every document truncated to an equal share of the room."""

    def method(candidates: Sequence[Candidate], query: str, budget: int) -> tuple[str, int]:
        share = max(1, (budget - 2 * (len(candidates) - 1)) // max(1, len(candidates)))
        parts = [tok.encoding.decode(_encode(tok, c.text)[:share]) for c in candidates]
        text = "\n\n".join(parts)
        return text, len(_encode(tok, text))

    return method


#: Characters per token of the SQuAD text under cl100k (about 4.4): how much text the floor encodes.
_FLOOR_CHARS_PER_TOKEN = 4


def reading_floor(tok: TiktokenTokenizer) -> Method:
    """What ``passages`` cannot do without, timed alone: split the documents into units, score
    them against the query, rank them, and encode about as much text as the budget holds. No
    choice, no trace, no block: the cost under any lexical packer of this kind (it shows no
    text, so it is timed, not scored)."""

    def method(candidates: Sequence[Candidate], query: str, budget: int) -> tuple[str, int]:
        layout = layout_of([c.text for c in candidates], budget)
        best, _ = combined(lexical(layout, query, Reading.of(AUTO, query, layout.text)), layout.units)
        sorted(best, key=best.__getitem__, reverse=True)  # timed as passages ranks; the order is not used
        return "", len(_encode(tok, layout.text[: _FLOOR_CHARS_PER_TOKEN * budget]))

    return method


def ceiling(candidates: Sequence[Candidate], query: str, budget: int) -> tuple[str, int]:
    """Everything retrieved, whatever the budget: what bounds any packer."""
    return "\n\n".join(c.text for c in candidates), 0


def recallpack_method(
    policy: str,
    with_query: bool,
    shown: Callable[[RecallResult], str] = RecallResult.to_markdown,
    **settings: Any,
) -> Method:
    """A recallpack policy as a method; ``shown(result)`` is the text judged (the whole block by
    default)."""
    packers: dict[int, Packer] = {}

    def method(candidates: Sequence[Candidate], query: str, budget: int) -> tuple[str, int]:
        packer = packers.get(budget)
        if packer is None:
            packer = packers[budget] = Packer(max_tokens=budget, policy=policy, **settings)
        # Every packing starts cold: the same documents come back for many questions, and a
        # warm count cache would make recallpack look cheaper than a first sight costs.
        packer.tokenizer_used._cache.clear()
        result = packer.recall(candidates, query=query if with_query else None)
        return shown(result), result.report.tokens_used

    return method


POLICIES = ("prefix", "skip", "truncate", "passages")
FLOOR = "reading floor"  # timed only: not a row of the tables


def methods(tok: TiktokenTokenizer, policies: Sequence[str] = POLICIES) -> dict[str, Method]:
    found: dict[str, Method] = {"retrieval ceiling": ceiling}
    for policy in policies:
        found[f"{policy} + query"] = recallpack_method(policy, True)
    for policy in policies:
        if policy != "passages":  # without a query, passages packs as prefix
            found[f"{policy}, no query"] = recallpack_method(policy, False)
    found["langchain reduce"] = langchain_reduce(tok)
    found["llamaindex equal share"] = llamaindex_equal_share(tok)
    found[FLOOR] = reading_floor(tok)
    return found


@dataclass
class Cell:
    kept: int = 0
    asked: int = 0
    tokens: int = 0
    seconds: float = 0.0
    #: Whether each question asked, in order, kept its answer: what two runs are diffed by.
    outcomes: list[bool] = field(default_factory=list, repr=False)

    @property
    def share(self) -> float:
        return self.kept / self.asked if self.asked else 0.0

    @property
    def ms(self) -> float:
        return self.seconds / self.asked * 1e3 if self.asked else 0.0


def evaluate(
    shape: Shape,
    questions: Sequence[Question],
    found: dict[str, Method],
    judge: Callable[[str, Sequence[str]], bool] = answered,
    advance: Advance = no_steps,
) -> dict[tuple[str, int], Cell]:
    """Every method on every question at every budget of ``shape``: one cell each. The methods
    take turns on each question, so that load from elsewhere hits them alike. ``judge(text,
    answers)`` says whether the answer is in the text shown; ``advance(1)`` is told of each question."""
    cells: dict[tuple[str, int], Cell] = {}
    for question in questions:
        ranked = shape.retrieve(question.text)
        candidates = [shape.candidate(i) for i in ranked]
        for budget in shape.budgets:
            for name, method in found.items():
                gc.disable()
                start = time.perf_counter()
                text, tokens = method(candidates, question.text, budget)
                elapsed = time.perf_counter() - start
                gc.enable()
                cell = cells.setdefault((name, budget), Cell())
                kept = judge(text, question.answers)
                cell.asked += 1
                cell.kept += kept
                cell.outcomes.append(kept)
                cell.tokens += tokens
                cell.seconds += elapsed
        advance(1)
    return cells


def of_articles(questions: Sequence[Question], articles: range | None) -> list[Question]:
    """The questions of ``articles`` (positions in the data, 0 the first), all when None: the
    retriever still reads every article, so a subset tells whether a result holds on questions
    of other articles than it was seen on."""
    return list(questions) if articles is None else [q for q in questions if q.article in articles]


_T = TypeVar("_T")


def sample(questions: Sequence[_T], limit: int | None) -> list[_T]:
    """Every n-th question, so that a sample spreads over all articles."""
    if limit is None or limit >= len(questions):
        return list(questions)
    step = len(questions) / limit
    return [questions[int(i * step)] for i in range(limit)]


def table(shape: Shape, cells: dict[tuple[str, int], Cell], names: Sequence[str]) -> Iterator[str]:
    yield f"{shape.name} (top {shape.k}): answer kept %, tokens used, ms per query"
    yield f"  {'':<24}" + "".join(f"  {f'{b} tokens':>22}" for b in shape.budgets)
    for name in names:
        row = f"  {name:<24}"
        for budget in shape.budgets:
            cell = cells[name, budget]
            used = cell.tokens / cell.asked if name != "retrieval ceiling" else 0
            row += f"  {cell.share:>7.1%} {used:>6.0f} {cell.ms:>6.2f}ms"
        yield row


Results = dict[str, dict[tuple[str, int], Cell]]


def markdown(made: Sequence[Shape], results: Results, names: Sequence[str]) -> str:
    """The answer-kept table as Markdown, for the README."""
    head = ["", *(f"{s.name} {b}" for s in made for b in s.budgets)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name in names:
        cells = [f"{results[s.name][name, b].share:.0%}" for s in made for b in s.budgets]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def targets(made: Sequence[Shape], results: Results) -> list[str]:
    """The issue's targets: passages keeps the answer at least as often as prefix everywhere, 93% at
    1024 over chunks, and costs no more than LangChain's reduce (2x over paragraphs)."""
    lines = []
    for shape in made:
        cells = results[shape.name]
        for budget in shape.budgets:
            passages, prefix = cells["passages + query", budget], cells["prefix + query", budget]
            ok = passages.share >= prefix.share
            lines.append(
                f"  {'ok  ' if ok else 'MISS'} passages >= prefix, {shape.name} at {budget}: "
                f"{passages.share:.1%} vs {prefix.share:.1%}"
            )
        reduce_ms = sum(cells["langchain reduce", b].ms for b in shape.budgets)
        ratio = sum(cells["passages + query", b].ms for b in shape.budgets) / max(reduce_ms, 1e-9)
        bound = 2.0 if shape.name == "paragraphs" else 1.0
        lines.append(
            f"  {'ok  ' if ratio <= bound else 'MISS'} passages / langchain reduce, time per query over "
            f"{shape.name} (<= {bound:.0f}x): {ratio:.2f}x"
        )
        if (FLOOR, shape.budgets[0]) in cells:
            floor = sum(cells[FLOOR, b].ms for b in shape.budgets) / max(reduce_ms, 1e-9)
            lines.append(f"       (the reading floor alone, split, score, rank, encode: {floor:.2f}x)")
    chunks = results["chunks"]["passages + query", 1024].share
    verdict = "ok  " if chunks >= 0.93 else "MISS"
    lines.append(f"  {verdict} passages over chunks at 1024 (>= 93%): {chunks:.1%}")
    return lines


def run(limit: int | None = 600, policies: Sequence[str] = POLICIES, as_markdown: bool = False,
        only: range | None = None, show_progress: bool = False) -> list[str]:
    if not DATA.exists():
        return [f"quality: skipped ({DATA} is not there: run from a checkout of recallpack)"]
    try:
        articles, questions = load_questions()
        made = shapes(articles)
    except ImportError as exc:
        return [f"quality: skipped ({exc}; pip install -e '.[demo]')"]
    tok = get_tokenizer("cl100k_base")
    assert isinstance(tok, TiktokenTokenizer)
    asked = sample(of_articles(questions, only), limit)
    found = methods(tok, policies)
    which = "" if only is None else f", asked of articles {only.start + 1} to {only.stop}"
    lines = [
        f"quality: is the answer still in what the model is shown? {len(asked)} of {len(questions)} "
        f"SQuAD v1.1 questions (12 articles, CC BY-SA 4.0{which}), BM25 retrieval, cl100k_base",
    ]
    results: Results = {}
    shown = [name for name in found if name != FLOOR]
    with progress(len(made) * len(asked), "quality: questions", show_progress) as advance:
        for shape in made:
            results[shape.name] = evaluate(shape, asked, found, advance=advance)
            lines.extend(table(shape, results[shape.name], shown))
    if "passages" in policies and "prefix" in policies:
        lines.append("targets:")
        lines.extend(targets(made, results))
    if as_markdown:
        lines.append(markdown(made, results, shown))
    return lines
