"""Small-budgets section of ``python -m recallpack.bench --small-budgets``: when the budget holds
less than one document, is ``passages`` at least as good as ``prefix``'s focus cut of the top one?

Paragraphs are the documents (top 10), in English (SQuAD v1.1's 12 development articles, the
quality section's retriever: ``en-squad``) and in each of XQuAD's 12 languages (the languages
section's retriever and answer test). The budgets are fractions of the language's mean paragraph,
counted in cl100k_base: 0.25, 0.4, 0.6, 0.8 and 1.5 times it, so a budget is the same share of a
document in every script (a Greek paragraph costs three times the tokens of the English one).

Rows: ``prefix`` and ``passages`` with the query (the evidence texts judged, as in the languages
section), and the per-question better of the two: the questions one of them keeps. The gap from
``prefix`` to that is what a policy choosing well between the two could still win.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from recallpack._bench import languages, quality
from recallpack._bench.quality import Cell, Question, Shape
from recallpack.packing.tokenizers import TiktokenTokenizer, get_tokenizer

__all__ = ["FACTORS", "LANGUAGES", "METHODS", "BETTER", "run", "budgets_of"]

#: The budgets, as shares of the language's mean paragraph's tokens.
FACTORS = (0.25, 0.4, 0.6, 0.8, 1.5)
SQUAD = "en-squad"
LANGUAGES = (SQUAD, *languages.LANGUAGES)
TOP = 10
PREFIX, PASSAGES = "prefix + query", "passages + query"
BETTER = "better of the two"
METHODS = (PREFIX, PASSAGES, BETTER)


@dataclass
class Language:
    """One language's paragraphs with their retriever, questions, answer test and budgets."""

    code: str
    shape: Shape
    questions: list[Question]
    judge: Callable[[str, Sequence[str]], bool]
    mean_tokens: float


def budgets_of(texts: Sequence[str], tok: TiktokenTokenizer) -> tuple[float, tuple[int, ...]]:
    """The mean paragraph's tokens of ``texts`` and the section's budgets for it."""
    mean = sum(len(tok.encoding.encode_ordinary(t)) for t in texts) / max(1, len(texts))
    return mean, tuple(max(1, round(f * mean)) for f in FACTORS)


def _squad(tok: TiktokenTokenizer) -> Language:
    from rank_bm25 import BM25Okapi

    articles, questions = quality.load_questions()
    texts: list[str] = []
    metadata: list[dict[str, Any]] = []
    for article in articles:
        for n, paragraph in enumerate(article["paragraphs"]):
            texts.append(paragraph["text"])
            metadata.append({"file_name": f"{article['title']}.txt", "paragraph": n})
    mean, budgets = budgets_of(texts, tok)
    shape = Shape("paragraphs", texts, metadata, TOP, budgets)
    shape.index = BM25Okapi([shape.analyze(t) for t in texts])
    return Language(SQUAD, shape, questions, quality.answered, mean)


def _xquad(code: str, data: dict[str, list[dict[str, Any]]], tok: TiktokenTokenizer) -> Language:
    articles = data[code]
    texts = [p["text"] for article in articles for p in article["paragraphs"]]
    mean, budgets = budgets_of(texts, tok)
    shape = languages.language_shapes(articles, code, ("paragraphs",), budgets)[0]
    judge = partial(languages.answered, language=code)
    return Language(code, shape, languages.questions_of(articles, code), judge, mean)


#: ``results[language][method, budget]``
Results = dict[str, dict[tuple[str, int], Cell]]


def _with_better(cells: dict[tuple[str, int], Cell], budgets: Sequence[int]) -> None:
    for budget in budgets:
        prefix, passages = cells[PREFIX, budget], cells[PASSAGES, budget]
        outcomes = [a or b for a, b in zip(prefix.outcomes, passages.outcomes)]
        cells[BETTER, budget] = Cell(sum(outcomes), len(outcomes), outcomes=outcomes)


def table(made: dict[str, Language], results: Results) -> Iterator[str]:
    """Answer kept % by language: each factor's prefix, passages and better of the two."""
    yield "  " + f"{'language':<10}{'mean':>6}" + "".join(
        f"  {f'{factor}x: prefix passages better':>31}" for factor in FACTORS
    )
    for code, lang in made.items():
        row = f"  {code:<10}{lang.mean_tokens:>6.0f}"
        for budget in lang.shape.budgets:
            shares = [results[code][m, budget].share for m in METHODS]
            row += "  " + f"{budget:>5}: " + " ".join(f"{s:>7.1%}" for s in shares) + "  "
        yield row


