"""The quality bench can ask the questions of some articles only (``--articles``), so a result can
be checked on questions of other articles than it was tuned on."""

from __future__ import annotations

import argparse

import pytest

from recallpack import bench
from recallpack._bench import quality


def test_articles_are_read_as_positions_and_bad_ranges_are_refused() -> None:
    assert bench._articles("1-6") == range(0, 6)
    assert bench._articles("7-12") == range(6, 12)
    assert bench._articles("3") == range(2, 3)
    for bad in ("0-3", "6-1", "1-13", "a-b", ""):
        with pytest.raises(argparse.ArgumentTypeError, match="articles are 1 to 12|FIRST-LAST"):
            bench._articles(bad)


def test_only_the_questions_of_the_articles_asked_are_sampled() -> None:
    _, questions = quality.load_questions()
    first, rest = quality.of_articles(questions, range(0, 6)), quality.of_articles(questions, range(6, 12))
    assert {q.article for q in first} == set(range(6)) and {q.article for q in rest} == set(range(6, 12))
    assert len(first) + len(rest) == len(questions) == 3320
    assert quality.of_articles(questions, None) == questions
    assert {q.article for q in quality.sample(first, 100)} <= set(range(6))


def test_a_misspelled_range_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        bench.main(["--quality", "--articles", "1..6"])
    assert exit_.value.code == 2 and "--articles" in capsys.readouterr().err
