"""The bookkeeping that keeps the passages choice and the ledger linear gives what recomputing
from scratch gives: runs of kept units, the estimate when units are given back, duplicates found
by hash among many kept texts of one length, and every copy's citation kept."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recallpack import Candidate, recall
from recallpack.packing.choosing.focus import Focus
from recallpack.packing.reading.units import split_units
from recallpack.packing.results.result import Reason
from recallpack.packing.tokenizers import get_tokenizer

TEXT = "One. Two!\n    code = 1\nThree is here. Four\n\nFive. Six? Seven.\nEight. Nine. Ten."


def _focus(rate: float | None) -> Focus:
    starts, ends = split_units(TEXT, 800)
    return Focus(TEXT, starts, ends, 10_000, get_tokenizer("cl100k_base"), tokens_per_char=rate)


def _scanned(focus: Focus, i: int) -> list[int]:
    """[first, last, tokens] of unit ``i``'s run, by walking it."""
    lo = hi = i
    while lo - 1 in focus.kept:
        lo -= 1
    while hi + 1 in focus.kept:
        hi += 1
    return [lo, hi, sum(focus.unit_cost(u) for u in range(lo, hi + 1))]


STEPS = st.lists(
    st.tuples(st.sampled_from(["add", "drop", "grow", "rescale"]), st.integers(0, 11), st.integers(1, 40)),
    max_size=40,
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=STEPS, rate=st.sampled_from([None, 0.3]))
def test_runs_total_and_last_match_a_recount_after_any_steps(
    steps: list[tuple[str, int, int]], rate: float | None
) -> None:
    """Units kept, dropped, grown around and re-rated in any order: each run, the estimate and the
    last kept unit are what recounting the kept units gives."""
    focus = _focus(rate)
    units = len(focus.starts)
    for step, unit, goal in steps:
        i = unit % units
        if step == "add":
            focus.try_add(i)
        elif step == "drop" and i in focus.kept:
            focus.drop(i)
        elif step == "grow":
            focus.grow(i, {}, goal)
        elif step == "rescale":
            focus.rescale(0.25)
        kept = sorted(focus.kept)
        assert focus.total == (focus.estimate(kept) if kept else 0)
        assert focus.last == (kept[-1] if kept else -1)
        runs = focus.runs()
        for u in kept:
            assert runs.run(u) == _scanned(focus, u)


def test_many_kept_texts_of_one_length_still_find_their_copies() -> None:
    """Past the few kept texts of one length compared one by one, a copy is still found, and
    the first kept of its text stands for it, with every copy's citation."""
    rows = [f"row {i:04d} of the table" for i in range(30)]
    copies = [Candidate(text=rows[i], metadata={"source": f"copy-{i}.csv"}) for i in (3, 25, 25, 12)]
    result = recall([Candidate(text=row, metadata={"source": "t.csv"}) for row in rows] + copies,
                    max_tokens=4096, policy="skip")
    dropped = [e for e in result.trace if e.reason is Reason.DUPLICATE]
    assert [e.duplicate_of for e in dropped] == [3, 25, 25, 12]
    assert result.evidence[25].citations == ("t.csv", "copy-25.csv")
    assert result.evidence[25].duplicates == 2 and result.evidence[3].duplicates == 1
    assert len(result.evidence) == 30


def test_copies_of_one_candidate_each_leave_their_citation_once() -> None:
    """n copies of one text with n citations: one item, n - 1 duplicates, every citation once."""
    n = 2_000
    copies = [Candidate(text="the same text", metadata={"source": f"s{i % 500}"}) for i in range(n)]
    for policy in ("prefix", "passages"):
        result = recall(copies, max_tokens=512, policy=policy, query="same")
        (kept,) = result.evidence
        assert kept.duplicates == n - 1 and result.report.reasons == {"duplicate": n - 1}
        assert kept.citations == tuple(f"s{i}" for i in range(500))
