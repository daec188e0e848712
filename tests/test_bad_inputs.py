"""One table of bad inputs across recallpack: each ends in a recallpack error naming the field.

The core, both adapters (construction and per call), the allowance (its own tables are
included) and the command line. A row is the call, the error class it must raise, and a
pattern naming the field; a bad input that escapes as a bare TypeError or KeyError, or is
accepted silently, fails here.
"""

from __future__ import annotations

import io
import json
import math
import re
from collections.abc import Callable
from contextlib import redirect_stderr, redirect_stdout
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("langchain_core")
pytest.importorskip("llama_index.core")

from langchain_core.documents import Document
from langchain_core.runnables import RunnableLambda
from llama_index.core.retrievers import BaseRetriever as LlamaRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from recallpack import (
    BudgetError,
    Candidate,
    CandidateError,
    ConfigError,
    LaneError,
    Packer,
    PolicyError,
    Reader,
    RecallpackError,
    Scope,
    TemplateError,
    TokenizerError,
    UpstreamError,
    chunk_size_for,
    count_tokens,
    get_tokenizer,
    pack,
    recall,
    recall_many,
    split_token_windows,
    truncate_to_tokens,
)
from recallpack.adapters import langchain as lc
from recallpack.adapters import llamaindex as li
from recallpack.allowance import Allowance, Remaining
from recallpack.cli import main as cli_main
from tests.adapters.test_langchain_memory_bad_inputs import BAD_INPUTS as MEMORY_BAD_INPUTS
from tests.test_allowance_bad_inputs import BAD_INPUTS as ALLOWANCE_BAD_INPUTS

DOCS = [Document(page_content="Paris is in France.")]
NODES = [NodeWithScore(node=TextNode(text="Paris is in France."), score=1.0)]
ONE = [Candidate(text="Paris is in France.")]
LONG = [Candidate(text="Paris is the capital of France. " * 100 + "The answer is 42. " + "Filler. " * 100)]


def upstream() -> RunnableLambda[str, list[Document]]:
    return RunnableLambda(lambda q: DOCS)


class Nodes(LlamaRetriever):
    """A LlamaIndex retriever returning fixed items (NodeWithScore or not)."""

    def __init__(self, items: list[Any]) -> None:
        self.items = items
        super().__init__()

    def _retrieve(self, query_bundle: QueryBundle) -> list[Any]:
        return self.items


def lc_retriever(**settings: Any) -> lc.BudgetedRetriever:
    return lc.BudgetedRetriever(retriever=upstream(), **settings)


def li_retriever(items: list[Any] | None = None, **settings: Any) -> li.BudgetedRetriever:
    return li.BudgetedRetriever(Nodes(NODES if items is None else items), **settings)


def row(probe: Callable[[], object], error: type[Exception], field: str, id: str) -> Any:
    """One table row; ``field`` is a literal substring the message must contain."""
    return pytest.param(probe, error, re.escape(field), id=id)


