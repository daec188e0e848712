"""A docs index that lasts: ``recallpack serve --docs DIR --index DIR`` keeps what indexing a
folder costs (each file's token windows, their BM25 words, the BM25 index itself) in a folder,
so that a restart redoes only the files that changed.

Each file is known by the SHA-256 of its text: a file whose hash matches takes its windows and
words from the store; a changed or added file is cut and tokenized again; a removed one is
gone. The settings that shape the index (the tokenizer, the window sizes, the analysis chain's
signature: its version and the folder's language, this format) are stored with it: any
difference rebuilds everything. Front matter is never taken from the store: every file's scopes
are read from the file at every start, so a scope is never decided by a stale or tampered index.

What is read back is checked before it is used: the manifest records the SHA-256 of every other
part as it was written (so a part cut short, or taken from another folder's index, is seen
before it is parsed), each stored window's numbers are whole numbers in its file, the word
arrays agree with the windows and the vocabulary, and the BM25 index holds as many documents
and words as the windows it was built from. A store that fails any check is rebuilt, with one
warning line (:attr:`IndexStore.warnings`), never trusted in part and never a failed call. Only
JSON and NumPy arrays without pickles are read back, through bm25s's own ``save``/``load``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import tempfile
from pathlib import Path
from typing import Any

from recallpack.adapters.shared.extras import require

bm25s = require("bm25s", extra="mcp", feature=__name__)

import numpy

from recallpack import ConfigError
from recallpack.packing.counting.windows import Window
from recallpack.packing.validation import is_int

__all__ = ["FORMAT", "IndexStore", "digest"]

logger = logging.getLogger("recallpack.mcp")

#: Bumped whenever what is stored changes: an older store is rebuilt. (How words are read is the
#: analysis chain's signature, among the settings.)
FORMAT = 2
_MANIFEST = "manifest.json"
_WORDS = "words.npz"
_BM25 = "bm25"
#: What an index folder holds; a folder holding anything else is not an index.
_OURS = frozenset({_MANIFEST, _WORDS, _BM25})


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _file_digest(path: Path) -> str | None:
    """The SHA-256 of the file at ``path`` (None when there is no such file)."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def _whole(value: object) -> bool:
    """A whole number as JSON gives one (not a bool, which Python counts as an int)."""
    return is_int(value, minimum=0)


def _records(record: dict[str, Any]) -> bool:
    """Whether a stored file's record has the shape this version writes: a digest, a body length,
    a parent hash and windows of ``[start, end, token count, chunk id]``, each number whole, in
    order within the body."""
    windows, body = record.get("windows"), record.get("body")
    if not isinstance(windows, list) or not _whole(body) or not isinstance(record.get("digest"), str):
        return False
    if not isinstance(record.get("parent"), str):
        return False
    for window in windows:
        if not isinstance(window, list) or len(window) != 4:
            return False
        start, end, tokens, chunk_id = window
        if not (_whole(start) and _whole(end) and _whole(tokens) and isinstance(chunk_id, str)):
            return False
        if not start <= end <= body:
            return False
    return True


def _reason(exc: BaseException) -> str:
    """Why a part cannot be read, in a few words (the exception's own, or its type's name)."""
    said = str(exc).splitlines()[0][:200] if str(exc) else ""
    return said if isinstance(exc, _Corrupt) else f"{type(exc).__name__}: {said}".rstrip(": ")


class _Corrupt(Exception):
    """The store is not what this version wrote: rebuild it."""