def markdown(made: dict[str, Language], results: Results) -> str:
    """The answer-kept table as Markdown: a row a language, prefix / passages / better per factor."""
    head = ["language", "mean tokens", *(f"{factor}x" for factor in FACTORS)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for code, lang in made.items():
        cells = [
            " / ".join(f"{results[code][m, b].share * 100:.1f}" for m in METHODS) for b in lang.shape.budgets
        ]
        lines.append(f"| {code} | {lang.mean_tokens:.0f} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def targets(made: dict[str, Language], results: Results) -> Iterator[str]:
    """passages >= prefix - 0.5 points in every cell; and how much of the gap from prefix to the
    better of the two passages closes at the two smallest budgets."""
    for code, lang in made.items():
        cells = results[code]
        behind = 0
        for budget in lang.shape.budgets:
            passages, prefix = cells[PASSAGES, budget].share, cells[PREFIX, budget].share
            if passages < prefix - 0.005:
                behind += 1
                yield (
                    f"  MISS {code} passages >= prefix - 0.5 point at {budget}: "
                    f"{passages:.1%} vs {prefix:.1%}"
                )
        if not behind:
            yield f"  ok   {code} passages >= prefix - 0.5 point at all {len(lang.shape.budgets)} budgets"
        gap = won = 0.0
        for budget in lang.shape.budgets[:2]:
            prefix = cells[PREFIX, budget].share
            gap += cells[BETTER, budget].share - prefix
            won += cells[PASSAGES, budget].share - prefix
        closed = won / gap if gap > 0 else 1.0
        yield f"       {code} share of the gap prefix -> better of the two closed at 0.25x and 0.4x: " + (
            f"{closed:.0%}"
        )


def to_json(made: dict[str, Language], results: Results, asked: dict[str, list[int]]) -> dict[str, Any]:
    """Every cell with each question's outcome, so that two runs diff."""
    cells = []
    for code, lang in made.items():
        for factor, budget in zip(FACTORS, lang.shape.budgets):
            for method in METHODS:
                cell = results[code][method, budget]
                cells.append(
                    {
                        "language": code,
                        "factor": factor,
                        "budget": budget,
                        "mean_tokens": lang.mean_tokens,
                        "method": method,
                        "asked": cell.asked,
                        "kept": cell.kept,
                        "share": cell.share,
                        "tokens_per_query": cell.tokens / cell.asked if cell.asked else 0.0,
                        "kept_by_question": "".join("1" if kept else "0" for kept in cell.outcomes),
                    }
                )
    return {
        "encoding": "cl100k_base", "top": TOP, "factors": list(FACTORS), "questions": asked, "cells": cells,
    }


def run(
    codes: Sequence[str] = LANGUAGES,
    limit: int | None = None,
    as_markdown: bool = False,
    json_path: Path | None = None,
) -> list[str]:
    """The section's lines: the table, the targets, the Markdown when asked; every cell written to
    ``json_path`` when given. ``limit`` questions a language, spread over the articles."""
    if not (quality.DATA.exists() and languages.DATA.exists()):
        return ["small budgets: skipped (benchmarks/data is not there: run from a checkout of recallpack)"]
    try:
        importlib.import_module("rank_bm25")
        importlib.import_module("Stemmer")
    except ImportError as exc:
        return [f"small budgets: skipped ({exc}; pip install -e '.[demo]')"]
    tok = get_tokenizer("cl100k_base")
    assert isinstance(tok, TiktokenTokenizer)
    found = {m: languages.methods(tok)[m] for m in (PREFIX, PASSAGES)}
    data = languages.load() if any(c != SQUAD for c in codes) else {}
    made: dict[str, Language] = {}
    results: Results = {}
    asked: dict[str, list[int]] = {}
    for code in codes:
        lang = made[code] = _squad(tok) if code == SQUAD else _xquad(code, data, tok)
        positions = asked[code] = quality.sample(list(range(len(lang.questions))), limit)
        cells = quality.evaluate(lang.shape, [lang.questions[i] for i in positions], found, lang.judge)
        _with_better(cells, lang.shape.budgets)
        results[code] = cells
    counts = ", ".join(f"{code} {len(p)}" for code, p in asked.items())
    lines = [
        "small budgets: paragraphs (top 10) at 0.25 to 1.5 times the mean paragraph's tokens (cl100k_base); "
        f"questions asked: {counts}",
        *table(made, results),
        "targets:",
        *targets(made, results),
    ]
    if as_markdown:
        lines.append(markdown(made, results))
    if json_path is not None:
        json_path.write_text(json.dumps(to_json(made, results, asked), indent=1) + "\n", encoding="utf-8")
        lines.append(f"every cell written to {json_path}")
    return lines
