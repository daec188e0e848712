"""LlamaIndex nodes to Candidates and back, and the tokenizer a user set in Settings."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import llama_index.core
from llama_index.core.schema import BaseNode, ImageNode, MetadataMode, NodeWithScore

from recallpack.packing.candidate import Candidate, LaneKind, Span
from recallpack.packing.errors import UpstreamError
from recallpack.packing.result import RecallResult
from recallpack.packing.tokenizer import CallableTokenizer, Tokenizer
from recallpack.packing.translate import EVIDENCE_METADATA_KEYS, evidence_metadata

__all__ = ["settings_tokenizer", "node_candidates", "kept_nodes", "node_span"]


def settings_tokenizer() -> Tokenizer | None:
    """The tokenizer the user gave ``Settings.tokenizer``, or None when it is LlamaIndex's own
    default (cl100k_base with special tokens allowed, which recallpack counts the same way)."""
    user = llama_index.core.global_tokenizer
    if user is None:
        return None
    if isinstance(user, functools.partial) and getattr(user.func, "__name__", "") == "encode":
        encoding = getattr(user.func, "__self__", None)
        if getattr(encoding, "name", None) == "cl100k_base":
            return None
    name = getattr(user, "__qualname__", type(user).__name__)
    return CallableTokenizer(user, name=f"llama_index Settings.tokenizer ({name})")


def _modality(node: BaseNode) -> str:
    """"text" when the node has text of its own, else what it holds instead (the core drops
    anything but text with reason ``no_text``; metadata alone says nothing either)."""
    if node.get_content(metadata_mode=MetadataMode.NONE).strip():
        return "text"
    if isinstance(node, ImageNode) or getattr(node, "image_resource", None) is not None:
        return "image"
    for kind in ("audio", "video"):
        if getattr(node, f"{kind}_resource", None) is not None:
            return kind
    return "none"


def node_candidates(
    nodes: Sequence[object], metadata_mode: MetadataMode, make: Callable[..., Candidate],
    lanes: Sequence[LaneKind] | None = None,
) -> list[Candidate]:
    """One Candidate per node, in order; anything that is not a NodeWithScore is named."""
    if not isinstance(nodes, (list, tuple)):
        raise UpstreamError(f"nodes must be a list of NodeWithScore, got {type(nodes).__name__}")
    candidates = []
    for position, item in enumerate(nodes):
        if not isinstance(item, NodeWithScore):
            raise UpstreamError(
                f"upstream item {position} is a {type(item).__name__}, not a NodeWithScore; "
                "a LlamaIndex retriever must return NodeWithScore objects"
            )
        modality = _modality(item.node)
        text = item.node.get_content(metadata_mode=metadata_mode) if modality == "text" else ""
        lane = None if lanes is None else lanes[position]
        span = node_span(item.node, text) if modality == "text" else None
        metadata, score = item.node.metadata, item.score
        made = make(text, metadata, position, lane=lane, score=score, modality=modality, span=span)
        candidates.append(made)
    return candidates


def node_span(node: BaseNode, text: str) -> Span | None:
    """Where a node's content sits in its source document, as its parser recorded it
    (``start_char_idx``/``end_char_idx`` of the ``ref_doc_id``): None unless the text the model is
    shown ends with exactly that content (a custom template may put it elsewhere)."""
    start, end = getattr(node, "start_char_idx", None), getattr(node, "end_char_idx", None)
    parent = node.ref_doc_id
    if not isinstance(start, int) or not isinstance(end, int) or not parent or not 0 <= start <= end:
        return None
    content = node.get_content(metadata_mode=MetadataMode.NONE)
    if len(content) != end - start or not text.endswith(content):
        return None
    return Span(parent=f"llama_index:{parent}", start=start, end=end, source="node.start_char_idx")


def _hidden(keys: Sequence[str]) -> list[str]:
    return [*keys, *(k for k in EVIDENCE_METADATA_KEYS if k not in keys)]


def kept_nodes(nodes: Sequence[NodeWithScore], result: RecallResult) -> list[NodeWithScore]:
    """Copies of the kept nodes, in evidence order, carrying the evidence fields.

    The fields go in metadata excluded from both the LLM and the embedding views, so nothing the
    budget counted changes. A cut node shows its cut text, and only that, in every view.
    """
    kept = []
    for rank, evidence in zip(result.selected_ranks, result.evidence):
        original = nodes[rank]
        node = original.node
        update: dict[str, Any] = {
            "metadata": {**node.metadata, **evidence_metadata(evidence)},
            "excluded_llm_metadata_keys": _hidden(node.excluded_llm_metadata_keys),
            "excluded_embed_metadata_keys": _hidden(node.excluded_embed_metadata_keys),
        }
        if evidence.truncated and hasattr(node, "text_template"):
            # The cut was made in the counted view, metadata header included; showing the cut
            # text as the whole content keeps every view exactly what was counted.
            update["text_template"] = "{content}"
        copied = node.model_copy(update=update)
        if evidence.truncated:
            copied.set_content(evidence.text)
        kept.append(NodeWithScore(node=copied, score=original.score))
    return kept
