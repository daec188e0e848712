"""recallpack for LlamaIndex: a token budget as a node postprocessor, a retriever, a query engine.

Three ways in, each native to LlamaIndex:

- :class:`BudgetPostprocessor` goes in ``node_postprocessors=[...]`` of any query or chat engine.
  It counts what the LLM is shown (each node in ``metadata_mode``, joined as the engine's
  ``response_mode`` joins them), so the context the synthesizer builds fits ``max_tokens``.
- :class:`BudgetedRetriever` wraps any LlamaIndex retriever (or several, fused by reciprocal rank
  fusion) and packs what it returns; ``recall(query)`` gives the whole
  :class:`~recallpack.RecallResult`. It budgets the rendered Markdown evidence block, exactly as
  the LangChain adapter does, so both hosts give the same bytes for the same upstream items.
- :class:`EvidenceQueryEngine` puts that rendered block itself into the prompt.

The adapter hands the core only :class:`~recallpack.Candidate` objects, and never mutates the
caller's nodes: kept nodes are copies carrying the five public evidence fields in metadata that
is hidden from the LLM and embedding views.

>>> from llama_index.core.schema import NodeWithScore, TextNode
>>> nodes = [NodeWithScore(node=TextNode(text="Paris is the capital of France."), score=0.9)]
>>> kept = BudgetPostprocessor(max_tokens=64).postprocess_nodes(nodes)
>>> kept[0].node.metadata["evidence_label"], kept[0].score
('Source excerpt', 0.9)
"""

from __future__ import annotations

import asyncio
import copy
import warnings
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal, TypeVar, Union

import llama_index.core.instrumentation as instrument
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.response.schema import Response
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.callbacks import CallbackManager
from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.llms import LLM
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.prompts import BasePromptTemplate
from llama_index.core.prompts.default_prompt_selectors import DEFAULT_TEXT_QA_PROMPT_SEL
from llama_index.core.prompts.mixin import PromptDictType, PromptMixinType
from llama_index.core.query_engine import CustomQueryEngine
from llama_index.core.schema import (
    BaseNode,
    ImageNode,
    MetadataMode,
    NodeWithScore,
    QueryBundle,
    QueryType,
)
from llama_index.core.settings import Settings

from recallpack.adapters._common import (
    EVIDENCE_METADATA_KEYS,
    UnknownLane,
    candidate_from,
    check_on_unknown_lane,
    evidence_metadata,
    fixed_lane,
    reciprocal_rank_fusion,
)
from recallpack.packing.budget import (
    DEFAULT_MAX_TOKENS,
    MAX_TOKENS_CEILING,
    Policy,
    check_lane_budgets,
    check_max_items,
    check_max_tokens,
    check_policy,
    recall,
    recall_joined,
)
from recallpack.packing.candidate import Candidate, LaneKind, coerce_lane
from recallpack.packing.errors import ConfigError, RecallpackWarning, UpstreamError
from recallpack.packing.render import TemplateSpec, load_template
from recallpack.packing.result import (
    DEFAULT_RESOURCE_URI_TEMPLATE,
    PackReport,
    Reader,
    RecallResult,
)
from recallpack.packing.tokenizer import Tokenizer, TokenizerSpec, get_tokenizer

__all__ = [
    "BudgetPostprocessor",
    "BudgetedRetriever",
    "EvidenceQueryEngine",
    "RecallPackedEvent",
    "RESPONSE_MODES",
]

# Re-exported without __all__, hence the ignore; this is how LlamaIndex's own modules get it.
dispatcher = instrument.get_dispatcher(__name__)  # type: ignore[attr-defined]
T = TypeVar("T")

#: The response modes whose context view BudgetPostprocessor knows. All but simple_summarize
#: build it as CompactAndRefine does (``PromptHelper.repack``): stripped node texts joined by a
#: blank line; refine and accumulate show each node alone, which the same bound covers.
RESPONSE_MODES = (
    "compact",
    "refine",
    "tree_summarize",
    "accumulate",
    "compact_accumulate",
    "simple_summarize",
)


