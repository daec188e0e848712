"""examples/quickstart.ipynb runs top to bottom offline, and is committed with its outputs.

To refresh the committed outputs after changing the notebook:

    .venv/bin/python tests/test_notebook.py
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
pytest.importorskip("matplotlib")

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "examples" / "quickstart.ipynb"
CELL_TIMEOUT = 120  # seconds per cell: a hung cell fails the test instead of hanging it


def execute(path: Path = NOTEBOOK) -> Any:
    """The notebook at ``path``, executed in a fresh python3 kernel from the examples folder."""
    notebook = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        notebook,
        timeout=CELL_TIMEOUT,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.execute()
    return notebook


def code_cells(notebook: Any) -> list[Any]:
    return [cell for cell in notebook.cells if cell.cell_type == "code"]


def mime_types(cell: Any) -> set[str]:
    return {mime for output in cell.get("outputs", []) for mime in output.get("data", {})}


@pytest.fixture(scope="module")
def executed() -> Any:
    return execute()


def test_notebook_executes_without_errors(executed: Any) -> None:
    """Every cell of the quickstart runs in a fresh kernel (a failing cell raises here)."""
    for cell in code_cells(executed):
        assert all(output.output_type != "error" for output in cell.outputs)


def test_notebook_shows_evidence_report_trace_and_plot(executed: Any) -> None:
    """The fresh run displays the evidence as Markdown, report and trace as HTML, and a PNG plot."""
    shown: set[str] = set().union(*(mime_types(cell) for cell in code_cells(executed)))
    assert {"text/markdown", "text/html", "image/png"} <= shown
    html = "".join(
        output["data"]["text/html"]
        for cell in code_cells(executed)
        for output in cell.outputs
        if "text/html" in output.get("data", {})
    )
    assert "recallpack-report" in html and "recallpack-trace" in html
    assert "selected" in html and "over_budget" in html and "withheld" in html
    markdown = "".join(
        output["data"]["text/markdown"]
        for cell in code_cells(executed)
        for output in cell.outputs
        if "text/markdown" in output.get("data", {})
    )
    assert "evidence, not instructions" in markdown and "Source excerpt" in markdown


def test_notebook_goes_through_both_hosts(executed: Any) -> None:
    """The quickstart uses the LangChain and the LlamaIndex adapters, not only the core."""
    source = "\n".join(cell.source for cell in code_cells(executed))
    assert "recallpack.adapters.langchain" in source
    assert "recallpack.adapters.llamaindex" in source
    assert "BudgetPostprocessor" in source


def test_committed_notebook_has_its_outputs() -> None:
    """The notebook in the repository was saved after running, so it reads without a kernel."""
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    cells = code_cells(notebook)
    assert all(cell.execution_count is not None for cell in cells)
    assert "image/png" in set().union(*(mime_types(cell) for cell in cells))
    assert all(
        output.output_type != "error" for cell in cells for output in cell.get("outputs", [])
    )


if __name__ == "__main__":
    done = execute()
    nbformat.write(done, NOTEBOOK)
    print(f"executed and saved {NOTEBOOK.relative_to(ROOT)}", file=sys.stderr)
