"""The Makefile's targets install what they need and no more: make demo, make test, make notebook."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
requirements = pytest.importorskip("packaging.requirements")
tomllib = pytest.importorskip("tomllib" if sys.version_info >= (3, 11) else "tomli")
EXTRAS: dict[str, list[str]] = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
    "optional-dependencies"
]
CORE: list[str] = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def extra_closure(extra: str) -> set[str]:
    """Every distribution that installing recallpack[extra] brings, as installed here."""
    todo = [requirements.Requirement(spec) for spec in [*CORE, *EXTRAS[extra]]]
    seen: set[str] = set()
    while todo:
        req = todo.pop()
        name = canonical(req.name)
        if name == "recallpack":
            todo += [requirements.Requirement(spec) for e in req.extras for spec in EXTRAS[e]]
            continue
        if name in seen:
            continue
        seen.add(name)
        try:
            specs = importlib.metadata.requires(req.name) or []
        except importlib.metadata.PackageNotFoundError:  # not for this platform
            continue
        for spec in specs:
            dep = requirements.Requirement(spec)
            wanted = {"extra": ""} if not req.extras else None
            envs = [{"extra": e} for e in req.extras] if wanted is None else [wanted]
            if dep.marker is None or any(dep.marker.evaluate(env) for env in envs):
                todo.append(dep)
    return seen


def imported_top_levels(script: Path) -> set[str]:
    tree = ast.parse(script.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_demo_extra_covers_every_example_import() -> None:
    """make demo installs the demo extra only: the imports of every script it runs come with it."""
    from tests.test_examples_all import NOT_IN_DEMO

    closure = extra_closure("demo")
    providers = importlib.metadata.packages_distributions()
    for script in sorted(p for p in (ROOT / "examples").glob("*.py") if p.name not in NOT_IN_DEMO):
        for module in imported_top_levels(script) - set(sys.stdlib_module_names) - {"recallpack"}:
            dists = {canonical(d) for d in providers.get(module, [])}
            assert dists & closure, f"examples/{script.name} imports {module}, which the demo extra lacks"


def test_demo_extra_leaves_out_the_dev_tools() -> None:
    """The demo extra brings no test or lint tool, and no Jupyter: those are make test's and make notebook's."""
    closure = extra_closure("demo")
    for tool in ("pytest", "mypy", "ruff", "hypothesis", "langchain-tests", "nbclient", "jupyterlab"):
        assert tool not in closure, tool
    assert any("jupyterlab" in spec for spec in EXTRAS["notebook"])
    assert "recallpack[demo]" in EXTRAS["dev"] and "recallpack[demo]" in EXTRAS["notebook"]


@pytest.mark.parametrize(
    ("target", "runs"),
    [
        ("notebook", "jupyter lab examples/quickstart.ipynb"),
        ("demo", "examples/stdlib_demo.py"),
        ("test", "-m pytest"),
        ("serve", "recallpack serve --docs docs"),
    ],
)
def test_make_targets_exist(target: str, runs: str) -> None:
    """make -n TARGET (dry run: nothing is installed or started) shows the command it would run."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    done = subprocess.run(["make", "-n", target], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and runs in done.stdout, done.stdout + done.stderr


def test_each_target_installs_its_own_extra_in_strict_editable_mode() -> None:
    """The install rule is per extra and strict, so make demo never installs the dev stack."""
    makefile = (ROOT / "Makefile").read_text()
    assert "editable_mode=strict" in makefile
    for target, extra in (("demo", "demo"), ("test", "dev"), ("notebook", "notebook"), ("serve", "mcp")):
        rule = re.search(rf"^{target}:(.*)$", makefile, re.M)
        assert rule and f".installed-{extra}" in rule.group(1), target


