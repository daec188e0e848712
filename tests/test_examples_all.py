"""Every example is exercised: each is run by some test, and each script is in ``make demo``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted(p for p in (ROOT / "examples").iterdir() if p.suffix in (".py", ".ipynb"))
THIS = Path(__file__).resolve()
#: Scripts kept out of ``make demo``, each with why. They are still run by a test (above).
NOT_IN_DEMO = {
    "ray_batch.py": "starts a local Ray cluster (about 10 s and a heavy dependency); "
    "tests/test_ray_example.py runs it",
}


def test_there_are_examples() -> None:
    """The examples folder holds the scripts and the notebook (the checks below are not vacuous)."""
    assert {p.suffix for p in EXAMPLES} == {".py", ".ipynb"}


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_each_example_is_run_by_a_test(example: Path) -> None:
    """Some test file other than this one names the example (and runs it: see that test)."""
    naming = [
        test
        for test in (ROOT / "tests").rglob("test_*.py")
        if test.resolve() != THIS and example.name in test.read_text()
    ]
    assert naming, f"no test runs examples/{example.name}; add one so make test covers it"


def _demo_recipe() -> str:
    demo = re.search(r"^demo:.*?(?=^\S)", (ROOT / "Makefile").read_text(), re.M | re.S)
    assert demo, "the Makefile has a demo target"
    return demo.group(0)


@pytest.mark.parametrize(
    "example",
    [p for p in EXAMPLES if p.suffix == ".py" and p.name not in NOT_IN_DEMO],
    ids=lambda p: p.name,
)
def test_each_script_is_in_make_demo(example: Path) -> None:
    """make demo runs every example script, so a new user sees each one work."""
    assert f"examples/{example.name}" in _demo_recipe()


@pytest.mark.parametrize("name", sorted(NOT_IN_DEMO))
def test_exemptions_from_make_demo_are_current(name: str) -> None:
    """An exempted script exists and is really not in make demo, so the list cannot go stale."""
    assert (ROOT / "examples" / name).is_file(), f"{name} is gone; drop it from NOT_IN_DEMO"
    assert f"examples/{name}" not in _demo_recipe(), f"{name} is in make demo now; drop it from NOT_IN_DEMO"
