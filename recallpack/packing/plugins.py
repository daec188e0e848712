"""What installed packages add to recallpack's tables, found through entry points, as a plugin
system finds its plugins (pluggy's ``load_setuptools_entrypoints``).

A package declares, in its ``pyproject.toml``::

    [project.entry-points."recallpack.policies"]
    mmr = "my_package.mmr:MMR"

    [project.entry-points."recallpack.hosts"]
    haystack = "my_package.haystack:HOST"

The entry point's name is the name the table knows it by; what it names is the object (a policy,
a :class:`~recallpack.packing.hosts.Host`), or a class, which is called with no arguments. The
groups are read lazily, once a process, when a table is first read: ``import recallpack`` reads
none.

One broken plugin does not break recallpack: an entry point that cannot be loaded, or loads
something of the wrong shape, or takes a name already taken, is skipped with a
:class:`~recallpack.packing.errors.RecallpackWarning` naming the distribution, the entry point
and the fix, and the table remembers why, so that asking for that name later says it too.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points

from recallpack.packing.errors import RecallpackWarning

__all__ = ["POLICY_GROUP", "HOST_GROUP", "Plugin", "plugins", "skipped"]

#: The entry-point group whose entry points are policies.
POLICY_GROUP = "recallpack.policies"
#: The entry-point group whose entry points are hosts.
HOST_GROUP = "recallpack.hosts"


@dataclass(frozen=True)
class Plugin:
    """One entry point, loaded: its ``name``, what it names, and where it comes from."""

    name: str
    value: object
    origin: str


def _origin(point: EntryPoint) -> str:
    dist = point.dist
    where = f"distribution {dist.name!r}" if dist is not None else "an unnamed distribution"
    return f"{where}'s entry point {point.name} = {point.value} (group {point.group!r})"


def skipped(origin: str, why: str, group: str) -> str:
    """Warn that a plugin is skipped, naming it and the fix; the reason, for the table to keep."""
    said = f"{origin} is skipped: {why}; fix or uninstall that distribution"
    warnings.warn(f"recallpack: {said}", RecallpackWarning, stacklevel=4)
    return said


def plugins(group: str, check: Callable[[str, object], str | None]) -> Iterator[Plugin | tuple[str, str]]:
    """Each entry point in ``group``, loaded and checked: a :class:`Plugin`, or, for one that is
    skipped, its name and why (it has been warned about). ``check(name, value)`` says what is
    wrong with a loaded value, or None."""
    for point in entry_points(group=group):
        origin = _origin(point)
        try:
            value = point.load()
            if isinstance(value, type):
                value = value()
        except Exception as exc:  # a plugin's own import error, of any kind, must not break recallpack
            yield point.name, skipped(origin, f"loading it raised {type(exc).__name__}: {exc}", group)
            continue
        wrong = check(point.name, value)
        if wrong is not None:
            yield point.name, skipped(origin, wrong, group)
            continue
        yield Plugin(point.name, value, origin)