CORE = [
    row(lambda: recall(None), CandidateError, "candidates", "recall-none"),  # type: ignore[arg-type]
    row(lambda: recall("Paris"), CandidateError, "candidates", "recall-str"),  # type: ignore[arg-type]
    row(lambda: recall([42]), CandidateError, "candidates[0]", "recall-item-int"),  # type: ignore[list-item]
    row(lambda: recall([{"txt": "a"}]), CandidateError, "txt", "recall-item-key-typo"),
    row(lambda: recall(ONE, max_tokens=0), BudgetError, "max_tokens", "max-tokens-zero"),
    row(lambda: recall(ONE, max_tokens=1.5), BudgetError, "max_tokens", "max-tokens-float"),
    row(lambda: recall(ONE, max_tokens="100"), BudgetError, "max_tokens", "max-tokens-str"),
    row(lambda: recall(ONE, max_tokens=True), BudgetError, "max_tokens", "max-tokens-bool"),
    row(lambda: recall(ONE, max_tokens=10**9), BudgetError, "max_tokens", "max-tokens-huge"),
    row(lambda: recall(ONE, max_items=0), BudgetError, "max_items", "max-items-zero"),
    row(lambda: recall(ONE, policy="nope"), PolicyError, "policy", "policy-unknown"),
    row(lambda: recall(ONE, tokenizer="no-such-encoding"), TokenizerError, "no-such-encoding", "tokenizer-name"),
    row(lambda: recall(ONE, tokenizer=42), TokenizerError, "tokenizer", "tokenizer-int"),
    row(lambda: recall(ONE, lane_budgets=["facts"]), BudgetError, "lane_budgets", "lane-budgets-list"),
    row(lambda: recall(ONE, lane_budgets={"fact": 3}), LaneError, "lane_budgets", "lane-budgets-key"),
    row(lambda: recall(ONE, lane_budgets={"facts": -1}), BudgetError, "lane_budgets", "lane-budgets-neg"),
    row(lambda: recall(ONE, dedupe="no"), ConfigError, "dedupe", "dedupe-str"),
    row(lambda: recall(ONE, floor=1), ConfigError, "floor", "floor-int"),
    row(lambda: recall(ONE, cut="middle"), ConfigError, "cut", "cut-unknown"),
    row(lambda: recall(ONE, cut="focus"), ConfigError, "query", "cut-focus-no-query"),
    row(lambda: recall(ONE, query=5), ConfigError, "query", "query-int"),  # type: ignore[arg-type]
    row(lambda: recall(ONE, template=123), TemplateError, "template", "template-int"),
    row(lambda: recall(ONE, template="{% for %}"), TemplateError, "template", "template-syntax"),
    row(lambda: recall(ONE, template=Path("/no/such.j2")), TemplateError, "template", "template-path-missing"),
    row(lambda: recall(ONE, template="{{ 1/0 }}"), TemplateError, "template", "template-raises"),
    row(lambda: recall(ONE, resource_uri_template="{artifact}"), ConfigError, "resource_uri_template",
        "uri-template-field"),
    row(lambda: recall(ONE, resource_uri_template=5), ConfigError, "resource_uri_template", "uri-template-int"),
    row(lambda: recall(ONE, resource_uri_template="{artifact_id:>100000000}"), ConfigError,
        "resource_uri_template", "uri-template-format-spec"),
    row(lambda: recall(ONE, reader="me"), ConfigError, "reader", "reader-str"),
    row(lambda: recall(ONE, reader={"idd": "me"}), ConfigError, "Reader: idd", "reader-key-typo"),
    row(lambda: Reader(id=5), ConfigError, "id=5", "reader-id-int"),
    row(lambda: Reader(id="me", scopes=["org-1"]), ConfigError, "scopes", "reader-scopes-list"),
    row(lambda: Scope(name="club", descripton="x"), ConfigError, "description", "scope-typo"),
    row(lambda: recall(ONE, embed=42), ConfigError, "embed", "embed-int"),
    row(lambda: recall(LONG, max_tokens=80, query="answer", embed=lambda texts: [[1.0] * (i + 1) for i in range(len(texts))]),
        ConfigError, "embed", "embed-ragged-vectors"),
    row(lambda: recall(LONG, max_tokens=80, query="answer", embed=lambda texts: [["a"]] * len(texts)), ConfigError,
        "embed", "embed-str-vectors"),
    row(lambda: recall(ONE, citation_keys=5), ConfigError, "citation_keys", "citation-keys-int"),
    row(lambda: recall(ONE, max_token=100), ConfigError, "max_tokens", "recall-typo"),
    row(lambda: recall_many([ONE], queries=["a", "b"]), ConfigError, "queries", "recall-many-queries"),
    row(lambda: recall_many(None), CandidateError, "candidate_lists", "recall-many-none"),  # type: ignore[arg-type]
    row(lambda: recall(ONE, join=lambda texts: len(texts)), ConfigError, "join", "join-returns-int"),
    row(lambda: pack(ONE, 0), BudgetError, "max_tokens", "pack-zero"),
    row(lambda: Packer(max_token=100), ConfigError, "max_tokens", "packer-typo"),
    row(lambda: Packer().recall(ONE, polcy="skip"), ConfigError, "policy", "packer-call-typo"),
    row(lambda: Packer(reader=Reader(id="a")).recall(ONE, reader=Reader(id="b")), ConfigError, "reader",
        "packer-call-reader-swap"),
    row(lambda: Packer(reader=Reader(id="a")).replace(reader=None), ConfigError, "reader",
        "packer-reader-lifted"),
    row(lambda: Candidate(text=None), CandidateError, "text", "candidate-text-none"),
    row(lambda: Candidate(text=b"bytes"), CandidateError, "text", "candidate-text-bytes"),
    row(lambda: Candidate(text="a", lane="nope"), LaneError, "lane", "candidate-lane"),
    row(lambda: Candidate(text="a", score=math.nan), CandidateError, "score", "candidate-score-nan"),
    row(lambda: Candidate(text="a", score=math.inf), CandidateError, "score", "candidate-score-inf"),
    row(lambda: Candidate(text="a", scope_ids=[""]), CandidateError, "scope_ids", "candidate-scope-empty"),
    row(lambda: Candidate(text="a", scope_ids=0), CandidateError, "scope_ids", "candidate-scope-int"),
    row(lambda: Candidate(text="a", scope_ids=[["x"]]), CandidateError, "scope_ids", "candidate-scope-nested"),
    row(lambda: Candidate(text="a", colour="red"), CandidateError, "colour", "candidate-extra"),
    row(lambda: count_tokens(5), CandidateError, "text", "count-tokens-int"),  # type: ignore[arg-type]
    row(lambda: truncate_to_tokens(None, 3), CandidateError, "text", "truncate-text-none"),  # type: ignore[arg-type]
    row(lambda: count_tokens("a", "no-such-encoding"), TokenizerError, "no-such-encoding", "count-tokens-enc"),
    row(lambda: get_tokenizer(3.5), TokenizerError, "3.5", "get-tokenizer-float"),  # type: ignore[arg-type]
    row(lambda: truncate_to_tokens("abc", -1), BudgetError, "max_tokens", "truncate-negative"),
    row(lambda: Allowance(max_item=3), BudgetError, "did you mean 'max_items'", "allowance-typo"),
    row(lambda: Remaining(items=1, tokens=-1, blocks=1), BudgetError, "tokens=-1", "remaining-negative"),
    row(lambda: recall(ONE, allowance={"max_items": 3}), BudgetError, "allowance", "recall-allowance-dict"),
    row(lambda: split_token_windows("abc", 0), BudgetError, "max_tokens", "windows-zero"),
]

