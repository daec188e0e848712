"""The same input packs to the same bytes: a digest of a few thousand real packings, held.

Real text nobody here wrote (SQuAD and XQuAD, ``benchmarks/data/``: 13 languages, 10 scripts) is
packed under every policy, in three shapes (whole paragraphs; overlapping chunks of an article
with their offsets, one of them wrong; paragraphs in scopes, some withheld), at three budgets, with
a joined view, item caps, another tokenizer and the language off for some of them. The digest of
every result (its block, evidence, report and trace) is kept per language and policy in
``tests/data/packings.json``, so a change that moves a byte names where.

A change that means to move bytes says so in its commit, and writes the digests again:
``RECALLPACK_WRITE_PACKINGS=1 python -m pytest tests/test_same_bytes.py``.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from recallpack import POLICIES, Candidate, Reader, Scope, pack, recall

ROOT = Path(__file__).resolve().parents[1]
SQUAD = ROOT / "benchmarks" / "data" / "squad-v1.1-dev-12-articles.json.gz"
XQUAD = ROOT / "benchmarks" / "data" / "xquad-12-languages-dev-12-articles.json.gz"
HELD = Path(__file__).with_name("data") / "packings.json"
BUDGETS = (64, 256, 1024)
CHUNK_CHARS, OVERLAP_CHARS = 700, 150
READER = Reader(id="u-1", scopes={"team-a": Scope(name="team a"), "team-b": Scope(name="team b")})


def _articles() -> dict[str, list[dict[str, Any]]]:
    with gzip.open(XQUAD, "rt", encoding="utf-8") as handle:
        languages: dict[str, list[dict[str, Any]]] = json.load(handle)["languages"]
    with gzip.open(SQUAD, "rt", encoding="utf-8") as handle:
        languages["squad"] = json.load(handle)["articles"]
    return languages


def _chunks(title: str, text: str) -> list[Candidate]:
    """Overlapping chunks at spaces, each with its offset, as a splitter with add_start_index makes."""
    chunks: list[Candidate] = []
    start = 0
    while start < len(text):
        end = min(len(text), start + CHUNK_CHARS)
        if end < len(text):
            space = text.rfind(" ", start + CHUNK_CHARS // 2, end)
            end = space if space > 0 else end
        chunks.append(Candidate(text=text[start:end], metadata={"source": title, "start_index": start}))
        if end >= len(text):
            break
        back = text.find(" ", max(start + 1, end - OVERLAP_CHARS), end)
        start = back + 1 if back > 0 else end
    if len(chunks) > 2:  # someone else's offsets are hints: one of them is wrong
        wrong = chunks[2]
        chunks[2] = wrong.model_copy(update={"metadata": {**wrong.metadata, "start_index": 3}})
    return chunks


def _shapes(articles: list[dict[str, Any]], a: int, q: int) -> Iterator[tuple[str, list[Any]]]:
    article, after = articles[a], articles[(a + 1) % len(articles)]
    paragraphs = [(article["title"], p["text"]) for p in article["paragraphs"]]
    paragraphs += [(after["title"], p["text"]) for p in after["paragraphs"]][:5]
    shift = q % len(paragraphs)  # the answer's paragraph is not always first
    ranked = paragraphs[shift:] + paragraphs[:shift]
    yield (
        "paragraphs",
        [
            Candidate(text=text, metadata={"source": f"{title}.txt", "paragraph": n})
            for n, (title, text) in enumerate(ranked)
        ],
    )
    joined = "\n\n".join(p["text"] for p in article["paragraphs"])
    chunks = _chunks(article["title"], joined)
    yield "chunks", chunks[q % 3 :] + chunks[: q % 3]
    scope_ids = (["team-a"], ["u-1"], ["team-c"], [], ["team-b", "team-a"])
    yield (
        "scoped",
        [
            # Mappings, as a host's loader hands them: a malformed one is withheld, not raised.
            {"text": text, "scope_ids": scope_ids[n % len(scope_ids)], "citation": f"{title}#{n}"}
            for n, (title, text) in enumerate(ranked)
        ],
    )


def _packings(language: str, articles: list[dict[str, Any]], policy: str) -> Iterator[str]:
    """Every packing of one language under one policy, each as the text its digest is made of."""
    for a, article in enumerate(articles):
        questions = [qa["question"] for p in article["paragraphs"] for qa in p["qas"]]
        for q, question in enumerate(questions[:2]):
            for shape, candidates in _shapes(articles, a, q):
                for budget in BUDGETS:
                    settings: dict[str, Any] = {"max_tokens": budget, "policy": policy}
                    if shape == "scoped":
                        settings["reader"] = READER
                    if (a + q) % 3 == 1:
                        settings["max_items"] = 3
                    if (a + q) % 4 == 2:
                        settings["tokenizer"] = "o200k_base"
                    if a % 5 == 4:
                        settings["language"] = None
                    result = recall(candidates, query=question if q % 4 != 3 else None, **settings)
                    yield json.dumps(result.to_dict(), sort_keys=True, ensure_ascii=False)
                    yield result.to_markdown()
            if policy == "prefix" and q == 0:
                kept = pack([Candidate(text=p["text"]) for p in article["paragraphs"]], 300)
                yield "\n".join(c.text for c in kept)


def _digests() -> dict[str, str]:
    digests: dict[str, str] = {}
    for language, articles in sorted(_articles().items()):
        for policy in POLICIES:
            h = hashlib.sha256()
            count = 0
            for text in _packings(language, articles, policy):
                h.update(text.encode("utf-8", "surrogatepass"))
                h.update(b"\0")
                count += 1
            digests[f"{language} {policy}"] = f"{count} {h.hexdigest()}"
    return digests


def test_real_packings_keep_their_bytes() -> None:
    digests = _digests()
    if os.environ.get("RECALLPACK_WRITE_PACKINGS") == "1":
        HELD.write_text(json.dumps(digests, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    held = json.loads(HELD.read_text(encoding="utf-8"))
    assert sum(int(d.split()[0]) for d in digests.values()) > 5000  # a few thousand, really packed
    moved = sorted(key for key in held.keys() | digests.keys() if held.get(key) != digests.get(key))
    assert not moved, f"these packings changed bytes: {moved}"
