"""What ``recallpack serve`` searches: a :class:`RecallSource` over the embedded docs index or
over a user's LangChain or LlamaIndex retriever, wrapped in the matching ``BudgetedRetriever``.

Each source packs with one Packer's settings, for the configured reader or for the reader a
call names, and knows which resource URIs it can serve again to that reader. Imports a host
framework only when given one of its retrievers.
"""

from __future__ import annotations

import importlib
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

from recallpack.adapters.shared.extras import require

require("anyio", extra="mcp", feature=__name__)

import anyio.to_thread

from recallpack import Candidate, ConfigError, Packer, Reader, RecallResult
from recallpack.adapters.mcp.docs import DocsIndex
from recallpack.adapters.mcp.windows import spans_template, spans_uri
from recallpack.adapters.shared.served import Served
from recallpack.packing.hosts import read_host
from recallpack.packing.validation import did_you_mean

__all__ = [
    "DEFAULT_WINDOW_TOKENS", "DEFAULT_OVERLAP_TOKENS", "SHOWN_LIMIT",
    "CallReader", "RecallSource", "reader_key", "docs_source", "retriever_source", "load_factory",
]

logger = logging.getLogger("recallpack.mcp")

#: Docs windows: eight of them, with their labels, fit the default budget of 2048.
DEFAULT_WINDOW_TOKENS = 200
DEFAULT_OVERLAP_TOKENS = 20
#: How many kept items a source remembers to serve as resources (oldest forgotten first).
SHOWN_LIMIT = 4096


#: A per-call reader: None for the packer's configured one (stdio, or a server without auth).
CallReader = Reader | None


def reader_key(reader: CallReader) -> str:
    """What keeps one reader's remembered items apart from another's: the whole reader."""
    return "" if reader is None else reader.model_dump_json()


class RecallSource:
    """What the recall tool searches: ``recall(query, max_tokens, reader)``, packed by
    ``packer``'s settings for ``reader`` (None: the packer's own), and ``read(uri, reader)``, the
    text behind a resource URI this source can serve to that reader (None for anything else).
    ``what`` names it in the tool's description, ``summary`` is one line for the server's log,
    ``warning`` (or None) what it withholds from everyone and why, for the server's log too.
    ``least`` is the smallest budget in which it can show its top match (None: the packer's
    ``least_tokens``, the least block with no resource line). ``spans_template`` is the URI
    template of ranges of a resource, which ``read`` serves too (None: it serves none)."""

    def __init__(
        self,
        recall: Callable[[str, int, CallReader], Awaitable[RecallResult]],
        *,
        packer: Packer,
        what: str,
        summary: str,
        read: Callable[[str, CallReader], str | None] | None = None,
        warning: str | None = None,
        least: int | None = None,
        spans_template: str | None = None,
    ) -> None:
        self.recall = recall
        self.packer = packer
        self.what = what
        self.summary = summary
        self._read = read
        self.warning = warning
        self.least = packer.least_tokens if least is None else least
        self.spans_template = spans_template

    def read(self, uri: str, reader: CallReader = None) -> str | None:
        return None if self._read is None else self._read(uri, reader)


def docs_source(
    folder: str,
    *,
    window_tokens: int = DEFAULT_WINDOW_TOKENS,
    overlap_tokens: int = DEFAULT_OVERLAP_TOKENS,
    fetch_k: int | None = None,
    index_dir: str | None = None,
    language: str | None = "auto",
    show_progress: bool = False,
    **settings: Any,
) -> RecallSource:
    """The embedded default: the text and Markdown files under ``folder``, in token windows of
    ``window_tokens``, searched with BM25 over the words ``language`` reads (``"auto"``: chosen
    from the folder's text; an ISO code; None: words as written); ``fetch_k`` best windows at most
    are ranked (None: enough for a few budgets, :meth:`DocsIndex.fetch_k`). ``index_dir`` is a
    folder the index is kept in, so a restart redoes only the files that changed (None: nothing is
    kept); ``show_progress`` draws the index build's progress on stderr (with tqdm). ``settings``
    are Packer settings (``max_tokens`` is the default budget of a call)."""
    packer = Packer(**settings)
    index = DocsIndex(
        folder, packer, window_tokens=window_tokens, overlap_tokens=overlap_tokens, index=index_dir,
        language=language, show_progress=show_progress,
    )
    least = _least_citing(packer, index.citations())

    def pack(query: str, max_tokens: int, reader: CallReader) -> RecallResult:
        # Each file is one candidate: its best window, and others while the room after the least
        # block (its header, label and resource line) lasts; at the least budget, one range.
        found = index.matches(query, fetch_k, max(max_tokens - least, 0))
        return packer.recall(found, query=query, max_tokens=max_tokens, **_as(reader))

    async def recall(query: str, max_tokens: int, reader: CallReader) -> RecallResult:
        # BM25 and packing are CPU work: a worker thread keeps the server answering meanwhile.
        return await anyio.to_thread.run_sync(pack, query, max_tokens, reader)

    def read(uri: str, reader: CallReader) -> str | None:
        found = index.resource(uri)
        # Readable exactly when the packer would show the file to this reader: the core's one
        # gate (scopes, malformed scope metadata, no reader) decides, not a second copy of it
        # here, judging the file's first window (all of a file's windows have its scopes). Only
        # then are the spans a URI names read (a ConfigError when they are wrong).
        if found is None or packer.recall([found[0]], **_as(reader)).report.items_withheld:
            return None
        return found[1]()

    what = f"the documents in {index.root.resolve().name or index.root}"
    warning = index.warning()
    if warning is not None:
        logger.warning("%s", warning)
    return RecallSource(
        recall, packer=packer, what=what, summary=index.summary(), read=read, warning=warning,
        least=least, spans_template=spans_template(packer.resource_uri_template),
    )


