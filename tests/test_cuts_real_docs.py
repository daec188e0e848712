"""Focus cuts on real long documents: known-item queries over the standard library's docstrings.

A sentence is taken from deep inside a long module docstring (past its first 300 tokens), some
of its words are dropped, and what is left is the query. When BM25 over whole docstrings ranks
the right module first, its docstring is cut to 280 tokens (a 300-token budget less the item's
framing) by a head cut and by a focus cut, and we look for the sentence in each.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from functools import lru_cache

import pytest

from recallpack.packing.choosing.cuts import MARK, cut_focus, cut_head
from recallpack.packing.tokenizers import TiktokenTokenizer, get_tokenizer
from recallpack.testing import stdlib_docs

rank_bm25 = pytest.importorskip("rank_bm25")

ROOM = 280
DEEP = 300  # tokens of the document before the sentence starts
PER_DOC = 4
_WORD = re.compile(r"\w+")
_SENTENCE = re.compile(r"[A-Z][^.!?]*?[.!?](?=\s|$)", re.DOTALL)


@dataclass(frozen=True)
class Case:
    module: str
    doc: str
    sentence: str
    query: str


def words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def squash(text: str) -> str:
    return " ".join(text.split())


def tiktoken_count(text: str) -> int:
    """An independent count: tiktoken's own encoder, not recallpack's counting."""
    tokenizer = get_tokenizer("cl100k_base")
    assert isinstance(tokenizer, TiktokenTokenizer), "cl100k_base must resolve exactly offline"
    return len(tokenizer.encoding.encode_ordinary(text))


@lru_cache(maxsize=1)
def cases() -> tuple[list[Case], list[Case]]:
    """All known-item cases, and those where BM25 ranks the right document first."""
    docs = [(name, doc) for name, doc in stdlib_docs() if tiktoken_count(doc) > 600]
    rng = random.Random(15)
    all_cases = []
    for name, doc in docs:
        deep = [
            m.group()
            for m in _SENTENCE.finditer(doc)
            if 8 <= len(m.group().split()) <= 40 and tiktoken_count(doc[: m.start()]) > DEEP
        ]
        for sentence in rng.sample(deep, min(PER_DOC, len(deep))):
            kept = [w for w in sentence.split() if rng.random() > 0.3]
            all_cases.append(Case(name, doc, sentence, " ".join(kept)))
    bm25 = rank_bm25.BM25Okapi([words(doc) for _, doc in docs])
    names = [name for name, _ in docs]
    ranked_first = []
    for case in all_cases:
        scores = bm25.get_scores(words(case.query))
        if names[max(range(len(names)), key=lambda i: scores[i])] == case.module:
            ranked_first.append(case)
    return all_cases, ranked_first


def answered(case: Case, text: str) -> bool:
    """The sentence is in the cut whole, or at least most (80%) of its distinct words are."""
    if squash(case.sentence) in squash(text):
        return True
    wanted = {w for w in words(case.sentence) if len(w) > 3}
    found = set(words(text.replace(MARK, " ")))
    return bool(wanted) and len(wanted & found) >= 0.8 * len(wanted)


def test_the_corpus_gives_enough_known_item_cases() -> None:
    """There are long documents and known-item queries enough for the rates below to mean something."""
    all_cases, ranked_first = cases()
    assert len(all_cases) >= 30
    assert len(ranked_first) >= 20


def test_focus_keeps_the_answer_where_head_loses_it() -> None:
    """Where the right page ranks first, focus keeps the answer in >= 80% of cases, head in <= 30%."""
    tokenizer = get_tokenizer("cl100k_base")
    _, ranked_first = cases()
    focus_hits = head_hits = 0
    for case in ranked_first:
        focus = cut_focus(case.doc, case.query, ROOM, tokenizer)
        head = cut_head(case.doc, ROOM, tokenizer)
        assert focus is not None and head is not None
        assert focus.kind == "focus", case.query
        focus_hits += answered(case, focus.text)
        head_hits += answered(case, head.text)
    n = len(ranked_first)
    assert focus_hits >= 0.8 * n, f"focus kept the answer in {focus_hits} of {n}"
    assert head_hits <= 0.3 * n, f"head kept the answer in {head_hits} of {n}"


@pytest.mark.parametrize("room", [40, 120, ROOM, 600])
def test_every_cut_fits_by_an_independent_count(room: int) -> None:
    """Every focus and head cut of every case fits its room as tiktoken itself counts."""
    tokenizer = get_tokenizer("cl100k_base")
    all_cases, _ = cases()
    for case in all_cases:
        for cut in (cut_focus(case.doc, case.query, room, tokenizer), cut_head(case.doc, room, tokenizer)):
            assert cut is not None
            assert tiktoken_count(cut.text) <= room, (case.module, room)


def test_cases_are_chosen_the_same_way_every_run() -> None:
    """The case selection is deterministic: the same modules and queries in the same order."""
    all_cases, _ = cases()
    cases.cache_clear()
    again, _ = cases()
    assert [(c.module, c.query) for c in again] == [(c.module, c.query) for c in all_cases]
