"""Growth section of ``python -m recallpack.bench``: does the work grow with the input, and no faster?

Each case is timed at a size n, 2n and 4n; its exponent is the slope of log time against log n
(1 is linear, 2 quadratic; n log n reads about 1.1 at these sizes). Inputs are adversarial in
shape, the kinds that made the work grow faster than the input before (every unit a match, many
texts of one length, many copies of one text):

- ``passages`` over one text with a query every unit of it matches: tiny units (``"x"`` lines),
  log lines, CSV rows, short CJK sentences. The budget doubles, and the text with it: at
  KEPT_CHARS characters a budget token the text holds a few times what the budget keeps, so
  what is kept weighs most; at REACH_CHARS (as far as the walk reads) what is read does. And
  over n copies of one candidate (each with its own citation), which the walk reads to the end;
- the ledger: a ``skip`` walk over n candidates within MAX_TOKENS, which reads every one of them
  (once the room is too small for the next candidate, it is too small for any): the same four
  shapes, one unit a candidate (numbered, so that all are of one length and none is a copy of
  another), and n copies of one candidate;
- ``passages`` against ``truncate`` on the same 4 MB of tiny matching units at MAX_TOKENS, in
  the same run.

Targets: every exponent below EXPONENT_TARGET, and passages at most RATIO_TARGET times truncate.
Every run packs with a tokenizer of its own (an empty count cache), made before the clock starts.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from recallpack._bench.timing import best_time
from recallpack.packing.candidate import Candidate
from recallpack.packing.choosing.policies import Policy
from recallpack.packing.packer import Packer
from recallpack.packing.tokenizers import TiktokenTokenizer, get_tokenizer

__all__ = ["run", "measure", "exponent", "Shape", "SHAPES", "EXPONENT_TARGET", "RATIO_TARGET"]

MAX_TOKENS = 16384
#: Characters of text per budget token in the passages cases, and the first budget of each: a
#: text a few times what the budget keeps, and a text as long as the walk reads.
KEPT_CHARS, KEPT_BUDGET = 16, 2048
REACH_CHARS, REACH_BUDGET = 256, 256
LEDGER_CANDIDATES = 20_000  # n for the ledger cases
DUPLICATES = 50_000  # n for the duplicates cases
RATIO_CHARS = 4_000_000
REPEAT = 3
#: A call shorter than this (seconds, at scale 1) is timed in a batch of at most MAX_CALLS calls.
MIN_RUN = 0.2
MAX_CALLS = 50
EXPONENT_TARGET = 1.3
RATIO_TARGET = 3.0


@dataclass(frozen=True)
class Shape:
    """Small units of one kind: the ``i``-th (every one of one length), the query all of them
    match, and what joins them into one text."""

    name: str
    unit: Callable[[int], str]
    query: str
    join: str = "\n"


SHAPES = (
    Shape("tiny matching units", lambda i: "x", "x"),
    Shape("log lines", lambda i: f"2026-01-01T00:{i // 60 % 60:02d}:{i % 60:02d} INFO worker[{i % 8}] "
          f"request {i % 10**7:07d} served", "worker request served"),
    Shape("CSV rows", lambda i: f"{i % 10**7:07d},alpha{i % 7},{i * 7 % 1000:03d},beta", "beta"),
    Shape("short CJK sentences", lambda i: f"天气，晴朗{i % 10}。", "天气", join=""),
)


def exponent(sizes: Sequence[int], times: Sequence[float]) -> float:
    """The least-squares slope of log time against log size."""
    xs = [math.log(n) for n in sizes]
    ys = [math.log(max(t, 1e-9)) for t in times]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


def _text(shape: Shape, chars: int) -> str:
    parts: list[str] = []
    size = i = 0
    while size < chars:
        parts.append(shape.unit(i))
        size += len(parts[-1]) + len(shape.join)
        i += 1
    return shape.join.join(parts)


def _timed(tokenizers: Callable[[], TiktokenTokenizer], min_run: float, policy: Policy, max_tokens: int,
           candidates: list[Candidate], query: str | None) -> float:
    """Best time of one recall, each by a Packer with a tokenizer of its own (made before the
    clock starts). A call shorter than ``min_run`` is timed in a batch of calls that lasts about
    that long: the exponent of a few milliseconds would be the machine's noise."""

    def batch(calls: int) -> list[Packer]:
        return [Packer(max_tokens=max_tokens, policy=policy, tokenizer=tokenizers()) for _ in range(calls)]

    def recall_each(packers: list[Packer]) -> None:
        for packer in packers:
            packer.recall(candidates, query=query)

    once = best_time(recall_each, [batch(1)])
    calls = max(1, min(MAX_CALLS, math.ceil(min_run / max(once, 1e-9))))
    if calls == 1:  # long enough: the first run is one of the REPEAT
        return min(once, best_time(recall_each, [batch(1) for _ in range(REPEAT - 1)]))
    return best_time(recall_each, [batch(calls) for _ in range(REPEAT)]) / calls


def _line(what: str, sizes: Sequence[int], times: Sequence[float]) -> tuple[str, float]:
    slope = exponent(sizes, times)
    verdict = "ok" if slope < EXPONENT_TARGET else "MISS"
    shown = "".join(f"{t * 1e3:9.1f} ms" for t in times)
    return f"    {what:<36}{shown}   exponent {slope:5.2f}  {verdict}", slope


