"""How the bench times a call: the collector paused (as timeit does), the best of fresh runs."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def timed(fn: Callable[[T], R], arg: T, collect: bool = True) -> tuple[float, R]:
    """One run of ``fn(arg)``: its wall time in seconds and what it returned. With ``collect``
    a full collection runs first, so no garbage of earlier runs is left; it also leaves the CPU
    caches cold, which on a run of a millisecond weighs as much as the code (timeit does not
    collect first)."""
    if collect:
        gc.collect()
    gc.disable()
    try:
        start = time.perf_counter()
        out = fn(arg)
        return time.perf_counter() - start, out
    finally:
        gc.enable()


def best_time(fn: Callable[[T], object], inputs: Sequence[T], collect: bool = True) -> float:
    """Best time of ``fn`` over ``inputs`` (one run each), in seconds. Each run gets its own
    input, so no cache carries over between runs."""
    return min(timed(fn, item, collect)[0] for item in inputs)


def interleaved_best(
    items: Sequence[T], sides: Sequence[Callable[[T], object]], repeat: int,
    fresh: Callable[[], None] = lambda: None,
) -> list[list[float]]:
    """Per side, its best time in seconds on each of ``items`` (``best[side][i]``): each item's
    sides run ``repeat`` times each, interleaved, the side that goes first rotating from run to
    run and item to item, so that a slow spell of the machine or a cache one side left warm hits
    every side alike, and the best of an item's runs is one no other process cut into.
    ``fresh()`` runs, untimed, before every timed call (to empty a cache a repeat would hit)."""
    best = [[float("inf")] * len(items) for _ in sides]
    for i, item in enumerate(items):
        for run in range(repeat):
            for step in range(len(sides)):
                side = (step + i + run) % len(sides)
                fresh()
                best[side][i] = min(best[side][i], timed(sides[side], item, collect=False)[0])
    return best
