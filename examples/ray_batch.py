"""Pack evidence for a batch of queries on every core with Ray Data, and write it to Parquet.

A small synthetic evaluation job, offline: the corpus is the paragraphs of the standard
library's module docstrings, and each query is the first line of one of those paragraphs, so
we know which paragraph it should find. Every Ray worker builds its own BM25 retriever and
LangChain ``BudgetedRetriever`` once, then packs batch after batch. Only plain data (the
corpus's texts, the queries) travels between processes; no recallpack object is shipped.

Per query the output has the evidence block, its token count, the packing report's counts,
whether the query's own paragraph made it into the block, and the seconds the worker spent
on it (retrieve, pack, render) with the worker's process id.

    python examples/ray_batch.py --queries 200 --workers 2 --out /tmp/evidence

Needs the ``ray`` extra (in a checkout: ``pip install -e '.[ray]'``; it brings ray[data] and the
demo's langchain-community and rank-bm25).
It starts a local Ray (no cluster, no dashboard, no network) unless Ray is already running in
this process.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import re
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# Before Ray is imported: no usage report, no uv-run runtime-env hook (both would try to do
# more than a local job needs), and Ray Data says only what went wrong, not each step.
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
os.environ.setdefault("RAY_DATA_LOG_LEVEL", "WARNING")

import pyarrow.parquet as pq
import ray
import ray.cloudpickle
import ray.data
from langchain_core.documents import Document

from recallpack.adapters.langchain import BudgetedRetriever
from recallpack.testing import paragraphs

with warnings.catch_warnings():
    # langchain-community warns that it is being sunset; its BM25Retriever still works.
    warnings.simplefilter("ignore", DeprecationWarning)
    from langchain_community.retrievers import BM25Retriever

MAX_TOKENS = 512
FETCH_K = 20
TOKENIZER = "cl100k_base"
#: The report's counts, one column each: selected + dropped + withheld == candidates.
COUNTS = ("candidates", "items_selected", "items_dropped", "items_withheld")

_WORD = re.compile(r"[a-z0-9]+")
_LETTERS = re.compile(r"[A-Za-z]{2,}")


def words(text: str) -> list[str]:
    """BM25's terms: lower-cased words, so "Parse" and "parse" match."""
    return _WORD.findall(text.lower())


def corpus() -> list[dict[str, str]]:
    """One document per docstring paragraph, as the plain dicts the workers receive."""
    counter: dict[str, int] = {}
    docs = []
    for module, text in paragraphs():
        number = counter[module] = counter.get(module, -1) + 1
        docs.append({"text": text, "module": module, "paragraph": f"paragraph-{number}"})
    return docs


def make_queries(n: int, docs: list[dict[str, str]]) -> list[dict[str, Any]]:
    """``n`` queries: the first line of each paragraph that reads like prose, in corpus order,
    starting over when ``n`` is larger than that set. ``source`` is the paragraph's resource."""
    pool, seen = [], set()
    for doc in docs:
        line = doc["text"].splitlines()[0].strip().rstrip(":")
        if len(_LETTERS.findall(line)) >= 5 and line not in seen and line[0].isalpha():
            seen.add(line)
            pool.append((line, resource_uri(doc)))
    return [
        {"query_id": i, "query": pool[i % len(pool)][0], "source": pool[i % len(pool)][1]} for i in range(n)
    ]


def resource_uri(doc: dict[str, str]) -> str:
    """The resource line recallpack writes for a document with both artifact ids."""
    return f"recallpack://artifacts/{doc['module']}/contents/{doc['paragraph']}"


def build_retriever(docs: list[dict[str, str]], max_tokens: int = MAX_TOKENS) -> BudgetedRetriever:
    """BM25 over ``docs`` (its ``FETCH_K`` best per query), packed to ``max_tokens``."""
    bm25 = BM25Retriever.from_documents(
        [
            Document(
                page_content=doc["text"],
                metadata={"artifact_id": doc["module"], "artifact_content_id": doc["paragraph"]},
            )
            for doc in docs
        ],
        k=FETCH_K,
        preprocess_func=words,
    )
    return BudgetedRetriever(retriever=bm25, max_tokens=max_tokens, tokenizer=TOKENIZER)


class EvidenceWorker:
    """One per Ray worker: builds its retriever once, then packs every batch it is given."""

    def __init__(self, docs: list[dict[str, str]], max_tokens: int) -> None:
        self.retriever = build_retriever(docs, max_tokens)

    def __call__(self, batch: dict[str, Any]) -> dict[str, list[Any]]:
        columns = ("query_id", "query", "evidence", "tokens", *COUNTS, "source_kept", "seconds", "worker")
        out: dict[str, list[Any]] = {name: [] for name in columns}
        for query_id, query, source in zip(batch["query_id"], batch["query"], batch["source"]):
            started = time.perf_counter()
            result = self.retriever.recall(str(query))
            evidence = result.to_markdown()
            out["seconds"].append(time.perf_counter() - started)
            report = result.report
            out["query_id"].append(int(query_id))
            out["query"].append(str(query))
            out["evidence"].append(evidence)
            out["tokens"].append(report.tokens_used)
            for name in COUNTS:
                out[name].append(getattr(report, name))
            out["source_kept"].append(any(e.resource_uri == source for e in result.evidence))
            out["worker"].append(os.getpid())  # which process packed it: the load per worker
        return out