def _per_size(sizes: Sequence[int], make: Callable[[int], list[Candidate]],
              timed: Callable[[list[Candidate]], float]) -> list[float]:
    """``timed`` of the candidates ``make`` makes for each size, made one size at a time (copies
    by the hundred thousand are not all kept alive at once)."""
    return [timed(make(n)) for n in sizes]


def run(scale: float = 1.0) -> list[str]:
    """The section's lines; ``scale`` shrinks every size (a test runs it small)."""
    return measure(scale)[0]


def measure(scale: float = 1.0) -> tuple[list[str], dict[str, float]]:
    """The section's lines and its two figures: the worst exponent (``"exponent"``) and
    passages / truncate (``"passages / truncate"``); no figures when cl100k_base is not exact."""
    base = get_tokenizer("cl100k_base")
    if not isinstance(base, TiktokenTokenizer):
        return ["growth: skipped, cl100k_base does not resolve exactly here"], {}
    encoding = base.encoding

    def fresh() -> TiktokenTokenizer:
        tokenizer = TiktokenTokenizer(encoding)
        _ = tokenizer.max_token_bytes
        return tokenizer

    timed = functools.partial(_timed, fresh, MIN_RUN * min(1.0, scale))

    def sizes(n: int) -> list[int]:
        return [max(64, round(n * scale)) * k for k in (1, 2, 4)]

    def copies_of(n: int) -> list[Candidate]:
        return [Candidate(text="x", metadata={"source": f"s{i}.txt"}) for i in range(n)]

    def rows_of(shape: Shape) -> Callable[[int], list[Candidate]]:
        return lambda n: [Candidate(text=f"{shape.unit(i)} {i:07d}") for i in range(n)]

    counts, copies = sizes(LEDGER_CANDIDATES), sizes(DUPLICATES)
    cases: list[tuple[str, str, list[int], list[float]]] = []
    headings: dict[str, str] = {}
    for chars, first in ((KEPT_CHARS, KEPT_BUDGET), (REACH_CHARS, REACH_BUDGET)):
        budgets = sizes(first)
        group = f"passages {chars}"
        headings[group] = (
            f"  passages, one text of {chars} characters per budget token, every unit a match, "
            f"budgets {'/'.join(map(str, budgets))}:"
        )
        for shape in SHAPES:
            times = [
                timed("passages", b, [Candidate(text=_text(shape, chars * b))], shape.query)
                for b in budgets
            ]
            cases.append((group, shape.name, budgets, times))
    cases.append(("passages copies", "n duplicates", copies,
                  _per_size(copies, copies_of, lambda c: timed("passages", MAX_TOKENS, c, "x"))))
    for shape in SHAPES:
        times = _per_size(counts, rows_of(shape), lambda c: timed("skip", MAX_TOKENS, c, None))
        cases.append(("ledger", shape.name, counts, times))
    cases.append(("ledger", "n duplicates", copies,
                  _per_size(copies, copies_of, lambda c: timed("skip", MAX_TOKENS, c, None))))

    headings["passages copies"] = (
        f"  passages over n copies of one candidate, n = {'/'.join(map(str, copies))}:"
    )
    headings["ledger"] = (
        f"  ledger: skip over n candidates of one length within {MAX_TOKENS} tokens, "
        f"n = {'/'.join(map(str, counts))} (duplicates {'/'.join(map(str, copies))}):"
    )
    lines = [
        "growth: time at n, 2n, 4n and its exponent (log-log slope: 1 is linear, 2 quadratic); "
        f"best of {REPEAT}, a fresh tokenizer each run",
    ]
    exponents: list[float] = []
    for group, what, sized, times in cases:
        if group in headings:
            lines.append(headings.pop(group))
        line, slope = _line(what, sized, times)
        lines.append(line)
        exponents.append(slope)
    worst = max(exponents)
    lines.append(
        f"  {'ok' if worst < EXPONENT_TARGET else 'MISS':<4} growth exponent, worst: {worst:.2f} "
        f"(target < {EXPONENT_TARGET})"
    )
    ratio_line, ratio = _ratio_line(timed, round(RATIO_CHARS * scale))
    return [*lines, ratio_line], {"exponent": worst, "passages / truncate": ratio}


def _ratio_line(timed: Callable[..., float], chars: int) -> tuple[str, float]:
    """passages against truncate over ``chars`` characters of tiny matching units, and the ratio."""
    tiny = SHAPES[0]
    big = [Candidate(text=_text(tiny, chars))]
    passages = timed("passages", MAX_TOKENS, big, tiny.query)
    truncate = timed("truncate", MAX_TOKENS, big, tiny.query)
    ratio = passages / truncate
    return (
        f"  {'ok' if ratio <= RATIO_TARGET else 'MISS':<4} passages / truncate at {MAX_TOKENS} tokens over "
        f"{chars / 1e6:g} MB of tiny matching units: {ratio:.2f} ({passages * 1e3:.0f} ms, "
        f"{truncate * 1e3:.0f} ms; target <= {RATIO_TARGET})"
    ), ratio


if __name__ == "__main__":
    print("\n".join(run()))
