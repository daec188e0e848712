"""LlamaIndex node parser on recallpack's token windows: nodes that fit, with stable ids.

``TokenWindowNodeParser`` is a ``llama_index.core.node_parser.TextSplitter``: use it as
``parser(documents)``, ``parser.get_nodes_from_documents(documents)``, in an
``IngestionPipeline`` or as a ``transformations=[...]`` entry. Each node is a window of at most
``max_tokens`` of its document's text, counted by the tokenizer recallpack will pack it with;
it never ends inside a grapheme cluster. As LlamaIndex's own parsers do, nodes keep their
document's metadata and get SOURCE, PREVIOUS and NEXT relationships and start/end char offsets;
they also carry ``chunk_index``, ``chunk_count``, ``parent_hash``, ``chunk_id``,
``start_char``/``end_char`` and ``token_count`` (kept out of the embedding and LLM text), and
their ``id_`` is the chunk id, so inserting the same document again replaces its nodes instead
of adding copies.

>>> from llama_index.core import Document
>>> from llama_index.core.schema import NodeRelationship
>>> nodes = TokenWindowNodeParser(8, 0)([Document(text="one two three " * 6)])
>>> [(n.start_char_idx, n.end_char_idx, n.metadata["token_count"]) for n in nodes]
[(0, 35, 8), (35, 73, 8), (73, 84, 3)]
>>> nodes[1].relationships[NodeRelationship.PREVIOUS].node_id == nodes[0].id_ == nodes[0].metadata["chunk_id"]
True
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.callbacks import CallbackManager
from llama_index.core.node_parser.interface import TextSplitter
from llama_index.core.node_parser.node_utils import (
    IdFuncCallable,
    build_nodes_from_splits,
    default_id_func,
)
from llama_index.core.schema import BaseNode, Document, MetadataMode, TextNode
from llama_index.core.utils import get_tqdm_iterable

from recallpack.adapters.llamaindex.settings import settings_tokenizer
from recallpack.packing.counting.windows import (
    CHUNK_METADATA_KEYS,
    DEFAULT_OVERLAP_TOKENS,
    DEFAULT_WINDOW_TOKENS,
    Window,
    WindowSplitting,
    check_window_settings,
    refuse_unknown_settings,
)
from recallpack.packing.tokenizers import Tokenizer, TokenizerSpec, get_tokenizer

__all__ = ["TokenWindowNodeParser"]

_SETTINGS = (
    "max_tokens",
    "overlap_tokens",
    "tokenizer",
    "include_metadata",
    "include_prev_next_rel",
    "callback_manager",
    "id_func",
)


def _chunk_ids(windows: Sequence[Window]) -> IdFuncCallable:
    """An ``id_func`` naming node ``i`` after window ``i``'s chunk id."""
    ids = [window.chunk_id for window in windows]
    return lambda i, doc: ids[i]