def warm_then(call: Callable[..., object], good: dict[str, Any], bad: dict[str, Any]) -> Callable[[], object]:
    """A probe: ``call`` with ``good`` settings first (they are cached), then with ``bad``, equal
    to them (5 == 5.0 == numpy's 5, 1 == True) but of a type the setting refuses."""

    def probe() -> object:
        call(**good)
        return call(**bad)

    return probe


def module_recall(**settings: Any) -> object:
    return recall(ONE, **settings)


def module_pack(**settings: Any) -> object:
    return pack(ONE, **settings)


def module_recall_many(**settings: Any) -> object:
    return recall_many([ONE, ONE], **settings)


# A setting's cache must not let a value of the wrong type in because an equal one came first.
WARM = [
    row(warm_then(call, {name: good}, {name: bad}), error, name, f"warm-{where}-{name}-{kind}")
    for where, call in (("recall", module_recall), ("pack", module_pack), ("recall-many", module_recall_many))
    for name, good, bad, kind, error in (
        ("max_tokens", 64, 64.0, "float", BudgetError),
        ("max_tokens", 1, True, "bool", BudgetError),
        ("max_tokens", 64, np.int64(64), "numpy-int", BudgetError),
        ("max_items", 3, 3.0, "float", BudgetError),
        ("max_items", 1, True, "bool", BudgetError),
        ("max_items", 2, np.int32(2), "numpy-int", BudgetError),
        ("max_tokens_ceiling", 20_000, 20_000.0, "float", BudgetError),
        ("floor", True, 1, "int", ConfigError),
        ("dedupe", False, 0, "int", ConfigError),
        ("dedupe", True, np.bool_(True), "numpy-bool", ConfigError),
    )
]

# Settings and values read strictly: a bool is not an int, a str is not a number or a list.
STRICT = [
    row(lambda: recall(ONE, lane_budgets={"facts": True}), BudgetError, "lane_budgets['facts']", "lane-budget-bool"),
    row(lambda: recall(ONE, lane_budgets={"facts": "5"}), BudgetError, "lane_budgets['facts']", "lane-budget-str"),
    row(lambda: recall(ONE, lane_budgets={"facts": 5.0}), BudgetError, "lane_budgets['facts']", "lane-budget-float"),
    row(lambda: recall(ONE, lane_budgets={"facts": np.int64(5)}), BudgetError, "lane_budgets['facts']",
        "lane-budget-numpy"),
    row(lambda: recall(ONE, lane_budgets={b"facts": 5}), LaneError, "lane_budgets", "lane-budget-key-bytes"),
    row(lambda: recall(ONE, lane_budgets="facts"), BudgetError, "lane_budgets", "lane-budgets-str"),
    row(lambda: Packer(lane_budgets={"derived": False}), BudgetError, "lane_budgets['derived']",
        "packer-lane-budget-bool"),
    row(lambda: Remaining(items=1, tokens=True, blocks=1), BudgetError, "tokens", "remaining-tokens-bool"),
    row(lambda: Remaining(items=1, tokens=1.0, blocks=1), BudgetError, "tokens", "remaining-tokens-float"),
    row(lambda: Remaining(items=1, tokens="1", blocks=1), BudgetError, "tokens", "remaining-tokens-str"),
    row(lambda: Remaining(items=True, tokens=5, blocks=1), BudgetError, "items", "remaining-items-bool"),
    row(lambda: Remaining(items=1, tokens=5, blocks=np.int64(1)), BudgetError, "blocks", "remaining-blocks-numpy"),
    row(lambda: Candidate(text="a", score="0.5"), CandidateError, "score", "candidate-score-str"),
    row(lambda: Candidate(text="a", score=b"0.5"), CandidateError, "score", "candidate-score-bytes"),
    row(lambda: Candidate(text="a", score=Decimal("NaN")), CandidateError, "score", "candidate-score-decimal-nan"),
    row(lambda: Candidate(text="a", score=1 + 2j), CandidateError, "score", "candidate-score-complex"),
    row(lambda: Candidate(text="a", score=[0.5]), CandidateError, "score", "candidate-score-list"),
    row(lambda: Candidate(text="a", artifact_id=b"doc"), CandidateError, "artifact_id", "candidate-artifact-bytes"),
    row(lambda: Candidate(text="a", citation=b"a.md"), CandidateError, "citation", "candidate-citation-bytes"),
    row(lambda: Candidate(text="a", modality=b"text"), CandidateError, "modality", "candidate-modality-bytes"),
    row(lambda: recall_many([ONE, ONE], queries="ab"), ConfigError, "queries", "recall-many-queries-str"),
    row(lambda: recall_many([ONE, ONE], queries=b"ab"), ConfigError, "queries", "recall-many-queries-bytes"),
    row(lambda: recall_many([ONE, ONE], queries={"a", "b"}), ConfigError, "queries", "recall-many-queries-set"),
    row(lambda: recall_many([ONE, ONE], queries={"a": 1, "b": 2}), ConfigError, "queries",
        "recall-many-queries-dict"),
    row(lambda: recall_many([ONE, ONE], queries=["a", 5]), ConfigError, "queries[1]", "recall-many-queries-int"),
    row(lambda: Packer().recall_many([ONE, ONE], queries="ab"), ConfigError, "queries", "packer-many-queries-str"),
    row(lambda: recall_many([ONE, ONE], workers=2, fork_callables=1), ConfigError, "fork_callables",
        "recall-many-fork-callables-int"),
    row(lambda: recall(ONE, resource_uri_template=b"{artifact_id}"), ConfigError, "resource_uri_template",
        "uri-template-bytes"),
    row(lambda: recall(ONE, citation_keys=(b"source",)), ConfigError, "citation_keys", "citation-keys-bytes"),
    row(lambda: recall(ONE, citation_keys=["source", 5]), ConfigError, "citation_keys", "citation-keys-int-item"),
    row(lambda: Scope(name=b"club"), ConfigError, "name", "scope-name-bytes"),
    row(lambda: Scope(name="club", description=5), ConfigError, "description", "scope-description-int"),
    row(lambda: Reader(id=b"me"), ConfigError, "id", "reader-id-bytes"),
    row(lambda: Reader(open=1), ConfigError, "open", "reader-open-int"),
    row(lambda: Reader(open="yes"), ConfigError, "open", "reader-open-str"),
    row(lambda: Reader(id="me", scopes={1: Scope(name="x")}), ConfigError, "scopes", "reader-scopes-key-int"),
    row(lambda: recall(ONE, reader={"id": "me", "open": "true"}), ConfigError, "open", "recall-reader-dict-open-str"),
]


