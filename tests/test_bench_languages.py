"""The bench's languages section (``--quality --languages``): XQuAD in 12 languages, a retriever that
suits each language, and an answer test that reads every script."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from recallpack import bench
from recallpack._bench import languages

pytest.importorskip("rank_bm25")
pytest.importorskip("Stemmer")

SLICE = ("hi", "th")  # one written with spaces and vowel signs, one without spaces
ASKED = 6


def _run(tmp_path: Path, *options: str) -> dict[str, Any]:
    out = tmp_path / "cells.json"
    code = bench.main(
        ["--quality", "--languages", ",".join(SLICE), "--questions", str(ASKED), "--json", str(out), *options]
    )
    assert code == 0
    cells: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return cells


@pytest.fixture(scope="module")
def slice_cells(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _run(tmp_path_factory.mktemp("languages"))


def _shares(cells: dict[str, Any]) -> dict[tuple[str, str, int, str], float]:
    return {(c["language"], c["shape"], c["budget"], c["method"]): c["share"] for c in cells["cells"]}


def test_the_json_has_every_requested_cell_and_each_questions_outcome(slice_cells: dict[str, Any]) -> None:
    """--json writes one cell per language, shape, budget and method, each with every question's outcome."""
    expected = {
        (language, shape, budget, method)
        for language in SLICE
        for shape, (_, budgets) in languages.SHAPES.items()
        for budget in budgets
        for method in languages.METHODS
    }
    assert set(_shares(slice_cells)) == expected and len(slice_cells["cells"]) == len(expected) == 60
    assert len(slice_cells["questions"]) == ASKED
    for cell in slice_cells["cells"]:
        outcomes = cell["kept_by_question"]
        assert cell["asked"] == len(outcomes) == ASKED and set(outcomes) <= {"0", "1"}
        assert cell["kept"] == outcomes.count("1") and cell["share"] == cell["kept"] / ASKED


def test_no_method_keeps_the_answer_more_often_than_retrieval_found_it(slice_cells: dict[str, Any]) -> None:
    """Every policy's and the reduce's kept share is at most the retrieval ceiling's, in every cell."""
    shares = _shares(slice_cells)
    for (language, shape, budget, method), share in shares.items():
        assert share <= shares[language, shape, budget, languages.CEILING], (language, shape, budget, method)
    assert any(share > 0 for (*_, method), share in shares.items() if method != languages.CEILING)


def test_a_huge_budget_keeps_every_answer_that_was_retrieved(tmp_path: Path) -> None:
    """With room for every article retrieved (Hindi's and Thai's top 5 are over 16,384 tokens), every
    method keeps exactly what the ceiling does."""
    cells = _run(tmp_path, "--budgets", "100000", "--shapes", "articles")
    by_question = {(c["language"], c["shape"], c["method"]): c["kept_by_question"] for c in cells["cells"]}
    for (language, shape, method), outcomes in by_question.items():
        assert outcomes == by_question[language, shape, languages.CEILING], (language, shape, method)
    assert all(c["budget"] == 100000 and c["shape"] == "articles" for c in cells["cells"])


@pytest.fixture(scope="module")
def data() -> dict[str, list[dict[str, Any]]]:
    return languages.load()


@pytest.mark.parametrize("language", languages.LANGUAGES)
def test_every_answer_is_found_in_its_own_article(language: str, data: dict[str, list[dict[str, Any]]]) -> None:
    """The ceiling would be 100% with every article retrieved: normalizing never loses an answer from its text."""
    articles = data[language]
    questions = languages.questions_of(articles, language)
    texts = ["\n\n".join(p["text"] for p in article["paragraphs"]) for article in articles]
    missed = [q.text for q in questions if not languages.answered(texts[q.article], q.answers, language)]
    assert len(questions) == 361 and missed == []


def test_the_normalization_keeps_devanagari_vowel_signs() -> None:
    """Hindi vowel signs and virama are marks, not punctuation: they survive, the danda does not."""
    assert languages.normalize("नमस्ते, दुनिया। किताबें!", "hi") == "नमस्ते दुनिया किताबें"
    assert not languages.answered("कताब", (languages.normalize("किताब", "hi"),), "hi")
    assert languages.answered("एक किताब।", (languages.normalize("किताब", "hi"),), "hi")


