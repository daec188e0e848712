"""``python -m recallpack.bench --check --quick``: the bench's ratio targets, short, for CI.

The whole bench takes minutes and reads its figures once. The guard measures only the ratios
that have a target (the core section, the adapters' overhead, the growth exponents), each as
its full run does, with fewer runs or queries, and copes with a shared machine in three ways:

- every figure is a ratio of two timings taken in the same run, interleaved where they are
  short, so a machine that is slow for the whole check slows both sides alike;
- each timing is the best of several runs, so a run slowed by another process does not count;
- a check that misses a target is measured once more, and a target fails only when it is missed
  both times (its better figure is printed).

A check is a :class:`Check`: a name, a ``measure`` returning one figure per target, and the
targets. :func:`run_checks` runs them and prints a line per target with its figure and verdict.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

__all__ = ["Target", "Check", "run_checks", "section_checks"]

#: Queries per adapter section (the full bench asks 40 and 20).
QUERIES = 12
#: The growth section's sizes, scaled: a quarter of the full bench's.
GROWTH_SCALE = 0.25


@dataclass(frozen=True)
class Target:
    """A bound on one figure: ``figure <= bound`` (``at_least``: ``>=``; ``strict``: ``<``/``>``)."""

    name: str
    bound: float
    at_least: bool = False
    strict: bool = False

    def met(self, figure: float) -> bool:
        if self.at_least:
            return figure > self.bound if self.strict else figure >= self.bound
        return figure < self.bound if self.strict else figure <= self.bound

    def better(self, one: float, other: float) -> float:
        """The figure of two runs that is nearer to meeting the bound."""
        return max(one, other) if self.at_least else min(one, other)

    def describe(self) -> str:
        sign = (">" if self.strict else ">=") if self.at_least else ("<" if self.strict else "<=")
        return f"{sign} {self.bound:g}"


@dataclass(frozen=True)
class Check:
    """One measurement and the targets its figures meet; ``measure`` returns a figure per
    target name (none at all when the check cannot run here: an extra not installed)."""

    name: str
    measure: Callable[[], Mapping[str, float]]
    targets: tuple[Target, ...]


def run_checks(checks: Sequence[Check], out: Callable[[str], None] = print) -> bool:
    """Run each check, measure again the ones that missed, print a line per target; True when
    every target was met (on the first measurement or on the second)."""
    passed = True
    for check in checks:
        figures = dict(check.measure())
        if not figures:
            out(f"  skip {check.name}: cannot run here")
            continue
        missed = [t for t in check.targets if not t.met(figures[t.name])]
        if missed:
            shown = ", ".join(f"{t.name} {figures[t.name]:.3f}" for t in missed)
            out(f"  again {check.name}: missed {shown}; measuring once more")
            again = check.measure()
            for target in missed:
                figures[target.name] = target.better(figures[target.name], again[target.name])
        for target in check.targets:
            ok = target.met(figures[target.name])
            passed = passed and ok
            out(f"  {'ok  ' if ok else 'MISS'} {check.name}: {target.name} {figures[target.name]:.3f} "
                f"(target {target.describe()})")
    return passed


# -- the sections' checks (the core's are built by recallpack.bench, which imports this) -------


def _section(module: str, *args: object) -> Callable[[], dict[str, float]]:
    """A bench section's figures from its ``measure(*args)``; none when its extra is missing."""

    def measure() -> dict[str, float]:
        import importlib

        try:
            section = importlib.import_module(f"recallpack._bench.{module}")
        except ImportError:
            return {}
        return dict(section.measure(*args)[1])

    return measure


def section_checks() -> list[Check]:
    """The targets of the adapter and growth sections, as docs/performance.md states them."""
    return [
        Check("langchain", _section("langchain", QUERIES), (Target("overhead", 0.10, strict=True),)),
        Check("llamaindex", _section("llamaindex", QUERIES), (Target("overhead", 0.10, strict=True),)),
        Check("growth", _section("growth", GROWTH_SCALE), (
            Target("exponent", 1.3, strict=True),
            Target("passages / truncate", 3.0),
        )),
    ]