def raising(error: Exception) -> Callable[..., Any]:
    def fn(*args: Any, **kwargs: Any) -> Any:
        raise error

    return fn


class RaisingEmbeddings:
    """A LangChain-style embedding whose client fails (a timeout, say)."""

    def embed_query(self, text: str) -> list[float]:
        raise TimeoutError("embedding service timed out")

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        raise TimeoutError("embedding service timed out")


class RaisingEncoder:
    """A Hugging Face-style tokenizer whose encode fails on real text."""

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        raise RuntimeError("tokenizer backend crashed")


def lc_docs(*metadata: dict[str, Any]) -> lc.BudgetedRetriever:
    docs = [Document(page_content=f"document {i}", metadata=m) for i, m in enumerate(metadata)]
    return lc.BudgetedRetriever(retriever=RunnableLambda(lambda q: docs))


def li_scored(score: float) -> li.BudgetedRetriever:
    return li_retriever([NodeWithScore(node=TextNode(text="Paris is in France."), score=score)])


# scope_ids=[] has one meaning everywhere: malformed (a Candidate refuses it when it is built; an
# item handed to a call, a mapping or a host's, is withheld: tests/test_gate_order.py).
EMPTY_SCOPES = [
    row(lambda: Candidate(text="a", scope_ids=[]), CandidateError, "scope_ids=[] is empty", "scope-ids-empty-list"),
    row(lambda: Candidate(text="a", scope_ids=()), CandidateError, "scope_ids=() is empty", "scope-ids-empty-tuple"),
]

