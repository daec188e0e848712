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
