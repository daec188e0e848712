"""TokenWindowSplitter: LangChain's text-splitter conventions, on recallpack's token windows."""

from __future__ import annotations

import copy
import subprocess
import sys

import pytest

pytest.importorskip("langchain_core")
pytest.importorskip("langchain_text_splitters")

from langchain_core.documents import BaseDocumentTransformer, Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.vectorstores import InMemoryVectorStore
from langchain_text_splitters import TextSplitter

from recallpack import count_tokens
from recallpack.adapters.langchain.splitter import TokenWindowSplitter
from recallpack.packing.counting.windows import CHUNK_METADATA_KEYS, token_windows
from recallpack.testing import stdlib_docs


def documents(n: int = 6) -> list[Document]:
    return [
        Document(page_content=doc, metadata={"source": f"{name}.py", "tags": ["stdlib"]})
        for name, doc in stdlib_docs()[:n]
    ]


def test_is_a_langchain_text_splitter() -> None:
    """It is a TextSplitter and a BaseDocumentTransformer, so LangChain code that takes either takes it."""
    splitter = TokenWindowSplitter(max_tokens=64, overlap_tokens=8)
    assert isinstance(splitter, TextSplitter) and isinstance(splitter, BaseDocumentTransformer)


def test_split_documents_keeps_metadata_and_adds_the_chunk() -> None:
    """Each chunk keeps its document's metadata (a copy), adds the chunk keys, and its id is the chunk id."""
    docs = documents()
    originals = copy.deepcopy([d.metadata for d in docs])
    chunks = TokenWindowSplitter(max_tokens=64, overlap_tokens=8).split_documents(docs)
    assert len(chunks) > len(docs)
    by_source = {d.metadata["source"]: d for d in docs}
    for chunk in chunks:
        parent = by_source[chunk.metadata["source"]]
        assert chunk.metadata["tags"] == ["stdlib"]
        assert set(CHUNK_METADATA_KEYS) <= set(chunk.metadata)
        assert chunk.id == chunk.metadata["chunk_id"]
        start, end = chunk.metadata["start_char"], chunk.metadata["end_char"]
        assert parent.page_content[start:end] == chunk.page_content
        assert chunk.metadata["token_count"] == count_tokens(chunk.page_content) <= 64
    chunks[0].metadata["tags"].append("changed")
    assert chunks[1].metadata["tags"] == ["stdlib"] and [d.metadata for d in docs] == originals


def test_chunk_index_and_count_describe_each_document() -> None:
    """chunk_index runs 0..chunk_count-1 within each document, and parent_hash is shared by its chunks."""
    chunks = TokenWindowSplitter(max_tokens=48, overlap_tokens=0).split_documents(documents(3))
    for source in {c.metadata["source"] for c in chunks}:
        own = [c for c in chunks if c.metadata["source"] == source]
        assert [c.metadata["chunk_index"] for c in own] == list(range(len(own)))
        assert {c.metadata["chunk_count"] for c in own} == {len(own)}
        assert len({c.metadata["parent_hash"] for c in own}) == 1


def test_split_text_and_transform_documents_agree_with_the_core() -> None:
    """split_text gives the core's windows; transform_documents is split_documents."""
    splitter = TokenWindowSplitter(max_tokens=40, overlap_tokens=5, tokenizer="o200k_base")
    text = stdlib_docs()[0][1]
    assert splitter.split_text(text) == [w.text for w in token_windows(text, 40, 5, "o200k_base")]
    docs = documents(2)
    assert splitter.transform_documents(docs) == splitter.split_documents(docs)
    assert splitter.tokenizer_used == "o200k_base"


def test_create_documents_and_start_index() -> None:
    """create_documents pairs texts with metadatas; add_start_index also sets LangChain's start_index."""
    splitter = TokenWindowSplitter(max_tokens=5, overlap_tokens=0, add_start_index=True)
    chunks = splitter.create_documents(
        ["alpha beta gamma delta epsilon zeta eta", "one"], [{"n": 1}, {"n": 2}]
    )
    assert [c.metadata["n"] for c in chunks] == [1] * (len(chunks) - 1) + [2]
    assert all(c.metadata["start_index"] == c.metadata["start_char"] for c in chunks)


def test_the_users_tokenizer_counts() -> None:
    """tokenizer= takes what recall() takes: here a word counter, whose count every chunk respects."""
    splitter = TokenWindowSplitter(max_tokens=7, overlap_tokens=2, tokenizer=lambda t: len(t.split()))
    chunks = splitter.split_text(" ".join(f"w{i}" for i in range(50)))
    assert all(len(c.split()) <= 7 for c in chunks) and len(chunks) > 7


def test_ids_are_stable_across_processes() -> None:
    """The same documents split the same way get the same Document ids in a fresh interpreter."""
    code = (
        "from recallpack.adapters.langchain.splitter import TokenWindowSplitter;"
        "from recallpack.testing import stdlib_docs;"
        "from langchain_core.documents import Document;"
        "docs = [Document(page_content=d) for _, d in stdlib_docs()[:4]];"
        "print(' '.join(c.id for c in TokenWindowSplitter(96, 12).split_documents(docs)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    docs = [Document(page_content=d) for _, d in stdlib_docs()[:4]]
    assert out == [c.id for c in TokenWindowSplitter(96, 12).split_documents(docs)]


def test_reindexing_the_same_documents_adds_nothing() -> None:
    """Adding the same documents' chunks to an InMemoryVectorStore again replaces them: the store does not grow."""
    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=16))
    splitter = TokenWindowSplitter(max_tokens=64, overlap_tokens=8)
    store.add_documents(splitter.split_documents(documents()))
    size = len(store.store)
    assert size > 6
    store.add_documents(splitter.split_documents(documents()))
    assert len(store.store) == size


def test_appending_to_a_document_keeps_its_earlier_chunk_ids() -> None:
    """Re-splitting a document with text appended keeps the ids of every chunk but its last."""
    splitter = TokenWindowSplitter(max_tokens=32, overlap_tokens=4)
    text = stdlib_docs()[1][1]
    before = splitter.split_documents([Document(page_content=text)])
    after = splitter.split_documents([Document(page_content=text + "\n\nA new paragraph, appended later.")])
    assert [c.id for c in after[: len(before) - 1]] == [c.id for c in before[:-1]]
    assert after[len(before) - 1].id != before[-1].id
