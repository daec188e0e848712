"""Languages section of ``python -m recallpack.bench --quality --languages``: does the answer survive
packing in every language, not only in English?

XQuAD (Artetxe, Ruder and Yogatama 2020; ``benchmarks/data/``, CC BY-SA 4.0) is the professional
translation of SQuAD v1.1 paragraphs and questions into 11 languages; its 12 development articles
(5 paragraphs each, 361 questions a language) are asked in each of the 12 languages, of a BM25
retriever over two shapes of document:

- ``paragraphs``: each paragraph a document (top 10), budgets 256, 512 and 1024;
- ``articles``: each article's paragraphs joined as one document (top 5), budgets 512, 1024 and 2048.

The rows are the English section's (``quality.py``): the retrieval ceiling, recallpack's
``prefix``, ``passages`` and ``truncate`` with the query, and LangChain's ``max_tokens_limit``
reduce, each with the share of questions whose answer is still in what the model is shown, the
tokens used and the milliseconds per query, budgets counted in cl100k_base.

The retriever is the bench user's own, as one in each language would build it, and it is the same
for every method: BM25 over Unicode words (letters, marks, digits), lower-cased, each stemmed by
its language's Snowball stemmer (PyStemmer) where there is one (none for Vietnamese); Chinese and
Thai, written without spaces between words, as overlapping character bigrams (a single character
alone), Latin words and digits among them as words. It never reads the packer's analysis, so a
change to the packer cannot move the ceiling.

An answer is kept when, under SQuAD's normalization (lower case, punctuation removed, the
articles a/an/the dropped, single spaces), it is in the evidence shown; for Chinese and Thai,
which have neither articles nor spaces between words, when it is in the text as it is (only runs
of white space are made one). Punctuation is Unicode's punctuation category and SQuAD's ASCII
symbols, never a combining mark: a Hindi vowel sign or a Thai tone mark stays. Only the evidence
texts are judged, not the block's labels and resource lines, so an answer is never found in a
document's name.
"""

from __future__ import annotations

import gzip
import importlib
import json
import string
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import regex

from recallpack._bench import quality
from recallpack._bench.quality import Cell, Question, Shape
from recallpack.packing.limits import MAX_TOKENS_CEILING
from recallpack.packing.progress import progress
from recallpack.packing.results.result import RecallResult
from recallpack.packing.tokenizers import TiktokenTokenizer, get_tokenizer

__all__ = [
    "DATA",
    "LANGUAGES",
    "SHAPES",
    "METHODS",
    "analyzer",
    "normalize",
    "answered",
    "load",
    "language_shapes",
    "run",
]

DATA = quality.DATA.with_name("xquad-12-languages-dev-12-articles.json.gz")
LANGUAGES = ("ar", "de", "el", "en", "es", "hi", "ro", "ru", "th", "tr", "vi", "zh")
#: Snowball's name for each language that has a stemmer; Vietnamese has none (and needs none: its
#: syllables do not inflect), Chinese and Thai are read as bigrams.
STEMMERS = {
    "ar": "arabic",
    "de": "german",
    "el": "greek",
    "en": "english",
    "es": "spanish",
    "hi": "hindi",
    "ro": "romanian",
    "ru": "russian",
    "tr": "turkish",
}
#: Languages written without spaces between words.
UNSPACED = frozenset({"th", "zh"})
#: Each shape's top k and budgets.
SHAPES = {"paragraphs": (10, (256, 512, 1024)), "articles": (5, (512, 1024, 2048))}
CEILING = "retrieval ceiling"
POLICIES = ("prefix", "passages", "truncate")
REDUCE = "langchain reduce"
METHODS = (CEILING, *(f"{policy} + query" for policy in POLICIES), REDUCE)
_SHORT = {**{f"{policy} + query": policy for policy in POLICIES}, REDUCE: "reduce"}

_WORDS = regex.compile(r"[\p{L}\p{M}\p{N}_]+")
_UNSPACED_RUNS = regex.compile(r"([\p{Han}\p{Thai}]+)|[^\p{Han}\p{Thai}]+")
_PUNCTUATION = regex.compile(r"[\p{P}" + regex.escape(string.punctuation, special_only=False) + "]+")
_ARTICLES = regex.compile(r"\b(?:a|an|the)\b")


def _bigrams(text: str) -> list[str]:
    terms: list[str] = []
    for word in _WORDS.findall(text.lower()):
        for run in _UNSPACED_RUNS.finditer(word):
            piece = run.group()
            if run.group(1) is None or len(piece) == 1:
                terms.append(piece)
            else:
                terms.extend(piece[i : i + 2] for i in range(len(piece) - 1))
    return terms


def _words(text: str) -> list[str]:
    return _WORDS.findall(text.lower())


