"""TokenWindowNodeParser: LlamaIndex's node-parser conventions, on recallpack's token windows."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

pytest.importorskip("llama_index.core")

from llama_index.core import Document, Settings, VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.ingestion import IngestionPipeline
from llama_index.core.llms import MockLLM
from llama_index.core.node_parser import NodeParser, TextSplitter
from llama_index.core.schema import MetadataMode, NodeRelationship, TextNode
from llama_index.core.vector_stores import SimpleVectorStore

from recallpack import count_tokens
from recallpack.adapters.llamaindex.splitter import TokenWindowNodeParser
from recallpack.packing.counting.windows import CHUNK_METADATA_KEYS, token_windows
from recallpack.testing import stdlib_docs


@pytest.fixture(autouse=True)
def offline_models() -> Iterator[None]:
    """Mock LLM and embedding in Settings, so nothing here can reach for a real model."""
    saved = Settings._llm, Settings._embed_model
    Settings.llm = MockLLM()
    Settings.embed_model = MockEmbedding(embed_dim=8)
    yield
    Settings._llm, Settings._embed_model = saved


def documents(n: int = 5) -> list[Document]:
    return [
        Document(text=doc, id_=f"doc-{name}", metadata={"file_name": f"{name}.py"})
        for name, doc in stdlib_docs()[:n]
    ]


def test_is_a_llamaindex_text_splitter() -> None:
    """It is a NodeParser and a TextSplitter, so anywhere LlamaIndex takes a transformation takes it."""
    parser = TokenWindowNodeParser(max_tokens=64, overlap_tokens=8)
    assert isinstance(parser, NodeParser) and isinstance(parser, TextSplitter)
    assert parser.to_dict()["max_tokens"] == 64 and parser.class_name() == "TokenWindowNodeParser"


def test_nodes_keep_metadata_and_get_relationships() -> None:
    """Nodes keep their document's metadata, point to it (SOURCE) and to their neighbours (PREVIOUS/NEXT)."""
    docs = documents(3)
    nodes = TokenWindowNodeParser(max_tokens=48, overlap_tokens=6).get_nodes_from_documents(docs)
    by_id = {d.id_: d for d in docs}
    for node in nodes:
        assert isinstance(node, TextNode)
        parent = by_id[node.ref_doc_id or ""]
        assert node.metadata["file_name"] == parent.metadata["file_name"]
        assert set(CHUNK_METADATA_KEYS) <= set(node.metadata)
        assert node.id_ == node.metadata["chunk_id"]
        assert parent.text[node.start_char_idx : node.end_char_idx] == node.text
        assert (node.metadata["start_char"], node.metadata["end_char"]) == (
            node.start_char_idx,
            node.end_char_idx,
        )
        assert node.metadata["token_count"] == count_tokens(node.text) <= 48
    for doc in docs:
        own = [n for n in nodes if n.ref_doc_id == doc.id_]
        assert len(own) > 1
        assert NodeRelationship.PREVIOUS not in own[0].relationships
        assert NodeRelationship.NEXT not in own[-1].relationships
        for before, after in zip(own, own[1:]):
            assert before.relationships[NodeRelationship.NEXT].node_id == after.id_
            assert after.relationships[NodeRelationship.PREVIOUS].node_id == before.id_


def test_offsets_are_right_in_repetitive_text() -> None:
    """Overlapping windows of repeated text keep their own offsets (finding the text again would not)."""
    text = "the same sentence again. " * 40
    nodes = TokenWindowNodeParser(max_tokens=12, overlap_tokens=4)([Document(text=text)])
    windows = token_windows(text, 12, 4)
    assert [(n.start_char_idx, n.end_char_idx) for n in nodes] == [(w.start, w.end) for w in windows]


def test_chunk_keys_stay_out_of_embeddings_and_prompts() -> None:
    """The chunk bookkeeping is excluded from the embedded and the LLM text; the document's own metadata is not."""
    node = TokenWindowNodeParser(max_tokens=32, overlap_tokens=0)(documents(1))[0]
    for mode in (MetadataMode.EMBED, MetadataMode.LLM):
        content = node.get_content(metadata_mode=mode)
        assert "file_name" in content and "chunk_id" not in content and "parent_hash" not in content