class TokenWindowNodeParser(WindowSplitting, TextSplitter):
    """Split documents into nodes of at most ``max_tokens``, consecutive nodes sharing about
    ``overlap_tokens``; ``tokenizer`` is anything :func:`recallpack.get_tokenizer` takes
    (``None`` is cl100k_base), the same option the packer has. Node ids are the chunk ids
    unless an ``id_func`` is given."""

    # Positional too (kw_only=False): type checkers then see ``TokenWindowNodeParser(8, 0)``.
    max_tokens: int = Field(
        default=DEFAULT_WINDOW_TOKENS, kw_only=False, description="Most tokens in one node."
    )
    overlap_tokens: int = Field(
        default=DEFAULT_OVERLAP_TOKENS,
        kw_only=False,
        description="Tokens a node shares with the one before it.",
    )
    tokenizer: Any = Field(default=None, exclude=True, description="What counts tokens.")

    # Resolved on first use: a resolved tokenizer holds locks, so pickling drops it and a worker
    # resolves its own from the spec.
    _tok: Tokenizer | None = PrivateAttr(default=None)

    if TYPE_CHECKING:  # every field, the first two positional too, with or without pydantic's
        # mypy plugin (which makes its own __init__, of keywords only and **kwargs, when none is seen)

        def __init__(
            self,
            max_tokens: int = DEFAULT_WINDOW_TOKENS,
            overlap_tokens: int = DEFAULT_OVERLAP_TOKENS,
            *,
            tokenizer: TokenizerSpec = None,
            include_metadata: bool = True,
            include_prev_next_rel: bool = True,
            callback_manager: CallbackManager | None = None,
            id_func: Callable[[int, Document], str] | None = None,
        ) -> None: ...
    else:  # a misspelled keyword is a ConfigError naming the closest one

        def __init__(
            self,
            max_tokens: int = DEFAULT_WINDOW_TOKENS,
            overlap_tokens: int = DEFAULT_OVERLAP_TOKENS,
            *,
            tokenizer: TokenizerSpec = None,
            **kwargs: Any,
        ) -> None:
            refuse_unknown_settings(
                type(self).__name__, {k: v for k, v in kwargs.items() if k not in _SETTINGS}, _SETTINGS
            )
            max_tokens, overlap_tokens = check_window_settings(max_tokens, overlap_tokens)
            super().__init__(
                max_tokens=max_tokens, overlap_tokens=overlap_tokens, tokenizer=tokenizer, **kwargs
            )
            self._tok = _resolve(tokenizer)  # an unknown tokenizer fails here, not on first use

    def __getstate__(self) -> dict[str, Any]:
        resolved, self._tok = self._tok, None  # dropped here, quietly, rather than by the base
        try:
            return super().__getstate__()
        finally:
            self._tok = resolved

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> TokenWindowNodeParser:
        memo = {} if memo is None else memo
        for shared in (self.tokenizer, self._tok):  # counting state is shared, never copied
            memo[id(shared)] = shared
        return super().__deepcopy__(memo)

    def window_tokenizer(self) -> Tokenizer:
        if self._tok is None:
            self._tok = _resolve(self.tokenizer)
        return self._tok

    @classmethod
    def class_name(cls) -> str:
        return "TokenWindowNodeParser"

    def _parse_nodes(
        self, nodes: Sequence[BaseNode], show_progress: bool = False, **kwargs: Any
    ) -> list[BaseNode]:
        parsed: list[BaseNode] = []
        for node in get_tqdm_iterable(nodes, show_progress, "Parsing nodes"):
            windows = self.split_windows(node.get_content(metadata_mode=MetadataMode.NONE))
            id_func: IdFuncCallable = _chunk_ids(windows) if self.id_func is default_id_func else self.id_func
            built = build_nodes_from_splits([w.text for w in windows], node, id_func=id_func)
            for child, window in zip(built, windows):
                child.metadata.update(window.metadata())
                child.start_char_idx, child.end_char_idx = window.start, window.end
                for keys in (child.excluded_embed_metadata_keys, child.excluded_llm_metadata_keys):
                    keys.extend(key for key in CHUNK_METADATA_KEYS if key not in keys)
            parsed.extend(built)
        return parsed

    def _postprocess_parsed_nodes(
        self, nodes: list[BaseNode], parent_doc_map: dict[str, Document]
    ) -> list[BaseNode]:
        # The base class finds each node's text in its document again; with overlapping or
        # repeated text that can land on an earlier copy. The windows know where they are.
        offsets = [
            (n.start_char_idx, n.end_char_idx) if isinstance(n, TextNode) else (None, None) for n in nodes
        ]
        nodes = super()._postprocess_parsed_nodes(nodes, parent_doc_map)
        for node, (start, end) in zip(nodes, offsets):
            if isinstance(node, TextNode) and start is not None:
                node.start_char_idx, node.end_char_idx = start, end
        return nodes


def _resolve(spec: TokenizerSpec) -> Tokenizer:
    """``spec``, or, when none is given, the tokenizer the user set in ``Settings.tokenizer``
    (as the packer's LlamaIndex components do), so windows and budgets count alike."""
    if spec is None:
        user = settings_tokenizer()
        if user is not None:
            return user
    return get_tokenizer(spec)