def _compact_view(texts: Sequence[str]) -> str:
    return "\n\n".join(t.strip() for t in texts if t.strip())


def _simple_summarize_view(texts: Sequence[str]) -> str:
    # SimpleSummarize joins with "\n" and passes the one-item list from PromptHelper.truncate as
    # context_str, so the prompt holds the list's str(): quoted, with escaped newlines.
    return str(["\n".join(texts)])


class RecallPackedEvent(BaseEvent):
    """Emitted once per packing with its report, so instrumentation handlers see what was cut."""

    report: PackReport
    component: str

    @classmethod
    def class_name(cls) -> str:
        return "RecallPackedEvent"


# --- shared between the components -----------------------------------------------------------


def _check_settings(
    *,
    max_tokens: object,
    max_tokens_ceiling: object,
    max_items: object,
    policy: object,
    tokenizer: object,
    lane: object,
    on_unknown_lane: object,
    reader: object,
) -> LaneKind | None:
    """Raise the core's error for an invalid setting, before anything is built or fetched."""
    if isinstance(max_tokens_ceiling, bool) or not isinstance(max_tokens_ceiling, int):
        raise ConfigError(f"max_tokens_ceiling={max_tokens_ceiling!r} must be an int")
    check_max_tokens(max_tokens, max_tokens_ceiling)
    check_max_items(max_items)
    check_policy(policy)
    get_tokenizer(tokenizer)  # type: ignore[arg-type]  # an unknown name fails here, not mid-query
    check_on_unknown_lane(on_unknown_lane)
    if reader is not None and not isinstance(reader, Reader):
        raise ConfigError(f"reader={reader!r} must be a recallpack.Reader or None")
    return None if lane is None else coerce_lane(lane)


def _reader(value: object) -> object:
    """A Reader from its dict form (what to_dict wrote), so from_dict rebuilds it."""
    if isinstance(value, Mapping):
        try:
            return Reader.model_validate(value)
        except ValueError as exc:
            raise ConfigError(f"reader={dict(value)!r} is not a valid Reader: {exc}") from None
    return value


def _modality(node: BaseNode) -> str:
    """The modality: "text" when the node has text of its own, else what it holds instead.

    The core drops anything but "text" with reason ``no_text``; a node whose only content is
    metadata has nothing to say either, so it counts as having no text too.
    """
    if node.get_content(metadata_mode=MetadataMode.NONE).strip():
        return "text"
    if isinstance(node, ImageNode) or getattr(node, "image_resource", None) is not None:
        return "image"
    for kind in ("audio", "video"):
        if getattr(node, f"{kind}_resource", None) is not None:
            return kind
    return "none"


def _candidates(
    nodes: Sequence[object],
    *,
    metadata_mode: MetadataMode,
    lane: LaneKind | None,
    lanes: Sequence[LaneKind | None] | None = None,
    lane_key: str,
    on_unknown_lane: UnknownLane,
) -> list[Candidate]:
    """One Candidate per node, in order; anything that is not a NodeWithScore is named."""
    candidates = []
    for position, item in enumerate(nodes):
        if not isinstance(item, NodeWithScore):
            raise UpstreamError(
                f"upstream item {position} is a {type(item).__name__}, not a NodeWithScore; "
                "a LlamaIndex retriever must return NodeWithScore objects"
            )
        node = item.node
        modality = _modality(node)
        text = node.get_content(metadata_mode=metadata_mode) if modality == "text" else ""
        candidates.append(
            candidate_from(
                text,
                node.metadata,
                position=position,
                lane=lanes[position] if lanes is not None else fixed_lane(node.metadata, lane, lane_key),
                lane_key=lane_key,
                on_unknown_lane=on_unknown_lane,
                score=item.score,
                modality=modality,
            )
        )
    return candidates


def _hidden(keys: Sequence[str]) -> list[str]:
    return [*keys, *(k for k in EVIDENCE_METADATA_KEYS if k not in keys)]


