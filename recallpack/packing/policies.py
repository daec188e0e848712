"""The policies: how a walk chooses what to keep, each one object, registered by name in one table.

A policy is an object with one method, :meth:`PackingPolicy.choose`. Given one call's
:class:`~recallpack.packing.ledger.Ledger` (the candidates in merit order, the settings, what is
left of each budget), the query and the embedding, it decides, and records every decision in the
ledger; one that corrects its choice with the exact count of what the model is shown (as
``passages`` does) returns that count. The walk (:mod:`recallpack.packing.walk`) calls it
once, then makes the whole fit and applies the floor through the ledger.

:data:`BUILT_IN` is the table: the ``policy`` setting, the CLI's ``--policy`` choices and their
help are read from it. A fifth policy is one module and one line here, or, from outside the
package, one call of :func:`register_policy`.
"""

from __future__ import annotations

from typing import Protocol

from recallpack.packing.embedding import EmbedFn
from recallpack.packing.errors import ConfigError, PolicyError
from recallpack.packing.in_order import Prefix, Skip, Truncate
from recallpack.packing.ledger import Counted, Ledger
from recallpack.packing.passages import Passages

__all__ = [
    "PackingPolicy", "BUILT_IN", "POLICIES", "Policy", "register_policy", "unregister_policy",
    "policy_named", "policy_names", "policy_help", "check_policy", "is_built_in",
]

#: A policy's name, as the ``policy`` setting takes it: one of :func:`policy_names`.
Policy = str


class PackingPolicy(Protocol):
    """How a walk chooses what to keep: ``choose`` records its decisions in the ledger."""

    #: One line saying what the policy does with an item that does not fit (the CLI's help).
    summary: str
    #: Whether it needs the call's query: without one, the walk packs as ``prefix`` and says so.
    needs_query: bool

    def choose(self, ledger: Ledger, query: str | None, embed: EmbedFn | None) -> Counted | None:
        """Decide, recording every decision in ``ledger``. A policy that corrects its choice
        with the exact count of what the model is shown returns the last count and block; one
        that does not returns None (the walk counts)."""
        ...


#: The built-in policies, by name, in the order the docs and the CLI list them.
BUILT_IN: dict[str, PackingPolicy] = {
    "prefix": Prefix(),
    "skip": Skip(),
    "truncate": Truncate(),
    "passages": Passages(),
}
#: The built-in policies' names.
POLICIES: tuple[str, ...] = tuple(BUILT_IN)
_TABLE: dict[str, PackingPolicy] = dict(BUILT_IN)


def register_policy(name: str, policy: PackingPolicy) -> None:
    """Make ``policy`` the one the ``policy`` setting names ``name``, in this process (a worker
    process registers it again: it is code, not a setting). A built-in name cannot be taken.

    >>> class Nothing:
    ...     summary, needs_query = "keeps nothing", False
    ...     def choose(self, ledger, query, embed):
    ...         return None
    >>> register_policy("nothing", Nothing())
    >>> "nothing" in policy_names()
    True
    >>> unregister_policy("nothing")
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise ConfigError(
            f"a policy's name must be an identifier such as 'mmr', got {name!r}", field="policy"
        )
    if name in BUILT_IN:
        raise ConfigError(f"policy {name!r} is built in; register yours under another name", field="policy")
    missing = [part for part in ("summary", "needs_query", "choose") if not hasattr(policy, part)]
    if missing:
        raise ConfigError(
            f"policy {name!r} has no {', '.join(missing)}: a policy has a summary (a str), "
            "needs_query (a bool) and choose(ledger, query, embed)",
            field="policy",
        )
    _TABLE[name] = policy


def unregister_policy(name: str) -> None:
    """Take back :func:`register_policy` (a built-in stays)."""
    if name not in BUILT_IN:
        _TABLE.pop(name, None)


def policy_names() -> tuple[str, ...]:
    """Every policy the ``policy`` setting takes: the built-ins, then those registered."""
    return tuple(_TABLE)


def is_built_in(policy: PackingPolicy) -> bool:
    """Whether ``policy`` is one of recallpack's own (whose recorded costs are the view's)."""
    return any(policy is built_in for built_in in BUILT_IN.values())


def policy_help() -> str:
    """Each policy's name and summary, as a command line's help says them."""
    return "; ".join(f"{name}: {policy.summary}" for name, policy in _TABLE.items())


def policy_named(name: str) -> PackingPolicy:
    """The policy registered as ``name``."""
    return _TABLE[check_policy(name)]


def check_policy(value: object) -> str:
    """``value`` if it names a policy, else a PolicyError naming the field and the choices."""
    if not isinstance(value, str) or value not in _TABLE:
        raise PolicyError(
            f"policy={value!r} is not a policy; use one of: {', '.join(_TABLE)}", field="policy"
        )
    return value
