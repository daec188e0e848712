"""show_progress=True: a bar on stderr for long work (recall_many, the bench); off by default, no thread."""

from __future__ import annotations

import re
import sys
import threading

import pytest

from recallpack import Candidate, ConfigError, Packer, RecallpackWarning, recall_many
from recallpack.testing import paragraphs

TEXTS = [text for _, text in paragraphs()][:200]


def batches(n: int) -> list[list[Candidate]]:
    """``n`` lists of real paragraphs, each in another order."""
    return [[Candidate(text=TEXTS[(i * 7 + j * 13) % len(TEXTS)]) for j in range(20)] for i in range(n)]


def test_show_progress_writes_a_bar_of_every_list_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    """recall_many(show_progress=True) draws a bar on stderr that ends at every list, and packs as without it."""
    lists = batches(30)
    shown = recall_many(lists, max_tokens=300, show_progress=True)
    out, err = capsys.readouterr()
    assert out == "" and "recall_many" in err and re.search(r"\b30/30\b", err), err
    assert not re.search(r"\b(3[1-9]|[4-9]\d)/30\b", err), err  # never counted twice
    quiet = recall_many(lists, max_tokens=300)
    assert [r.to_markdown() for r in shown] == [r.to_markdown() for r in quiet]


def test_the_default_writes_nothing(capfd: pytest.CaptureFixture[str]) -> None:
    """recall_many and Packer.recall_many without show_progress write nothing to stdout or stderr."""
    recall_many(batches(30), max_tokens=300)
    Packer(max_tokens=300).recall_many(batches(30), show_progress=False)
    assert capfd.readouterr() == ("", "")


def test_a_bar_starts_no_thread(capsys: pytest.CaptureFixture[str]) -> None:
    """The bar runs no monitor thread while the lists are packed, and none is left after."""
    before = threading.active_count()
    during: list[int] = []

    def count(text: str) -> int:
        during.append(threading.active_count())
        return len(text) // 4 + 1

    Packer(max_tokens=300, tokenizer=count).recall_many(batches(20), show_progress=True)
    assert set(during) == {before} and threading.active_count() == before
    assert "20/20" in capsys.readouterr().err


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_show_progress_is_true_or_false(value: object) -> None:
    """Any other show_progress is a ConfigError naming the field, before any list is packed."""
    with pytest.raises(ConfigError, match="show_progress") as raised:
        recall_many(batches(2), max_tokens=300, show_progress=value)
    assert raised.value.field == "show_progress"


def test_without_tqdm_a_warning_says_so_and_nothing_is_drawn(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """show_progress=True where tqdm is not installed packs as ever, with a warning naming the fix."""
    monkeypatch.setitem(sys.modules, "tqdm", None)  # import tqdm raises ImportError
    with pytest.warns(RecallpackWarning, match="tqdm is not installed; pip install tqdm"):
        results = recall_many(batches(5), max_tokens=300, show_progress=True)
    assert len(results) == 5 and capsys.readouterr() == ("", "")


def test_the_bench_shows_progress_when_asked(capsys: pytest.CaptureFixture[str]) -> None:
    """python -m recallpack.bench --progress draws a bar of the questions asked on stderr; without it, none."""
    pytest.importorskip("rank_bm25")
    from recallpack import bench

    options = ["--quality", "--languages", "hi", "--questions", "2", "--shapes", "paragraphs", "--budgets", "256"]
    assert bench.main([*options, "--progress"]) == 0
    out, err = capsys.readouterr()
    assert "hi paragraphs" in out or "hi " in out
    assert "languages: questions" in err and re.search(r"\b2/2\b", err), err
    assert bench.main(options) == 0
    assert capsys.readouterr().err == ""