# Numbers that are no finite float, wherever a score comes from; the caller's code, raising.
NUMBERS = [
    row(lambda: Candidate(text="a", score=10**400), CandidateError, "does not fit a float", "score-huge-int"),
    row(lambda: Candidate(text="a", score=-math.inf), CandidateError, "score", "score-minus-inf"),
    row(lambda: Candidate(text="a", score=np.float64("nan")), CandidateError, "score", "score-numpy-nan"),
    row(lambda: Candidate(text="a", score=np.float32("inf")), CandidateError, "score", "score-numpy-inf"),
    row(lambda: recall([{"text": "a", "score": 10**400}]), CandidateError, "candidates[0]", "recall-dict-score-huge"),
    row(lambda: lc_docs({}, {"score": math.nan, "source": "notes.md"}).invoke("q"), CandidateError,
        "item 1 (source='notes.md')", "lc-metadata-score-nan"),
    row(lambda: lc_docs({"relevance_score": math.inf}).invoke("q"), CandidateError, "metadata['relevance_score']",
        "lc-metadata-relevance-inf"),
    row(lambda: lc_docs({"score": 10**400, "file_path": "/d/a.pdf"}).invoke("q"), CandidateError,
        "item 0 (file_path='/d/a.pdf')", "lc-metadata-score-huge"),
    row(lambda: lc_docs({"score": np.float64("nan")}).invoke("q"), CandidateError, "metadata['score']",
        "lc-metadata-score-numpy-nan"),
    row(lambda: lc_docs({"score": Decimal("NaN")}).invoke("q"), CandidateError, "metadata['score']",
        "lc-metadata-score-decimal-nan"),
    row(lambda: lc_docs({"score": Decimal("1e400")}).invoke("q"), CandidateError, "metadata['score']",
        "lc-metadata-score-decimal-huge"),
    row(lambda: lc_docs({"score": 1j}).invoke("q"), CandidateError, "metadata['score']", "lc-metadata-score-complex"),
    row(lambda: recall(ONE, tokenizer=lambda text: -1), TokenizerError, "non-negative", "tokenizer-negative-count"),
    row(lambda: recall(ONE, tokenizer=lambda text: np.int64(-3)), TokenizerError, "non-negative",
        "tokenizer-negative-numpy-count"),
    row(lambda: recall(ONE, tokenizer=lambda text: {"input_ids": [1]}), TokenizerError, "tokenizer",
        "tokenizer-returns-a-dict"),
    row(lambda: lc.BudgetCompressor().compress_documents([Document(page_content="a", metadata={"score": -math.inf})],
                                                        "q"), CandidateError, "item 0", "lc-compressor-score-inf"),
    row(lambda: li_scored(math.nan).retrieve("q"), CandidateError, "item 0", "li-node-score-nan"),
    row(lambda: li_scored(math.inf).recall("q"), CandidateError, "score", "li-node-score-inf"),
    row(lambda: li.BudgetPostprocessor().postprocess_nodes([NodeWithScore(node=TextNode(text="a"), score=math.nan)]),
        CandidateError, "item 0", "li-pp-node-score-nan"),
    row(lambda: lc.BudgetedRetriever.from_lanes({"facts": upstream()}, weights={"facts": 10**400}), ConfigError,
        "weights", "lc-weight-huge-int"),
    row(lambda: recall(ONE, tokenizer=raising(KeyError("no count"))), TokenizerError, "raised KeyError",
        "tokenizer-function-raises"),
    row(lambda: recall(ONE, tokenizer=RaisingEncoder()), TokenizerError, "raised RuntimeError",
        "tokenizer-encoder-raises"),
    row(lambda: recall(LONG, max_tokens=80, query="answer", embed=raising(ConnectionResetError("reset"))),
        ConfigError, "embed", "embed-function-raises"),
    row(lambda: recall(LONG, max_tokens=80, query="answer", embed=RaisingEmbeddings()), ConfigError,
        "raised TimeoutError", "embed-langchain-raises"),
    row(lambda: recall(ONE, join=raising(ValueError("bad join"))), ConfigError, "join raised ValueError",
        "join-raises"),
]

LANGCHAIN = [
    row(lambda: lc.BudgetedRetriever(), ConfigError, "retriever", "lc-no-upstream"),
    row(lambda: lc.BudgetedRetriever(retriever=42), ConfigError, "retriever", "lc-upstream-int"),
    row(lambda: lc_retriever(readers=Reader(id="me")), ConfigError, "reader", "lc-typo-readers"),
    row(lambda: lc_retriever(max_token=100), ConfigError, "max_tokens", "lc-typo-max-token"),
    row(lambda: lc_retriever(max_tokens=0), BudgetError, "max_tokens", "lc-max-tokens-zero"),
    row(lambda: lc_retriever(k=0), BudgetError, "k", "lc-k-zero"),
    row(lambda: lc_retriever(k=3, max_items=4), ConfigError, "max_items", "lc-k-disagrees"),
    row(lambda: lc_retriever(fetch_k=-1), BudgetError, "fetch_k", "lc-fetch-k-neg"),
    row(lambda: lc_retriever(lane="nope"), LaneError, "lane", "lc-lane"),
    row(lambda: lc_retriever(lane_key=""), ConfigError, "lane_key", "lc-lane-key-empty"),
    row(lambda: lc.BudgetedRetriever(lanes=[upstream()]), ConfigError, "lanes", "lc-lanes-list"),
    row(lambda: lc_retriever(on_unknown_lane="ignore"), ConfigError, "on_unknown_lane", "lc-on-unknown-lane"),
    row(lambda: lc.BudgetedRetriever.from_lanes({"nope": upstream()}), LaneError, "nope", "lc-lanes-key"),
    row(lambda: lc.BudgetedRetriever.from_lanes({"facts": upstream()}, weights={"facts": -1}), ConfigError,
        "weights", "lc-weight-neg"),
    row(lambda: lc.BudgetedRetriever.from_lanes({"facts": upstream()}, weights={"facts": math.nan}),
        ConfigError, "weights", "lc-weight-nan"),
    row(lambda: lc.BudgetedRetriever.from_lanes({"facts": upstream()}, rrf_k=0), ConfigError, "rrf_k",
        "lc-rrf-k"),
    row(lambda: lc_retriever().invoke("q", max_token=5), ConfigError, "max_tokens", "lc-invoke-typo"),
    row(lambda: lc_retriever().invoke("q", max_tokens=-5), BudgetError, "max_tokens", "lc-invoke-budget"),
    row(lambda: lc_retriever().invoke("q", fetch_k="all"), BudgetError, "fetch_k", "lc-invoke-fetch-k"),
    row(lambda: lc_retriever(reader=Reader(id="me")).invoke("q", reader=None), ConfigError, "reader",
        "lc-invoke-reader-lifted"),
    row(lambda: lc_retriever().as_evidence(polcy="skip"), ConfigError, "policy", "lc-as-evidence-typo"),
    row(lambda: lc_retriever().invoke("q", join="\n".join), ConfigError, "join", "lc-invoke-join"),
    row(lambda: lc.BudgetedRetriever(retriever=RunnableLambda(lambda q: "text")).invoke("q"), UpstreamError,
        "upstream", "lc-upstream-returns-str"),
    row(lambda: lc.BudgetCompressor(max_token=5), ConfigError, "max_tokens", "lc-compressor-typo"),
    row(lambda: lc.BudgetCompressor(policy="nope"), PolicyError, "policy", "lc-compressor-policy"),
    row(lambda: lc.BudgetCompressor().compress_documents(["text"], "q"), UpstreamError, "Document",
        "lc-compressor-input"),  # type: ignore[list-item]
    row(lambda: lc.BudgetCompressor().compress_documents(None, "q"), UpstreamError, "compressor input",
        "lc-compressor-none"),  # type: ignore[arg-type]
    row(lambda: lc.EvidenceRenderer(max_token=5), ConfigError, "max_tokens", "lc-renderer-typo"),
    row(lambda: lc.EvidenceRenderer(template=5), TemplateError, "template", "lc-renderer-template"),
    row(lambda: lc.render_evidence.invoke(DOCS, max_token=5), ConfigError, "max_tokens",
        "lc-renderer-invoke-typo"),
    row(lambda: lc.render_evidence.invoke("not documents"), UpstreamError, "render_evidence",
        "lc-renderer-input"),  # type: ignore[arg-type]
]

