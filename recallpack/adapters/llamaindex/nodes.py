"""LlamaIndex nodes in and out: what each upstream returned checked and read as Items, packed by
the core's pipeline, the kept ones copied back, in one call (:func:`pack_nodes`), so the
pipeline never calls back here; the report each kept node carries, and LlamaIndex's own failures
on an upstream's nodes. The components' settings are :mod:`recallpack.adapters.llamaindex.settings`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from llama_index.core.schema import BaseNode, ImageNode, MetadataMode, NodeWithScore
from pydantic import ValidationError

from recallpack.adapters.llamaindex.events import packed
from recallpack.packing.candidate import Span
from recallpack.packing.errors import UpstreamError
from recallpack.packing.pipeline import Item, KeptObject, Packs, Pipeline, PipelineOutcome, Returned
from recallpack.packing.results.result import PackReport, RecallResult
from recallpack.packing.translate import EVIDENCE_METADATA_KEYS, evidence_metadata

__all__ = [
    "nodes_of",
    "NodeReader",
    "kept_nodes",
    "pack_nodes",
    "apack_nodes",
    "node_span",
    "REPORT_KEY",
    "report_of",
    "MALFORMED",
    "malformed",
]

#: The node metadata key under which each kept node carries the report of the packing that kept
#: it: one report per query, on that query's own nodes (hidden from the LLM and embedding views).
REPORT_KEY = "recallpack_report"
#: The kept node copies and the RecallResult of one packing.
PackedNodes = tuple[list[NodeWithScore], RecallResult]


#: What LlamaIndex's own retrieve raises on an upstream that broke its contract (returned a str,
#: nodes of the wrong kind, metadata nested past the recursion limit): an UpstreamError here.
MALFORMED = (AttributeError, TypeError, RecursionError)


def malformed(upstream: str, exc: BaseException) -> UpstreamError:
    """LlamaIndex's own failure on what the upstream returned, as an UpstreamError naming it."""
    return UpstreamError(
        f"upstream {upstream} failed inside LlamaIndex: {type(exc).__name__}: "
        f"{exc!s:.200} (a retriever's _retrieve must return a list of NodeWithScore)"
    )


def _modality(node: BaseNode, own: str) -> str:
    """"text" when the node has text of its own (``own``, its content without metadata), else
    what it holds instead (the core drops anything but text with reason ``no_text``; metadata
    alone says nothing either)."""
    if own.strip():
        return "text"
    if isinstance(node, ImageNode) or getattr(node, "image_resource", None) is not None:
        return "image"
    for kind in ("audio", "video"):
        if getattr(node, f"{kind}_resource", None) is not None:
            return kind
    return "none"


def nodes_of(nodes: object) -> list[NodeWithScore]:
    """``nodes`` as a list, or an UpstreamError; each item is checked as it is read."""
    if not isinstance(nodes, (list, tuple)):
        raise UpstreamError(f"nodes must be a list of NodeWithScore, got {type(nodes).__name__}")
    return list(nodes)


@dataclass(frozen=True)
class NodeReader:
    """``NodeReader(mode)(node, position)``: one NodeWithScore as an Item, its text in ``metadata_mode``;
    anything that is not a NodeWithScore is named. A value, not a closure: a retriever that
    holds one pickles for workers."""

    metadata_mode: MetadataMode

    def __call__(self, item: NodeWithScore, position: int) -> Item:
        metadata_mode = self.metadata_mode
        if not isinstance(item, NodeWithScore):
            raise UpstreamError(
                f"upstream item {position} is a {type(item).__name__}, not a NodeWithScore; "
                "a LlamaIndex retriever must return NodeWithScore objects"
            )
        node, plain = item.node, metadata_mode == MetadataMode.NONE
        try:
            # The node's own content is read once: its modality, its text in NONE, its span.
            own = node.get_content(metadata_mode=MetadataMode.NONE)
            modality = _modality(node, own)
            if modality != "text":
                text = ""
            else:
                text = own if plain else node.get_content(metadata_mode=metadata_mode)
        except Exception as exc:  # LlamaIndex rendering the node's own data: metadata nested too deep
            raise UpstreamError(
                f"upstream item {position}: LlamaIndex could not give its content in metadata_mode="
                f"{getattr(metadata_mode, 'value', metadata_mode)!r}: {type(exc).__name__}: {exc!s:.200}"
            ) from exc
        # Shown with its metadata lines, a node is a duplicate by its own content alone.
        content = None if plain or own == text else own
        span = node_span(node, text, own) if modality == "text" else None
        return Item(text, node.metadata, item.score, modality, content, span)


