"""A policy (or a host) installed as a package is found through its entry point (group ``recallpack.policies``)
and packs everywhere a policy's name is taken: ``recall``, the adapters, ``recallpack pack
--policy`` and ``recallpack serve --policy``; a broken one is skipped with a warning naming its
distribution.

Each package is written into ``tmp_path`` as an installed distribution is laid out (a module and a
``*.dist-info`` folder holding ``METADATA`` and ``entry_points.txt``), and put on ``PYTHONPATH``
of a child process, so the entry points are read as in a fresh process and this one's table is
never changed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from recallpack.testing import paragraphs

REPO = Path(__file__).resolve().parent.parent

#: The toy policy the throwaway package installs: in order while half the budget lasts.
HALF_BUDGET = '''
from recallpack.packing.decisions import End, Keep
from recallpack.packing.results.result import Reason


class HalfBudget:
    summary = "keeps items in order while half the budget lasts"
    needs_query = False

    def choose(self, view, query, embed):
        half, spent = view.tokens_left // 2, 0
        for rank in range(len(view)):
            if view.candidate(rank) is None:
                continue
            cost = view.measure(rank)
            if spent + cost > half:
                yield End(Reason.OVER_BUDGET, rank)
                return
            spent += cost
            yield Keep(rank)
'''


def install(root: Path, dist: str, module: str, source: str, entry_points: dict[str, str],
            group: str = "recallpack.policies") -> Path:
    """Lay out ``dist`` in ``root`` as pip would: ``module.py`` and its dist-info; ``root``."""
    (root / f"{module}.py").write_text(source)
    info = root / f"{dist.replace('-', '_')}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    lines = "\n".join(f"{name} = {value}" for name, value in entry_points.items())
    (info / "entry_points.txt").write_text(f"[{group}]\n{lines}\n")
    return root


def child_env(root: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(REPO)])}


def python(root: Path, code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], env=child_env(root), cwd=REPO,
                          capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture
def half_budget_installed(tmp_path: Path) -> Path:
    return install(tmp_path, "toy-half-budget", "toy_half_budget", HALF_BUDGET,
                   {"half_budget": "toy_half_budget:HalfBudget"})


def candidates_file(root: Path) -> Path:
    lines = root / "candidates.jsonl"
    rows = [{"text": text, "metadata": {"source": module}} for module, text in paragraphs()[:12]]
    lines.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return lines


PACK_EVERYWHERE = '''
import json
from langchain_core.documents import Document
from langchain_core.runnables import RunnableLambda
from llama_index.core.schema import NodeWithScore, TextNode
from recallpack import Packer, recall
from recallpack.adapters import langchain, llamaindex
from recallpack.packing.choosing.policies import policy_help
from recallpack.testing import paragraphs

texts = paragraphs()[:12]
rows = [{"text": t, "metadata": {"source": m}} for m, t in texts]
out = {"help": policy_help()}
for policy in ("half_budget", "prefix"):
    got = recall(rows, max_tokens=400, policy=policy)
    out[policy] = [got.report.policy, got.report.tokens_used, got.report.items_selected]
docs = [Document(page_content=t, metadata={"source": m}) for m, t in texts]
upstream = RunnableLambda(lambda query: docs)
lc = langchain.BudgetedRetriever(retriever=upstream, max_tokens=400, policy="half_budget").recall("q")
out["langchain"] = [lc.report.policy, lc.report.tokens_used]
nodes = [NodeWithScore(node=TextNode(text=t, metadata={"source": m}), score=1.0) for m, t in texts]
li = llamaindex.BudgetPostprocessor(max_tokens=400, policy="half_budget").pack_nodes(nodes, "q")[1]
out["llamaindex"] = [li.report.policy, li.report.tokens_used]
print(json.dumps(out))
'''


def test_an_installed_policy_packs_through_recall_and_both_adapters(half_budget_installed: Path) -> None:
    """The entry point's policy is a choice of recall, LangChain's retriever and LlamaIndex's
    postprocessor by its name, keeps what it chooses (half the budget) and is in the help."""
    done = python(half_budget_installed, PACK_EVERYWHERE)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    policy, used, selected = out["half_budget"]
    assert policy == "half_budget" and used <= 200 < out["prefix"][1]
    assert selected < out["prefix"][2]
    assert out["langchain"][0] == out["llamaindex"][0] == "half_budget"
    assert out["langchain"][1] <= 200 and out["llamaindex"][1] <= 200
    assert "half_budget: keeps items in order while half the budget lasts" in out["help"]


def test_an_installed_policy_is_a_choice_of_recallpack_pack(half_budget_installed: Path) -> None:
    """``recallpack pack --policy half_budget`` packs with it, and ``--help`` lists it."""
    lines = candidates_file(half_budget_installed)
    done = subprocess.run(
        [sys.executable, "-m", "recallpack", "pack", str(lines), "--policy", "half_budget",
         "--max-tokens", "400", "--format", "json"],
        env=child_env(half_budget_installed), cwd=REPO, capture_output=True, text=True, timeout=300, check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)["report"]
    assert report["policy"] == "half_budget" and report["tokens_used"] <= 200
    helped = subprocess.run([sys.executable, "-m", "recallpack", "pack", "--help"], env=child_env(half_budget_installed),
                            cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    assert "half_budget: keeps items in order" in " ".join(helped.stdout.split())


def test_an_installed_policy_is_a_choice_of_recallpack_serve(half_budget_installed: Path) -> None:
    """``recallpack serve --policy half_budget`` starts, and its recall tool packs with it."""
    pytest.importorskip("mcp")
    from tests.adapters.mcp_host import connect

    with connect("--docs", "docs", "--policy", "half_budget", "--max-tokens", "600",
                 env={"PYTHONPATH": child_env(half_budget_installed)["PYTHONPATH"]}) as host:
        result = host.recall({"query": "how does the floor keep a match", "max_tokens": 600})
    assert not result.is_error
    report = result.structured_content["report"]  # type: ignore[index]
    # Within half the budget, or (a first file larger than half) the floor's cut of it, to the budget.
    assert report["policy"] == "half_budget" and report["tokens_used"] <= 600
    assert report["tokens_used"] <= 300 or report["floor_applied"], report


@pytest.mark.parametrize(
    ("source", "target", "name", "said"),
    [
        ("raise ImportError('needs numpy 9')", "toy_broken:Policy", "broken", "loading it raised ImportError: needs numpy 9"),
        ("class Policy:\n    summary, needs_query, choose = 'x', False, 5\n", "toy_broken:Policy", "broken",
         "choose(view, query, embed) is not a method"),
        ("class Policy:\n    summary, needs_query = 3, 'yes'\n    def choose(self, l, q, e): return None\n",
         "toy_broken:Policy", "broken", "its summary is not a str; its needs_query is not a bool"),
        ("from recallpack.packing.choosing.in_order import Skip as Policy\n", "toy_broken:Policy", "prefix", "is built in"),
    ],
)
def test_a_broken_installed_policy_is_skipped_with_a_warning_naming_its_distribution(
    tmp_path: Path, source: str, target: str, name: str, said: str
) -> None:
    """One broken plugin does not break recallpack: it is skipped, the warning names the
    distribution, the entry point and what is wrong, and asking for it by name says why."""
    root = install(tmp_path, "toy-broken", "toy_broken", source, {name: target})
    done = python(root, (
        "import warnings, json\n"
        "from recallpack import PolicyError, recall\n"
        "from recallpack.packing.choosing.policies import policy_names\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    names = policy_names()\n"
        "ok = recall([{'text': 'kept'}], max_tokens=100, policy='prefix').report.items_selected\n"
        "try:\n"
        f"    recall([{{'text': 'x'}}], max_tokens=100, policy={name!r}); error = ''\n"
        "except PolicyError as exc:\n"
        "    error = str(exc)\n"
        "print(json.dumps({'names': names, 'warnings': [str(w.message) for w in caught], 'ok': ok, 'error': error}))\n"
    ))
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["names"] == ["prefix", "skip", "truncate", "passages"] and out["ok"] == 1
    [warning] = out["warnings"]
    assert "distribution 'toy-broken'" in warning and f"entry point {name} = {target}" in warning
    assert said in warning and "fix or uninstall that distribution" in warning
    if name != "prefix":
        assert said in out["error"] and "is not a policy" in out["error"]


#: A throwaway host package: its objects count one token a bead; it is its own reader.
ABACUS_HOST = '''
from recallpack.packing.hosts import Host
from recallpack.packing.tokenizers import CallableTokenizer

HOST = Host("abacus", ("toy_abacus",), "toy_abacus")
MISNAMED = Host("counting_frame", ("toy_abacus",), "toy_abacus")


class Abacus:
    def beads(self, text):
        return text.count("o")


def read_tokenizer(obj):
    return CallableTokenizer(obj.beads, name="abacus") if isinstance(obj, Abacus) else None
'''


def test_an_installed_host_reads_its_objects_and_a_misnamed_one_is_skipped(tmp_path: Path) -> None:
    """A Host under the entry-point group ``recallpack.hosts`` joins the table after the built-ins
    and its reader reads its objects; one whose Host is named otherwise is skipped with a warning."""
    root = install(tmp_path, "toy-abacus", "toy_abacus", ABACUS_HOST,
                   {"abacus": "toy_abacus:HOST", "frame": "toy_abacus:MISNAMED"}, group="recallpack.hosts")
    done = python(root, (
        "import json, warnings\n"
        "from recallpack import get_tokenizer\n"
        "from recallpack.packing.hosts import hosts\n"
        "import toy_abacus\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    names = [host.name for host in hosts()]\n"
        "count = get_tokenizer(toy_abacus.Abacus()).count('two boots')\n"
        "print(json.dumps({'names': names, 'count': count, 'warnings': [str(w.message) for w in caught]}))\n"
    ))
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["names"] == ["langchain", "llamaindex", "huggingface", "abacus"] and out["count"] == 3
    [warning] = out["warnings"]
    assert "distribution 'toy-abacus'" in warning and "entry point frame = toy_abacus:MISNAMED" in warning
    assert "name them alike" in warning
