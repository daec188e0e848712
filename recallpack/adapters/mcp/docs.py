"""The embedded default of ``recallpack serve --docs DIR``: a folder's text, searched with BM25.

Every text and Markdown file under the folder (hidden files and folders aside) is cut into
recallpack's token windows, counted by the tokenizer that later counts the evidence, each window
one BM25 document (`bm25s <https://github.com/xhluca/bm25s>`_). A call is handed each file whose
windows match once, as one Candidate of them citing the file and the ranges shown
(:mod:`recallpack.adapters.mcp.windows`); a file's URI reads back as its text, with ranges as
those ranges. With a folder to keep it in, the index lasts from one start to the next
(:mod:`recallpack.adapters.mcp.index`).

A file is scoped by its YAML front matter, as Markdown sites write it::

    ---
    scope_ids: [org-acme]
    ---

Its windows then carry those scope ids, and the reader decides who sees them. Front matter that
cannot be read for certain withholds the file's windows from everyone rather than show them to
everyone (:mod:`recallpack.adapters.mcp.front_matter` says what that is); such files are listed
in :attr:`DocsIndex.withheld`.

Words are read by recallpack's one analysis chain (:class:`~recallpack.packing.reading.analysis.Reading`),
the one packing reads the evidence with: each window's BM25 terms are its
:meth:`~recallpack.packing.reading.analysis.Reading.keys` (words folded and stemmed by the language's
filter, pairs of characters for Chinese, Japanese and Thai), and a query is read by the same
reading. The language is chosen once for the folder (``language="auto"``: read from a sample of
its files' text). No stop words: BM25's idf weighs a word every window holds at almost nothing.
A call ranks at most ``fetch_k`` windows, by default enough to fill :data:`FETCH_BUDGETS` budgets,
so its work follows the budget, not the folder. Needs the ``mcp`` extra.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

from recallpack.adapters.shared.extras import require

bm25s = require("bm25s", extra="mcp", feature=__name__)

import numpy

from recallpack import Candidate, ConfigError, Packer, token_windows
from recallpack.adapters.mcp.folder import (
    DOC_SUFFIXES,
    MAX_FILE_BYTES,
    Skipped,
    bm25_of,
    doc_paths,
    read_files,
    sample,
)
from recallpack.adapters.mcp.front_matter import FrontMatter, front_matter_scopes
from recallpack.adapters.mcp.index import IndexStore, digest
from recallpack.adapters.mcp.windows import (
    file_candidate,
    one_per_file,
    parse_spans,
    shown,
    split_spans,
    version,
    window_candidate,
)
from recallpack.packing.counting.windows import Window
from recallpack.packing.progress import progress
from recallpack.packing.reading.analysis import AUTO, Reading, check_language

__all__ = [
    "DOC_SUFFIXES", "FETCH_BUDGETS", "LEAST_FETCH", "MAX_FILE_BYTES", "NEIGHBOUR_WEIGHT", "DocsIndex",
    "front_matter_scopes",
]

#: How many withheld files the start-up warning names.
_NAMED = 50
#: A call with no ``fetch_k`` ranks the best windows that hold this many budgets of tokens: the
#: packer chooses among more than fit, and never among every file that shares a word.
FETCH_BUDGETS = 4
#: ... and at least this many windows, so that the least budget still chooses among a few files.
LEAST_FETCH = 10
#: How much a window's neighbours' scores (in its file) add to its own in the ranking.
NEIGHBOUR_WEIGHT = 0.5


class DocsIndex:
    """The windows of a folder's files and their BM25 index.

    ``packer`` is the Packer the server packs with: its tokenizer cuts the windows (so a window
    counts what the evidence will count) and its resource URI template names them.
    """

    def __init__(
        self, root: str | Path, packer: Packer, *, window_tokens: int, overlap_tokens: int,
        index: str | Path | None = None, language: str | None = AUTO, show_progress: bool = False,
    ) -> None:
        self.root = Path(root)
        if not self.root.is_dir():
            raise ConfigError(f"{str(root)!r} is not a folder; give the folder of text or Markdown to serve")
        setting = check_language(language)
        self.skipped: list[Skipped] = []
        #: The files withheld from every reader, because their front matter cannot be read for certain.
        self.withheld: list[Skipped] = []
        #: How many files were taken from the stored ``index`` unchanged (the rest were cut again).
        self.reused = 0
        self.index = index
        self._window_tokens = window_tokens
        #: Each file's body (after its front matter) and front matter, by name.
        self._files: dict[str, tuple[str, FrontMatter]] = {}
        texts = dict(read_files(self.root, doc_paths(self.root), self.skipped))
        self.files = len(texts)
        if not self.files:
            raise ConfigError(
                f"{str(root)!r} has no text or Markdown files (looked for {', '.join(DOC_SUFFIXES)})"
            )
        for name, text in texts.items():
            front = front_matter_scopes(text)  # never from the store: scopes are read every start
            if front[2] is not None:
                self.withheld.append(Skipped(name, front[2]))
            self._files[name] = (text[front[0]:], front)
        #: How every window and every query is read: one reading for the folder.
        bodies = [body for body, _ in self._files.values()]
        self.reading = Reading(setting) if setting != AUTO else Reading.of(AUTO, "", sample(bodies))
        store = None if index is None else IndexStore(index, {
            "tokenizer": packer.tokenizer_used.name, "window_tokens": window_tokens,
            "overlap_tokens": overlap_tokens, "analysis": self.reading.signature,
            "bm25s": bm25s.__version__,
        })
        #: What went wrong with the stored index (each rebuilt): the start-up warning says it.
        self.index_warnings: list[str] = [] if store is None else store.warnings
        #: The BM25 documents, in order: a file's name and one of its windows (not blank). A
        #: window is made a Candidate when a search returns it: work in proportion to what is found.
        self._spots: list[tuple[str, Window]] = []
        self._made: dict[int, Candidate] = {}
        kept: dict[str, tuple[str, int, list[Window]]] = {}
        # Each window's word ids: a changed or new file's read now (its keys by the reading),
        # a stored file's from the store, and only if the BM25 index must be built again.
        vocab = store.vocabulary() if store is not None else {}
        ids: dict[str, list[list[int]]] = {}
        stored: list[str] = []
        keys = self.reading.keys
        with progress(len(texts), "recallpack: indexing", show_progress) as advance:
            for name, text in texts.items():
                body = self._files[name][0]
                text_digest = digest(text)
                windows = None if store is None else store.windows(name, body, text_digest)
                if windows is None:
                    windows = token_windows(body, window_tokens, overlap_tokens, packer.tokenizer_used)
                    ids[name] = [[vocab.setdefault(k, len(vocab)) for k in keys(w.text)] for w in windows]
                else:
                    stored.append(name)
                kept[name] = (text_digest, len(body), windows)
                self._spots.extend((name, w) for w in windows if w.text.strip())
                advance(1)
        self.reused = len(stored)
        # Each file's URI, its template filled as the core fills it (a window's resource line):
        # the file a client can read, and what the citation of a file's item names.
        template = packer.resource_uri_template
        self._uris: dict[str, str] = {}  # and by file, _uri_of
        self._uri_of: dict[str, str] = {}
        self._first: dict[str, int] = {}
        for i, (name, window) in enumerate(self._spots):
            if name not in self._first:
                self._first[name] = i
                uri = template.format(artifact_id=quote(name, safe=""),
                                      artifact_content_id=quote(version(window), safe=""))
                self._uris[uri], self._uri_of[name] = name, uri
        self._bm25 = bm25_of(kept, ids, vocab, store, len(self._spots))
        #: For each window but the first, whether the one before it is of the same file (1.0) or not.
        names = [name for name, _ in self._spots]
        self._after_same = numpy.array([a == b for a, b in zip(names, names[1:])], dtype=numpy.float32)

    @property
    def candidates(self) -> list[Candidate]:
        """Every window as a Candidate, in file order (a search makes only those it returns)."""
        return [self._candidate(i) for i in range(len(self._spots))]

    def _candidate(self, i: int) -> Candidate:
        made = self._made.get(i)
        if made is None:
            name, window = self._spots[i]
            made = self._made[i] = window_candidate(name, self._files[name][1], window)
        return made

    def resource(self, uri: str) -> tuple[Candidate, Callable[[], str]] | None:
        """What ``uri`` reads (None for a URI of no file): the file's first window, which carries
        its scopes (a small thing for the packer's gate to judge), and its text, read only when
        called, after the gate (a reader learns nothing of a file it may not read, not even its
        length): the file's text after its front matter, or for its URI with ``spans=`` those
        ranges, as an item shows them (a ConfigError when they are malformed or past its end)."""
        base, named = split_spans(uri)
        name = self._uris.get(base)
        if name is None:
            return None
        body = self._files[name][0]
        text = (lambda: body) if named is None else (lambda: shown(body, parse_spans(named, len(body))))
        return self._candidate(self._first[name]), text

    def citations(self) -> list[tuple[str, int, tuple[str, ...]]]:
        """Each file's resource URI, the length of its text (after its front matter), its scopes."""
        return [(uri, len(self._files[n][0]), self._files[n][1][1]) for uri, n in self._uris.items()]

    def matches(self, query: str, limit: int | None, room: int) -> list[Candidate]:
        """The files matching ``query`` (in its ``limit`` best windows; None: :meth:`fetch_k` of
        ``room``), best first, each one Candidate of the windows
        :func:`~.windows.one_per_file` takes of it for ``room``."""
        limit = self.fetch_k(room) if limit is None else limit
        taken = one_per_file([self._spots[i] for i in self._ranked(query, limit)], room).items()
        files = self._files
        return [file_candidate(n, files[n][1], files[n][0], ws, self._uri_of[n]) for n, ws in taken]

    @property
    def by_uri(self) -> dict[str, Candidate]:
        """Every file's resource URI, and the file as one Candidate of its text under its scopes."""
        files = {}
        for uri, name in self._uris.items():
            first = self._candidate(self._first[name])
            files[uri] = first.model_copy(update={"text": self._files[name][0], "span": None})
        return files

    def search(self, query: str, limit: int | None = None) -> list[Candidate]:
        """Every window matching ``query`` (at most ``limit``), best first; ties in file order."""
        return [self._candidate(i) for i in self._ranked(query, limit)]

    def _ranked(self, query: str, limit: int | None) -> list[int]:
        """The positions in ``_spots`` of the ``limit`` best windows matching ``query`` (None:
        all), best first, ties in file order."""
        keys = list(dict.fromkeys(self.reading.keys(query)))  # a word repeated weighs once
        ids = None if self._bm25 is None else self._bm25.get_tokens_ids(keys)
        if not ids:
            return []
        own = self._bm25.get_scores_from_ids(ids)
        hits = numpy.flatnonzero(own > 0)
        # A window is ranked with half its neighbours' scores (in its file): a question's words
        # spread over a paragraph, and a window holds a third of one in Greek or Hindi (their
        # tokens hold fewer letters). Measured on the bench's docs section: Greek 82% -> 89%.
        scores = own.copy()
        scores[1:] += NEIGHBOUR_WEIGHT * own[:-1] * self._after_same
        scores[:-1] += NEIGHBOUR_WEIGHT * own[1:] * self._after_same
        if limit is not None and limit < hits.size:
            # Only the best are sorted: those scoring at least the limit-th best score (all its
            # ties, so that the stable sort below gives exactly a full sort's first ``limit``).
            least = numpy.partition(scores[hits], hits.size - limit)[hits.size - limit]
            hits = hits[scores[hits] >= least]
        ranked: list[int] = hits[numpy.argsort(-scores[hits], kind="stable")][:limit].tolist()
        return ranked

    def fetch_k(self, room: int) -> int:
        """How many windows a call with ``room`` tokens ranks when no ``fetch_k`` is given: enough
        to fill :data:`FETCH_BUDGETS` times the room, and at least :data:`LEAST_FETCH`."""
        return max(LEAST_FETCH, math.ceil(FETCH_BUDGETS * room / self._window_tokens))

    def summary(self) -> str:
        """One line for the server's log: what was indexed, and what was skipped and why."""
        line = f"{self.files} files, {len(self._spots)} windows from {self.root}"
        if self.index is not None:
            line += f" ({self.reused} unchanged since the index in {self.index} was saved)"
        if self.skipped:
            named = ", ".join(f"{s.path} ({s.why})" for s in self.skipped[:5])
            line += f"; skipped {len(self.skipped)}: {named}"
            if len(self.skipped) > 5:
                line += ", ..."
        return line

    def warning(self) -> str | None:
        """What the server warns of at start, one line each (None if nothing): a stored index
        that was damaged and rebuilt, and the files withheld from every reader for their front
        matter, each with why."""
        lines = list(self.index_warnings)
        if self.withheld:
            named = "; ".join(f"{s.path}: {s.why}" for s in self.withheld[:_NAMED])
            more = f"; and {len(self.withheld) - _NAMED} more" if len(self.withheld) > _NAMED else ""
            lines.append(
                f"{len(self.withheld)} files are withheld from every reader, as their front matter "
                f"cannot be read for certain (fix it to serve them): {named}{more}"
            )
        return "\n".join(lines) or None
