"""The LlamaIndex adapters count with Settings.tokenizer when the user set one."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("llama_index.core")

import llama_index.core  # noqa: E402
from llama_index.core import Settings  # noqa: E402
from llama_index.core.retrievers import BaseRetriever  # noqa: E402
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode  # noqa: E402

from recallpack.adapters.llamaindex import BudgetedRetriever, BudgetPostprocessor, report_of  # noqa: E402

TEXTS = [f"paragraph {i}: " + "alpha beta gamma delta " * (5 + i) for i in range(12)]


def words(text: str) -> list[str]:
    return text.split()


@pytest.fixture
def word_tokenizer() -> Iterator[None]:
    saved = llama_index.core.global_tokenizer
    Settings.tokenizer = words
    try:
        yield
    finally:
        llama_index.core.global_tokenizer = saved


class Fixed(BaseRetriever):
    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [NodeWithScore(node=TextNode(text=t), score=1.0) for t in TEXTS]


def test_postprocessor_counts_with_the_users_settings_tokenizer(word_tokenizer: None) -> None:
    """With Settings.tokenizer a word splitter, the kept context fits the budget in words."""
    processor = BudgetPostprocessor(max_tokens=60)
    nodes = [NodeWithScore(node=TextNode(text=t)) for t in TEXTS]
    kept = processor.postprocess_nodes(nodes)
    shown = [n.node.get_content(metadata_mode="llm") for n in kept]  # type: ignore[arg-type]
    views = ["\n\n".join(t.strip() for t in shown), str(["\n".join(shown)]), *shown]
    report = report_of(kept)
    assert kept and report is not None and max(len(words(v)) for v in views) == report.tokens_used <= 60
    assert report.tokenizer_used.startswith("llama_index Settings.tokenizer")


def test_retriever_block_fits_by_the_users_settings_tokenizer(word_tokenizer: None) -> None:
    """The retriever's rendered block fits max_tokens counted in words."""
    result = BudgetedRetriever(Fixed(), max_tokens=80).recall("alpha")
    assert result.evidence and len(words(result.to_markdown())) <= 80
    assert result.report.tokenizer_used.startswith("llama_index Settings.tokenizer")


def test_an_explicit_tokenizer_wins_over_settings(word_tokenizer: None) -> None:
    """tokenizer= on the component takes precedence over Settings.tokenizer."""
    processor = BudgetPostprocessor(max_tokens=60, tokenizer="chars")
    _, result = processor.pack_nodes([NodeWithScore(node=TextNode(text="x"))])
    assert result.report.tokenizer_used == "chars"


def test_llamaindex_default_tokenizer_is_not_mistaken_for_the_users() -> None:
    """LlamaIndex's own default (cl100k_base) is not reported as a user tokenizer."""
    Settings.tokenizer  # noqa: B018  (makes LlamaIndex install its default)
    processor = BudgetPostprocessor(max_tokens=60)
    _, result = processor.pack_nodes([NodeWithScore(node=TextNode(text="x"))])
    assert result.report.tokenizer_used == "cl100k_base"


def test_token_window_node_parser_counts_with_settings_tokenizer(word_tokenizer: None) -> None:
    """TokenWindowNodeParser defaults to Settings.tokenizer too, so its windows fit in words."""
    from llama_index.core import Document

    from recallpack.adapters.llamaindex import TokenWindowNodeParser

    parser = TokenWindowNodeParser(max_tokens=20, overlap_tokens=0)
    nodes = parser.get_nodes_from_documents([Document(text=" ".join(TEXTS))])
    assert parser.tokenizer_used.startswith("llama_index Settings.tokenizer")
    assert len(nodes) > 1 and all(len(words(n.get_content())) <= 20 for n in nodes)


def test_an_encoding_named_cl100k_base_is_not_taken_for_the_default() -> None:
    """Settings.tokenizer set to the encode of an Encoding a user built and called cl100k_base
    (another split pattern) is the user's tokenizer: the adapters count with it, not with
    recallpack's own cl100k_base, which the name alone would have picked."""
    import functools

    import tiktoken

    from recallpack import get_tokenizer
    from recallpack.adapters.llamaindex.settings import settings_tokenizer

    ranks = get_tokenizer("cl100k_base").encoding._mergeable_ranks  # type: ignore[attr-defined]
    forged = tiktoken.Encoding(name="cl100k_base", pat_str=r"(?s)..?", mergeable_ranks=ranks, special_tokens={})
    saved = llama_index.core.global_tokenizer
    Settings.tokenizer = functools.partial(forged.encode, allowed_special="all")
    try:
        user = settings_tokenizer()
        assert user is not None
        post = BudgetPostprocessor(max_tokens=120)
        assert post.packer.tokenizer_used.name == user.name
        text = "Alice works at Initech.\nBob runs the refunds service."
        assert post.packer.tokenizer_used.count(text) == len(forged.encode(text))
    finally:
        llama_index.core.global_tokenizer = saved
    assert settings_tokenizer() is None  # LlamaIndex's own default: tiktoken's cl100k_base object
