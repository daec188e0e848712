"""The walk (packing/choosing/walk.py): one call of the plan's policy, then the whole made to fit, with
data flowing down only.

A pack is traced under every policy: along every call stack, no module of the package is entered
again while it is on the stack below (no callback climbs back up), and no method runs on an
object whose class is defined in another file (no method inherited across files). The tokenizer
is one unit here: it is a plug (a user's subclass), whose base class counts through it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import recallpack
from recallpack import POLICIES, Candidate, Packer, Reader, Scope
from recallpack.testing import paragraphs

PACKAGE = Path(recallpack.__file__).parent
QUERY = "parse command line arguments"


def _unit(path: str) -> str | None:
    """The module a code file is part of, as the trace sees it (the tokenizers as one)."""
    p = Path(path)
    if not p.is_relative_to(PACKAGE):
        return None
    name = p.relative_to(PACKAGE).as_posix()
    return "packing/tokenizers/" if name.startswith("packing/tokenizers/") else name


def _trace(call: Callable[[], object]) -> tuple[list[str], list[str]]:
    """While ``call`` runs: every call into a module already on the stack below another one (a
    return up the stack), and every method run on an object of a class from another file."""
    reentries: list[str] = []
    inherited: list[str] = []

    def profile(frame: Any, event: str, arg: object) -> None:
        if event != "call":
            return
        unit = _unit(frame.f_code.co_filename)
        if unit is None:
            return
        chain: list[str] = []
        back = frame
        while back is not None:
            name = _unit(back.f_code.co_filename)
            if name is not None and (not chain or chain[-1] != name):
                chain.append(name)
            back = back.f_back
        if len(chain) != len(set(chain)):
            reentries.append(" <- ".join(chain) + f" :{frame.f_code.co_qualname}")
        code = frame.f_code
        if code.co_argcount and code.co_varnames[0] == "self" and "self" in frame.f_locals:
            owner = type(frame.f_locals["self"])
            source = getattr(sys.modules.get(owner.__module__), "__file__", None)
            owner_unit = _unit(source) if source else None
            if owner_unit is not None and owner_unit != unit:
                inherited.append(f"{owner.__qualname__}.{code.co_name} from {unit}")

    call()  # once before: what a first call imports is no part of a pack
    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return reentries, inherited


def _candidates() -> list[Candidate]:
    texts = paragraphs()[:40]
    return [
        Candidate(text=text, metadata={"source": module}, **({"scope_ids": ["team"]} if i % 7 == 3 else {}))
        for i, (module, text) in enumerate(texts)
    ]


CALLS = {
    **{f"{policy} with a query": (policy, QUERY, 300) for policy in POLICIES},
    "passages without a query (packs as prefix)": ("passages", None, 300),
    "truncate by head": ("truncate", None, 300),
    "the floor (a budget below the first item)": ("prefix", QUERY, 60),
}


@pytest.mark.parametrize("case", CALLS)
def test_a_pack_enters_no_module_twice_and_inherits_no_method_across_files(case: str) -> None:
    """Under every policy, no call climbs back into a module on the stack, and no method of a
    class from another file runs (the passages choice, the ledger, the focus growth included)."""
    policy, query, budget = CALLS[case]
    packer = Packer(max_tokens=budget, policy=policy, reader=Reader(scopes={"team": Scope(name="team")}))
    candidates = _candidates()
    result = packer.recall(candidates, query=query)
    assert result.report.items_selected >= 1
    assert _trace(lambda: packer.recall(candidates, query=query)) == ([], [])


def test_the_trace_sees_a_return_up_the_stack_and_an_inherited_method() -> None:
    """The trace is not vacuous: a callback handed down that climbs back into the module that
    handed it, and a method inherited from another file, are both seen (here through the
    tokenizer plug, counted as its own two files)."""
    global _unit
    whole = _unit

    def per_file(path: str) -> str | None:
        p = Path(path)
        return p.relative_to(PACKAGE).as_posix() if p.is_relative_to(PACKAGE) else None

    _unit = per_file
    try:
        packer = Packer(max_tokens=300, policy="skip")
        # Counts of these texts cached by an earlier test in this process would skip the plug.
        packer.tokenizer_used._cache.clear()
        reentries, inherited = _trace(lambda: packer.recall(_candidates(), query=QUERY))
    finally:
        _unit = whole
    assert any("tokenizers/base.py" in r for r in reentries)
    assert any("from packing/tokenizers/base.py" in i for i in inherited)


def test_a_policy_that_needs_the_query_packs_as_prefix_without_one_and_says_so() -> None:
    """passages without a query: the prefix walk's result, with the note and the policy said."""
    candidates = _candidates()[:6]
    alone = Packer(max_tokens=300, policy="prefix").recall(candidates)
    fell = Packer(max_tokens=300, policy="passages").recall(candidates)
    assert fell.to_markdown() == alone.to_markdown()
    assert fell.report.policy == "prefix"
    assert fell.report.notes == (
        "policy 'passages' needs the query, and this call had none: it packed as 'prefix'",
    )


@pytest.mark.parametrize("policy", POLICIES)
def test_the_whole_fits_whatever_the_policy(policy: str) -> None:
    """Walk.fit's guarantee: the exact count of the block is within the budget, and every
    candidate is accounted for once."""
    candidates = _candidates()
    for budget in (40, 100, 333, 1000):
        result = Packer(max_tokens=budget, policy=policy, reader=Reader()).recall(candidates, query=QUERY)
        assert result.report.tokens_used <= budget
        assert Packer(max_tokens=budget).tokenizer_used.count(result.to_markdown()) == result.report.tokens_used
        report = result.report
        assert report.items_selected + report.items_dropped + report.items_withheld == len(candidates)