def start_ray(workers: int) -> None:
    """A local Ray, quiet: no dashboard, errors only.

    One CPU per worker and one more for reading queries in and writing Parquet out: with every
    CPU held by a worker, Ray Data could not write until the workers finish, so a large job's
    output would pile up in memory instead of streaming to disk.
    """
    ray.init(num_cpus=workers + 1, include_dashboard=False, logging_level=logging.ERROR)


def run(
    queries: int = 200,
    workers: int = 2,
    out: str | Path | None = None,
    max_tokens: int = MAX_TOKENS,
) -> Path:
    """Pack evidence for ``queries`` queries on ``workers`` Ray workers; the Parquet directory.

    ``out`` must be new or empty (default: a new temporary directory). Uses the Ray already
    running in this process if there is one, else starts (and afterwards stops) a local one.
    """
    if queries < 1 or workers < 1:
        raise ValueError(f"queries={queries} and workers={workers} must both be at least 1")
    path = Path(out) if out is not None else Path(tempfile.mkdtemp(prefix="recallpack-ray-"))
    if path.exists() and any(path.iterdir()):
        raise ValueError(f"--out {path} is not empty; give a new or empty directory")
    path = path.resolve()
    docs = corpus()
    rows = make_queries(queries, docs)
    if __name__ != "__main__" and __name__ in sys.modules:
        # Imported by path (a test, the bench): workers cannot import this file by name, so
        # the worker class travels by value, as it does when the script runs as __main__.
        ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    started_here = not ray.is_initialized()
    if started_here:
        start_ray(workers)
    try:
        # Several batches per worker, so a slow batch does not leave the other workers idle.
        batch_size = max(1, math.ceil(len(rows) / (4 * workers)))
        dataset = ray.data.from_items(rows, override_num_blocks=4 * workers).map_batches(
            EvidenceWorker,
            fn_constructor_kwargs={"docs": docs, "max_tokens": max_tokens},
            batch_size=batch_size,
            compute=ray.data.ActorPoolStrategy(size=workers),
            num_cpus=1,
            batch_format="numpy",
        )
        dataset.write_parquet(str(path))
    finally:
        if started_here:
            ray.shutdown()
    return path


def read(path: str | Path) -> list[dict[str, Any]]:
    """The rows written by :func:`run`, in query order."""
    return sorted(pq.read_table(str(path)).to_pylist(), key=lambda row: int(row["query_id"]))


def summary(rows: list[dict[str, Any]], seconds: float, workers: int, max_tokens: int) -> Iterator[str]:
    n = len(rows)
    yield f"{n} queries on {workers} Ray worker(s) in {seconds:.1f} s ({n / seconds:.0f} queries/s, Ray start included)"
    yield (
        f"evidence per query: {sum(r['tokens'] for r in rows) / n:.0f} tokens on average, at most "
        f"{max(r['tokens'] for r in rows)} (budget {max_tokens}); "
        f"{sum(r['items_selected'] for r in rows) / n:.1f} of {sum(r['candidates'] for r in rows) / n:.0f} "
        "candidates kept"
    )
    yield f"the query's own paragraph is in its evidence for {sum(r['source_kept'] for r in rows) / n:.0%} of queries"
    busy: dict[int, float] = {}
    for r in rows:
        busy[r["worker"]] = busy.get(r["worker"], 0.0) + r["seconds"]
    yield (
        f"inside the workers: {1e3 * sum(busy.values()) / n:.2f} ms per query (retrieve, pack, render); "
        f"the busiest of {len(busy)} was busy {max(busy.values()):.1f} s"
    )


def main(argv: list[str] | None = None) -> Path:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=200, help="how many queries (default 200)")
    parser.add_argument("--workers", type=int, default=2, help="Ray workers, one CPU each (default 2)")
    parser.add_argument("--max-tokens", type=int, default=MAX_TOKENS, help="the evidence budget per query")
    parser.add_argument(
        "--out", type=Path, default=None, help="a new or empty directory for the Parquet files"
    )
    args = parser.parse_args(argv)
    started = time.perf_counter()
    try:
        path = run(queries=args.queries, workers=args.workers, out=args.out, max_tokens=args.max_tokens)
    except ValueError as exc:
        parser.error(str(exc))
    seconds = time.perf_counter() - started
    for line in summary(read(path), seconds, args.workers, args.max_tokens):
        print(line)
    print(f"Parquet: {path}")
    return path


if __name__ == "__main__":
    main()