LLAMAINDEX = [
    row(lambda: li.BudgetPostprocessor(lane_budget={"facts": 3}), ConfigError, "lane_budgets", "li-pp-typo"),
    row(lambda: li.BudgetPostprocessor(max_tokens=0), BudgetError, "max_tokens", "li-pp-budget"),
    row(lambda: li.BudgetPostprocessor(response_mode="nope"), ConfigError, "response_mode", "li-pp-mode"),
    row(lambda: li.BudgetPostprocessor(reader="me"), ConfigError, "reader", "li-pp-reader-str"),
    row(lambda: li.BudgetPostprocessor().postprocess_nodes(["x"]), UpstreamError, "NodeWithScore",
        "li-pp-input"),  # type: ignore[list-item]
    row(lambda: li.BudgetPostprocessor().postprocess_nodes(None), UpstreamError, "nodes", "li-pp-none"),  # type: ignore[arg-type]
    row(lambda: li_retriever(max_token=5), ConfigError, "max_tokens", "li-ret-typo"),
    row(lambda: li_retriever(fetch_k=0), BudgetError, "fetch_k", "li-ret-fetch-k"),
    row(lambda: li_retriever(lane_key=""), ConfigError, "lane_key", "li-ret-lane-key"),
    row(lambda: li.BudgetedRetriever("not a retriever"), ConfigError, "retriever", "li-ret-upstream"),
    row(lambda: li.BudgetedRetriever.from_lanes({}), ConfigError, "lane", "li-lanes-empty"),
    row(lambda: li.BudgetedRetriever.from_lanes(["facts"]), ConfigError, "lanes", "li-lanes-list"),  # type: ignore[arg-type]
    row(lambda: li.BudgetedRetriever.from_lanes({"facts": Nodes(NODES)}, weights={"facts": math.inf}),
        ConfigError, "weights", "li-weight-inf"),
    row(lambda: li.BudgetedRetriever.from_lanes({"facts": Nodes(NODES)}, weight={"facts": 1}), ConfigError,
        "weights", "li-lanes-typo"),
]


class ReturnsText(LlamaRetriever):
    """A LlamaIndex retriever breaking its contract: its _retrieve returns a str."""

    def _retrieve(self, query_bundle: QueryBundle) -> Any:
        return "Paris is in France."


class Returns(LlamaRetriever):
    """A LlamaIndex retriever whose _retrieve returns whatever it was given."""

    def __init__(self, value: Any) -> None:
        self.value = value
        super().__init__()

    def _retrieve(self, query_bundle: QueryBundle) -> Any:
        return self.value


def deep(levels: int) -> dict[str, Any]:
    """Metadata nested past Python's recursion limit (as a careless loader can write it)."""
    top: dict[str, Any] = {}
    inner = top
    for _ in range(levels):
        inner["child"] = {}
        inner = inner["child"]
    return top


