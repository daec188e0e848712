"""What both hosts' token-window splitters promise alike (they share WindowSplitting): bad
settings refused by name, pickling and deep copies that split the same, a docstring that runs."""

from __future__ import annotations

import copy
import doctest
import importlib
import pickle
from typing import Any

import pytest

from recallpack import BudgetError, ConfigError, get_tokenizer
from recallpack.testing import stdlib_docs

#: (module, class, the host's own name for the overlap, which recallpack refuses by name)
SPLITTERS = [
    pytest.param("recallpack.adapters.langchain.splitter", "TokenWindowSplitter", "overlap", id="langchain"),
    pytest.param("recallpack.adapters.llamaindex.splitter", "TokenWindowNodeParser", "chunk_overlap", id="llamaindex"),
]


def splitter_class(module: str, name: str) -> Any:
    pytest.importorskip("langchain_text_splitters" if "langchain" in module else "llama_index.core")
    return getattr(importlib.import_module(module), name)


@pytest.mark.parametrize(("module", "name", "host_overlap"), SPLITTERS)
def test_bad_settings_are_refused(module: str, name: str, host_overlap: str) -> None:
    """Bad or unknown settings raise recallpack's errors, naming the setting or the closest valid name."""
    cls = splitter_class(module, name)
    cases: list[tuple[dict[str, Any], type[Exception], str]] = [
        ({"max_tokens": 0}, BudgetError, "max_tokens"),
        ({"max_tokens": 10, "overlap_tokens": 10}, BudgetError, "overlap_tokens"),
        ({"chunk_size": 100}, ConfigError, "did you mean max_tokens"),
        ({host_overlap: 3}, ConfigError, "overlap_tokens"),
    ]
    for kwargs, error, match in cases:
        with pytest.raises(error, match=match):
            cls(**kwargs)


@pytest.mark.parametrize(("module", "name", "host_overlap"), SPLITTERS)
def test_pickles_and_deep_copies(module: str, name: str, host_overlap: str) -> None:
    """A splitter goes to a worker (pickle) or a copy and splits the same there."""
    cls = splitter_class(module, name)
    by_name = cls(max_tokens=30, overlap_tokens=3)
    instance = cls(max_tokens=30, overlap_tokens=3, tokenizer=get_tokenizer("o200k_base"))
    text = stdlib_docs()[2][1]
    assert len(by_name.split_text(text)) > 1
    assert pickle.loads(pickle.dumps(by_name)).split_text(text) == by_name.split_text(text)
    assert copy.deepcopy(instance).split_text(text) == instance.split_text(text)


@pytest.mark.parametrize(("module", "name", "host_overlap"), SPLITTERS)
def test_docstring_example_runs(module: str, name: str, host_overlap: str) -> None:
    """The module's >>> example passes."""
    splitter_class(module, name)
    outcome = doctest.testmod(importlib.import_module(module))
    assert outcome.failed == 0 and outcome.attempted > 0