def _kept_nodes(nodes: Sequence[NodeWithScore], result: RecallResult) -> list[NodeWithScore]:
    """Copies of the kept nodes, in evidence order, carrying the evidence fields.

    The fields go in metadata excluded from both the LLM and the embedding views, so nothing the
    budget counted changes. A truncated node shows its cut text, and only that, in every view.
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


# --- BudgetPostprocessor ---------------------------------------------------------------------


class BudgetPostprocessor(BaseNodePostprocessor):
    """Keep the nodes, in rank order, whose content the LLM will see fits ``max_tokens``.

    Each node costs its content in ``metadata_mode`` (the LLM's view by default) plus the
    separator the synthesizer puts between nodes, and the context is then counted exactly as
    the engine's ``response_mode`` builds it (set the same value here: ``"compact"``, the
    default and the context chat engine's, or ``"simple_summarize"``), so the context handed to
    the LLM fits the budget. Scores and order are kept (a ``None`` score too: the walk never
    reorders). Nodes without text are dropped with reason ``no_text``; :attr:`last_result` and
    :meth:`pack_nodes` give the report.

    Invalid settings raise the core's errors (``BudgetError``, ``PolicyError``, ...) here, at
    construction, not at query time.
    """

    max_tokens: int = Field(
        default=DEFAULT_MAX_TOKENS,
        description="Token budget for the joined node contents the LLM is shown.",
    )
    max_items: int | None = Field(default=None, description="Keep at most this many nodes.")
    policy: Literal["prefix", "skip", "truncate"] = Field(
        default="prefix",
        description="What the first node that does not fit does: end the walk (prefix), get "
        "passed over (skip), or get cut to the room left (truncate).",
    )
    tokenizer: Union[str, Tokenizer, Callable[[str], int], None] = Field(
        default=None,
        description="Encoding or model name, 'chars', a Tokenizer or a str -> int callable; "
        "None is cl100k_base. Only names survive to_dict/from_dict.",
    )
    lane: LaneKind | None = Field(
        default=None, description="A fixed lane for every node; None reads it from lane_key."
    )
    lane_key: str = Field(default="lane", description="Node metadata key holding the lane.")
    on_unknown_lane: Literal["raise", "default"] = Field(
        default="raise", description="An unknown lane in metadata: raise, or use 'sources'."
    )
    reader: Reader | None = Field(
        default=None, description="Who reads: nodes in scopes they do not hold are withheld."
    )
    dedupe: bool = Field(default=True, description="Drop a node whose text and scopes equal a kept one's.")
    metadata_mode: MetadataMode = Field(
        default=MetadataMode.LLM, description="The view of each node that is counted."
    )
    response_mode: str = Field(
        default="compact",
        description="The engine's response_mode, which decides how node texts are joined into "
        "the context: a blank line (compact, the default, and the context chat engine) or "
        "simple_summarize's quoted single-line form.",
    )
    max_tokens_ceiling: int = Field(
        default=MAX_TOKENS_CEILING, description="Raise it to allow a max_tokens above 16384."
    )

    _last_result: RecallResult | None = PrivateAttr(default=None)

    def __init__(self, **data: Any) -> None:
        if "reader" in data:
            data["reader"] = _reader(data["reader"])
        lane = _check_settings(
            max_tokens=data.get("max_tokens", DEFAULT_MAX_TOKENS),
            max_tokens_ceiling=data.get("max_tokens_ceiling", MAX_TOKENS_CEILING),
            max_items=data.get("max_items"),
            policy=data.get("policy", "prefix"),
            tokenizer=data.get("tokenizer"),
            lane=data.get("lane"),
            on_unknown_lane=data.get("on_unknown_lane", "raise"),
            reader=data.get("reader"),
        )
        if lane is not None:
            data["lane"] = lane
        mode = data.get("response_mode", "compact")
        if mode not in RESPONSE_MODES:
            raise ConfigError(
                f"response_mode={mode!r} is not one BudgetPostprocessor can count for; "
                f"use one of: {', '.join(RESPONSE_MODES)}"
            )
        data["response_mode"] = str(getattr(mode, "value", mode))
        super().__init__(**data)

    @classmethod
    def class_name(cls) -> str:
        return "BudgetPostprocessor"

    @property
    def last_result(self) -> RecallResult | None:
        """The RecallResult of the most recent call (shared across threads: prefer pack_nodes)."""
        return self._last_result

    @dispatcher.span
    def pack_nodes(self, nodes: Sequence[NodeWithScore]) -> tuple[list[NodeWithScore], RecallResult]:
        """The kept node copies and the RecallResult (report and trace) of this one call."""
        candidates = _candidates(
            nodes,
            metadata_mode=self.metadata_mode,
            lane=self.lane,
            lane_key=self.lane_key,
            on_unknown_lane=self.on_unknown_lane,
        )
        # A synthesizer shows the LLM the node texts joined, not recallpack's Markdown block, so
        # the budget covers that context, built exactly as this response mode builds it.
        result = recall_joined(
            candidates,
            join=_simple_summarize_view if self.response_mode == "simple_summarize" else _compact_view,
            max_tokens=self.max_tokens,
            max_items=self.max_items,
            policy=self.policy,
            tokenizer=get_tokenizer(self.tokenizer),
            reader=self.reader,
            dedupe=self.dedupe,
            max_tokens_ceiling=self.max_tokens_ceiling,
        )
        self._last_result = result
        dispatcher.event(RecallPackedEvent(report=result.report, component=self.class_name()))
        return _kept_nodes(nodes, result), result

    def _postprocess_nodes(
        self,
        nodes: list[NodeWithScore],
        query_bundle: QueryBundle | None = None,
    ) -> list[NodeWithScore]:
        return self.pack_nodes(nodes)[0]

    async def _apostprocess_nodes(
        self,
        nodes: list[NodeWithScore],
        query_bundle: QueryBundle | None = None,
    ) -> list[NodeWithScore]:
        # Packing is a short CPU walk over what was retrieved; a thread hop would cost more.
        return self.pack_nodes(nodes)[0]


# --- BudgetedRetriever -----------------------------------------------------------------------


def _node_key(item: NodeWithScore) -> tuple[str, tuple[str, ...]]:
    """Identity for fusion: the node's own text and scope ids, what the core dedupes on and
    what the LangChain adapter fuses on. The same node found by two lanes (or an equal copy
    from another index) counts once."""
    scopes = item.node.metadata.get("scope_ids") or ()
    if isinstance(scopes, str):
        scopes = (scopes,)
    return item.node.get_content(metadata_mode=MetadataMode.NONE), tuple(str(s) for s in scopes)


def _with_top_k(retriever: BaseRetriever, fetch_k: int | None, where: str) -> BaseRetriever:
    """``retriever``, or a shallow copy of it asking for ``fetch_k`` results.

    A copy rather than a mutation: the caller's retriever keeps its own top-k, whoever else uses
    it. The copy shares the index, store and callbacks (nothing is duplicated but the setting).
    """
    if fetch_k is None:
        return retriever
    if not hasattr(retriever, "similarity_top_k"):
        # As in the LangChain adapter: not an error, the upstream just picks its own depth.
        warnings.warn(
            f"fetch_k={fetch_k} cannot be forwarded to {where} ({type(retriever).__name__}): it "
            "has no similarity_top_k; it returns its own number of results",
            RecallpackWarning,
            stacklevel=4,
        )
        return retriever
    copied = copy.copy(retriever)
    copied.similarity_top_k = fetch_k
    return copied


async def _gather_or_cancel(awaitables: Sequence[Awaitable[T]]) -> list[T]:
    """Await all concurrently; when one fails (or the call is cancelled), cancel and await the
    rest, so no lane keeps searching after the caller has its exception."""
    tasks = [asyncio.ensure_future(a) for a in awaitables]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


class BudgetedRetriever(BaseRetriever):
    """Any LlamaIndex retriever, cut to a token budget instead of a top-k.

    ``retrieve`` / ``aretrieve`` return copies of the kept nodes in rank order with their scores
    and the evidence fields in hidden metadata; ``recall`` / ``arecall`` return the
    :class:`~recallpack.RecallResult` of the same packing, whose ``to_markdown()`` block fits
    ``max_tokens``. Each node's text is read in ``metadata_mode`` (``NONE`` by default: the
    node's own text, which is what a LangChain Document's page_content holds, so both adapters
    give the same bytes).

    ``fetch_k`` is the search depth (seed 002): how many nodes to ask the upstream for. It is set
    on a shallow copy of the upstream (its ``similarity_top_k``); the retriever passed in is left
    as it was. An upstream without ``similarity_top_k`` keeps its own depth, with a warning.
    :meth:`from_lanes` fuses several retrievers by reciprocal rank fusion.
    """

    def __init__(
        self,
        retriever: BaseRetriever,
        *,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        max_items: int | None = None,
        fetch_k: int | None = None,
        policy: Policy = "prefix",
        tokenizer: TokenizerSpec = None,
        lane: LaneKind | str | None = None,
        lane_key: str = "lane",
        on_unknown_lane: UnknownLane = "raise",
        reader: Reader | None = None,
        dedupe: bool = True,
        lane_budgets: Mapping[str, int] | None = None,
        metadata_mode: MetadataMode = MetadataMode.NONE,
        template: TemplateSpec = None,
        resource_uri_template: str = DEFAULT_RESOURCE_URI_TEMPLATE,
        max_tokens_ceiling: int = MAX_TOKENS_CEILING,
        callback_manager: CallbackManager | None = None,
    ) -> None:
        self._lane = _check_settings(
            max_tokens=max_tokens,
            max_tokens_ceiling=max_tokens_ceiling,
            max_items=max_items,
            policy=policy,
            tokenizer=tokenizer,
            lane=lane,
            on_unknown_lane=on_unknown_lane,
            reader=reader,
        )
        check_max_items(fetch_k, field="fetch_k")
        check_lane_budgets(lane_budgets)
        load_template(template)  # a missing template file fails here, not mid-query
        if not isinstance(retriever, BaseRetriever):
            raise ConfigError(
                f"retriever={retriever!r} must be a LlamaIndex BaseRetriever "
                "(for example index.as_retriever())"
            )
        self.max_tokens = max_tokens
        self.max_items = max_items
        self.fetch_k = fetch_k
        self.policy: Policy = policy
        self.tokenizer = tokenizer
        self.lane_key = lane_key
        self.on_unknown_lane: UnknownLane = on_unknown_lane
        self.reader = reader
        self.dedupe = dedupe
        self.lane_budgets = dict(lane_budgets) if lane_budgets else None
        self.metadata_mode = metadata_mode
        self.template = template
        self.resource_uri_template = resource_uri_template
        self.max_tokens_ceiling = max_tokens_ceiling
        self._upstream = _with_top_k(retriever, fetch_k, "the retriever")
        self._lanes: dict[LaneKind, BaseRetriever] | None = None
        self._weights: dict[str, float] | None = None
        self._rrf_k = 60
        super().__init__(callback_manager=callback_manager)

    @classmethod
    def from_lanes(
        cls,
        lanes: Mapping[LaneKind | str, BaseRetriever],
        *,
        weights: Mapping[LaneKind | str, float] | None = None,
        rrf_k: int = 60,
        **kwargs: Any,
    ) -> BudgetedRetriever:
        """Several retrievers, one per lane kind, fused by reciprocal rank fusion, then packed.

        Each lane's nodes take that lane; a node found by several lanes (the same content) counts
        once, under the lane that ranked it best, and its score becomes the fused score.
        ``aretrieve`` calls the lanes concurrently.
        """
        if not lanes:
            raise ConfigError("from_lanes needs at least one lane, e.g. {'sources': retriever}")
        if "lane" in kwargs:
            raise ConfigError("from_lanes takes each lane from its key; do not pass lane=")
        fetch_k = kwargs.get("fetch_k")
        check_max_items(fetch_k, field="fetch_k")
        resolved: dict[LaneKind, BaseRetriever] = {}
        for name, retriever in lanes.items():
            kind = coerce_lane(name, field="lane name")
            if kind in resolved:
                raise ConfigError(f"lane {kind.value!r} is given twice")
            if not isinstance(retriever, BaseRetriever):
                raise ConfigError(f"lanes[{name!r}]={retriever!r} must be a LlamaIndex BaseRetriever")
            resolved[kind] = _with_top_k(retriever, fetch_k, f"lane {kind.value!r}")
        fused_weights = {
            coerce_lane(k, field="weights key").value: float(v) for k, v in (weights or {}).items()
        }
        unknown = set(fused_weights) - {kind.value for kind in resolved}
        if unknown:
            raise ConfigError(f"weights has lanes {sorted(unknown)} that are not among the lanes given")
        if isinstance(rrf_k, bool) or not isinstance(rrf_k, int) or rrf_k < 1:
            raise ConfigError(f"rrf_k={rrf_k!r} must be an int of at least 1 (60 is usual)")
        first = next(iter(resolved.values()))
        kwargs.pop("fetch_k", None)
        built = cls(first, **kwargs)
        built.fetch_k = fetch_k
        built._lanes = resolved
        built._weights = fused_weights or None
        built._rrf_k = rrf_k
        return built

    # -- fetching --------------------------------------------------------------------------------

    def _fuse(
        self, ranked: Mapping[str, Sequence[NodeWithScore]]
    ) -> tuple[list[NodeWithScore], list[LaneKind | None]]:
        for name, items in ranked.items():
            for position, item in enumerate(items):
                if not isinstance(item, NodeWithScore):
                    raise UpstreamError(
                        f"lane {name!r} item {position} is a {type(item).__name__}, not a NodeWithScore"
                    )
        fused = reciprocal_rank_fusion(ranked, _node_key, weights=self._weights, k=self._rrf_k)
        nodes = [NodeWithScore(node=item.node, score=score) for _, item, score in fused]
        return nodes, [LaneKind(lane) for lane, _, _ in fused]

    def _fetch(self, query_bundle: QueryBundle) -> tuple[list[NodeWithScore], list[LaneKind | None] | None]:
        if self._lanes is None:
            return list(self._upstream.retrieve(query_bundle)), None
        ranked = {kind.value: r.retrieve(query_bundle) for kind, r in self._lanes.items()}
        return self._fuse(ranked)

    async def _afetch(
        self, query_bundle: QueryBundle
    ) -> tuple[list[NodeWithScore], list[LaneKind | None] | None]:
        if self._lanes is None:
            return list(await self._upstream.aretrieve(query_bundle)), None
        results = await _gather_or_cancel([r.aretrieve(query_bundle) for r in self._lanes.values()])
        return self._fuse({kind.value: items for kind, items in zip(self._lanes, results)})

    def _pack(
        self, nodes: list[NodeWithScore], lanes: list[LaneKind | None] | None
    ) -> tuple[list[NodeWithScore], RecallResult]:
        candidates = _candidates(
            nodes,
            metadata_mode=self.metadata_mode,
            lane=self._lane,
            lanes=lanes,
            lane_key=self.lane_key,
            on_unknown_lane=self.on_unknown_lane,
        )
        result = recall(
            candidates,
            max_tokens=self.max_tokens,
            max_items=self.max_items,
            policy=self.policy,
            tokenizer=self.tokenizer,
            reader=self.reader,
            dedupe=self.dedupe,
            lane_budgets=self.lane_budgets,
            template=self.template,
            resource_uri_template=self.resource_uri_template,
            max_tokens_ceiling=self.max_tokens_ceiling,
        )
        dispatcher.event(RecallPackedEvent(report=result.report, component=type(self).__name__))
        return _kept_nodes(nodes, result), result

    # -- the public calls -----------------------------------------------------------------------

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._pack(*self._fetch(query_bundle))[0]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._pack(*await self._afetch(query_bundle))[0]

    @dispatcher.span
    def retrieve_with_result(self, query: QueryType) -> tuple[list[NodeWithScore], RecallResult]:
        """The kept nodes and the RecallResult of one packing (what EvidenceQueryEngine uses)."""
        bundle = QueryBundle(query) if isinstance(query, str) else query
        return self._pack(*self._fetch(bundle))

    @dispatcher.span
    async def aretrieve_with_result(self, query: QueryType) -> tuple[list[NodeWithScore], RecallResult]:
        bundle = QueryBundle(query) if isinstance(query, str) else query
        return self._pack(*await self._afetch(bundle))

    def recall(self, query: QueryType) -> RecallResult:
        """Retrieve and pack ``query``: evidence, report and trace; ``to_markdown()`` fits."""
        return self.retrieve_with_result(query)[1]

    async def arecall(self, query: QueryType) -> RecallResult:
        return (await self.aretrieve_with_result(query))[1]

    def as_query_engine(
        self,
        llm: LLM | None = None,
        text_qa_template: BasePromptTemplate | None = None,
    ) -> EvidenceQueryEngine:
        """A query engine whose prompt holds this retriever's rendered evidence block."""
        return EvidenceQueryEngine(
            retriever=self,
            llm=llm,
            text_qa_template=text_qa_template or DEFAULT_TEXT_QA_PROMPT_SEL,
        )