def analyzer(language: str) -> Callable[[str], list[str]]:
    """The retriever's terms of a text in ``language``: the same for its documents and queries."""
    if language in UNSPACED:
        return _bigrams
    if language not in STEMMERS:
        return _words
    # PyStemmer (the ``mcp`` extra, which ``demo`` and ``dev`` include) ships no type stubs.
    stemmer: Any = importlib.import_module("Stemmer")
    if STEMMERS[language] not in stemmer.algorithms():
        raise RuntimeError(f"PyStemmer has no {STEMMERS[language]} stemmer: pip install -U 'PyStemmer>=2.2'")
    stem = stemmer.Stemmer(STEMMERS[language]).stemWords
    return lambda text: stem(_words(text))


def normalize(text: str, language: str) -> str:
    """SQuAD's normalization of an answer or a text in ``language`` (see the module's docstring)."""
    if language in UNSPACED:
        return " ".join(text.split())
    text = _PUNCTUATION.sub("", text.lower())
    return " ".join(_ARTICLES.sub(" ", text).split())


def answered(text: str, answers: Sequence[str], language: str) -> bool:
    """Whether one of ``answers`` (already normalized for ``language``) is in ``text``."""
    shown = normalize(text, language)
    return any(answer in shown for answer in answers)


def load(path: Path = DATA) -> dict[str, list[dict[str, Any]]]:
    """Every language's articles, as the data has them."""
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        languages: dict[str, list[dict[str, Any]]] = json.load(handle)["languages"]
    return languages


def questions_of(articles: Sequence[dict[str, Any]], language: str) -> list[Question]:
    """Every question of ``articles`` in data order (the same position in every language), with
    its answers normalized for ``language``."""
    return [
        Question(qa["question"], tuple(normalize(a, language) for a in qa["answers"]), i)
        for i, article in enumerate(articles)
        for paragraph in article["paragraphs"]
        for qa in paragraph["qas"]
    ]


def language_shapes(
    articles: Sequence[dict[str, Any]],
    language: str,
    names: Sequence[str] = tuple(SHAPES),
    budgets: Sequence[int] | None = None,
) -> list[Shape]:
    """The shapes ``names`` of ``articles``, each with a BM25 retriever for ``language``, at their
    own budgets or at ``budgets``."""
    from rank_bm25 import BM25Okapi

    analyze = analyzer(language)
    made = []
    for name in names:
        k, own = SHAPES[name]
        texts: list[str] = []
        metadata: list[dict[str, Any]] = []
        for article in articles:
            source = {"file_name": f"{article['title']}.txt"}
            paragraphs = [p["text"] for p in article["paragraphs"]]
            if name == "paragraphs":
                texts.extend(paragraphs)
                metadata.extend({**source, "paragraph": n} for n in range(len(paragraphs)))
            else:
                texts.append("\n\n".join(paragraphs))
                metadata.append(source)
        shape = Shape(name, texts, metadata, k, tuple(budgets or own), analyze=analyze)
        shape.index = BM25Okapi([analyze(t) for t in texts])
        made.append(shape)
    return made


def _evidence(result: RecallResult) -> str:
    return "\n\n".join(item.text for item in result.evidence)


def methods(tok: TiktokenTokenizer, largest: int = MAX_TOKENS_CEILING) -> dict[str, quality.Method]:
    """The section's rows; ``largest``, the largest budget asked, may be over the default ceiling (a
    whole Greek or Hindi article is over 8,000 tokens)."""
    found: dict[str, quality.Method] = {CEILING: quality.ceiling}
    ceiling = max(largest, MAX_TOKENS_CEILING)
    for policy in POLICIES:
        found[f"{policy} + query"] = quality.recallpack_method(
            policy, True, shown=_evidence, max_tokens_ceiling=ceiling
        )
    found[REDUCE] = quality.langchain_reduce(tok)
    return found


#: ``results[language][shape name][method, budget]``
Results = dict[str, dict[str, dict[tuple[str, int], Cell]]]


def markdown(made: dict[str, list[Shape]], results: Results) -> str:
    """Answer kept % by language, one table a shape, then the tokens used and ms per query."""
    out: list[str] = []
    first = next(iter(made.values()))
    for position, template in enumerate(first):
        columns = [(m, b) for b in template.budgets for m in METHODS[1:]]
        head = ["language", "ceiling", *(f"{_SHORT[m]} {b}" for m, b in columns)]
        kept = [f"{template.name} (top {template.k}): answer kept %", "", *_rows(head)]
        cost = [
            f"{template.name} (top {template.k}): tokens used / ms per query",
            "",
            *_rows(head[:1] + head[2:]),
        ]
        for language, shapes in made.items():
            cells = results[language][shapes[position].name]
            ceiling = cells[CEILING, template.budgets[0]].share
            shares = (f"{cells[c].share:.1%}" for c in columns)
            kept.append(f"| {language} | {ceiling:.1%} | " + " | ".join(shares) + " |")
            costs = (f"{cells[c].tokens / max(cells[c].asked, 1):.0f} / {cells[c].ms:.2f}" for c in columns)
            cost.append(f"| {language} | " + " | ".join(costs) + " |")
        out.extend([*kept, "", *cost, ""])
    return "\n".join(out).rstrip("\n")


def _rows(head: Sequence[str]) -> list[str]:
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]


