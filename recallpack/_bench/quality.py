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
of the normalized text. It also prints the tokens used and the milliseconds per query.

The retriever and the chunker are what the hosts ship (rank-bm25, llama-index-core), so this
section needs the ``demo`` extra.
"""

from __future__ import annotations

import gzip
import json
import re
import string
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from recallpack.packing.candidate import Candidate, Span
from recallpack.packing.packer import Packer
from recallpack.packing.tokenizer import TiktokenTokenizer, get_tokenizer

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

    def candidate(self, i: int) -> Candidate:
        span = self.spans[i] if self.spans else None
        return Candidate(text=self.texts[i], metadata=self.metadata[i], span=span)

    def retrieve(self, query: str) -> list[int]:
        scores = self.index.get_scores(_terms(query))
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
            chunk_spans.append(node_span(node))
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


def node_span(node: Any) -> Span | None:
    """Where a LlamaIndex node sits in its document, as the LlamaIndex adapter records it."""
    if node.ref_doc_id is None or node.start_char_idx is None or node.end_char_idx is None:
        return None
    return Span(parent=f"llama_index:{node.ref_doc_id}", start=node.start_char_idx, end=node.end_char_idx)


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


def ceiling(candidates: Sequence[Candidate], query: str, budget: int) -> tuple[str, int]:
    """Everything retrieved, whatever the budget: what bounds any packer."""
    return "\n\n".join(c.text for c in candidates), 0


def recallpack_method(policy: str, with_query: bool, **settings: Any) -> Method:
    packers: dict[int, Packer] = {}

    def method(candidates: Sequence[Candidate], query: str, budget: int) -> tuple[str, int]:
        packer = packers.get(budget)
        if packer is None:
            packer = packers[budget] = Packer(max_tokens=budget, policy=policy, **settings)
        result = packer.recall(candidates, query=query if with_query else None)
        return result.to_markdown(), result.report.tokens_used

    return method


def methods(tok: TiktokenTokenizer, policies: Sequence[str]) -> dict[str, Method]:
    found: dict[str, Method] = {"retrieval ceiling": ceiling}
    for policy in policies:
        found[f"{policy} + query"] = recallpack_method(policy, True)
        if policy != "passages":
            found[f"{policy}, no query"] = recallpack_method(policy, False)
    found["langchain reduce"] = langchain_reduce(tok)
    found["llamaindex equal share"] = llamaindex_equal_share(tok)
    return found


@dataclass
class Cell:
    kept: int = 0
    asked: int = 0
    tokens: int = 0
    seconds: float = 0.0

    @property
    def share(self) -> float:
        return self.kept / self.asked if self.asked else 0.0


def evaluate(
    shape: Shape, questions: Sequence[Question], found: dict[str, Method]
) -> dict[tuple[str, int], Cell]:
    cells: dict[tuple[str, int], Cell] = {}
    for question in questions:
        ranked = shape.retrieve(question.text)
        candidates = [shape.candidate(i) for i in ranked]
        for budget in shape.budgets:
            for name, method in found.items():
                start = time.perf_counter()
                text, tokens = method(candidates, question.text, budget)
                elapsed = time.perf_counter() - start
                cell = cells.setdefault((name, budget), Cell())
                cell.asked += 1
                cell.kept += answered(text, question.answers)
                cell.tokens += tokens
                cell.seconds += elapsed
    return cells


def sample(questions: Sequence[Question], limit: int | None) -> list[Question]:
    """Every n-th question, so that a sample spreads over all articles."""
    if limit is None or limit >= len(questions):
        return list(questions)
    step = len(questions) / limit
    return [questions[int(i * step)] for i in range(limit)]


def table(shape: Shape, cells: dict[tuple[str, int], Cell], names: Sequence[str]) -> Iterator[str]:
    header = f"  {'':<24}" + "".join(f"  {b:>5} tok: kept  used    ms" for b in shape.budgets)
    yield f"{shape.name} (top {shape.k}):"
    yield header
    for name in names:
        row = f"  {name:<24}"
        for budget in shape.budgets:
            cell = cells[name, budget]
            used = cell.tokens / cell.asked if name != "retrieval ceiling" else 0
            row += f"  {'':>9} {cell.share:>5.1%} {used:>5.0f} {cell.seconds / cell.asked * 1e3:>5.2f}"
        yield row


def run(limit: int | None = 600, policies: Sequence[str] = ("prefix", "skip", "truncate")) -> list[str]:
    if not DATA.exists():
        return [f"quality: skipped ({DATA} is not there: run from a checkout of recallpack)"]
    try:
        articles, questions = load_questions()
        made = shapes(articles)
    except ImportError as exc:
        return [f"quality: skipped ({exc}; pip install -e '.[demo]')"]
    tok = get_tokenizer("cl100k_base")
    assert isinstance(tok, TiktokenTokenizer)
    asked = sample(questions, limit)
    found = methods(tok, policies)
    lines = [
        f"quality: answer kept, over {len(asked)} of {len(questions)} SQuAD questions "
        "(12 articles, BM25 retrieval; cl100k_base)",
    ]
    for shape in made:
        cells = evaluate(shape, asked, found)
        lines.extend(table(shape, cells, list(found)))
    return lines