class IndexStore:
    """The stored index at ``path`` for these ``settings`` (None when there is none to reuse, with
    :attr:`why` saying so when a store was there but could not be used)."""

    def __init__(self, path: str | Path, settings: dict[str, Any]) -> None:
        self.path = Path(path).resolve()
        if self.path.exists() and not self.path.is_dir():
            raise ConfigError(f"--index {str(path)!r} is a file; give a folder to keep the index in")
        # The folder is replaced whole when the index is saved: one that holds anything but an
        # index (a user's own files) is refused, never overwritten.
        held = self.path.iterdir() if self.path.is_dir() else iter(())
        others = sorted(p.name for p in held if p.name not in _OURS)
        if others or self.path.parent == self.path:
            raise ConfigError(
                f"--index {str(path)!r} holds other files ({', '.join(others[:3]) or 'a root'}); give a "
                "new or empty folder for the index alone: it is replaced whole when saved"
            )
        self.settings = {**settings, "format": FORMAT}
        self.why: str | None = None
        #: Each damage found in the store (a warning line each; the store is rebuilt).
        self.warnings: list[str] = []
        self._forget()
        if (self.path / _MANIFEST).exists():
            try:
                self._load()
            except Exception as exc:  # noqa: BLE001 - whatever a damaged store raises, it is rebuilt
                self._forget()
                self._warn(f"the index in {self.path} cannot be read ({_reason(exc)}); rebuilding it")
        elif self.path.is_dir() and any(self.path.iterdir()):
            self._warn(f"the index in {self.path} has no {_MANIFEST}; rebuilding it")

    def _warn(self, why: str) -> None:
        self.why = why
        self.warnings.append(why)
        logger.warning("%s", why)

    def _forget(self) -> None:
        """Nothing stored to reuse."""
        self.files: dict[str, dict[str, Any]] = {}
        self._vocab: list[str] = []
        self._ids: Any = numpy.zeros(0, dtype=numpy.int32)
        self._bounds: list[int] = [0]
        self._first: dict[str, int] = {}
        self._parts: dict[str, str] = {}

    def _check_part(self, name: str) -> Path:
        """The part ``name`` of the store, if its bytes are those the manifest recorded."""
        where = self.path / name
        if self._parts.get(name) != _file_digest(where):
            raise _Corrupt(f"{name} is not the one its manifest was written with")
        return where

    def _load(self) -> None:
        manifest = json.loads((self.path / _MANIFEST).read_text(encoding="utf-8"))
        if not isinstance(manifest, dict) or manifest.get("settings") != self.settings:
            if isinstance(manifest, dict) and isinstance(manifest.get("settings"), dict):
                self.why = f"the index in {self.path} was built with other settings; rebuilding it"
                logger.info("%s", self.why)
                return
            raise _Corrupt("its manifest is not this version's")
        files, vocab, parts = manifest["files"], manifest["vocab"], manifest["parts"]
        if not isinstance(files, dict) or not isinstance(vocab, list) or not all(
            isinstance(record, dict) and _records(record) for record in files.values()
        ):
            raise _Corrupt("its manifest is not this version's")
        if not all(isinstance(word, str) for word in vocab) or len(set(vocab)) != len(vocab):
            raise _Corrupt("its vocabulary is not a list of distinct words")
        if not isinstance(parts, dict) or not all(isinstance(v, str) for v in parts.values()):
            raise _Corrupt("its manifest does not record its parts")
        self._parts = parts
        with numpy.load(self._check_part(_WORDS), allow_pickle=False) as arrays:
            ids, lengths = arrays["ids"], arrays["lengths"]
        windows = sum(len(record["windows"]) for record in files.values())
        if ids.dtype.kind != "i" or lengths.dtype.kind != "i" or ids.ndim != 1 or (
            lengths.shape != (windows,) or int(lengths.sum()) != ids.shape[0] or (lengths < 0).any()
        ) or (ids.size and (ids.min() < 0 or ids.max() >= len(vocab))):
            raise _Corrupt("its words do not match its windows")
        # Word ids are read only for a file that needs them (when another file changed): a warm
        # start with nothing changed loads the BM25 index and never reads them.
        self._vocab, self._ids = vocab, ids
        self._bounds = numpy.concatenate(([0], numpy.cumsum(lengths))).tolist()
        at = 0
        for name, record in files.items():
            self._first[name] = at
            at += len(record["windows"])
        self.files = files

    def vocabulary(self) -> dict[str, int]:
        """The stored words' ids (a copy, for new words to be added to)."""
        return {word: i for i, word in enumerate(self._vocab)}

    def ids(self, name: str) -> list[list[int]]:
        """The word ids (of :meth:`vocabulary`) of each stored window of file ``name``."""
        first, bounds = self._first[name], self._bounds
        return [
            self._ids[bounds[w] : bounds[w + 1]].tolist()
            for w in range(first, first + len(self.files[name]["windows"]))
        ]

    def windows(self, name: str, body: str, text_digest: str) -> list[Window] | None:
        """The stored windows of file ``name`` if its text is the text they were cut from."""
        record = self.files.get(name)
        if record is None or record.get("digest") != text_digest or record.get("body") != len(body):
            return None
        parent, stored = record["parent"], record["windows"]
        try:
            windows = [
                Window(text=body[s:e], start=s, end=e, chunk_index=i, chunk_count=len(stored),
                       token_count=n, parent_hash=parent, chunk_id=chunk_id)
                for i, (s, e, n, chunk_id) in enumerate(stored)
                if isinstance(s, int) and isinstance(e, int) and 0 <= s <= e <= len(body)
            ]
        except (TypeError, ValueError):
            return None
        return windows if len(windows) == len(stored) else None

    def bm25(self, documents: int, words: int) -> Any:
        """The stored BM25 index, if it is the one written with this manifest and holds
        ``documents`` documents over ``words`` words (the stored vocabulary); else None, with a
        warning."""
        try:
            names = sorted(n for n in self._parts if n.startswith(_BM25 + "/"))
            held = sorted(f"{_BM25}/{p.name}" for p in (self.path / _BM25).iterdir())
            if not names or names != held:
                raise _Corrupt(f"its {_BM25} folder is not the one its manifest was written with")
            for name in names:
                self._check_part(name)
            bm25 = bm25s.BM25.load(str(self.path / _BM25), allow_pickle=False, show_progress=False)
            scores, vocab = bm25.scores, bm25.vocab_dict
            indices = scores["indices"]
            columns = len(scores["indptr"]) - 1  # a word's id is its column ("", bm25s's own, has none)
            if scores["num_docs"] != documents or (
                any(vocab.get(word) != i for i, word in enumerate(self._vocab))
                or len(vocab) - words not in (0, 1)  # bm25s adds "" to the vocabulary
                or any(not 0 <= i < columns for word, i in vocab.items() if word)
                or not int(scores["indptr"][-1]) == indices.size == scores["data"].size
                or (indices.size and (indices.min() < 0 or indices.max() >= documents))
            ):
                raise _Corrupt("its BM25 index is not over these windows")
            return bm25
        except Exception as exc:  # noqa: BLE001 - a store that does not load is rebuilt
            self._warn(f"the BM25 index in {self.path} cannot be read ({_reason(exc)}); rebuilding it")
            return None

    def save(self, files: dict[str, tuple[str, int, list[Window]]], ids: dict[str, list[list[int]]],
             vocab: dict[str, int], bm25: Any) -> None:
        """Write the index: ``files`` maps a name to its text's digest, its body's length and its
        windows; ``ids`` each window's word ids in ``vocab``. Written beside, then moved into
        place, so a crash halfway leaves the old store or none, never half of one."""
        flat: list[int] = []
        lengths: list[int] = []
        manifest_files = {}
        for name, (text_digest, body, windows) in files.items():
            for window_ids in ids[name]:
                flat.extend(window_ids)
                lengths.append(len(window_ids))
            manifest_files[name] = {
                "digest": text_digest, "body": body,
                "parent": windows[0].parent_hash if windows else "",
                "windows": [[w.start, w.end, w.token_count, w.chunk_id] for w in windows],
            }
        # Written beside the folder under a fresh name, then swapped in: no name a user's own
        # folder could have is ever written or removed.
        staging = Path(tempfile.mkdtemp(prefix=".recallpack-index-", dir=self.path.parent))
        try:
            numpy.savez(staging / _WORDS, ids=numpy.asarray(flat, dtype=numpy.int32),
                        lengths=numpy.asarray(lengths, dtype=numpy.int64))
            if bm25 is not None:
                bm25.save(str(staging / _BM25), show_progress=False)
            parts = {p.relative_to(staging).as_posix(): _file_digest(p)
                     for p in sorted(staging.rglob("*")) if p.is_file()}
            manifest = {"settings": self.settings, "files": manifest_files, "vocab": list(vocab),
                        "parts": parts}
            (staging / _MANIFEST).write_text(json.dumps(manifest), encoding="utf-8")
            if self.path.exists():
                old = Path(tempfile.mkdtemp(prefix=".recallpack-index-old-", dir=self.path.parent))
                self.path.rename(old / "index")
                staging.rename(self.path)
                shutil.rmtree(old)
            else:
                staging.rename(self.path)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