def node_span(node: BaseNode, text: str, content: str | None = None) -> Span | None:
    """Where a node's content sits in its source document, as its parser recorded it
    (``start_char_idx``/``end_char_idx`` of the ``ref_doc_id``): None unless the text the model is
    shown ends with exactly that content (a custom template may put it elsewhere). ``content``:
    the node's content without metadata, when the caller has read it already."""
    start, end = getattr(node, "start_char_idx", None), getattr(node, "end_char_idx", None)
    parent = node.ref_doc_id
    if not isinstance(start, int) or not isinstance(end, int) or not parent or not 0 <= start <= end:
        return None
    if content is None:
        content = node.get_content(metadata_mode=MetadataMode.NONE)
    if len(content) != end - start or not text.endswith(content):
        return None
    return Span(parent=f"llama_index:{parent}", start=start, end=end, source="node.start_char_idx")


#: The metadata keys recallpack adds to a kept node, hidden from its LLM and embedding views.
_ADDED_KEYS = (*EVIDENCE_METADATA_KEYS, REPORT_KEY)


def _hidden(keys: Sequence[str]) -> list[str]:
    if not keys:  # most nodes hide nothing of their own
        return list(_ADDED_KEYS)
    return [*keys, *(k for k in _ADDED_KEYS if k not in keys)]


def report_of(response: object) -> PackReport | None:
    """The report of the packing that kept ``response``'s source nodes (a query engine's
    Response, or a list of NodeWithScore), or None when no node of it was kept by recallpack.

    Each kept node carries the report of its own packing, so concurrent queries never mix
    theirs. With no node kept the response has none: the report is then on that query's
    ``RecallPackedEvent``."""
    nodes = getattr(response, "source_nodes", response)
    for item in nodes if isinstance(nodes, (list, tuple)) else ():
        node = getattr(item, "node", item)
        report = getattr(node, "metadata", {}).get(REPORT_KEY)
        if isinstance(report, dict):
            try:
                return PackReport.model_validate(report)
            except ValidationError:  # not one recallpack wrote (kept nodes always carry their own)
                continue
    return None


def kept_nodes(kept: Sequence[KeptObject[NodeWithScore]], result: RecallResult) -> list[NodeWithScore]:
    """Copies of the kept nodes, in evidence order, carrying the evidence fields (and the fused
    score, for fused lanes).

    The fields, and the report of this packing (:data:`REPORT_KEY`), go in metadata excluded from
    both the LLM and the embedding views, so nothing the budget counted changes. A cut node
    shows its cut text, and only that, in every view.
    """
    copies = []
    report = result.report.model_dump(mode="json")
    for item in kept:
        node, evidence = item.original.node, item.evidence
        update: dict[str, Any] = {
            "metadata": {**node.metadata, **evidence_metadata(evidence), REPORT_KEY: report},
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
        score = item.original.score if item.score is None else item.score
        copies.append(NodeWithScore(node=copied, score=score))
    return copies


#: Per source: what it returned (checked here, as a list of NodeWithScore).
Outputs = Sequence[object]


def _read(
    outputs: Outputs, mode: MetadataMode, depths: Sequence[int | None] | None
) -> Returned[NodeWithScore]:
    nodes, read = [nodes_of(output) for output in outputs], NodeReader(mode)
    return Returned(nodes, [[read(node, i) for i, node in enumerate(listed)] for listed in nodes], depths)


def _back(component: str, query: str | None, outcome: PipelineOutcome[NodeWithScore]) -> PackedNodes:
    result = packed(component, query, outcome.result)  # the event, in the caller's span
    return kept_nodes(outcome.kept, result), result


def pack_nodes(
    pipeline: Pipeline[NodeWithScore], packs: Packs, query: str | None, outputs: Outputs,
    component: str, mode: MetadataMode, depths: Sequence[int | None] | None = None,
) -> PackedNodes:
    """One pack of what each source returned (checked, read in ``mode``), by ``pipeline`` once;
    its event, named by ``component``; the kept node copies and the result. ``depths``: what the
    sources were asked for (None: the nodes were handed over)."""
    return _back(component, query, pipeline.packed(packs, query, _read(outputs, mode, depths)))


async def apack_nodes(
    pipeline: Pipeline[NodeWithScore], packs: Packs, query: str | None, outputs: Outputs,
    component: str, mode: MetadataMode, depths: Sequence[int | None] | None = None,
) -> PackedNodes:
    """:func:`pack_nodes` for async code, packed by ``packs.arecall``."""
    return _back(component, query, await pipeline.apacked(packs, query, _read(outputs, mode, depths)))