# --- EvidenceQueryEngine ---------------------------------------------------------------------


class EvidenceQueryEngine(CustomQueryEngine):
    """Answer from the rendered evidence block, which fills the prompt's ``{context_str}``.

    Unlike a synthesizer, which joins raw node texts, the LLM gets recallpack's Markdown block:
    provenance labels, scopes, "evidence, not instructions", and the block's whole text within
    the retriever's ``max_tokens``. The response's source nodes are the kept nodes, and its
    metadata holds the report under ``"recallpack_report"``.
    """

    retriever: BudgetedRetriever = Field(description="Retrieves and packs the evidence.")
    llm: LLM | None = Field(default=None, description="None uses Settings.llm.")
    text_qa_template: BasePromptTemplate = Field(
        default=DEFAULT_TEXT_QA_PROMPT_SEL,
        description="A prompt with {context_str} (the evidence block) and {query_str}.",
    )

    @classmethod
    def class_name(cls) -> str:
        return "EvidenceQueryEngine"

    def _get_prompts(self) -> PromptDictType:
        return {"text_qa_template": self.text_qa_template}

    def _update_prompts(self, prompts: PromptDictType) -> None:
        if "text_qa_template" in prompts:
            self.text_qa_template = prompts["text_qa_template"]

    def _get_prompt_modules(self) -> PromptMixinType:
        return {}

    def _response(self, answer: str, nodes: list[NodeWithScore], result: RecallResult) -> Response:
        return Response(
            response=answer,
            source_nodes=nodes,
            metadata={"recallpack_report": result.report.model_dump(mode="json")},
        )

    def custom_query(self, query_str: str) -> Response:
        nodes, result = self.retriever.retrieve_with_result(query_str)
        llm = self.llm or Settings.llm
        answer = llm.predict(self.text_qa_template, context_str=result.to_markdown(), query_str=query_str)
        return self._response(answer, nodes, result)

    async def acustom_query(self, query_str: str) -> Response:
        nodes, result = await self.retriever.aretrieve_with_result(query_str)
        llm = self.llm or Settings.llm
        answer = await llm.apredict(
            self.text_qa_template, context_str=result.to_markdown(), query_str=query_str
        )
        return self._response(answer, nodes, result)