def test_make_test_builds_the_docs_strictly_first() -> None:
    """make test depends on make docs, which builds with --strict: a dead reference fails make test."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    done = subprocess.run(["make", "-n", "test"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    out = done.stdout
    assert done.returncode == 0 and "mkdocs build --strict" in out
    assert out.index("mkdocs build --strict") < out.index("-m pytest")
    assert "recallpack[docs]" in EXTRAS["dev"] and {"mkdocs", "mkdocstrings"} <= {
        canonical(requirements.Requirement(spec).name) for spec in EXTRAS["docs"]}


def test_the_ray_extra_brings_what_the_ray_example_imports() -> None:
    """pip install ".[ray]" is enough for examples/ray_batch.py: ray[data] and the demo's retrievers."""
    closure = extra_closure("ray")
    providers = importlib.metadata.packages_distributions()
    for module in imported_top_levels(ROOT / "examples" / "ray_batch.py") - set(sys.stdlib_module_names) - {"recallpack"}:
        assert {canonical(d) for d in providers.get(module, [])} & closure, module
    assert any(requirements.Requirement(spec).extras == {"data"} for spec in EXTRAS["ray"])


FAKE_UV = """#!/bin/sh
i=1; while [ $i -le 40 ]; do echo " + package-$i==1.0"; i=$((i+1)); done
echo "resolver says: $FAKE_UV_SAYS" >&2
exit "$FAKE_UV_EXIT"
"""


@pytest.mark.parametrize("fails", [False, True], ids=["succeeds", "fails"])
def test_an_install_prints_one_line_unless_it_fails(tmp_path: Path, fails: bool) -> None:
    """The installer's 40 lines go to a log: one line on success, the whole log when it fails."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    uv = tmp_path / "uv"
    uv.write_text(FAKE_UV)
    uv.chmod(0o755)
    venv = tmp_path / "venv"
    env = {**__import__("os").environ, "FAKE_UV_EXIT": "1" if fails else "0", "FAKE_UV_SAYS": "no match for x"}
    done = subprocess.run(
        ["make", "--no-print-directory", f"VENV={venv}", f"UV={uv}", f"PYTHON={sys.executable}",
         f"{venv}/.installed-demo"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, env=env,
    )
    lines = (done.stdout + done.stderr).strip().splitlines()
    if fails:
        assert done.returncode != 0 and " + package-40==1.0" in done.stdout
        assert "resolver says: no match for x" in done.stdout and "install failed" in done.stdout
        assert not (venv / ".installed-demo").exists()
    else:
        assert done.returncode == 0 and (venv / ".installed-demo").exists()
        assert lines == [f"installing recallpack[demo] into {venv} (the installer's output: {venv}/install.log)"]
        assert " + package-40==1.0" in (venv / "install.log").read_text()


def test_make_test_runs_every_test_file_in_exactly_one_step() -> None:
    """The main step runs on xdist workers and leaves out only the files another step of make test runs."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    done = subprocess.run(["make", "-n", "test"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    runs = [line.split("-m pytest", 1)[1].split() for line in done.stdout.splitlines() if "-m pytest" in line]
    main = [args for args in runs if "-n" in args]
    assert len(main) == 1 and "--dist" in main[0], done.stdout
    ignored = {arg.removeprefix("--ignore=") for arg in main[0] if arg.startswith("--ignore=")}
    alone = [arg for args in runs if args is not main[0] for arg in args if arg.startswith("tests/")]
    assert sorted(alone) == sorted(ignored) and len(set(alone)) == len(alone)
    assert all((ROOT / path).is_file() for path in alone)
    assert {"tests/test_recall_many.py", "tests/test_ray_example.py", "tests/test_notebook.py"} <= ignored
    steps = subprocess.run(["make", "-s", "--no-print-directory", "test-steps"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert len(steps.stdout.split()) == len(runs)
    for step in steps.stdout.split():
        assert f"== {step}:" in done.stdout, step


def test_ci_runs_make_test_and_wants_passed_tests_from_every_step() -> None:
    """.ci/run calls the README's command and checks each of make test-steps for passed tests."""
    script = (ROOT / ".ci" / "run").read_text()
    assert "make test 2>&1 | tee" in script and "set -euo pipefail" in script
    assert "test-steps" in script and "passed" in script