DEEP_NODES = [NodeWithScore(node=TextNode(text="Paris is in France.", metadata={"tree": deep(5_000)}), score=1.0)]

# Checked where they are given: the query and LangChain's own arguments, LlamaIndex's settings,
# chunk_size_for's; and what LlamaIndex itself fails on, named as the upstream's fault.
CHECKED_WHEN_BUILT = [
    row(lambda: lc_retriever().invoke("q", query="x"), ConfigError, "query=", "lc-invoke-query-kwarg"),
    row(lambda: lc_retriever().invoke("q", query=None), ConfigError, "query=", "lc-invoke-query-kwarg-none"),
    row(lambda: lc_retriever().as_evidence(query="x"), ConfigError, "query=", "lc-as-evidence-query-kwarg"),
    row(lambda: lc_retriever().invoke(None), ConfigError, "query must be a str", "lc-invoke-none"),  # type: ignore[arg-type]
    row(lambda: lc_retriever().invoke(b"q"), ConfigError, "query must be a str", "lc-invoke-bytes"),  # type: ignore[arg-type]
    row(lambda: lc_retriever().invoke(["q"]), ConfigError, "query must be a str", "lc-invoke-list"),  # type: ignore[arg-type]
    row(lambda: lc_retriever().recall(None), ConfigError, "query must be a str", "lc-recall-none"),  # type: ignore[arg-type]
    row(lambda: lc_retriever().as_evidence().invoke(None), ConfigError, "query must be a str",
        "lc-as-evidence-none"),  # type: ignore[arg-type]
    row(lambda: li_retriever(metadata_mode=5), ConfigError, "metadata_mode=5", "li-ret-metadata-mode-int"),
    row(lambda: li_retriever(metadata_mode="llmm"), ConfigError, "metadata_mode='llmm'", "li-ret-metadata-mode-str"),
    row(lambda: li_retriever(callback_manager="x"), ConfigError, "callback_manager='x'", "li-ret-callback-str"),
    row(lambda: li_retriever(callback_manager=[]), ConfigError, "callback_manager=[]", "li-ret-callback-list"),
    row(lambda: li.BudgetedRetriever.from_lanes({"facts": Nodes(NODES)}, metadata_mode=object()), ConfigError,
        "metadata_mode", "li-lanes-metadata-mode"),
    row(lambda: li.BudgetPostprocessor(metadata_mode="nope"), ConfigError, "metadata_mode", "li-pp-metadata-mode"),
    row(lambda: li_retriever().retrieve(None), ConfigError, "query must be a str", "li-retrieve-none"),  # type: ignore[arg-type]
    row(lambda: li_retriever().recall(5), ConfigError, "query must be a str", "li-recall-int"),  # type: ignore[arg-type]
    row(lambda: li.BudgetedRetriever(ReturnsText()).retrieve("q"), UpstreamError, "ReturnsText",
        "li-upstream-returns-str"),
    row(lambda: li.BudgetedRetriever(ReturnsText()).recall("q"), UpstreamError, "NodeWithScore",
        "li-upstream-returns-str-recall"),
    row(lambda: li.BudgetedRetriever.from_lanes({"facts": ReturnsText()}).retrieve("q"), UpstreamError,
        "ReturnsText", "li-lane-returns-str"),
    row(lambda: li.BudgetedRetriever(Returns(None)).retrieve("q"), UpstreamError, "Returns", "li-upstream-returns-none"),
    row(lambda: li.BudgetedRetriever(Returns(["a", "b"])).recall("q"), UpstreamError, "Returns",
        "li-upstream-returns-strs"),
    row(lambda: li.BudgetedRetriever(Returns([{"text": "a"}])).recall("q"), UpstreamError, "Returns",
        "li-upstream-returns-dicts"),
    row(lambda: li.BudgetedRetriever(Returns([TextNode(text="a")])).recall("q"), UpstreamError, "Returns",
        "li-upstream-returns-bare-nodes"),
    row(lambda: li.BudgetPostprocessor().postprocess_nodes(DEEP_NODES), UpstreamError, "upstream item 0",
        "li-pp-deep-metadata"),
    row(lambda: li_retriever(DEEP_NODES, metadata_mode="llm").recall("q"), UpstreamError, "metadata_mode='llm'",
        "li-ret-deep-metadata"),
    row(lambda: chunk_size_for(2048, 8, scopes=[5]), ConfigError, "scopes", "chunk-size-scopes-int"),
    row(lambda: chunk_size_for(2048, 8, scopes=[""]), ConfigError, "scopes", "chunk-size-scopes-empty-name"),
    row(lambda: chunk_size_for(2048, 8, scopes={"a": 1}), ConfigError, "scopes", "chunk-size-scopes-dict"),
    row(lambda: chunk_size_for(2048, 8, label=5), ConfigError, "label", "chunk-size-label-int"),
    row(lambda: chunk_size_for(2048, 8, label=""), ConfigError, "label", "chunk-size-label-empty"),
    row(lambda: chunk_size_for(2048, 8, resource_uri=5), ConfigError, "resource_uri", "chunk-size-uri-int"),
    row(lambda: chunk_size_for(2048, "8"), BudgetError, "items", "chunk-size-items-str"),
    row(lambda: chunk_size_for(2048, 8, tokenizer=5), TokenizerError, "tokenizer", "chunk-size-tokenizer-int"),
]