def test_the_normalization_is_squads_on_latin_text() -> None:
    """English text loses case, punctuation and articles, and keeps its letters and digits."""
    assert languages.normalize("The U.S. Army's “first” division, in 1990!", "en") == "us armys first division in 1990"
    assert languages.normalize("Ανατολή, η Αθήνα.", "el") == "ανατολή η αθήνα"


def test_chinese_and_thai_answers_are_plain_substrings() -> None:
    """Without spaces between words, an answer is kept only when it appears as it is."""
    assert languages.answered("超级碗50的冠军是丹佛野马队。", ("丹佛野马队",), "zh")
    assert not languages.answered("超级碗50的冠军是丹佛。", ("丹佛野马队",), "zh")
    assert languages.answered("ทีมรับของแพนเธอร์ส", ("แพนเธอร์ส",), "th")


@given(st.text(st.characters(categories=("L", "M", "N", "P", "Zs"), codec="utf-8")))
def test_the_normalization_drops_no_letter_mark_or_digit_but_articles(text: str) -> None:
    """Whatever the script, normalizing removes punctuation and spaces only (and a/an/the words)."""
    kept = languages.normalize(text, "hi").replace(" ", "")
    lowered = text.lower()
    for category in ("M", "N"):
        count = sum(unicodedata.category(ch).startswith(category) for ch in lowered)
        assert sum(unicodedata.category(ch).startswith(category) for ch in kept) == count


@pytest.mark.parametrize("language", ["zh", "th"])
def test_retrieval_without_spaces_ranks_the_answers_paragraph_first(
    language: str, data: dict[str, list[dict[str, Any]]]
) -> None:
    """Character bigrams find the paragraph holding the answer first for most Chinese and Thai questions."""
    articles = data[language]
    questions = languages.questions_of(articles, language)
    shape = languages.language_shapes(articles, language, ("paragraphs",))[0]
    first = [shape.texts[shape.retrieve(q.text)[0]] for q in questions]
    found = sum(languages.answered(text, q.answers, language) for text, q in zip(first, questions))
    assert found / len(questions) >= 0.85


def test_the_analyzers_read_each_script_as_its_users_would() -> None:
    """Han runs become bigrams beside whole Latin words; Hindi words keep their signs and are stemmed."""
    assert languages.analyzer("zh")("超级碗的NFL冠军") == ["超级", "级碗", "碗的", "nfl", "冠军"]
    assert languages.analyzer("zh")("在 NFL 中") == ["在", "nfl", "中"]
    hindi = languages.analyzer("hi")("किताबें")
    assert len(hindi) == 1 and hindi[0].startswith("किताब")
    assert languages.analyzer("vi")("Hà Nội") == ["hà", "nội"]
    assert languages.analyzer("en")("Running runners") == ["run", "runner"]


@pytest.mark.parametrize(
    ("options", "named"),
    [
        (["--languages", "en,xx"], "'xx'"),
        (["--languages", "fr"], "'fr'"),
        (["--languages", "en", "--shapes", "chunks"], "'chunks'"),
        (["--languages", "en", "--budgets", "512,0"], "positive"),
        (["--json", "out.json"], "--languages"),
    ],
)
def test_a_bad_option_is_a_usage_error_naming_it(
    options: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """An unknown language, shape or budget, or a languages option alone, is argparse's usage error."""
    with pytest.raises(SystemExit) as exit_:
        bench.main(["--quality", *options])
    assert exit_.value.code == 2 and named in capsys.readouterr().err


def test_the_markdown_has_a_row_per_language_and_a_column_per_method_and_budget(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--markdown prints, per shape, a table of kept shares with each language a row."""
    _run(tmp_path, "--shapes", "paragraphs", "--budgets", "256", "--markdown")
    out = capsys.readouterr().out
    head = "| language | ceiling | prefix 256 | passages 256 | truncate 256 | reduce 256 |"
    assert head in out
    rows = [line for line in out.splitlines() if line.startswith(tuple(f"| {lang} |" for lang in SLICE))]
    kept, cost = rows[: len(SLICE)], rows[len(SLICE) :]  # the cost table has no ceiling column
    assert [line.count("|") for line in kept] == [head.count("|")] * len(SLICE)
    assert [line.count("|") for line in cost] == [head.count("|") - 1] * len(SLICE)
    assert "articles" not in out.split("targets:")[1]

