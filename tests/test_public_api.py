"""The public surface: pinned names, one error tree, and no host framework on import."""

from __future__ import annotations

import subprocess
import sys

import pytest

import recallpack


def test_all_is_pinned() -> None:
    """__all__ lists exactly the contract names (add here when adding to the API)."""
    assert set(recallpack.__all__) >= {
        "Candidate", "LaneKind", "Provenance", "Scope", "Reader", "pack", "recall", "RecallResult",
        "Evidence", "PackReport", "get_tokenizer", "count_tokens", "truncate_to_tokens",
        "split_token_windows", "RecallpackError", "BudgetError", "budget_for",
    }
    for name in recallpack.__all__:
        assert hasattr(recallpack, name), name


def test_every_error_is_a_recallpack_error() -> None:
    """All error classes share the RecallpackError root; setting errors are ValueErrors."""
    errors = [getattr(recallpack, n) for n in recallpack.__all__ if n.endswith("Error")]
    assert all(issubclass(e, recallpack.RecallpackError) for e in errors)
    assert issubclass(recallpack.BudgetError, ValueError)


def test_import_loads_no_host_framework() -> None:
    """import recallpack (and a recall, and the CLI) imports no host framework: no langchain_core,
    llama_index, nor the MCP SDK or BM25 of the mcp extra."""
    code = (
        "import sys, recallpack, recallpack.cli; recallpack.recall([recallpack.Candidate(text='x')]);"
        "print(sorted({m.split('.')[0] for m in sys.modules"
        " if m.startswith(('langchain', 'llama_index', 'bm25s', 'Stemmer')) or m.split('.')[0] == 'mcp'}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_docstring_examples_run() -> None:
    """The >>> examples in the public modules pass."""
    import doctest

    from recallpack.packing import candidate, fusion, limits, model_budget, packer, result, scopes, text
    from recallpack.packing.tokenizers import resolve as tokenizer

    for module in (recallpack, packer, fusion, candidate, result, scopes, tokenizer, model_budget, limits, text):
        outcome = doctest.testmod(module)
        assert outcome.failed == 0 and (outcome.attempted > 0 or module is result), module


def test_moved_allowance_names_warn_and_still_work() -> None:
    """recallpack.Allowance (moved to recallpack.allowance) works for one release, with a warning."""
    import pytest

    import recallpack.allowance

    with pytest.warns(DeprecationWarning, match=r"recallpack\.allowance\.Allowance"):
        moved = recallpack.Allowance  # type: ignore[attr-defined]
    assert moved is recallpack.allowance.Allowance
    assert "Allowance" not in recallpack.__all__
    with pytest.raises(AttributeError):
        recallpack.NoSuchName  # type: ignore[attr-defined]  # noqa: B018


def test_reader_and_scope_moved_to_scopes_warn_from_result() -> None:
    """Reader and Scope live in packing.scopes (inputs, not results); the old result path still
    gives the same classes for one release, with a DeprecationWarning naming the new home."""
    import pytest

    from recallpack.packing import result, scopes

    for name in ("Reader", "Scope"):
        with pytest.warns(DeprecationWarning, match=rf"recallpack\.packing\.scopes\.{name}"):
            moved = getattr(result, name)
        assert moved is getattr(scopes, name) is getattr(recallpack, name)
    assert recallpack.Reader.__module__ == "recallpack.packing.scopes"
    with pytest.raises(AttributeError):
        result.NoSuchName  # type: ignore[attr-defined]  # noqa: B018


def test_budget_for_keeps_its_old_path_for_one_release() -> None:
    """recallpack.packing.sizing.budget_for still works, with a DeprecationWarning naming the adapters."""
    import recallpack
    from recallpack.packing import sizing

    with pytest.warns(DeprecationWarning, match="recallpack.adapters.sizing"):
        old = sizing.budget_for
    assert old is recallpack.budget_for
    assert old(8192, reserve_output=1000) == recallpack.budget_for(8192, reserve_output=1000)
