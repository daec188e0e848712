"""Progress of long work on stderr, only when asked (``show_progress=True``), as LlamaIndex shows it.

The bar is tqdm's, imported when a caller first asks for one: tqdm is not a dependency of
recallpack (LlamaIndex, LangChain's community packages and most notebooks bring it; ``pip install
tqdm`` otherwise). Asked for without tqdm, a warning says so once per call and the work runs
without a bar. A bar starts no thread (tqdm's monitor thread is off for it): a library leaves
none running, and ``recall_many``'s workers fork only from a process with no other thread.
"""

from __future__ import annotations

import importlib
import os
import sys
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from recallpack.packing.errors import ConfigError, RecallpackWarning

__all__ = ["Advance", "progress", "check_show_progress", "counted", "no_steps"]

T = TypeVar("T")
#: What a piece of work calls as it goes: the number of steps it just finished.
Advance = Callable[[int], None]


def no_steps(steps: int) -> None:
    """No bar: nothing to advance."""


def counted(work: Callable[[int], T], advance: Advance) -> Callable[[int], T]:
    """``work`` that tells ``advance`` of each call it finishes, in this process only (a forked
    child that calls it tells nothing: its parent tells its work as it takes the results in)."""
    if advance is no_steps:
        return work
    caller = os.getpid()

    def step(i: int) -> T:
        result = work(i)
        if os.getpid() == caller:
            advance(1)
        return result

    return step


def check_show_progress(value: object) -> bool:
    """``show_progress`` as given, or a ConfigError: True or False only."""
    if not isinstance(value, bool):
        raise ConfigError(f"show_progress={value!r} must be True or False", field="show_progress")
    return value


@contextmanager
def progress(total: int, what: str, show: bool) -> Iterator[Advance]:
    """A bar of ``total`` steps named ``what`` on stderr while the block runs, when ``show``;
    yields the function the work calls with each number of steps it finishes."""
    if not check_show_progress(show) or total <= 0:
        yield no_steps
        return
    try:
        tqdm = importlib.import_module("tqdm").tqdm  # typed Any: tqdm ships no type information
    except ImportError:
        warnings.warn(
            f"show_progress=True: {what} shows no progress, as tqdm is not installed; "
            "pip install tqdm",
            RecallpackWarning,
            stacklevel=4,
        )
        yield no_steps
        return

    # No monitor thread: tqdm.__new__ reads monitor_interval from the class, so this one's only.
    bar_class = type("Bar", (tqdm,), {"monitor_interval": 0})
    bar: Any = bar_class(total=total, desc=what, file=sys.stderr, dynamic_ncols=True)
    try:
        yield bar.update
    finally:
        bar.close()
