"""The bench's growth section, run small: a line per case with its three times and exponent, the
worst exponent and the passages / truncate ratio, each with its verdict (timings are not checked)."""

from __future__ import annotations

import re

import pytest

from recallpack import bench
from recallpack._bench import growth

CASE = re.compile(r"^    (?P<what>.+?)\s+(?:\d+\.\d ms\s+){3}\s*exponent\s+(?P<slope>-?\d+\.\d\d)\s+(?P<verdict>ok|MISS)$")


@pytest.fixture(scope="module")
def lines() -> list[str]:
    return growth.run(scale=0.01)


def test_every_case_is_a_line_with_three_times_and_its_exponent(lines: list[str]) -> None:
    """Passages over the four shapes (a text a few times the budget, and one as long as the walk
    reads) and over copies, the ledger over the four shapes and over copies: fourteen lines,
    each with three times, its exponent and a verdict that agrees with it; a heading over each
    group."""
    cases = [m for m in map(CASE.match, lines) if m]
    names = [m["what"] for m in cases]
    shapes = [shape.name for shape in growth.SHAPES]
    assert names == [*shapes, *shapes, "n duplicates", *shapes, "n duplicates"]
    for m in cases:
        assert (m["verdict"] == "ok") == (float(m["slope"]) < growth.EXPONENT_TARGET)
    headings = [line for line in lines if line.startswith("  ") and line.endswith(":")]
    assert [h.split(",")[0].strip() for h in headings] == [
        "passages", "passages", "passages over n copies of one candidate",
        "ledger: skip over n candidates of one length within 16384 tokens",
    ]


def test_the_section_ends_with_the_worst_exponent_and_the_ratio(lines: list[str]) -> None:
    """The last two lines: the worst exponent of the cases, and passages / truncate at 16384 tokens
    over the tiny matching units, each with a verdict against its target."""
    slopes = [float(m["slope"]) for m in map(CASE.match, lines) if m]
    worst = re.fullmatch(r"  (ok  |MISS) growth exponent, worst: (-?\d+\.\d\d) \(target < 1\.3\)", lines[-2])
    assert worst is not None and float(worst[2]) == max(round(s, 2) for s in slopes)
    ratio = re.fullmatch(
        r"  (ok  |MISS) passages / truncate at 16384 tokens over 0\.04 MB of tiny matching units: "
        r"(\d+\.\d\d) \(\d+ ms, \d+ ms; target <= 3\.0\)",
        lines[-1],
    )
    assert ratio is not None and (ratio[1] == "ok  ") == (float(ratio[2]) <= growth.RATIO_TARGET)
    assert lines[0].startswith("growth: time at n, 2n, 4n")


def test_exponent_is_the_log_log_slope() -> None:
    """Times that double with the size give 1, that quadruple give 2, that stay give 0."""
    sizes = [100, 200, 400]
    assert growth.exponent(sizes, [1.0, 2.0, 4.0]) == pytest.approx(1.0)
    assert growth.exponent(sizes, [1.0, 4.0, 16.0]) == pytest.approx(2.0)
    assert growth.exponent(sizes, [3.0, 3.0, 3.0]) == pytest.approx(0.0)


def test_the_bench_runs_the_growth_section() -> None:
    """`python -m recallpack.bench` runs the growth section, after the cuts section."""
    assert bench.SECTIONS.index("growth") == bench.SECTIONS.index("cuts") + 1
