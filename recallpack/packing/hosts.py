"""The host frameworks whose objects the core takes, each read by an adapter module named here.

``tokenizer=`` takes a LangChain language model or a Hugging Face tokenizer, ``embed=`` a
LangChain or LlamaIndex embedding, and ``budget_for`` a LangChain chat model or a LlamaIndex LLM.
The core names none of their methods: each host's *reader*, an adapter module that imports no
host framework, names them and hands the core what it knows (a Tokenizer, a Similarity, a
ModelWindow). This table is the one place outside the adapters that names those modules, and
only by string: a reader is imported the first time the core meets an object it does not know
itself (never by ``import recallpack``), and once.

A reader module defines any of ``read_tokenizer``, ``read_embedding`` and ``read_model``, each
``obj -> what the core takes``, or None when ``obj`` is not of its kind, and ``EMBEDDINGS``, what
its ``read_embedding`` takes, in an error message's words.

An object is offered first to the hosts its class comes from (a base class's top-level package
is one of the host's: a look at ``type(obj).__mro__``, no import), then, since hosts' objects are
recognised by their shape, to the others in the table's order (a duck-typed stand-in, a subclass
in the caller's own package), whose readers are imported then. Functions, methods and builtin
values are the core's own and are never offered. A new host is one entry, registered on
purpose and undone the same way::

    register_host(Host("haystack", packages=("haystack",), reader="recallpack.adapters._haystack_reader"))
    ...
    unregister_host("haystack")

or installed: a package's entry point in the group ``recallpack.hosts`` naming a :class:`Host` of
the same name is registered the first time the table is read (:mod:`recallpack.packing.plugins`).
A taken name, or a Host whose reader cannot be found, is refused (a ConfigError on ``host``; an
installed one is skipped with a warning naming its distribution).

Every switch on a host reads this table: a reader may also define ``read_depth`` (how many
results a retriever returns by its own settings: :func:`recallpack.adapters.shared.depth.own_depth`) and
``read_retriever`` (how ``recallpack serve --retriever`` wraps one of its retrievers).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import threading
from collections.abc import Collection
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Literal, cast

from recallpack.packing.errors import ConfigError
from recallpack.packing.plugins import HOST_GROUP, Plugin, plugins

__all__ = [
    "Host", "HOSTS", "Capability", "hosts", "register_host", "unregister_host", "read_host", "accepted",
]

#: What a reader may read: a tokenizer, an embedding, a model's window (``budget_for``), how many
#: results a retriever returns by its own settings (``depth``), and how ``recallpack serve
#: --retriever`` wraps a retriever (``retriever``: a :class:`recallpack.adapters.shared.served.Served`).
Capability = Literal["tokenizer", "embedding", "model", "depth", "retriever"]


@dataclass(frozen=True)
class Host:
    """A host framework: its ``name``, the top-level ``packages`` its classes come from (a
    package also claims its ``name_*`` siblings: ``langchain`` claims ``langchain_openai``), and
    its ``reader``, the module (by its import name) that reads its objects."""

    name: str
    packages: tuple[str, ...]
    reader: str
    _siblings: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in ("name", "reader"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise ConfigError(f"Host({name}={value!r}) must be a non-empty str", field=name)
        packages = self.packages
        if isinstance(packages, str) or not isinstance(packages, (tuple, list)) or not packages or not all(
            isinstance(package, str) and package and "." not in package for package in packages
        ):
            raise ConfigError(
                f"Host(packages={packages!r}) must be a tuple of top-level package names, such as "
                "('haystack',)",
                field="packages",
            )
        object.__setattr__(self, "packages", tuple(packages))
        object.__setattr__(self, "_siblings", tuple(f"{package}_" for package in packages))

    def claims(self, kind: type) -> bool:
        """Whether ``kind``, or a class it derives from, comes from one of this host's packages."""
        return self.claims_any(_packages_of(kind))

    def claims_any(self, packages: Collection[str]) -> bool:
        """Whether one of the top-level ``packages`` is one of this host's."""
        return any(top in self.packages or top.startswith(self._siblings) for top in packages)


#: The hosts recallpack reads out of the box, in the order a duck-typed object is offered to them.
HOSTS: tuple[Host, ...] = (
    Host("langchain", ("langchain",), "recallpack.adapters.langchain.reader"),
    Host("llamaindex", ("llama_index",), "recallpack.adapters.llamaindex.reader"),
    Host("huggingface", ("tokenizers", "transformers"), "recallpack.adapters.shared.hugging_face"),
)

