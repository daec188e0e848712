"""A LlamaIndex query engine whose context fits a token budget, offline, in a few seconds.

Indexes real text that every Python install carries (the docstrings of some standard-library
modules and their public functions and classes) with BM25, asks a question through a
RetrieverQueryEngine with recallpack's BudgetPostprocessor, and prints the exact prompt the
LLM received (LlamaIndex's MockLLM, so no key and no network) and recallpack's report.

    python examples/llamaindex_query_engine.py ["your question"] [--max-tokens N]
"""

from __future__ import annotations

import argparse
import importlib
import inspect

from llama_index.core import Settings
from llama_index.core.llms import CompletionResponse, MockLLM
from llama_index.core.llms.callbacks import llm_completion_callback
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import Document
from llama_index.retrievers.bm25 import BM25Retriever

from recallpack import count_tokens
from recallpack.adapters.llamaindex import BudgetPostprocessor, report_of

MODULES = [
    "argparse", "asyncio", "collections", "contextlib", "csv", "dataclasses", "datetime",
    "functools", "getopt", "gzip", "heapq", "itertools", "json", "logging", "optparse",
    "os", "pathlib", "pickle", "random", "re", "shlex", "shutil", "sqlite3", "statistics",
    "string", "subprocess", "tempfile", "textwrap", "threading", "typing", "unittest",
    "urllib.parse", "uuid", "zipfile",
]  # fmt: skip


class PrintingLLM(MockLLM):
    """MockLLM that remembers the last prompt, so the example can show exactly what was sent."""

    last_prompt: str = ""

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: object) -> CompletionResponse:
        self.last_prompt = prompt
        return CompletionResponse(text="(MockLLM: no model was called)")


def stdlib_documents() -> list[Document]:
    """One Document per module or public member docstring: real prose, available offline."""
    documents = []
    for name in MODULES:
        module = importlib.import_module(name)
        if module.__doc__:
            documents.append(Document(text=inspect.cleandoc(module.__doc__), metadata={"source": name}))
        for attr, member in sorted(vars(module).items()):
            if attr.startswith("_") or getattr(member, "__module__", None) != module.__name__:
                continue
            doc = inspect.getdoc(member)
            if doc and len(doc.split()) >= 12:
                documents.append(Document(text=doc, metadata={"source": f"{name}.{attr}"}))
    return documents


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("question", nargs="?", default="how do I parse command line arguments")
    parser.add_argument("--max-tokens", type=int, default=512)
    args = parser.parse_args()

    nodes = SentenceSplitter(chunk_size=128, chunk_overlap=0).get_nodes_from_documents(stdlib_documents())
    retriever = BM25Retriever.from_defaults(nodes=nodes, similarity_top_k=20)
    llm = PrintingLLM()
    Settings.llm = llm
    budget = BudgetPostprocessor(max_tokens=args.max_tokens)
    engine = RetrieverQueryEngine.from_args(retriever, llm=llm, node_postprocessors=[budget])

    response = engine.query(args.question)

    report = report_of(response)  # this query's own report, carried by its source nodes
    assert report is not None
    print(f"Indexed {len(nodes)} chunks of standard-library docstrings with BM25.")
    print(f"Question: {args.question}\n")
    print("=" * 30, "the exact prompt the LLM received", "=" * 30)
    print(llm.last_prompt)
    print("=" * 30, "recallpack report", "=" * 30)
    print(report.summary())
    for node in response.source_nodes:
        meta = node.node.metadata
        print(f"  kept {meta['source']:<28} score={node.score:6.2f} tokens={meta['token_count']}")
    context = llm.last_prompt.split("-" * 21 + "\n")[1].rsplit("\n" + "-" * 21, 1)[0]
    print(f"Context in the prompt: {count_tokens(context)} tokens (max_tokens={args.max_tokens})")


if __name__ == "__main__":
    main()
