"""LlamaIndex nodes to Candidates and back, the tokenizer a user set in Settings, and the checks
of what LlamaIndex hands the adapters (a metadata mode, a callback manager, an upstream's nodes)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import llama_index.core
from llama_index.core.callbacks import CallbackManager
from llama_index.core.schema import BaseNode, ImageNode, MetadataMode, NodeWithScore

from recallpack.packing.candidate import Candidate, LaneKind
from recallpack.packing.errors import ConfigError, UpstreamError
from recallpack.packing.result import RecallResult
from recallpack.packing.tokenizer import CallableTokenizer, Tokenizer, is_known_encoding
from recallpack.packing.translate import EVIDENCE_METADATA_KEYS, evidence_metadata

__all__ = [
    "settings_tokenizer",
    "node_candidates",
    "kept_nodes",
    "metadata_mode_of",
    "callback_manager_of",
    "MALFORMED",
    "malformed",
]


def settings_tokenizer() -> Tokenizer | None:
    """The tokenizer the user gave ``Settings.tokenizer``, or None when it is LlamaIndex's own
    default (cl100k_base with special tokens allowed, which recallpack counts the same way)."""
    user = llama_index.core.global_tokenizer
    if user is None:
        return None
    if isinstance(user, functools.partial) and getattr(user.func, "__name__", "") == "encode":
        encoding = getattr(user.func, "__self__", None)
        # LlamaIndex's own default is tiktoken's cl100k_base object: known by identity, not by a
        # name any Encoding a user built can carry.
        if getattr(encoding, "name", None) == "cl100k_base" and is_known_encoding(encoding):
            return None
    name = getattr(user, "__qualname__", type(user).__name__)
    return CallableTokenizer(user, name=f"llama_index Settings.tokenizer ({name})")


def metadata_mode_of(value: object) -> MetadataMode:
    """A MetadataMode, or the value of one (``"llm"``), checked where it is given."""
    try:
        return MetadataMode(value)
    except ValueError:
        modes = ", ".join(repr(m.value) for m in MetadataMode)
        raise ConfigError(
            f"metadata_mode={value!r:.60} is not a llama_index MetadataMode; use one of {modes}"
        ) from None


def callback_manager_of(value: object) -> CallbackManager | None:
    if value is not None and not isinstance(value, CallbackManager):
        raise ConfigError(
            f"callback_manager={value!r:.60} must be a llama_index CallbackManager or None "
            f"(Settings.callback_manager), got {type(value).__name__}"
        )
    return value


#: What LlamaIndex's own retrieve raises on an upstream that broke its contract (returned a str,
#: nodes of the wrong kind, metadata nested past the recursion limit): an UpstreamError here.
MALFORMED = (AttributeError, TypeError, RecursionError)


def malformed(upstream: str, exc: BaseException) -> UpstreamError:
    """LlamaIndex's own failure on what the upstream returned, as an UpstreamError naming it."""
    return UpstreamError(
        f"upstream {upstream} failed inside LlamaIndex: {type(exc).__name__}: "
        f"{exc!s:.200} (a retriever's _retrieve must return a list of NodeWithScore)"
    )


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
        try:
            modality = _modality(item.node)
            text = item.node.get_content(metadata_mode=metadata_mode) if modality == "text" else ""
        except Exception as exc:  # LlamaIndex rendering the node's own data: metadata nested too deep
            raise UpstreamError(
                f"upstream item {position}: LlamaIndex could not give its content in metadata_mode="
                f"{getattr(metadata_mode, 'value', metadata_mode)!r}: {type(exc).__name__}: {exc!s:.200}"
            ) from exc
        lane = None if lanes is None else lanes[position]
        made = make(text, item.node.metadata, position, lane=lane, score=item.score, modality=modality)
        candidates.append(made)
    return candidates


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
