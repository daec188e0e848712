"""Every public name that moved, in one table, with the release that removes it.

A module that lost names keeps one line, ``__getattr__ = moved_names(__name__)`` (Python looks a
missing module attribute up in that module's own ``__getattr__`` and nowhere else); what it lost
is listed here: each old module, each of its old names and the module the name lives in now.
Using an old name still works until :data:`REMOVED_IN`, with a DeprecationWarning that names the
new home; any other name is an AttributeError, as usual. A new home is imported only when an old
name is used, so this module imports nothing of the package (the core cannot import the adapters,
and one old core path, ``packing.sizing``, now points at them).

>>> import warnings
>>> from recallpack.packing import result, scopes
>>> with warnings.catch_warnings(record=True) as caught:
...     warnings.simplefilter("always")
...     reader_class = result.Reader
>>> str(caught[0].message).split("; ")[0]
'recallpack.packing.results.result.Reader moved to recallpack.packing.scopes.Reader'
>>> reader_class is scopes.Reader
True
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["REMOVED_IN", "Moves", "MOVED", "moved_names", "MOVED_MODULES", "moved_module"]

#: The release without the old names below. Each first warns in 0.2, the release after 0.1.0,
#: saying it goes "in the next release": this one.
REMOVED_IN = "0.3"


@dataclass(frozen=True)
class Moves:
    """The names one module lost: ``homes`` maps each old name to the module it lives in now;
    ``gone`` is what the warning says goes next release (the old name, the whole module, or an
    alias), in the words its users have seen since it moved."""

    homes: Mapping[str, str]
    gone: str = "the old name"
    removed_in: str = REMOVED_IN


_TOKENIZERS = "recallpack.packing.tokenizers"

#: Each old module → what it lost. The one place a moved name is kept working.
MOVED: Mapping[str, Moves] = {
    # The evidence allowance is its own namespace, recallpack.allowance.
    "recallpack": Moves(
        dict.fromkeys(
            ("Allowance", "Remaining", "Receipt", "Block", "Assembly", "Withheld", "WithheldReason",
             "assemble", "verify", "issue_receipt", "receipt_for"),
            "recallpack.allowance",
        )
    ),
    # The checks every module makes of settings live with the other checks.
    "recallpack.packing.packer": Moves(
        dict.fromkeys(
            ("unknown_setting", "refuse_unknown", "recallpack_error"), "recallpack.packing.validation"
        )
    ),
    # Who reads is an input of a recall, not part of its result.
    "recallpack.packing.results.result": Moves(
        dict.fromkeys(("Scope", "Reader", "PRIVATE"), "recallpack.packing.scopes")
    ),
    # budget_for's arithmetic is the core's (model_budget); the adapters read host models' windows.
    "recallpack.packing.sizing": Moves(
        dict.fromkeys(("budget_for", "DEFAULT_RESERVE_OUTPUT"), "recallpack.packing.counting.model_budget")
    ),
    # The module became the package recallpack.packing.tokenizers; the hosts' protocols went
    # to the adapters.
    "recallpack.packing.tokenizer": Moves(
        {
            **dict.fromkeys(
                ("Tokenizer", "TiktokenTokenizer", "HeuristicTokenizer", "ByteTokenizer", "CallableTokenizer",
                 "TokenizerSpec", "Resolution", "get_tokenizer", "resolve_encoding", "count_tokens",
                 "truncate_to_tokens", "DEFAULT_ENCODING", "fallback_advice", "is_known_encoding"),
                _TOKENIZERS,
            ),
            "split_token_windows": "recallpack.packing.counting.windows",
            "CountsTokens": "recallpack.adapters.shared.tokenizers",
            "EncodesText": "recallpack.adapters.shared.tokenizers",
        },
        gone="the old module",
    ),
    # An embedding is the caller's model, not a way of cutting.
    "recallpack.packing.choosing.cuts": Moves(
        dict.fromkeys(("embed_function", "CALLER_LOOP"), "recallpack.packing.choosing.embedding"),
        gone="this alias",
    ),
}  # fmt: skip


def moved_names(module: str) -> Callable[[str], Any]:
    """The ``__getattr__`` of ``module`` (its ``__name__``), for the names :data:`MOVED` says it
    lost: each still works, with a DeprecationWarning that points at the line that used it."""
    moves = MOVED[module]

    def __getattr__(name: str) -> Any:
        home = moves.homes.get(name)
        if home is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        warnings.warn(
            f"{module}.{name} moved to {home}.{name}; import it from there "
            f"({moves.gone} goes in the next release)",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(home), name)

    return __getattr__


_ADAPTERS = "recallpack.adapters"

#: Each old module path that became a module of a folder → that module. The old path keeps one
#: line, ``__getattr__ = moved_module(__name__)``, and every public name of the new module (its
#: ``__all__``) works through it until :data:`REMOVED_IN`, with a DeprecationWarning.
MOVED_MODULES: Mapping[str, str] = {
    # The adapters: one folder a host (langchain, langgraph, llamaindex, mcp), and what they share.
    f"{_ADAPTERS}.langchain_memory": f"{_ADAPTERS}.langchain.memory",
    f"{_ADAPTERS}.langchain_splitter": f"{_ADAPTERS}.langchain.splitter",
    f"{_ADAPTERS}.langgraph_memory": f"{_ADAPTERS}.langgraph.memory",
    f"{_ADAPTERS}.llamaindex_memory": f"{_ADAPTERS}.llamaindex.memory",
    f"{_ADAPTERS}.llamaindex_splitter": f"{_ADAPTERS}.llamaindex.splitter",
    f"{_ADAPTERS}.tokenizers": f"{_ADAPTERS}.shared.tokenizers",
    f"{_ADAPTERS}.sizing": f"{_ADAPTERS}.shared.sizing",
    # An allowance's arithmetic is the core's: the Packer takes it, and imports nothing above it.
    "recallpack.allowance.budget": "recallpack.packing.allowance",
    "recallpack.packing.windows": "recallpack.packing.counting.windows",
    "recallpack.packing.embedding": "recallpack.packing.choosing.embedding",
    "recallpack.packing.policies": "recallpack.packing.choosing.policies",
    "recallpack.packing.ledger": "recallpack.packing.choosing.ledger",
    "recallpack.packing.result": "recallpack.packing.results.result",
}


def moved_module(module: str) -> Callable[[str], Any]:
    """The ``__getattr__`` of the old module path ``module`` (its ``__name__``): each public name
    of its new home still works through it, with a DeprecationWarning that points at the line
    that used it. The new home is imported when a name is first used, not before."""
    home = MOVED_MODULES[module]

    def __getattr__(name: str) -> Any:
        target = importlib.import_module(home) if not name.startswith("_") else None
        if target is not None and home in MOVED and name in MOVED[home].homes:
            return getattr(target, name)  # a name the new home lost too: its own forward warns
        if target is None or name not in getattr(target, "__all__", ()):
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        warnings.warn(
            f"{module} moved to {home}; import {name} from there (the old module goes in the next release)",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(target, name)

    return __getattr__
