"""Ray section of ``python -m recallpack.bench``: the Ray Data example's throughput, 1 and 2 workers.

Runs ``examples/ray_batch.py`` (BM25 over the stdlib's docstring paragraphs, LangChain
``BudgetedRetriever`` at 512 tokens, Parquet out) on one query set with 1 and 2 workers,
against the same retriever in a plain loop in this process, all in the same run. Two rates
per job:

* whole job: queries over the wall-clock time a user waits, Parquet written. A Ray job pays a
  fixed cost first (a process per worker, LangChain imported there, BM25 built from the
  shipped texts), so on a small job this is below the loop's rate;
* steady: queries over the busy time of the busiest worker (each row records the seconds its
  worker spent on it), the rate once the workers are up, which grows with the worker count
  as long as each worker has a core.

Needs ray[data] and a checkout (the example is not part of the installed package); the
section says it is skipped otherwise.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from types import ModuleType
from typing import Any

import ray  # noqa: F401  - imported first so that a missing ray skips the section

__all__ = ["run"]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "ray_batch.py"
QUERIES = 6_000
WORKERS = (1, 2)


def _example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("recallpack_ray_batch_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # run() ships its worker class by value from here
    spec.loader.exec_module(module)
    return module


def _job(example: Any, workers: int) -> tuple[float, float, int]:
    """One whole job on the Ray already running: its seconds, the busiest worker's busy
    seconds, and how many workers packed rows."""
    with tempfile.TemporaryDirectory(prefix="recallpack-bench-ray-") as out:
        started = time.perf_counter()
        path = example.run(queries=QUERIES, workers=workers, out=Path(out) / "evidence")
        elapsed = time.perf_counter() - started
        rows = example.read(path)
    if len(rows) != QUERIES:
        raise RuntimeError(f"the Ray job wrote {len(rows)} rows for {QUERIES} queries")
    busy: Counter[int] = Counter()
    for row in rows:
        busy[row["worker"]] += row["seconds"]
    return elapsed, max(busy.values()), len(busy)


def run() -> list[str]:
    """Printable lines: loop vs Ray with 1 and 2 workers, throughput as ratios to the loop."""
    if not EXAMPLE.is_file():
        return [f"ray: skipped, {EXAMPLE.name} is not here (run the bench from a checkout)"]
    example: Any = _example()
    docs = example.corpus()
    queries = [q["query"] for q in example.make_queries(QUERIES, docs)]

    def loop() -> float:
        started = time.perf_counter()
        retriever = example.build_retriever(docs)  # built inside the timing, as each worker does
        for query in queries:
            retriever.recall(query).to_markdown()
        return time.perf_counter() - started

    first_loop_s = loop()
    started = time.perf_counter()
    example.start_ray(max(WORKERS))
    init_s = time.perf_counter() - started
    try:
        jobs = {w: _job(example, w) for w in WORKERS}
    finally:
        example.ray.shutdown()
    # The loop runs before and after the Ray jobs and counts at its best, so a burst of load
    # from elsewhere on the machine does not flatter Ray (the second run also finds this
    # process's token-count cache warm: that favours the loop, never Ray).
    loop_s = min(first_loop_s, loop())
    loop_rate = QUERIES / loop_s

    lines = [
        f"ray: examples/{EXAMPLE.name}, {QUERIES:,} queries ({len(set(queries))} distinct) over "
        f"{len(docs)} docstring paragraphs, BM25 k={example.FETCH_K}, max_tokens={example.MAX_TOKENS}; "
        f"Ray {example.ray.__version__} started in {init_s:.1f} s (not counted); {os.cpu_count()} cores",
        f"  {'':<20}{'whole job':>10}{'queries/s':>11}{'vs loop':>9}   {'steady q/s':>10}{'vs loop':>9}",
        f"  {'in-process loop':<20}{loop_s:>8.1f} s{loop_rate:>11.0f}{1:>8.2f}x   "
        f"{loop_rate:>10.0f}{1:>8.2f}x",
    ]
    for workers, (job_s, busiest_s, used) in jobs.items():
        steady = QUERIES / busiest_s
        lines.append(
            f"  {f'Ray, {workers} worker(s)':<20}{job_s:>8.1f} s{QUERIES / job_s:>11.0f}"
            f"{QUERIES / job_s / loop_rate:>8.2f}x   {steady:>10.0f}{steady / loop_rate:>8.2f}x"
            + ("" if used == workers else f"  (only {used} worker(s) got rows)")
        )
    (one_s, one_busy, _), (two_s, two_busy, _) = (jobs[w] for w in WORKERS)
    lines.append(
        f"  2 workers / 1 worker: whole job {one_s / two_s:.2f}x, steady {one_busy / two_busy:.2f}x faster"
    )
    return lines


if __name__ == "__main__":
    print("\n".join(run()))
