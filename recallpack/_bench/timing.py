"""How the bench times a call: the collector paused (as timeit does), the best of fresh runs."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def timed(fn: Callable[[T], R], arg: T) -> tuple[float, R]:
    """One run of ``fn(arg)``: its wall time in seconds and what it returned."""
    gc.collect()
    gc.disable()
    try:
        start = time.perf_counter()
        out = fn(arg)
        return time.perf_counter() - start, out
    finally:
        gc.enable()


def best_time(fn: Callable[[T], object], inputs: Sequence[T]) -> float:
    """Best time of ``fn`` over ``inputs`` (one run each), in seconds. Each run gets its own
    input, so no cache carries over between runs."""
    return min(timed(fn, item)[0] for item in inputs)
