"""The policies: how a walk chooses what to keep, each one object, registered by name in one table.

A policy is an object with one method, :meth:`PackingPolicy.choose`. Given a read-only
:class:`~recallpack.packing.choosing.door.PolicyView` of one call's walk (the candidates in merit
order as the gate shows them, what is left of each budget, the price of an item), the query and the
embedding, it decides: it yields (or returns a list of) decisions, which the walk
(:mod:`recallpack.packing.choosing.walk`) applies through the ledger's one door, checked and held to every
cap, then makes the whole fit and applies the floor. recallpack's own policies apply theirs
through that same door as they make them.

:data:`BUILT_IN` is the table: the ``policy`` setting, the CLI's ``--policy`` choices and their
help are read from it. A fifth policy is one module and one line here, or, from outside the
package, one call of :func:`register_policy`, or one entry point in the group
``recallpack.policies`` of an installed package (:mod:`recallpack.packing.plugins`), which makes
it a choice of ``recallpack pack --policy`` and ``recallpack serve --policy`` too.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Protocol, cast

from recallpack.packing.choosing.door import PolicyView
from recallpack.packing.choosing.embedding import EmbedFn
from recallpack.packing.choosing.in_order import Prefix, Skip, Truncate
from recallpack.packing.choosing.ledger import Counted
from recallpack.packing.choosing.passages import Passages
from recallpack.packing.decisions import Decision
from recallpack.packing.errors import ConfigError, PolicyError
from recallpack.packing.plugins import POLICY_GROUP, Plugin, plugins

__all__ = [
    "PackingPolicy", "BUILT_IN", "POLICIES", "Policy", "register_policy", "unregister_policy",
    "policy_named", "policy_names", "policy_help", "check_policy", "is_built_in", "table_version",
]

#: A policy's name, as the ``policy`` setting takes it: one of :func:`policy_names`.
Policy = str


class PackingPolicy(Protocol):
    """How a walk chooses what to keep: ``choose`` yields its decisions."""

    #: One line saying what the policy does with an item that does not fit (the CLI's help).
    summary: str
    #: Whether it needs the call's query: without one, the walk packs as ``prefix`` and says so.
    needs_query: bool

    def choose(
        self, view: PolicyView, query: str | None, embed: EmbedFn | None
    ) -> Iterable[Decision] | Counted | None:
        """Decide each candidate reached, in rank order (:mod:`recallpack.packing.decisions`):
        yield the decisions, or return a list of them; the walk applies each and the ``view``
        shows its effect. (recallpack's own apply theirs as they make them and return None, or
        the last exact count and block.) A policy may also have ``refine(view, used)``: shown the
        exact count of its choice, it returns decisions that replace it, or None to keep it."""
        ...


#: The built-in policies, by name, in the order the docs and the CLI list them.
BUILT_IN: dict[str, PackingPolicy] = {
    "prefix": Prefix(),
    "skip": Skip(),
    "truncate": Truncate(),
    "passages": Passages(),
}
_BUILT_IN_IDS = frozenset(map(id, BUILT_IN.values()))
#: The built-in policies' names.
POLICIES: tuple[str, ...] = tuple(BUILT_IN)
#: Replaced, never changed in place, so a reader iterating it under threads sees one version.
_TABLE: dict[str, PackingPolicy] = dict(BUILT_IN)
#: Each entry point skipped when the table was first read, by name, and why (for check_policy).
_SKIPPED: dict[str, str] = {}
_lock = threading.RLock()
_loaded = False
#: Bumped by every change to the table: what caches a policy object keys on it.
_version = 0


def _shape(name: str, policy: object) -> str | None:
    """What is wrong with ``policy`` as a policy, in words, or None."""
    wrong = []
    if not callable(getattr(policy, "choose", None)):
        wrong.append("choose(view, query, embed) is not a method")
    if not isinstance(getattr(policy, "summary", None), str):
        wrong.append("its summary is not a str")
    if not isinstance(getattr(policy, "needs_query", None), bool):
        wrong.append("its needs_query is not a bool")
    if not wrong:
        return None
    return (
        f"policy {name!r} is not a policy: {'; '.join(wrong)} (a policy has a summary, a str, "
        "needs_query, a bool, and choose(view, query, embed))"
    )


def _name_refused(name: object) -> str | None:
    if not isinstance(name, str) or not name.isidentifier():
        return f"a policy's name must be an identifier such as 'mmr', got {name!r}"
    if name in BUILT_IN:
        return f"policy {name!r} is built in; register yours under another name"
    if name in _TABLE:
        return f"a policy named {name!r} is registered already; unregister_policy({name!r}) first"
    return None


def _refused(name: str, policy: object) -> str | None:
    return _name_refused(name) or _shape(name, policy)


def _table() -> dict[str, PackingPolicy]:
    """The table, with the policies installed packages declare under the entry-point group
    ``recallpack.policies`` (read once, the first time the table is read)."""
    global _TABLE, _loaded, _version
    if not _loaded:
        with _lock:
            if not _loaded:
                for found in plugins(POLICY_GROUP, _refused):
                    if isinstance(found, Plugin):
                        _TABLE = {**_TABLE, found.name: cast(PackingPolicy, found.value)}
                    else:
                        _SKIPPED[found[0]] = found[1]
                _version += 1
                _loaded = True
    return _TABLE


def table_version() -> int:
    """A number that changes whenever the table does: a cache holding policy objects keys on it,
    so that a name registered again takes effect."""
    _table()
    return _version


def register_policy(name: str, policy: PackingPolicy) -> None:
    """Make ``policy`` the one the ``policy`` setting names ``name``, in this process (a worker
    process registers it again: it is code, not a setting). A name that is taken, built in or
    registered (or installed: see :mod:`recallpack.packing.plugins`), is refused: unregister it
    first. The policy's shape is checked now: ``choose`` callable, ``summary`` a str,
    ``needs_query`` a bool.

    >>> from recallpack.packing.decisions import End
    >>> from recallpack.packing.results.result import Reason
    >>> class Nothing:
    ...     summary, needs_query = "keeps nothing", False
    ...     def choose(self, view, query, embed):
    ...         return [End(Reason.OVER_BUDGET, 0)] if len(view) else []
    >>> register_policy("nothing", Nothing())
    >>> "nothing" in policy_names()
    True
    >>> unregister_policy("nothing")
    """
    global _TABLE, _version
    with _lock:
        _table()
        refused = _refused(name, policy)
        if refused is not None:
            raise ConfigError(refused, field="policy")
        _TABLE = {**_TABLE, name: policy}
        _version += 1


def unregister_policy(name: str) -> None:
    """Take back :func:`register_policy`, or an installed policy (a built-in stays)."""
    global _TABLE, _version
    with _lock:
        _table()
        if name not in BUILT_IN and name in _TABLE:
            _TABLE = {known: policy for known, policy in _TABLE.items() if known != name}
            _version += 1


def policy_names() -> tuple[str, ...]:
    """Every policy the ``policy`` setting takes: the built-ins, then those installed and
    registered."""
    return tuple(_table())


def is_built_in(policy: PackingPolicy) -> bool:
    """Whether ``policy`` is one of recallpack's own (whose recorded costs are the view's)."""
    return id(policy) in _BUILT_IN_IDS  # BUILT_IN holds them for the process's life: ids stay theirs


def policy_help() -> str:
    """Each policy's name and summary, as a command line's help says them."""
    return "; ".join(f"{name}: {policy.summary}" for name, policy in _table().items())


def policy_named(name: str) -> PackingPolicy:
    """The policy registered as ``name``."""
    return _table()[check_policy(name)]


def check_policy(value: object) -> str:
    """``value`` if it names a policy, else a PolicyError naming the field and the choices (and,
    for an installed policy that was skipped, why)."""
    table = _table()
    if not isinstance(value, str) or value not in table:
        why = f" ({_SKIPPED[value]})" if isinstance(value, str) and value in _SKIPPED else ""
        raise PolicyError(
            f"policy={value!r} is not a policy{why}; use one of: {', '.join(table)}", field="policy"
        )
    return value