#: How many of the URIs that count the most tokens alone, and of the longest sets of scopes, are
#: measured in a block.
_MEASURED_URIS = 8
_MEASURED_SCOPES = 64


def _least_citing(packer: Packer, citations: list[tuple[str, int, tuple[str, ...]]]) -> int:
    """The least budget in which the floor keeps a match with its resource line (every docs item
    has one: its file's URI and the one range it shows at that budget) and its scopes' label:
    the core's :meth:`Packer.least_tokens_for` of a one-letter match cited by each of the URIs
    that count the most tokens alone, each naming a range with as many digits as its file's
    length, and by the dearest of them in each of the longest sets of scopes the files have (for
    the configured reader: a set it may not read is never shown), asked with a query as a call
    is (a passages cut marks both ends)."""
    tok = packer.tokenizer_used
    longest = (spans_uri(uri, [(length, length)]) for uri, length, _ in citations)
    dearest = sorted(longest, key=lambda uri: -tok.count(uri))[:_MEASURED_URIS]
    scopes = sorted({s for _, _, s in citations if s}, key=lambda s: -sum(map(len, s)))[:_MEASURED_SCOPES]
    probes = [Candidate(text="x", citation=uri) for uri in dearest]
    probes += [Candidate(text="x", citation=dearest[0], scope_ids=s) for s in scopes if dearest]
    return max((packer.least_tokens_for(probe, query="x") or packer.least_tokens for probe in probes),
               default=packer.least_tokens)


def _as(reader: CallReader) -> dict[str, Any]:
    """The per-call override for ``reader``: none for the packer's own (which it cannot lift)."""
    return {} if reader is None else {"reader": reader}


def _host_of(retriever: object) -> Served:
    """How the host the retriever comes from is served: the host table's readers say (their
    ``read_retriever``), so that a host registered there is served too."""
    modules = [cls.__module__ for cls in type(retriever).__mro__]
    if any(m.startswith("recallpack.") for m in modules):
        raise ConfigError(
            f"the factory returned a recallpack {type(retriever).__name__}; return the retriever it "
            "wraps: recallpack serve wraps it with the packing settings it was given"
        )
    served = read_host("retriever", retriever)
    if isinstance(served, Served):
        return served
    raise ConfigError(
        f"the factory returned a {type(retriever).__name__}; it must return a LangChain retriever "
        "(or a Runnable str -> list[Document]) or a LlamaIndex retriever (for a vector store or "
        "an index, return its .as_retriever())"
    )


def retriever_source(retriever: object, **settings: Any) -> RecallSource:
    """A user's LangChain or LlamaIndex retriever (or a registered host's), wrapped in the
    matching ``BudgetedRetriever`` with ``settings`` (Packer settings). It can serve again only
    what it has shown."""
    shown = _Shown()
    name = type(retriever).__name__
    served = _host_of(retriever)
    wrapped = served.wrap(**settings)

    async def recall(query: str, max_tokens: int, reader: CallReader) -> RecallResult:
        result: RecallResult = await wrapped.arecall(query, max_tokens=max_tokens, **_as(reader))
        return shown.remember(result, reader)

    return RecallSource(
        recall, packer=wrapped.packer, what=f"the {served.label} {name}", summary=f"{served.label} {name}",
        read=shown.get,
    )


def load_factory(spec: str) -> object:
    """Import ``module:factory``, call the factory with no arguments, and return what it returns.

    Each way this can fail is a ConfigError naming the spec; an error raised inside the user's
    module or factory is named as theirs, with its type and message.
    """
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute or not attribute.isidentifier():
        raise ConfigError(
            f"retriever factory {spec!r} must be module:factory, such as myapp.search:make_retriever"
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        if exc.name and (module_name == exc.name or module_name.startswith(exc.name + ".")):
            raise ConfigError(
                f"retriever factory {spec!r}: no module named {exc.name!r}; run from the folder that "
                "holds it, or install it"
            ) from None
        raise ConfigError(f"retriever factory {spec!r}: importing {module_name} failed: {exc}") from exc
    except Exception as exc:
        raise ConfigError(
            f"retriever factory {spec!r}: importing {module_name} failed: {type(exc).__name__}: {exc}"
        ) from exc
    factory = getattr(module, attribute, None)
    if factory is None:
        close = did_you_mean(attribute, [n for n in dir(module) if not n.startswith("_")])
        hint = f"; did you mean {close!r}?" if close else ""
        raise ConfigError(f"retriever factory {spec!r}: {module_name} has no {attribute!r}{hint}")
    if not callable(factory):
        raise ConfigError(
            f"retriever factory {spec!r}: {module_name}.{attribute} is a {type(factory).__name__}, "
            "not a function or class to call"
        )
    try:
        return factory()
    except Exception as exc:
        raise ConfigError(f"retriever factory {spec!r} raised {type(exc).__name__}: {exc}") from exc


class _Shown:
    """The kept items a source has shown, by reader and resource URI: a user's retriever keeps
    no store the server could read again, so what it can serve a reader is what it has shown
    that reader, never what it showed another. Bounded, oldest forgotten first."""

    def __init__(self) -> None:
        self._texts: OrderedDict[tuple[str, str], str] = OrderedDict()

    def remember(self, result: RecallResult, reader: CallReader) -> RecallResult:
        key = reader_key(reader)
        for evidence in result.evidence:
            if evidence.resource_uri is not None:
                self._texts[key, evidence.resource_uri] = evidence.text
                self._texts.move_to_end((key, evidence.resource_uri))
        while len(self._texts) > SHOWN_LIMIT:
            self._texts.popitem(last=False)
        return result

    def get(self, uri: str, reader: CallReader) -> str | None:
        return self._texts.get((reader_key(reader), uri))