def test_call_and_split_text_agree_with_the_core() -> None:
    """parser(docs) is get_nodes_from_documents; split_text gives the core's windows."""
    parser = TokenWindowNodeParser(max_tokens=40, overlap_tokens=5, tokenizer="o200k_base")
    docs = documents(2)
    assert [n.id_ for n in parser(docs)] == [n.id_ for n in parser.get_nodes_from_documents(docs)]
    assert parser.split_text(docs[0].text) == [
        w.text for w in token_windows(docs[0].text, 40, 5, "o200k_base")
    ]
    assert parser.tokenizer_used == "o200k_base"


def test_ids_are_stable_across_processes() -> None:
    """The same documents split the same way get the same node ids in a fresh interpreter."""
    code = (
        "from recallpack.adapters.llamaindex.splitter import TokenWindowNodeParser;"
        "from recallpack.testing import stdlib_docs;"
        "from llama_index.core import Document;"
        "docs = [Document(text=d) for _, d in stdlib_docs()[:4]];"
        "print(' '.join(n.id_ for n in TokenWindowNodeParser(96, 12)(docs)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    docs = [Document(text=d) for _, d in stdlib_docs()[:4]]
    assert out == [n.id_ for n in TokenWindowNodeParser(96, 12)(docs)]


def test_reinserting_the_same_documents_adds_nothing_to_the_index() -> None:
    """A VectorStoreIndex given the same documents' nodes again holds as many nodes and vectors as before."""
    parser = TokenWindowNodeParser(max_tokens=64, overlap_tokens=8)
    index = VectorStoreIndex.from_documents(
        documents(), transformations=[parser], embed_model=MockEmbedding(embed_dim=8)
    )
    vector_store = index.vector_store
    assert isinstance(vector_store, SimpleVectorStore)
    vectors, stored = len(vector_store.data.embedding_dict), len(index.docstore.docs)
    assert vectors == stored > 5
    for doc in documents():
        index.insert(doc)
    index.insert_nodes(parser(documents()))
    assert (len(vector_store.data.embedding_dict), len(index.docstore.docs)) == (vectors, stored)


def test_an_ingestion_pipeline_upserts_the_same_nodes() -> None:
    """An IngestionPipeline (no docstore to skip documents) run twice leaves one vector per chunk id."""
    vector_store = SimpleVectorStore()
    pipeline = IngestionPipeline(
        transformations=[TokenWindowNodeParser(max_tokens=64, overlap_tokens=8), MockEmbedding(embed_dim=8)],
        vector_store=vector_store,
    )
    first = pipeline.run(documents=documents())
    count = len(vector_store.data.embedding_dict)
    assert count == len(first) > 5
    pipeline.run(documents=documents())
    assert len(vector_store.data.embedding_dict) == count


def test_appending_to_a_document_keeps_its_earlier_node_ids() -> None:
    """Re-parsing a document with text appended keeps the ids of every node but its last."""
    parser = TokenWindowNodeParser(max_tokens=32, overlap_tokens=4)
    text = stdlib_docs()[1][1]
    before = parser([Document(text=text)])
    after = parser([Document(text=text + "\n\nA new paragraph, appended later.")])
    assert [n.id_ for n in after[: len(before) - 1]] == [n.id_ for n in before[:-1]]


def test_an_explicit_id_func_wins() -> None:
    """A user's id_func names the nodes, as in LlamaIndex's own parsers."""
    parser = TokenWindowNodeParser(max_tokens=16, overlap_tokens=0, id_func=lambda i, doc: f"{doc.id_}-{i}")
    nodes = parser([Document(text="one two three four five six " * 10, id_="d")])
    assert [n.id_ for n in nodes] == [f"d-{i}" for i in range(len(nodes))]
