"""The embedded default of ``recallpack serve --docs DIR``: a folder's text, searched with BM25.

Every text and Markdown file under the folder (hidden files and folders aside) is cut into
recallpack's token windows, counted by the tokenizer that later counts the evidence, each window
one BM25 document (`bm25s <https://github.com/xhluca/bm25s>`_). A call is handed each file whose
windows match once, as one Candidate of them citing the file and the ranges shown
(:mod:`recallpack.adapters.mcp_windows`); a file's URI reads back as its text, with ranges as
those ranges. With a folder to keep it in, the index lasts from one start to the next
(:mod:`recallpack.adapters.mcp_index`).

A file is scoped by its YAML front matter, as Markdown sites write it::

    ---
    scope_ids: [org-acme]
    ---

Its windows then carry those scope ids, and the reader decides who sees them. Front matter that
cannot be read for certain withholds the file's windows from everyone rather than show them to
everyone (:mod:`recallpack.adapters.mcp_front_matter` says what that is); such files are listed
in :attr:`DocsIndex.withheld`. Words are stemmed (English, PyStemmer) and English stop words
left out. Needs the ``mcp`` extra.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from recallpack.adapters._extras import require

bm25s = require("bm25s", extra="mcp", feature=__name__)
Stemmer = require("Stemmer", extra="mcp", feature=__name__)

import numpy

from recallpack import Candidate, ConfigError, Packer, token_windows
from recallpack.adapters.mcp_front_matter import FrontMatter, front_matter_scopes
from recallpack.adapters.mcp_index import IndexStore, digest
from recallpack.adapters.mcp_windows import (
    file_candidate,
    one_per_file,
    parse_spans,
    shown,
    split_spans,
    version,
    window_candidate,
)
from recallpack.packing.windows import Window

__all__ = ["DOC_SUFFIXES", "MAX_FILE_BYTES", "DocsIndex", "front_matter_scopes"]

#: The files a docs folder is read for: text and Markdown.
DOC_SUFFIXES = (".md", ".markdown", ".mdx", ".txt", ".text", ".rst")
#: A file larger than this is skipped (with a note): a docs folder holds prose, not data dumps.
MAX_FILE_BYTES = 8 * 1024 * 1024


#: How many withheld files the start-up warning names.
_NAMED = 50


@dataclass(frozen=True)
class _Skipped:
    path: str
    why: str


def _files(root: Path, skipped: list[_Skipped]) -> Iterator[tuple[str, str]]:
    """``(path relative to root, text)`` of every text or Markdown file under ``root``, sorted.

    A symbolic link is judged by its target, not its name: a link that leads out of the folder,
    or to a hidden file or a file that is not text, is not followed; a link to a file that is
    served anyway is not served twice.
    """
    real_root = root.resolve()
    served: set[Path] = set()
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if _hidden(relative) or path.suffix.lower() not in DOC_SUFFIXES:
            continue
        name = relative.as_posix()
        try:
            real = path.resolve()
            if not real.is_relative_to(real_root):
                skipped.append(_Skipped(name, "a link to outside the folder"))
                continue
            if _hidden(real.relative_to(real_root)) or real.suffix.lower() not in DOC_SUFFIXES:
                skipped.append(_Skipped(name, "a link to a hidden file or a file that is not text"))
                continue
            if not real.is_file() or real in served:
                continue
            served.add(real)
            if real.stat().st_size > MAX_FILE_BYTES:
                skipped.append(_Skipped(name, f"larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB"))
                continue
            data = real.read_bytes()
        except OSError as exc:
            skipped.append(_Skipped(name, f"cannot be read ({exc.strerror or exc})"))
            continue
        try:
            yield name, data.decode("utf-8-sig")
        except UnicodeDecodeError:
            skipped.append(_Skipped(name, "not UTF-8 text"))


def _hidden(relative: Path) -> bool:
    return any(part.startswith(".") for part in relative.parts)


class DocsIndex:
    """The windows of a folder's files and their BM25 index.

    ``packer`` is the Packer the server packs with: its tokenizer cuts the windows (so a window
    counts what the evidence will count) and its resource URI template names them.
    """

    def __init__(
        self, root: str | Path, packer: Packer, *, window_tokens: int, overlap_tokens: int,
        index: str | Path | None = None,
    ) -> None:
        self.root = Path(root)
        if not self.root.is_dir():
            raise ConfigError(
                f"{str(root)!r} is not a folder; give the folder of text and Markdown files to serve"
            )
        self.skipped: list[_Skipped] = []
        #: The files withheld from every reader, because their front matter cannot be read for certain.
        self.withheld: list[_Skipped] = []
        self.files = 0
        #: How many files were taken from the stored ``index`` unchanged (the rest were cut again).
        self.reused = 0
        self.index = index
        # English stems, so that "budgets" finds "budget"; stop words weigh nothing either way.
        self._stemmer = Stemmer.Stemmer("english")
        store = None if index is None else IndexStore(index, {
            "tokenizer": packer.tokenizer_used.name, "window_tokens": window_tokens,
            "overlap_tokens": overlap_tokens, "words": "bm25s stopwords=en stemmer=english",
            "bm25s": bm25s.__version__,
        })
        #: Each file's body (after its front matter) and front matter, by name.
        self._files: dict[str, tuple[str, FrontMatter]] = {}
        #: The BM25 documents, in order: a file's name and one of its windows (not blank). A
        #: window is made a Candidate when a search returns it: work in proportion to what is found.
        self._spots: list[tuple[str, Window]] = []
        self._made: dict[int, Candidate] = {}
        kept: dict[str, tuple[str, int, list[Window]]] = {}
        stored: list[str] = []
        for name, text in _files(self.root, self.skipped):
            self.files += 1
            front = front_matter_scopes(text)  # never from the store: scopes are read every start
            if front[2] is not None:
                self.withheld.append(_Skipped(name, front[2]))
            body = text[front[0]:]
            self._files[name] = (body, front)
            text_digest = digest(text)
            windows = None if store is None else store.windows(name, body, text_digest)
            if windows is None:
                windows = token_windows(body, window_tokens, overlap_tokens, packer.tokenizer_used)
            else:
                stored.append(name)
            kept[name] = (text_digest, len(body), windows)
            self._spots.extend((name, w) for w in windows if w.text.strip())
        self.reused = len(stored)
        if not self.files:
            raise ConfigError(
                f"{str(root)!r} has no text or Markdown files (looked for {', '.join(DOC_SUFFIXES)})"
            )
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
        self._bm25 = self._index(kept, stored, store)

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
        """The files matching ``query`` (in its ``limit`` best windows), best first, each one
        Candidate of the windows :func:`~.mcp_windows.one_per_file` takes of it for ``room``."""
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

    def _index(self, files: dict[str, tuple[str, int, list[Window]]], stored: list[str],
               store: IndexStore | None) -> Any:
        """The BM25 index of the windows: the stored one when no file changed (the ``stored``
        files are all there are), else built from each window's word ids (the store's for the
        ``stored`` files, tokenized for the rest); the store is then rewritten."""
        if store is not None and len(stored) == len(files) and set(files) == set(store.files):
            loaded = store.bm25()
            if loaded is not None:
                return loaded
        # BM25 is built from word ids: the stored ones for the files that did not change (the
        # vocabulary kept, so they are never made words again), new ids for the rest.
        vocab = store.vocabulary() if store is not None else {}
        ids = {name: store.ids(name) for name in stored} if store is not None else {}
        fresh = [name for name in files if name not in ids]
        texts = [w.text for name in fresh for w in files[name][2]]
        tokenized = iter(self._tokenize(texts, return_ids=False) if texts else [])
        for name in fresh:
            ids[name] = [[vocab.setdefault(w, len(vocab)) for w in next(tokenized)] for _ in files[name][2]]
        corpus = [window_ids for name, (_, _, windows) in files.items()
                  for w, window_ids in zip(windows, ids[name]) if w.text.strip()]
        bm25 = None
        if corpus:
            bm25 = bm25s.BM25()
            bm25.index(bm25s.tokenization.Tokenized(ids=corpus, vocab=vocab), show_progress=False)
        if store is not None:
            store.save(files, ids, vocab, bm25)
        return bm25

    def search(self, query: str, limit: int | None = None) -> list[Candidate]:
        """Every window matching ``query`` (at most ``limit``), best first; ties in file order."""
        return [self._candidate(i) for i in self._ranked(query, limit)]

    def _ranked(self, query: str, limit: int | None) -> list[int]:
        """The positions in ``_spots`` of the windows matching ``query``, best first."""
        words = self._tokenize([query], return_ids=False)[0]
        ids = None if self._bm25 is None else self._bm25.get_tokens_ids(words)
        if not ids:
            return []
        scores = self._bm25.get_scores_from_ids(ids)
        hits = numpy.flatnonzero(scores > 0)
        ranked: list[int] = hits[numpy.argsort(-scores[hits], kind="stable")][:limit].tolist()
        return ranked

    def _tokenize(self, texts: list[str], return_ids: bool = True) -> Any:
        return bm25s.tokenize(
            texts, stopwords="en", stemmer=self._stemmer, return_ids=return_ids, show_progress=False
        )

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
        """The files withheld from every reader for their front matter, each with why; None if none."""
        if not self.withheld:
            return None
        named = "; ".join(f"{s.path}: {s.why}" for s in self.withheld[:_NAMED])
        more = f"; and {len(self.withheld) - _NAMED} more" if len(self.withheld) > _NAMED else ""
        return (
            f"{len(self.withheld)} files are withheld from every reader, as their front matter cannot "
            f"be read for certain (fix it to serve them): {named}{more}"
        )