#: Where the issue found ``passages`` no better than ``prefix``: it must gain there.
BEHIND = ("ru", "el", "ar", "hi", "th", "zh")


def targets(made: dict[str, list[Shape]], results: Results) -> Iterator[str]:
    """The issue's targets: passages within a point of prefix in every cell, 3 points ahead on
    average where it was behind, and no more than 2x the reduce's time over articles."""
    for language, shapes in made.items():
        gains: list[float] = []
        behind = 0
        for shape in shapes:
            cells = results[language][shape.name]
            for budget in shape.budgets:
                passages, prefix = cells["passages + query", budget], cells["prefix + query", budget]
                gains.append(passages.share - prefix.share)
                if passages.share < prefix.share - 0.01:
                    behind += 1
                    yield (
                        f"  MISS {language} passages >= prefix - 1 point, {shape.name} at {budget}: "
                        f"{passages.share:.1%} vs {prefix.share:.1%}"
                    )
            if shape.name == "articles":
                ratio = sum(cells["passages + query", b].ms for b in shape.budgets) / max(
                    sum(cells[REDUCE, b].ms for b in shape.budgets), 1e-9
                )
                ok = "ok  " if ratio <= 2 else "MISS"
                yield f"  {ok} {language} passages / reduce, time over articles (<= 2x): {ratio:.2f}x"
        if not behind:
            yield f"  ok   {language} passages >= prefix - 1 point in all {len(gains)} cells"
        mean = sum(gains) / len(gains)
        if language in BEHIND:
            ok = "ok  " if mean >= 0.03 else "MISS"
            yield f"  {ok} {language} passages - prefix, mean over its cells (>= 3 points): {mean * 100:+.1f}"
        else:
            yield f"       {language} passages - prefix, mean over its cells: {mean * 100:+.1f}"


def to_json(made: dict[str, list[Shape]], results: Results, asked: Sequence[int]) -> dict[str, Any]:
    """Every cell, with whether each question asked kept its answer, so that two runs diff."""
    cells = []
    for language, shapes in made.items():
        for shape in shapes:
            for budget in shape.budgets:
                for method in METHODS:
                    cell = results[language][shape.name][method, budget]
                    cells.append(
                        {
                            "language": language,
                            "shape": shape.name,
                            "top": shape.k,
                            "budget": budget,
                            "method": method,
                            "asked": cell.asked,
                            "kept": cell.kept,
                            "share": cell.share,
                            "tokens_per_query": cell.tokens / cell.asked if cell.asked else 0.0,
                            "ms_per_query": cell.ms,
                            "kept_by_question": "".join("1" if kept else "0" for kept in cell.outcomes),
                        }
                    )
    return {"data": DATA.name, "encoding": "cl100k_base", "questions": list(asked), "cells": cells}


def run(
    languages: Sequence[str] = LANGUAGES,
    shapes: Sequence[str] = tuple(SHAPES),
    budgets: Sequence[int] | None = None,
    limit: int | None = None,
    as_markdown: bool = False,
    json_path: Path | None = None,
    show_progress: bool = False,
) -> list[str]:
    """The section's lines: a table a language and shape, the targets, the Markdown when asked;
    every cell written to ``json_path`` when given."""
    if not DATA.exists():
        return [f"languages: skipped ({DATA} is not there: run from a checkout of recallpack)"]
    try:
        importlib.import_module("rank_bm25")
        importlib.import_module("Stemmer")
    except ImportError as exc:
        return [f"languages: skipped ({exc}; pip install -e '.[demo]')"]
    data = load()
    tok = get_tokenizer("cl100k_base")
    assert isinstance(tok, TiktokenTokenizer)
    found = methods(tok, max(budgets or (b for _, own in SHAPES.values() for b in own)))
    everything = questions_of(data[languages[0]], languages[0])
    positions = quality.sample(list(range(len(everything))), limit)
    lines = [
        f"languages: is the answer still in what the model is shown? {len(positions)} of {len(everything)} "
        "XQuAD questions a language (12 articles, CC BY-SA 4.0), BM25 retrieval per language, cl100k_base",
    ]
    made: dict[str, list[Shape]] = {}
    results: Results = {}
    steps = len(languages) * len(shapes) * len(positions)
    with progress(steps, "languages: questions", show_progress) as advance:
        for language in languages:
            articles = data[language]
            every = questions_of(articles, language)
            asked = [every[i] for i in positions]
            made[language] = language_shapes(articles, language, shapes, budgets)
            results[language] = {}
            judge = partial(answered, language=language)
            for shape in made[language]:
                results[language][shape.name] = cells = quality.evaluate(shape, asked, found, judge, advance)
                first, *rest = quality.table(shape, cells, METHODS)
                lines.extend([f"{language} {first}", *rest])
    lines.append("targets:")
    lines.extend(targets(made, results))
    if as_markdown:
        lines.append(markdown(made, results))
    if json_path is not None:
        json_path.write_text(json.dumps(to_json(made, results, positions), indent=1) + "\n", encoding="utf-8")
        lines.append(f"every cell written to {json_path}")
    return lines
