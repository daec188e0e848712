"""LangGraph store items as LangChain Documents, and the namespace one call searches.

What :class:`recallpack.adapters.langgraph.StoreRetriever` translates: a namespace (a template
whose ``{fields}`` the running graph fills in), an item's text read from its value, its scope ids
read from its namespace, and its citation (``store://users/alice/facts#key``). Imports LangChain's
``Document`` and LangGraph's runtime only.
"""

from __future__ import annotations

import functools
import re
import string
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Union
from urllib.parse import quote

from langchain_core.documents import Document
from langchain_core.runnables.config import var_child_runnable_config

from recallpack.packing.errors import ConfigError, UpstreamError
from recallpack.packing.validation import is_int

__all__ = [
    "TextOf",
    "ScopeFrom",
    "check_namespace",
    "check_scope_from",
    "check_text_field",
    "fields_of",
    "filled_namespace",
    "item_document",
    "running_store",
    "store_uri",
]

#: Which field of an item's value is its text: a key, or a function of the value.
TextOf = Union[str, Callable[[dict[str, Any]], str]]
#: An item's scope ids from its namespace: an index into it, or a function of it.
ScopeFrom = Union[int, Callable[[tuple[str, ...]], Union[str, Sequence[str], None]]]


def check_namespace(value: object) -> tuple[str, ...]:
    """A namespace prefix as LangGraph takes it: a tuple of non-empty labels with no ``.`` (each
    may hold ``{field}`` placeholders, plain names only, filled per call)."""
    if isinstance(value, str) or not isinstance(value, (tuple, list)):
        raise ConfigError(
            f"namespace={value!r:.60} must be a tuple of labels, such as ('users', '{{user_id}}', 'facts')",
            field="namespace",
        )
    for label in value:
        if not isinstance(label, str) or not label or "." in label:
            raise ConfigError(
                f"namespace={value!r:.80} holds {label!r:.40}; each label must be a non-empty str "
                "without '.' (LangGraph's rule for namespace labels)",
                field="namespace",
            )
        fields_of((label,))  # a malformed placeholder fails here, not at the first search
    return tuple(value)


def fields_of(namespace: tuple[str, ...]) -> list[str]:
    """The ``{field}`` names the labels of ``namespace`` hold, in order."""
    names = []
    for label in namespace:
        try:
            parsed = list(string.Formatter().parse(label))
        except ValueError as exc:  # an unmatched brace
            raise ConfigError(
                f"namespace label {label!r} cannot be filled: {exc}", field="namespace"
            ) from None
        for _, name, spec, conversion in parsed:
            if name is None:
                continue
            if not name.isidentifier() or spec or conversion:
                raise ConfigError(
                    f"namespace label {label!r} holds {{{name}}}; a placeholder is a plain name, "
                    "such as {user_id}, with no format spec",
                    field="namespace",
                )
            names.append(name)
    return names


def _running() -> tuple[Any, Mapping[str, Any]]:
    """The running graph's runtime (None outside one) and the call's ``configurable``."""
    config = var_child_runnable_config.get() or {}
    configurable = config.get("configurable") or {}
    try:
        from langgraph.runtime import get_runtime

        runtime = get_runtime()
    except (ImportError, RuntimeError):  # not inside a graph's run
        runtime = None
    return runtime, configurable


def running_store() -> Any:
    """The store of the graph this call runs in, or None."""
    runtime, _ = _running()
    return getattr(runtime, "store", None)


def _field(name: str, context: object, configurable: Mapping[str, Any]) -> object:
    if isinstance(context, Mapping) and name in context:
        return context[name]
    if context is not None and not isinstance(context, Mapping) and hasattr(context, name):
        return getattr(context, name)
    return configurable.get(name)


