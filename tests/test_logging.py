"""The recallpack logger: one DEBUG record per packing, WARNING only for what to act on, no text."""

from __future__ import annotations

import inspect
import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from recallpack import Candidate, Packer, RecallpackWarning, RecallResult, get_tokenizer, pack, recall
from recallpack.packing.tokenizers import EncodingRegistry, TiktokenCache, using_registry

ROOT = Path(__file__).resolve().parents[1]
SECRET = "a withheld candidate's text never reaches a log record"
MANUAL = inspect.getdoc(json) or ""


def ranked() -> list[Candidate]:
    """A withheld item, a kept one, and one too long for what is left."""
    return [
        Candidate(text=SECRET, scope_ids=("org-2",)),
        Candidate(text="Alice moved to the Berlin office in March.", lane="facts"),
        Candidate(text=MANUAL * 3),
    ]


def test_one_debug_record_per_recall_with_counts(caplog: pytest.LogCaptureFixture) -> None:
    """A DEBUG record names what was kept, dropped and withheld, with counts and reasons."""
    with caplog.at_level(logging.DEBUG, logger="recallpack"):
        result = recall(ranked(), max_tokens=2000)
    debug = [r for r in caplog.records if r.levelno == logging.DEBUG and r.name == "recallpack"]
    assert len(debug) == 1
    message = debug[0].getMessage()
    assert "kept 1, dropped 1, withheld 1 of 3 candidates" in message
    assert "1 no_reader" in message and "1 over_budget" in message and "kept ranks: [1]" in message
    assert debug[0].recallpack["report"] == result.report.model_dump(mode="json")  # type: ignore[attr-defined]


def test_no_record_carries_the_text_of_a_withheld_item(caplog: pytest.LogCaptureFixture) -> None:
    """Neither the message nor the structured event of any record holds a withheld item's text."""
    with caplog.at_level(logging.DEBUG, logger="recallpack"):
        recall(ranked(), max_tokens=300)
        recall(ranked(), max_tokens=300, policy="skip")
    assert caplog.records
    for record in caplog.records:
        assert SECRET not in record.getMessage()
        assert SECRET not in json.dumps(getattr(record, "recallpack", {}))


def test_an_unfilled_budget_is_a_warning_that_says_what_to_do(caplog: pytest.LogCaptureFixture) -> None:
    """Items dropped for size with most of the budget unused: one WARNING naming the fixes."""
    with caplog.at_level(logging.WARNING, logger="recallpack"):
        recall(ranked(), max_tokens=2000)
    (warning,) = caplog.records
    assert warning.levelno == logging.WARNING
    message = warning.getMessage()
    assert "of 2000 tokens" in message and "policy='skip'" in message and "split_token_windows" in message
    assert SECRET not in message


@pytest.mark.parametrize(
    ("candidates", "settings"),
    [
        (ranked(), {"max_tokens": 2000, "policy": "truncate"}),  # the long one is cut in: filled
        ([Candidate(text="Alice moved to Berlin.")], {"max_tokens": 2000}),  # everything fitted
    ],
)
def test_a_used_or_sufficient_budget_logs_no_warning(
    candidates: list[Candidate], settings: dict[str, object], caplog: pytest.LogCaptureFixture
) -> None:
    """No WARNING when the budget was used or everything fitted: nothing for the caller to do."""
    with caplog.at_level(logging.WARNING, logger="recallpack"):
        result = recall(candidates, **settings)
    assert result.report.items_selected >= 1
    assert caplog.records == []


def test_pack_logs_one_debug_record(caplog: pytest.LogCaptureFixture) -> None:
    """pack() logs its own DEBUG record with its counts."""
    with caplog.at_level(logging.DEBUG, logger="recallpack"):
        kept = pack([Candidate(text="a" * 40), Candidate(text="b" * 4000)], 30, tokenizer="chars")
    (record,) = caplog.records
    assert len(kept) == 1 and record.getMessage() == "pack: kept 1 of 2 candidates (2 reached)"


def test_the_fallback_tokenizer_is_a_warning(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                             caplog: pytest.LogCaptureFixture) -> None:
    """A tokenizer that falls back to counting bytes logs one WARNING that says how to fix it."""
    registry = EncodingRegistry([TiktokenCache(str(tmp_path))])
    with using_registry(registry), caplog.at_level(logging.WARNING, logger="recallpack"), pytest.warns(RecallpackWarning):
        assert not get_tokenizer("o200k_base").exact
    (record,) = caplog.records
    assert "o200k_base" in record.getMessage() and "reinstall recallpack" in record.getMessage()


def test_debug_off_builds_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """With DEBUG disabled the per-packing event is never built: logging costs nothing per call."""
    monkeypatch.setattr(RecallResult, "to_event", lambda self: pytest.fail("built for a disabled level"))
    logging.getLogger("recallpack").setLevel(logging.INFO)
    try:
        Packer(max_tokens=100).recall([Candidate(text="Alice moved to Berlin.")])
    finally:
        logging.getLogger("recallpack").setLevel(logging.NOTSET)


def test_the_library_adds_only_a_null_handler() -> None:
    """recallpack's logger has a NullHandler and nothing else, and propagates to the application's."""
    logger = logging.getLogger("recallpack")
    assert [type(h) for h in logger.handlers] == [logging.NullHandler] and logger.propagate


UNFILLED = (
    "from recallpack import Candidate, recall\n"
    "recall([Candidate(text='short.'), Candidate(text='long ' * 5000)], max_tokens=2000)\n"
)


@pytest.mark.parametrize(
    ("configure", "stderr_starts"),
    [("", None), ("import logging; logging.basicConfig()\n", "WARNING:recallpack:recall used")],
    ids=["unconfigured program: nothing on stderr", "basicConfig: the warning shows"],
)
def test_records_reach_stderr_only_where_the_application_configured_logging(
    configure: str, stderr_starts: str | None
) -> None:
    """No last-resort output for a program that configured nothing; basicConfig() is all it takes."""
    done = subprocess.run([sys.executable, "-c", configure + UNFILLED], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0
    assert done.stderr.startswith(stderr_starts) if stderr_starts else done.stderr == ""
