"""examples/ray_batch.py: the Ray Data job packs the same evidence a plain loop does, within budget.

The job runs once, as a user runs it (a subprocess with a local two-CPU Ray that ends with
it), and its Parquet output is checked here against an independent token count and against a
loop of the same BudgetedRetriever in this process.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pytest.importorskip("ray.data", reason="the Ray example needs the ray extra (pip install -e '.[ray]')")

from recallpack import get_tokenizer  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "examples" / "ray_batch.py"
QUERIES = 120


def _load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ray_batch_example", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def example() -> ModuleType:
    return _load_example()


@pytest.fixture(scope="module")
def rows(example: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    out = tmp_path_factory.mktemp("ray") / "evidence"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--queries", str(QUERIES), "--workers", "2", "--out", str(out)],
        # About 30 s here; with the two cores shared with two busy processes it took 283 s (Ray
        # waits for CPUs it has counted as free), so the limit is for a hang, not a slow machine.
        capture_output=True, text=True, timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"{QUERIES} queries on 2 Ray worker(s)" in done.stdout
    result: list[dict[str, Any]] = example.read(out)
    return result


def test_one_row_per_query(example: ModuleType, rows: list[dict[str, Any]]) -> None:
    """Every query comes back exactly once, with its own text, whichever worker packed it."""
    expected = example.make_queries(QUERIES, example.corpus())
    assert [r["query_id"] for r in rows] == list(range(QUERIES))
    assert [r["query"] for r in rows] == [q["query"] for q in expected]


def test_every_block_fits_the_budget_by_an_independent_count(example: ModuleType, rows: list[dict[str, Any]]) -> None:
    """tiktoken's own count of each written block is its reported count, within max_tokens."""
    encoding = get_tokenizer("cl100k_base").encoding
    counts = [len(encoding.encode_ordinary(r["evidence"])) for r in rows]
    assert counts == [r["tokens"] for r in rows]
    assert max(counts) <= example.MAX_TOKENS
    assert all(r["evidence"] for r in rows), "a BM25 match is never answered with an empty block"


def test_the_budget_binds(rows: list[dict[str, Any]]) -> None:
    """The budget, not the fetch depth, decides what is kept (else the checks above are vacuous)."""
    assert sum(r["items_dropped"] > 0 for r in rows) > QUERIES // 2


def test_blocks_equal_a_plain_loop_byte_for_byte(example: ModuleType, rows: list[dict[str, Any]]) -> None:
    """Sharding over Ray workers changes nothing: the same retriever in a loop writes the same bytes."""
    retriever = example.build_retriever(example.corpus())
    expected = [retriever.recall(q["query"]).to_markdown() for q in example.make_queries(QUERIES, example.corpus())]
    assert [r["evidence"].encode() for r in rows] == [e.encode() for e in expected]


def test_report_counts_add_up(example: ModuleType, rows: list[dict[str, Any]]) -> None:
    """Each candidate BM25 fetched is selected, dropped or withheld, and at least one is kept."""
    for r in rows:
        assert r["items_selected"] + r["items_dropped"] + r["items_withheld"] == r["candidates"]
        assert r["items_selected"] >= 1 and r["candidates"] == example.FETCH_K


def test_the_query_source_is_found(rows: list[dict[str, Any]]) -> None:
    """A query's own paragraph is cited in its evidence (the resource line matches the corpus)."""
    assert sum(r["source_kept"] for r in rows) >= 0.9 * QUERIES


def test_a_used_output_directory_is_refused(tmp_path: Path) -> None:
    """--out pointing at a non-empty directory fails before Ray starts, and leaves it alone."""
    (tmp_path / "keep.txt").write_text("mine")
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--queries", "3", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 2
    assert "is not empty" in done.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]
