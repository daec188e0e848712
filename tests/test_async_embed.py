"""Async calls never embed on the event loop: async methods are awaited, sync ones run in a worker."""

from __future__ import annotations

import asyncio
import inspect
import json
import threading
from typing import Any

import pytest

from recallpack import Candidate, Packer
from recallpack.testing import hashed_bag_of_words

MANUAL = inspect.getdoc(json) or ""
QUESTION = "use json.tool from the shell to validate and pretty-print"


class SlowSyncEmbedding:
    """A LangChain-shaped embedding with only sync methods, which waits for a signal from the loop.

    If it ran on the event loop thread, the task that sets the signal could never run and the wait
    would time out."""

    def __init__(self) -> None:
        self.signal = threading.Event()
        self.threads: list[int] = []

    def embed_query(self, text: str) -> list[float]:
        self.threads.append(threading.get_ident())
        if not self.signal.wait(timeout=10):
            raise AssertionError("the event loop was blocked while the embedding ran")
        return hashed_bag_of_words(text)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [hashed_bag_of_words(t) for t in texts]


class AsyncOnlyEmbedding:
    """A LangChain-shaped embedding whose sync methods must not be called from an async path."""

    def __init__(self) -> None:
        self.loops: list[asyncio.AbstractEventLoop] = []

    def embed_query(self, text: str) -> list[float]:
        raise AssertionError("the sync embed_query was called from an async call")

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        raise AssertionError("the sync embed_documents was called from an async call")

    async def aembed_query(self, text: str) -> list[float]:
        self.loops.append(asyncio.get_running_loop())
        await asyncio.sleep(0)
        return hashed_bag_of_words(text)

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        self.loops.append(asyncio.get_running_loop())
        return [hashed_bag_of_words(t) for t in texts]


def manual() -> list[Candidate]:
    return [Candidate(text=MANUAL, metadata={"source": "json"})]


async def test_a_sync_embedding_runs_off_the_loop_while_other_tasks_go_on() -> None:
    """arecall with a slow sync embedding: a concurrent task runs (and unblocks it) meanwhile."""
    embedding = SlowSyncEmbedding()
    packer = Packer(max_tokens=200, embed=embedding)

    async def release() -> None:
        await asyncio.sleep(0.01)
        embedding.signal.set()

    result, _ = await asyncio.gather(packer.arecall(manual(), query=QUESTION), release())
    assert result.report.cut == "focus" and embedding.threads
    assert embedding.threads[0] != threading.get_ident()  # a worker thread, not the loop's


async def test_async_methods_are_awaited_on_the_callers_loop() -> None:
    """An embedding with aembed_query/aembed_documents: those are awaited, on this very loop."""
    embedding = AsyncOnlyEmbedding()
    result = await Packer(max_tokens=200, embed=embedding).arecall(manual(), query=QUESTION)
    assert result.report.cut == "focus" and result.report.tokens_used <= 200
    assert embedding.loops and all(loop is asyncio.get_running_loop() for loop in embedding.loops)


async def test_arecall_gives_recalls_bytes() -> None:
    """arecall and recall of the same input give the same block and report."""
    class Both(AsyncOnlyEmbedding):
        def embed_query(self, text: str) -> list[float]:
            return hashed_bag_of_words(text)

        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return [hashed_bag_of_words(t) for t in texts]

    packer = Packer(max_tokens=200, embed=Both())
    synchronous = packer.recall(manual(), query=QUESTION)
    asynchronous = await packer.arecall(manual(), query=QUESTION)
    assert asynchronous.to_markdown() == synchronous.to_markdown()
    assert asynchronous.report == synchronous.report


async def test_without_an_embedding_arecall_stays_on_the_loop() -> None:
    """No embed: the packing is a short CPU walk and runs inline, in the caller's thread."""
    seen: list[int] = []

    def count(text: str) -> int:
        seen.append(threading.get_ident())
        return len(text) // 4 + 1

    await Packer(max_tokens=200, tokenizer=count).arecall(manual(), query=QUESTION)
    assert seen and set(seen) == {threading.get_ident()}