def cli(args: list[str]) -> tuple[int, str]:
    """Run the command line in-process: its exit status and what it wrote to stderr."""
    err, out = io.StringIO(), io.StringIO()
    with redirect_stderr(err), redirect_stdout(out):
        try:
            code = cli_main(args)
        except SystemExit as exc:  # argparse exits on a bad flag
            code = exc.code if isinstance(exc.code, int) else 2
    return code, err.getvalue()


CLI_ROWS = [
    pytest.param(["pack", "/no/such/file.jsonl"], r"/no/such/file\.jsonl", id="cli-missing-file"),
    pytest.param(["pack", "{dir}"], r"directory", id="cli-directory"),
    pytest.param(["pack", "{good}", "--max-tokens", "0"], r"max.tokens", id="cli-max-tokens-zero"),
    pytest.param(["pack", "{good}", "--policy", "nope"], r"policy", id="cli-policy-unknown"),
    pytest.param(["pack", "{bad}"], r"line 2|:2:", id="cli-bad-json-line"),
]


TABLE = [*CORE, *WARM, *STRICT, *EMPTY_SCOPES, *NUMBERS, *CHECKED_WHEN_BUILT, *LANGCHAIN, *LLAMAINDEX, *ALLOWANCE_BAD_INPUTS, *MEMORY_BAD_INPUTS]


def test_the_table_is_large_and_spans_every_surface() -> None:
    """At least 40 rows of our own, plus the allowance's and the memory tool's tables."""
    assert len(CORE) + len(LANGCHAIN) + len(LLAMAINDEX) + len(CLI_ROWS) >= 40
    assert len(LANGCHAIN) >= 10 and len(LLAMAINDEX) >= 5
    assert ALLOWANCE_BAD_INPUTS and MEMORY_BAD_INPUTS


@pytest.mark.filterwarnings("ignore::recallpack.RecallpackWarning")
@pytest.mark.parametrize(("probe", "error", "field"), TABLE)
def test_bad_input_raises_a_recallpack_error_naming_the_field(
    probe: Callable[[], object], error: type[RecallpackError], field: str
) -> None:
    """Each bad input raises its recallpack error (never a bare Python error), naming the field."""
    with pytest.raises(Exception) as caught:
        probe()
    assert isinstance(caught.value, RecallpackError), f"{type(caught.value).__name__}: {caught.value}"
    assert isinstance(caught.value, error), f"{type(caught.value).__name__}: {caught.value}"
    assert re.search(field, str(caught.value)), str(caught.value)


@pytest.mark.parametrize(("args", "field"), CLI_ROWS)
def test_the_command_line_says_one_line_and_exits_2(args: list[str], field: str, tmp_path: Path) -> None:
    """A bad flag or file ends with exit status 2 and one line on stderr naming it, no traceback."""
    good = tmp_path / "good.jsonl"
    good.write_text(json.dumps({"text": "Paris is in France."}) + "\n")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"text": "fine"}) + "\n{not json\n")
    paths = {"{good}": str(good), "{bad}": str(bad), "{dir}": str(tmp_path)}
    code, err = cli([paths.get(a, a) for a in args])
    assert code == 2, err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert re.search(field, lines[0]), lines[0]


CALLERS_CODE = [
    pytest.param(lambda: recall(ONE, tokenizer=raising(KeyError("no count"))), KeyError, id="tokenizer-function"),
    pytest.param(lambda: recall(ONE, tokenizer=RaisingEncoder()), RuntimeError, id="tokenizer-encoder"),
    pytest.param(lambda: recall(LONG, max_tokens=80, query="answer", embed=raising(ConnectionResetError("reset"))),
                 ConnectionResetError, id="embed-function"),
    pytest.param(lambda: recall(LONG, max_tokens=80, query="answer", embed=RaisingEmbeddings()), TimeoutError,
                 id="embed-langchain"),
    pytest.param(lambda: lc.BudgetedRetriever(retriever=RunnableLambda(lambda q: [Document(page_content=LONG[0].text)]),
                                              embed=RaisingEmbeddings(), max_tokens=80).invoke("answer"),
                 TimeoutError, id="embed-through-langchain-retriever"),
    pytest.param(lambda: recall(ONE, join=raising(ValueError("bad join"))), ValueError, id="join"),
]


@pytest.mark.parametrize(("probe", "original"), CALLERS_CODE)
def test_an_exception_in_the_callers_code_is_the_cause_of_a_recallpack_error(
    probe: Callable[[], object], original: type[Exception]
) -> None:
    """What the caller's tokenizer, embedding or join raised is kept as ``__cause__``."""
    with pytest.raises(RecallpackError) as caught:
        probe()
    assert isinstance(caught.value.__cause__, original), repr(caught.value.__cause__)
