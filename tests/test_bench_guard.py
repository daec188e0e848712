"""The bench guard (``python -m recallpack.bench --check --quick``): a missed target is measured
once more, fails only when missed twice, and prints its figure; a slowed walk fails it. No test
here asserts a timing of real code: the slowed walk sleeps far longer than the work it guards."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import pytest

from recallpack import bench
from recallpack._bench import guard, timing
from recallpack.packing.choosing.walk import Walk


def replay(*figures: float) -> Iterator[dict[str, float]]:
    """One figure per measurement, in turn, under the name "ratio"."""
    return iter({"ratio": figure} for figure in figures)


def run(check: guard.Check) -> tuple[bool, list[str]]:
    lines: list[str] = []
    return guard.run_checks([check], out=lines.append), lines


def section_check(name: str) -> guard.Check:
    (check,) = [check for check in guard.section_checks() if check.name == name]
    return check


def slow_down(monkeypatch: pytest.MonkeyPatch, owner: object, name: str, seconds: float) -> None:
    """``owner.name`` made to sleep ``seconds`` before each call (far longer than the work)."""
    fast = getattr(owner, name)

    def slowed(*args: object, **kwargs: object) -> object:
        time.sleep(seconds)
        return fast(*args, **kwargs)

    monkeypatch.setattr(owner, name, slowed)


def test_a_target_met_at_once_is_measured_once() -> None:
    """A figure within its bound: one measurement, one ok line with the figure."""
    figures = replay(1.05)
    passed, lines = run(guard.Check("walk", lambda: next(figures), (guard.Target("ratio", 1.1),)))
    assert passed and lines == ["  ok   walk: ratio 1.050 (target <= 1.1)"]


def test_a_miss_is_measured_once_more_and_passes_when_the_second_meets_it() -> None:
    """A first figure over the bound is measured again; the second, within it, passes."""
    figures = replay(1.4, 1.08)
    passed, lines = run(guard.Check("walk", lambda: next(figures), (guard.Target("ratio", 1.1),)))
    assert passed
    assert lines == ["  again walk: missed ratio 1.400; measuring once more", "  ok   walk: ratio 1.080 (target <= 1.1)"]


def test_a_target_missed_twice_fails_with_its_better_figure() -> None:
    """Missed on both measurements: MISS, with the better of the two figures."""
    figures = replay(1.6, 1.5)
    passed, lines = run(guard.Check("batch", lambda: next(figures),
                                    (guard.Target("ratio", 1.6, at_least=True, strict=True),)))
    assert not passed
    assert lines[-1] == "  MISS batch: ratio 1.600 (target > 1.6)"


def test_a_target_not_yet_met_fails_only_past_its_limit() -> None:
    """A target with a limit (today's figure, not yet the goal): over the target but within the
    limit is OVER and passes, measured once; past the limit twice is a MISS."""
    target = guard.Target("ratio", 1.1, limit=1.4)
    figures = replay(1.2)
    passed, lines = run(guard.Check("walk", lambda: next(figures), (target,)))
    assert passed and lines == ["  OVER walk: ratio 1.200 (target <= 1.1, fails past 1.4)"]
    figures = replay(1.6, 1.5)
    passed, lines = run(guard.Check("walk", lambda: next(figures), (target,)))
    assert not passed and lines[-1] == "  MISS walk: ratio 1.500 (target <= 1.1, fails past 1.4)"


def test_a_check_that_cannot_run_here_is_skipped_not_failed() -> None:
    """A check with no figures (its extra missing) prints a skip line and fails nothing."""
    passed, lines = run(guard.Check("langchain", dict, (guard.Target("overhead", 0.1),)))
    assert passed and lines == ["  skip langchain: cannot run here"]


def test_every_bench_target_has_a_check() -> None:
    """The guard checks the core's ratios, both adapters' overhead, the adversarial focus cuts and
    the growth figures."""
    names = {(check.name, target.name, target.describe()) for check in bench.guard_checks() for target in check.targets}
    assert names == {
        ("core walk", "pack / kept texts", "<= 1.1"),
        ("core walk", "recall / kept texts", "<= 1.3"),
        ("core scale", "speedup over the baseline at 1,000", ">= 50"),
        ("core scale", "time at 100,000 / at 1,000", "<= 2"),
        ("core scale", "10 MB head / a list of 1,000", "<= 5"),
        ("core batch", "recall_many / a loop", ">= 1.6"),
        ("langchain", "overhead", "< 0.1"),
        ("llamaindex", "overhead", "< 0.1"),
        ("cuts", "adversarial", "< 3"),
        ("growth", "exponent", "< 1.3"),
        ("growth", "passages / truncate", "<= 3"),
    }


def test_a_slowed_walk_fails_the_guard_and_prints_the_figure(monkeypatch: pytest.MonkeyPatch) -> None:
    """Walk.fit slowed by 20 ms a call: pack and recall of 1,000 candidates, against encoding
    the texts they keep (about half a millisecond), miss their targets twice, and the figures
    are printed."""
    slow_down(monkeypatch, Walk, "fit", 0.02)
    monkeypatch.setattr(bench, "GUARD_REPEAT", 1)  # six runs of each side: the delay decides, not the count
    (walk,) = [check for check in bench.guard_checks() if check.name == "core walk"]
    passed, lines = run(walk)
    assert not passed
    assert lines[0].startswith("  again core walk: missed pack / kept texts ")
    for name in ("pack", "recall"):
        (line,) = [line for line in lines if line.startswith(f"  MISS core walk: {name} / kept texts ")]
        figure = re.search(r"kept texts (\d+\.\d{3}) \(target", line)
        assert figure is not None and float(figure[1]) > 1.3


def test_quick_takes_no_other_section(capsys: pytest.CaptureFixture[str]) -> None:
    """--quick runs the targets of every section: with --core or --quality it is refused."""
    for other in ("--core", "--quality"):
        with pytest.raises(SystemExit) as exit_info:
            bench.main(["--check", "--quick", other])
        assert exit_info.value.code == 2
    assert "--quick runs the targets of every section" in capsys.readouterr().err


def test_a_slowed_budgeted_retriever_fails_the_langchain_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """BudgetedRetriever's packing slowed by 0.4 s a call (several times the upstream's search of
    10,000 documents): its overhead, measured besides the upstream's own invoke inside the call,
    misses the target and the limit twice, and the figure is printed."""
    pytest.importorskip("langchain_core")
    from recallpack.adapters.langchain import retriever

    slow_down(monkeypatch, retriever, "pack_documents", 0.4)
    monkeypatch.setattr(guard, "QUERIES", 2)  # two queries, one run a side: the delay decides
    monkeypatch.setattr(guard, "ADAPTER_REPEAT", 1)
    passed, lines = run(section_check("langchain"))
    assert not passed and lines[0].startswith("  again langchain: missed overhead ")
    figure = re.search(r"MISS langchain: overhead (\d+\.\d{3}) \(target < 0\.1, fails past 0\.2\)", lines[-1])
    assert figure is not None and float(figure[1]) > 0.2


def test_a_slowed_focus_cut_fails_the_cuts_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """A focus cut slowed by 0.1 s a call, over texts of 20,000 characters (encoding one takes
    about a millisecond): the adversarial cuts miss their target and limit twice, and the figure is printed."""
    from recallpack._bench import cuts

    slow_down(monkeypatch, cuts, "cut_focus", 0.1)
    monkeypatch.setattr(guard, "CUTS_CHARS", 20_000)
    monkeypatch.setattr(guard, "CUTS_REPEAT", 1)
    passed, lines = run(section_check("cuts"))
    assert not passed and lines[0].startswith("  again cuts: missed adversarial ")
    figure = re.search(r"MISS cuts: adversarial (\d+\.\d{3}) \(target < 3, fails past 3\.5\)", lines[-1])
    assert figure is not None and float(figure[1]) > 3.5


def test_interleaved_best_runs_every_side_of_an_item_in_turn() -> None:
    """Each item's sides run repeat times each, one after another, the side that goes first
    rotating from run to run and item to item, fresh() before every call; one best per side and item."""
    calls: list[tuple[str, int]] = []
    sides = [lambda item: calls.append(("a", item)), lambda item: calls.append(("b", item))]
    fresh: list[int] = []
    best = timing.interleaved_best([10, 20], sides, 2, lambda: fresh.append(len(calls)))
    assert calls == [("a", 10), ("b", 10), ("b", 10), ("a", 10), ("b", 20), ("a", 20), ("a", 20), ("b", 20)]
    assert fresh == list(range(8))
    assert [len(side) for side in best] == [2, 2] and all(t >= 0 for side in best for t in side)