def test_no_thread_is_left_running() -> None:
    """After the caller's asyncio.run returns, no thread that arecall used is still alive."""
    before = set(threading.enumerate())

    async def main() -> None:
        embedding = SlowSyncEmbedding()
        embedding.signal.set()
        await Packer(max_tokens=200, embed=embedding).arecall(manual(), query=QUESTION)

    asyncio.run(main())
    assert set(threading.enumerate()) <= before


def test_sync_recall_never_touches_an_event_loop() -> None:
    """recall() with an async-capable embedding calls its sync methods, with no loop involved."""
    class Both(AsyncOnlyEmbedding):
        calls = 0

        def embed_query(self, text: str) -> list[float]:
            Both.calls += 1
            return hashed_bag_of_words(text)

        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return [hashed_bag_of_words(t) for t in texts]

    embedding = Both()
    Packer(max_tokens=200, embed=embedding).recall(manual(), query=QUESTION)
    assert Both.calls == 1 and embedding.loops == []


# -- the hosts' async paths ----------------------------------------------------------------------


async def test_langchain_ainvoke_and_acompress_await_the_embedding() -> None:
    """BudgetedRetriever.ainvoke and BudgetCompressor.acompress_documents use aembed_*."""
    pytest.importorskip("langchain_core")
    from langchain_core.documents import Document
    from langchain_core.runnables import RunnableLambda

    from recallpack.adapters.langchain import BudgetCompressor, BudgetedRetriever

    doc = Document(page_content=MANUAL, metadata={"source": "json"})
    embedding = AsyncOnlyEmbedding()
    retriever = BudgetedRetriever(retriever=RunnableLambda(lambda q: [doc]), max_tokens=200, embed=embedding)
    (kept,) = await retriever.ainvoke(QUESTION)
    assert "json.tool" in kept.page_content and len(embedding.loops) == 2
    (compressed,) = await BudgetCompressor(max_tokens=200, embed=embedding).acompress_documents([doc], QUESTION)
    assert compressed.page_content == kept.page_content and len(embedding.loops) == 4


async def test_llamaindex_async_paths_await_aget_embeddings() -> None:
    """LlamaIndex aretrieve and apostprocess_nodes use aget_query_embedding/aget_text_embedding_batch."""
    pytest.importorskip("llama_index.core")
    from llama_index.core.base.base_retriever import BaseRetriever
    from llama_index.core.schema import NodeWithScore, TextNode

    from recallpack.adapters.llamaindex import BudgetedRetriever, BudgetPostprocessor
    from recallpack.testing import HashingEmbedding

    calls: list[str] = []

    class Recording(HashingEmbedding):  # type: ignore[misc, valid-type]
        def _get_query_embedding(self, query: str) -> list[float]:
            raise AssertionError("the sync query embedding was called from an async path")

        def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
            raise AssertionError("the sync text embeddings were called from an async path")

        async def _aget_query_embedding(self, query: str) -> list[float]:
            calls.append("query")
            return self.embed(query)

        async def _aget_text_embeddings(self, texts: list[str]) -> list[list[float]]:
            calls.append("texts")
            return [self.embed(t) for t in texts]

    nodes = [NodeWithScore(node=TextNode(text=MANUAL), score=1.0)]

    class Fixed(BaseRetriever):
        def _retrieve(self, query_bundle: Any) -> list[NodeWithScore]:
            return list(nodes)

    embedding = Recording()
    (kept,) = await BudgetedRetriever(Fixed(), max_tokens=200, embed=embedding).aretrieve(QUESTION)
    # aget_text_embedding_batch awaits the texts in batches of embed_batch_size.
    assert "json.tool" in kept.node.get_content() and calls[0] == "query" and set(calls) == {"query", "texts"}
    processor = BudgetPostprocessor(max_tokens=200, embed=embedding)
    (processed,) = await processor.apostprocess_nodes(nodes, query_str=QUESTION)
    assert "json.tool" in processed.node.get_content() and calls.count("query") == 2
