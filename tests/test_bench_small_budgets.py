"""The bench's small-budgets section (``--small-budgets``): paragraphs at budgets under one, in
SQuAD's English and XQuAD's languages, prefix against passages and the better of the two."""

from __future__ import annotations

import json
from typing import Any

import pytest

from recallpack import bench
from recallpack._bench import small_budgets
from recallpack.packing.tokenizers import TiktokenTokenizer, get_tokenizer

pytest.importorskip("rank_bm25")
pytest.importorskip("Stemmer")

SLICE = ("en-squad", "th")  # the quality section's English and its retriever; a script without spaces
ASKED = 5


@pytest.fixture(scope="module")
def cells(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("small") / "cells.json"
    code = bench.main(["--small-budgets", ",".join(SLICE), "--questions", str(ASKED), "--json", str(out)])
    assert code == 0
    written: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return written


def test_the_json_has_a_cell_per_language_factor_and_method(cells: dict[str, Any]) -> None:
    """--json writes every language's five budgets for prefix, passages and the better of the two."""
    keys = {(c["language"], c["factor"], c["method"]) for c in cells["cells"]}
    expected = {(lang, f, m) for lang in SLICE for f in small_budgets.FACTORS for m in small_budgets.METHODS}
    assert keys == expected and len(cells["cells"]) == len(expected)
    for cell in cells["cells"]:
        outcomes = cell["kept_by_question"]
        assert cell["asked"] == len(outcomes) == ASKED and cell["kept"] == outcomes.count("1")


def test_the_budgets_are_the_factors_of_each_languages_mean_paragraph(cells: dict[str, Any]) -> None:
    """Each budget is its factor times the language's mean paragraph's tokens, so Thai's are larger."""
    for cell in cells["cells"]:
        assert cell["budget"] == max(1, round(cell["factor"] * cell["mean_tokens"]))
    mean = {c["language"]: c["mean_tokens"] for c in cells["cells"]}
    assert mean["th"] > 2 * mean["en-squad"] > 0


def test_the_better_of_the_two_is_each_questions_best(cells: dict[str, Any]) -> None:
    """Per question, the better of the two keeps the answer exactly when prefix or passages does."""
    by = {(c["language"], c["factor"], c["method"]): c["kept_by_question"] for c in cells["cells"]}
    for lang in SLICE:
        for factor in small_budgets.FACTORS:
            prefix, passages = by[lang, factor, small_budgets.PREFIX], by[lang, factor, small_budgets.PASSAGES]
            either = "".join("1" if "1" in pair else "0" for pair in zip(prefix, passages))
            assert by[lang, factor, small_budgets.BETTER] == either


def test_budgets_of_rounds_each_factor_of_the_mean() -> None:
    """budgets_of counts every text and scales the mean by each factor, never under one token."""
    tok = get_tokenizer("cl100k_base")
    assert isinstance(tok, TiktokenTokenizer)
    mean, budgets = small_budgets.budgets_of(["one two three four", "five six seven eight nine ten"], tok)
    assert mean == pytest.approx(5.0)
    assert budgets == tuple(max(1, round(f * 5.0)) for f in small_budgets.FACTORS)


def test_an_unknown_language_is_a_usage_error_naming_it(capsys: pytest.CaptureFixture[str]) -> None:
    """--small-budgets fr is argparse's usage error, naming the code and the ones there are."""
    with pytest.raises(SystemExit) as exit_:
        bench.main(["--small-budgets", "en-squad,fr"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "'fr'" in err and "en-squad" in err
