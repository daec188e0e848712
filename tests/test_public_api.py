"""The public surface: pinned names, one error tree, and no host framework on import."""

from __future__ import annotations

import importlib
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import recallpack

#: Each public module's ``__all__``, exactly: the face, the allowance and each adapter module
#: with a reference page or a documented import (docs/reference/, docs/token-windows.md). A name
#: added or taken away fails here until this pin, and CHANGELOG.md, say so.
PUBLIC_NAMES = {
    "recallpack": [
        "BudgetError", "Candidate", "CandidateError", "ConfigError", "DEFAULT_MAX_TOKENS", "Evidence",
        "Fused", "LaneError", "LaneKind", "MAX_TOKENS_CEILING", "Outcome", "POLICIES", "PackReport",
        "Packer", "Policy", "PolicyError", "Provenance", "Reader", "Reason", "RecallResult",
        "RecallpackError", "RecallpackWarning", "ReceiptError", "Scope", "TemplateError", "Tokenizer",
        "TokenizerError", "Trace", "TraceEntry", "UpstreamError", "Window", "__version__", "budget_for",
        "chunk_size_for", "count_tokens", "fuse", "get_tokenizer", "pack", "recall", "recall_many",
        "resolve_encoding", "split_token_windows", "token_windows", "truncate_to_tokens",
    ],
    "recallpack.allowance": [
        "Allowance", "Assembly", "Block", "CONTEXT_FIELDS", "ContextSource", "KEY_ENV", "RECEIPT_KIND",
        "Recaller", "Receipt", "ReceiptContext", "ReceiptKey", "Remaining", "Withheld", "WithheldReason",
        "arecall_of", "arecall_remaining", "as_allowance", "as_recaller", "as_remaining", "assemble",
        "capped_overrides", "check_receipt", "check_receipt_settings", "coerce_receipt", "context_for",
        "digest_of", "issue_receipt", "looks_like_receipt", "omission_texts", "recall_remaining",
        "receipt_for", "resolve_context", "resolve_key", "verify",
    ],
    "recallpack.adapters.langchain": [
        "BudgetCompressor", "BudgetedRetriever", "EvidenceRenderer", "REPORT_EVENT", "TokenWindowSplitter",
        "render_evidence",
    ],
    "recallpack.adapters.langchain.memory": [
        "AssembledMessages", "DEFAULT_MARKER", "DEFAULT_TOOL_NAME", "EvidenceAllowanceMiddleware",
        "NO_MATCH", "Recaller", "aassemble_messages", "arecall_remaining", "assemble_messages",
        "evidence_allowance", "memory_search_tool", "recall_remaining",
    ],
    "recallpack.adapters.langchain.splitter": ["TokenWindowSplitter"],
    "recallpack.adapters.llamaindex": [
        "BudgetPostprocessor", "BudgetedRetriever", "EvidenceQueryEngine", "REPORT_KEY", "RESPONSE_MODES",
        "RecallPackedEvent", "TokenWindowNodeParser", "report_of",
    ],
    "recallpack.adapters.llamaindex.splitter": ["TokenWindowNodeParser"],
    "recallpack.adapters.mcp": [
        "DEFAULT_OVERLAP_TOKENS", "DEFAULT_WINDOW_TOKENS", "MAX_QUERY_CHARS", "ReaderVerifier",
        "RecallSource", "TOOL_NAME", "build_server", "check_arguments", "docs_source", "http_app",
        "load_factory", "retriever_source", "serve",
    ],
}  # fmt: skip

#: The host framework each adapter module needs (its extra): without it, its pin is skipped.
NEEDS = {
    "recallpack.adapters.langchain": "langchain_core",
    "recallpack.adapters.langchain.memory": "langchain",
    "recallpack.adapters.langchain.splitter": "langchain_core",
    "recallpack.adapters.llamaindex": "llama_index.core",
    "recallpack.adapters.llamaindex.splitter": "llama_index.core",
    "recallpack.adapters.mcp": "mcp",
}


@pytest.mark.parametrize("module", sorted(PUBLIC_NAMES))
def test_all_is_pinned(module: str) -> None:
    """A public module's __all__ is exactly its pinned names, each once, and each resolves
    without a DeprecationWarning (no moved name is exported)."""
    if module in NEEDS:
        pytest.importorskip(NEEDS[module])
    public = importlib.import_module(module)
    assert sorted(public.__all__) == PUBLIC_NAMES[module]
    assert len(public.__all__) == len(set(public.__all__))
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        missing = [name for name in public.__all__ if not hasattr(public, name)]
    assert missing == []


def test_the_pins_cover_every_module_with_a_reference_page() -> None:
    """Each module docs/reference/ renders (``::: module``) has its __all__ pinned above."""
    reference = Path(__file__).resolve().parents[1] / "docs" / "reference"
    rendered = {
        line.removeprefix(":::").strip()
        for page in reference.glob("*.md")
        for line in page.read_text().splitlines()
        if line.startswith(":::")
    }
    assert len(rendered) >= 6 and rendered <= set(PUBLIC_NAMES), rendered - set(PUBLIC_NAMES)


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

    from recallpack.packing import candidate, fusion, limits, packer, scopes
    from recallpack.packing.counting import model_budget
    from recallpack.packing.reading import text
    from recallpack.packing.results import result
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

    from recallpack.packing import scopes
    from recallpack.packing.results import result

    for name in ("Reader", "Scope"):
        with pytest.warns(DeprecationWarning, match=rf"recallpack\.packing\.scopes\.{name}"):
            moved = getattr(result, name)
        assert moved is getattr(scopes, name) is getattr(recallpack, name)
    assert recallpack.Reader.__module__ == "recallpack.packing.scopes"
    with pytest.raises(AttributeError):
        result.NoSuchName  # type: ignore[attr-defined]  # noqa: B018


def test_budget_for_keeps_its_old_path_for_one_release() -> None:
    """recallpack.packing.sizing.budget_for still works, with a DeprecationWarning naming its new home."""
    import recallpack
    from recallpack.packing import sizing

    with pytest.warns(DeprecationWarning, match="recallpack.packing.counting.model_budget"):
        old = sizing.budget_for
    assert old is recallpack.budget_for
    assert old(8192, reserve_output=1000) == recallpack.budget_for(8192, reserve_output=1000)