_lock = threading.RLock()
_hosts: tuple[Host, ...] = HOSTS
_loaded = False
#: Each reader module as imported, once, or why it could not be.
_readers: dict[str, ModuleType | ImportError] = {}


def _shape(name: str, host: object) -> str | None:
    """What is wrong with ``host`` as a host called ``name``, in words, or None."""
    if not isinstance(host, Host):
        return f"register_host() takes a Host, got {type(host).__name__}"
    if any(known.name == host.name for known in _hosts):
        return f"a host named {host.name!r} is registered already; unregister_host({host.name!r}) first"
    if host.name != name:
        return f"the entry point is named {name!r} and its Host {host.name!r}; name them alike"
    try:
        found = importlib.util.find_spec(host.reader) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        return (
            f"Host(reader={host.reader!r}) names no module that can be imported; give the import "
            "name of the module that defines read_tokenizer, read_embedding or read_model"
        )
    return None


def _table() -> tuple[Host, ...]:
    """The hosts, with those installed packages declare under the entry-point group
    ``recallpack.hosts`` after the built-ins (read once, the first time the table is read)."""
    global _hosts, _loaded
    if not _loaded:
        with _lock:
            if not _loaded:
                for found in plugins(HOST_GROUP, _shape):
                    if isinstance(found, Plugin):
                        _hosts = (*_hosts, cast(Host, found.value))
                _loaded = True
    return _hosts


def hosts() -> tuple[Host, ...]:
    """The hosts objects are offered to now: :data:`HOSTS`, those installed (entry points in the
    group ``recallpack.hosts``), and those registered since."""
    return _table()


def register_host(host: Host) -> Host:
    """Offer objects to ``host`` too, after the hosts already known, until :func:`unregister_host`.
    Its reader module must exist (it is found now, imported only when first needed)."""
    global _hosts
    with _lock:
        _table()
        refused = _shape(host.name if isinstance(host, Host) else "", host)
        if refused is not None:
            raise ConfigError(refused, field="host")
        _hosts = (*_hosts, host)
    return host


def unregister_host(name: str) -> None:
    """Stop offering objects to the host called ``name`` (one of :data:`HOSTS` too)."""
    global _hosts
    with _lock:
        _table()
        kept = tuple(host for host in _hosts if host.name != name)
        if len(kept) == len(_hosts):
            raise ConfigError(
                f"no host named {name!r} is registered; the hosts are "
                f"{', '.join(host.name for host in _hosts) or 'none'}",
                field="host",
            )
        _hosts = kept


def _reader(host: Host) -> ModuleType | ImportError:
    found = _readers.get(host.reader)
    if found is None:
        try:
            found = importlib.import_module(host.reader)
        except ImportError as exc:  # a reader that needs its framework, which is not installed
            found = exc
        found = _readers.setdefault(host.reader, found)
    return found


def _packages_of(kind: type) -> set[str]:
    """The top-level packages ``kind`` and the classes it derives from come from."""
    return {base.__module__.partition(".")[0] for base in kind.__mro__}


def _offered(obj: object) -> list[Host]:
    """The hosts ``obj`` is offered to, in order: none for what the core knows itself."""
    if inspect.isroutine(obj) or type(obj).__module__ == "builtins":
        return []
    known, packages = _table(), _packages_of(type(obj))
    claimed = [host for host in known if host.claims_any(packages)]
    return [*claimed, *(host for host in known if all(host is not own for own in claimed))]


def read_host(capability: Capability, obj: object) -> Any:
    """What the first host whose reader knows ``obj`` makes of it as a ``capability``, or None
    when no host knows it (the core then reads it itself, or says what it takes)."""
    for host in _offered(obj):
        reader = _reader(host)
        if isinstance(reader, ImportError):
            if host.claims(type(obj)):
                raise reader
            continue  # its framework is not installed, so ``obj`` is none of its objects
        read = getattr(reader, f"read_{capability}", None)
        found = read(obj) if read is not None else None
        if found is not None:
            return found
    return None


def accepted(attribute: str) -> list[str]:
    """What every host's reader says it takes (its ``attribute``, such as ``EMBEDDINGS``), for an
    error message: the readers are imported for it."""
    said = []
    for host in _table():
        text = getattr(_reader(host), attribute, None)
        if isinstance(text, str):
            said.append(text)
    return said
