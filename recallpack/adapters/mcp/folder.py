"""How ``recallpack serve --docs`` reads a folder (:mod:`recallpack.adapters.mcp.docs`): which files
it serves and which it skips and why, a sample of their text to choose the folder's language
from, and the BM25 index of the windows' word ids (the stored one,
or built again). Needs the ``mcp`` extra.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from recallpack.adapters.shared.extras import require

bm25s = require("bm25s", extra="mcp", feature=__name__)

from recallpack.adapters.mcp.index import IndexStore
from recallpack.packing.counting.windows import Window

__all__ = [
    "DOC_SUFFIXES", "MAX_FILE_BYTES", "Skipped", "bm25_of", "doc_paths", "read_files", "sample",
]

#: The files a docs folder is read for: text and Markdown.
DOC_SUFFIXES = (".md", ".markdown", ".mdx", ".txt", ".text", ".rst")
#: A file larger than this is skipped (with a note): a docs folder holds prose, not data dumps.
MAX_FILE_BYTES = 8 * 1024 * 1024


#: Characters of the folder's text read to choose its language: from files spread over the folder.
_SAMPLE_CHARS = 4000
_SAMPLE_FILES = 40


@dataclass(frozen=True)
class Skipped:
    path: str
    why: str


def doc_paths(root: Path) -> list[Path]:
    """The paths under ``root`` a docs folder is read for (by name: not hidden, a text suffix), sorted."""
    return [
        path for path in sorted(root.rglob("*"))
        if not _hidden(path.relative_to(root)) and path.suffix.lower() in DOC_SUFFIXES
    ]


def read_files(root: Path, paths: Iterable[Path], skipped: list[Skipped]) -> Iterator[tuple[str, str]]:
    """``(path relative to root, text)`` of each of ``paths`` (:func:`doc_paths`) that is a file.

    A symbolic link is judged by its target, not its name: a link that leads out of the folder,
    or to a hidden file or a file that is not text, is not followed; a link to a file that is
    served anyway is not served twice.
    """
    real_root = root.resolve()
    served: set[Path] = set()
    for path in paths:
        name = path.relative_to(root).as_posix()
        try:
            real = path.resolve()
            if not real.is_relative_to(real_root):
                skipped.append(Skipped(name, "a link to outside the folder"))
                continue
            if _hidden(real.relative_to(real_root)) or real.suffix.lower() not in DOC_SUFFIXES:
                skipped.append(Skipped(name, "a link to a hidden file or a file that is not text"))
                continue
            if not real.is_file() or real in served:
                continue
            served.add(real)
            if real.stat().st_size > MAX_FILE_BYTES:
                skipped.append(Skipped(name, f"larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB"))
                continue
            data = real.read_bytes()
        except OSError as exc:
            skipped.append(Skipped(name, f"cannot be read ({exc.strerror or exc})"))
            continue
        try:
            yield name, data.decode("utf-8-sig")
        except UnicodeDecodeError:
            skipped.append(Skipped(name, "not UTF-8 text"))


def _hidden(relative: Path) -> bool:
    return any(part.startswith(".") for part in relative.parts)


def bm25_of(files: dict[str, tuple[str, int, list[Window]]], ids: dict[str, list[list[int]]],
             vocab: dict[str, int], store: IndexStore | None, documents: int) -> Any:
    """The BM25 index of the windows (``documents`` of them not blank): the stored one when no
    file changed (``ids`` holds none: every file is the store's) and it is this folder's, else
    built from each window's word ids (the store's for the files not in ``ids``, in ``vocab``);
    the store is then rewritten."""
    if store is not None and not ids and set(files) == set(store.files):
        loaded = store.bm25(documents, len(vocab))
        if loaded is not None:
            return loaded
    # The stored files' ids, in the stored vocabulary (kept: they are never made words again).
    for name in files:
        if name not in ids and store is not None:
            ids[name] = store.ids(name)
    corpus = [window_ids for name, (_, _, windows) in files.items()
              for w, window_ids in zip(windows, ids[name]) if w.text.strip()]
    bm25 = None
    if corpus:
        bm25 = bm25s.BM25()
        bm25.index(bm25s.tokenization.Tokenized(ids=corpus, vocab=vocab), show_progress=False)
    if store is not None:
        store.save(files, ids, vocab, bm25)
    return bm25


def sample(bodies: list[str]) -> list[str]:
    """Text to choose the folder's language from: the start of up to ``_SAMPLE_FILES`` files spread
    over the folder, so that one English README does not name the language of a Chinese folder."""
    step = max(1, len(bodies) // _SAMPLE_FILES)
    chosen = bodies[::step][:_SAMPLE_FILES]
    share = _SAMPLE_CHARS // max(1, len(chosen))
    return [body[:share] for body in chosen]