def filled_namespace(namespace: tuple[str, ...]) -> tuple[str, ...]:
    """``namespace`` with each ``{field}`` filled from the running graph: its runtime context
    (``create_agent(context_schema=...)``, ``invoke(..., context=...)``), else the call's
    ``config["configurable"]``. A field found in neither, or whose value cannot be a label,
    is a ConfigError naming it: no search runs under a namespace only partly filled."""
    if not fields_of(namespace):
        return namespace
    runtime, configurable = _running()
    context = getattr(runtime, "context", None)
    values: dict[str, str] = {}
    for name in fields_of(namespace):
        value = _field(name, context, configurable)
        if value is None or value == "" or "." in str(value) or not isinstance(value, (str, int)):
            raise ConfigError(
                f"namespace field {{{name}}} is {value!r:.40} in this call; give it a non-empty value "
                "without '.' in the graph's context (invoke(..., context={...})) or in "
                f"config['configurable'][{name!r}]",
                field="namespace",
            )
        values[name] = str(value)
    return tuple(label.format(**values) for label in namespace)


def check_text_field(value: object) -> TextOf:
    if callable(value) or (isinstance(value, str) and value):
        return value
    raise ConfigError(
        f"text_field={value!r:.60} must be the key of the value that holds the text (a non-empty "
        "str) or a function of the value returning it",
        field="text_field",
    )


def check_scope_from(value: object) -> ScopeFrom | None:
    if value is None or is_int(value) or (callable(value) and not isinstance(value, bool)):
        return value
    raise ConfigError(
        f"scope_from={value!r:.60} must be an index into an item's namespace (1 for the user id of "
        "('users', uid, ...)), a function of the namespace returning its scope ids, or None",
        field="scope_from",
    )


#: What needs no quoting in a URI's path or fragment (most labels and keys): quote() is skipped.
_PLAIN = re.compile(r"[A-Za-z0-9_~-]*")


def _quoted(text: str) -> str:
    return text if _PLAIN.fullmatch(text) else quote(text, safe="")


@functools.lru_cache(maxsize=1024)
def _path(namespace: tuple[str, ...]) -> str:
    # A search returns many items of few namespaces: each is quoted once.
    return "/".join(_quoted(label) for label in namespace)


def store_uri(namespace: tuple[str, ...], key: str) -> str:
    """The resource line an item is cited by: ``store://users/alice/facts#key``."""
    return f"store://{_path(namespace)}#{_quoted(key)}"


def _scope_ids(namespace: tuple[str, ...], scope_from: ScopeFrom | None) -> object:
    if scope_from is None:
        return None
    if isinstance(scope_from, int):
        inside = -len(namespace) <= scope_from < len(namespace)
        # An index past the namespace gives no scope: [] is malformed scope metadata, which the
        # packer withholds from every reader (it never reads an item it cannot scope as everyone's).
        return [namespace[scope_from]] if inside else []
    found = scope_from(namespace)
    return [found] if isinstance(found, str) else (None if found is None else list(found))


def _text(value: object, text_field: TextOf) -> str | None:
    if not isinstance(value, dict):
        return None
    text = text_field(value) if callable(text_field) else value.get(text_field)
    return text if isinstance(text, str) else None


def item_document(item: Any, text_field: TextOf, scope_from: ScopeFrom | None, lane: str | None) -> Document:
    """A store's ``SearchItem`` as a Document: its text, and in metadata its namespace, key,
    times, score, citation (``source``), lane and scope ids. A value with no text is an
    UpstreamError if the item is unscoped; a scoped one becomes an empty Document, which the
    packer withholds with the rest of its scope or drops as empty, so nothing of it is named to
    a reader who may not read it."""
    namespace = tuple(item.namespace)
    metadata: dict[str, Any] = {
        "namespace": list(namespace),
        "key": item.key,
        "created_at": item.created_at.isoformat(),
        "updated_at": item.updated_at.isoformat(),
        "score": getattr(item, "score", None),
        "source": store_uri(namespace, item.key),
    }
    if lane is not None:
        metadata["lane"] = lane
    scope_ids = _scope_ids(namespace, scope_from)
    if scope_ids is not None:
        metadata["scope_ids"] = scope_ids
    text = _text(item.value, text_field)
    if text is None and scope_ids is None:  # everyone's item: its error may name it
        what = f"{text_field!r}" if isinstance(text_field, str) else "the text_field function"
        raise UpstreamError(
            f"store item {metadata['source']} has no str text under {what}; set text_field= to the "
            "key of its value that holds the text, or to a function of the value",
            field="text_field",
        )
    return Document(page_content=text or "", metadata=metadata, id=metadata["source"])
