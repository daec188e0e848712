"""How ``recallpack serve --retriever`` wraps a host's retriever: what each host's reader's
``read_retriever`` says (:mod:`recallpack.packing.hosts`), so that the server names no host.

Imports no host framework: a :class:`Served`'s ``wrap`` imports its adapter when called.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["Served", "comes_from"]


@dataclass(frozen=True)
class Served:
    """A host's retriever as the server takes it: the host's ``label`` as a sentence says it
    ("LangChain"), and ``wrap(**settings)``, the budgeted retriever over it (with ``.packer`` and
    ``async arecall(query, max_tokens=..., reader=...)``)."""

    label: str
    wrap: Callable[..., Any]


def comes_from(obj: object, package: str) -> bool:
    """Whether ``obj``'s class, or one it derives from, is defined in ``package`` (no import)."""
    return any(kind.__module__.startswith(f"{package}.") for kind in type(obj).__mro__)
