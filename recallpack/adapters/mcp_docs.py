"""The embedded default of ``recallpack serve --docs DIR``: a folder's text, searched with BM25.

Every text and Markdown file under the folder (hidden files and folders aside) is cut into
recallpack's token windows, counted by the tokenizer that later counts the evidence, each window
one BM25 document (`bm25s <https://github.com/xhluca/bm25s>`_). A search returns every window
that matches, best first, as Candidates: the window's text, its file as ``artifact_id`` and its
stable ``chunk_id`` as ``artifact_content_id`` (so each has a resource URI), offsets into the
file in the metadata.

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

from collections.abc import Iterator
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
from recallpack.packing.candidate import Span
from recallpack.packing.documents import documents_of

__all__ = ["DOC_SUFFIXES", "MAX_FILE_BYTES", "DocsIndex", "front_matter_scopes"]

#: The files a docs folder is read for: text and Markdown.
DOC_SUFFIXES = (".md", ".markdown", ".mdx", ".txt", ".text", ".rst")
#: A file larger than this is skipped (with a note): a docs folder holds prose, not data dumps.
MAX_FILE_BYTES = 8 * 1024 * 1024


#: How many hex digits of a file's text hash name its version in its URI (64 bits).
_VERSION_DIGITS = 16
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

    def __init__(self, root: str | Path, packer: Packer, *, window_tokens: int, overlap_tokens: int) -> None:
        self.root = Path(root)
        if not self.root.is_dir():
            raise ConfigError(
                f"{str(root)!r} is not a folder; give the folder of text and Markdown files to serve"
            )
        self.skipped: list[_Skipped] = []
        #: The files withheld from every reader, because their front matter cannot be read for certain.
        self.withheld: list[_Skipped] = []
        self.files = 0
        self.candidates: list[Candidate] = []
        bodies: dict[str, str] = {}
        template = packer.resource_uri_template
        for name, text in _files(self.root, self.skipped):
            self.files += 1
            front = front_matter_scopes(text)
            if front[2] is not None:
                self.withheld.append(_Skipped(name, front[2]))
            self.candidates.extend(self._windows(name, text, front, packer, window_tokens, overlap_tokens))
            bodies[name] = text[front[0]:]
        if not self.files:
            raise ConfigError(
                f"{str(root)!r} has no text or Markdown files (looked for {', '.join(DOC_SUFFIXES)})"
            )
        # The URI the packer gives each file's windows (walk.py fills the template the same way),
        # so a client can read the file it was shown, by the URI it was shown: the file's text,
        # under the file's scopes (its first window stands for them to the packer's gate).
        self.by_uri: dict[str, Candidate] = {}
        for c in self.candidates:
            uri = template.format(
                artifact_id=quote(c.artifact_id or "", safe=""),
                artifact_content_id=quote(c.artifact_content_id or "", safe=""),
            )
            if uri not in self.by_uri:
                self.by_uri[uri] = c.model_copy(update={"text": bodies[c.artifact_id or ""], "span": None})
        self._bm25: Any = None
        # English stems, so that "budgets" finds "budget"; stop words weigh nothing either way.
        self._stemmer = Stemmer.Stemmer("english")
        if self.candidates:
            self._bm25 = bm25s.BM25()
            self._bm25.index(self._tokenize([c.text for c in self.candidates]), show_progress=False)

    @staticmethod
    def _windows(
        name: str, text: str, front: FrontMatter, packer: Packer, size: int, overlap: int
    ) -> Iterator[Candidate]:
        body_start, scope_ids, scope_error = front
        body = text[body_start:]
        windows = token_windows(body, size, overlap, packer.tokenizer_used)
        if not windows:
            return
        # One URI for all of a file's windows: the core merges pieces that cite the same resource.
        version = windows[0].parent_hash[:_VERSION_DIGITS]
        scoped: dict[str, Any] = {"scope_ids": scope_ids} if scope_ids else {}  # absent: unscoped
        for window in windows:
            if not window.text.strip():
                continue
            start, end = body_start + window.start, body_start + window.end
            metadata = {**window.metadata(), "source": name, "start_char": start, "end_char": end}
            yield Candidate(
                text=window.text,
                **scoped,
                scope_error=scope_error,
                artifact_id=name,
                artifact_content_id=version,
                metadata=metadata,
                span=Span(parent=f"file:{name}", start=start, end=end, source="the docs index"),
            )

    @staticmethod
    def merged(candidates: list[Candidate]) -> list[Candidate]:
        """``candidates`` with the windows of one file that overlap or touch made one candidate,
        by the core's own merge (the one ``passages`` runs), for the policies that do not merge:
        the best-ranked window's place, the union of their text. Files never merge with each
        other (the file is in the key), nor does anything without a span."""
        documents = documents_of(list(enumerate(candidates)), lambda c: c.artifact_id, {})
        out = []
        for doc in documents:
            lead = doc.candidate
            if len(doc.pieces) == 1 or lead.span is None:
                out.append(lead)
                continue
            start = min(p.start for p in doc.pieces)
            span = lead.span.model_copy(update={"start": start, "end": start + len(doc.text)})
            metadata = {**lead.metadata, "start_char": span.start, "end_char": span.end}
            out.append(lead.model_copy(update={"text": doc.text, "span": span, "metadata": metadata}))
        return out

    def search(self, query: str, limit: int | None = None) -> list[Candidate]:
        """Every window matching ``query`` (at most ``limit``), best first; ties in file order."""
        if self._bm25 is None:
            return []
        words = self._tokenize([query], return_ids=False)[0]
        ids = self._bm25.get_tokens_ids(words)
        if not ids:
            return []
        scores = self._bm25.get_scores_from_ids(ids)
        hits = numpy.flatnonzero(scores > 0)
        ranked = hits[numpy.argsort(-scores[hits], kind="stable")][:limit]
        return [self.candidates[i] for i in ranked.tolist()]

    def _tokenize(self, texts: list[str], return_ids: bool = True) -> Any:
        return bm25s.tokenize(
            texts, stopwords="en", stemmer=self._stemmer, return_ids=return_ids, show_progress=False
        )

    def summary(self) -> str:
        """One line for the server's log: what was indexed, and what was skipped and why."""
        line = f"{self.files} files, {len(self.candidates)} windows from {self.root}"
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
