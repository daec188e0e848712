"""LangChain text splitter on recallpack's token windows: chunks that fit, with stable ids.

``TokenWindowSplitter`` is a ``langchain_text_splitters.TextSplitter`` (a plain
``BaseDocumentTransformer`` when only langchain-core is installed). Every chunk is a window of
at most ``max_tokens`` counted by the tokenizer recallpack will pack it with, never ends inside
a grapheme cluster, and carries ``chunk_index``, ``chunk_count``, ``parent_hash``, ``chunk_id``,
``start_char``/``end_char`` and ``token_count`` in its metadata; its Document ``id`` is the
chunk id, so adding the same chunks to a vector store again replaces them instead of adding
copies, and appending to a document changes only the ids of its last chunks.

>>> from langchain_core.documents import Document
>>> splitter = TokenWindowSplitter(max_tokens=8, overlap_tokens=0)
>>> document = Document(page_content="one two three " * 6, metadata={"source": "a.txt"})
>>> chunks = splitter.split_documents([document])
>>> [(c.metadata["source"], c.metadata["chunk_index"], c.metadata["token_count"]) for c in chunks]
[('a.txt', 0, 8), ('a.txt', 1, 8), ('a.txt', 2, 3)]
>>> chunks[0].id == chunks[0].metadata["chunk_id"]
True
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, ParamSpec

from langchain_core.documents import Document

from recallpack.packing.counting.windows import (
    DEFAULT_OVERLAP_TOKENS,
    DEFAULT_WINDOW_TOKENS,
    WindowSplitting,
    check_window_settings,
    refuse_unknown_settings,
)
from recallpack.packing.tokenizers import Tokenizer, TokenizerSpec, get_tokenizer

if TYPE_CHECKING:
    from langchain_text_splitters import TextSplitter as _Base

    _HAS_TEXT_SPLITTERS = True
else:
    try:
        from langchain_text_splitters import TextSplitter as _Base

        _HAS_TEXT_SPLITTERS = True
    except ImportError:  # langchain-core alone: still a document transformer
        from langchain_core.documents import BaseDocumentTransformer as _Base

        _HAS_TEXT_SPLITTERS = False

__all__ = ["TokenWindowSplitter"]

_SETTINGS = ("max_tokens", "overlap_tokens", "tokenizer", "add_start_index")
P = ParamSpec("P")


def _refusing_unknown_settings(init: Callable[P, None]) -> Callable[P, None]:
    """``init``, with a keyword it does not take refused first, as a ConfigError naming the
    closest setting (rather than Python's TypeError)."""

    @functools.wraps(init)
    def checked(*args: P.args, **kwargs: P.kwargs) -> None:
        unknown = {k: v for k, v in kwargs.items() if k not in _SETTINGS}
        refuse_unknown_settings(type(args[0]).__name__, unknown, _SETTINGS)
        init(*args, **kwargs)

    return checked


class TokenWindowSplitter(WindowSplitting, _Base):
    """Split text into token windows of at most ``max_tokens``, consecutive windows sharing
    about ``overlap_tokens``; ``tokenizer`` is anything :func:`recallpack.get_tokenizer` takes
    (``None`` is cl100k_base), the same option the packer has."""

    @_refusing_unknown_settings  # a misspelled keyword is a type error too, and a ConfigError
    def __init__(
        self,
        max_tokens: int = DEFAULT_WINDOW_TOKENS,
        overlap_tokens: int = DEFAULT_OVERLAP_TOKENS,
        *,
        tokenizer: TokenizerSpec = None,
        add_start_index: bool = False,
    ) -> None:
        self.max_tokens, self.overlap_tokens = check_window_settings(max_tokens, overlap_tokens)
        self.tokenizer = tokenizer
        self._tok: Tokenizer = get_tokenizer(tokenizer)
        if _HAS_TEXT_SPLITTERS:
            super().__init__(
                chunk_size=self.max_tokens,
                chunk_overlap=self.overlap_tokens,
                length_function=self._tok.count,
                add_start_index=add_start_index,
                strip_whitespace=False,  # the chunks are exact slices of the text: offsets hold
            )
        self._add_start_index = add_start_index

    def window_tokenizer(self) -> Tokenizer:
        return self._tok

    def create_documents(
        self, texts: list[str], metadatas: list[dict[Any, Any]] | None = None
    ) -> list[Document]:
        """One Document per window of each text, its metadata a copy of the text's plus the
        chunk's; its ``id`` is the chunk id."""
        documents = []
        for i, text in enumerate(texts):
            base = metadatas[i] if metadatas else {}
            for window in self.split_windows(text):
                metadata = copy.deepcopy(base)
                metadata.update(window.metadata())
                if self._add_start_index:
                    metadata["start_index"] = window.start
                documents.append(Document(page_content=window.text, metadata=metadata, id=window.chunk_id))
        return documents

    def split_documents(self, documents: Iterable[Document]) -> list[Document]:
        """Each Document's windows, keeping its metadata."""
        texts, metadatas = [], []
        for document in documents:
            texts.append(document.page_content)
            metadatas.append(document.metadata)
        return self.create_documents(texts, metadatas)

    def transform_documents(self, documents: Sequence[Document], **kwargs: Any) -> Sequence[Document]:
        return self.split_documents(list(documents))

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(max_tokens={self.max_tokens}, overlap_tokens={self.overlap_tokens}, "
            f"tokenizer={self._tok.name!r})"
        )

    # A resolved tokenizer holds locks; a worker resolves its own from the spec, by name.
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        if self.tokenizer is None or isinstance(self.tokenizer, str):
            state["_tok"] = None
            state.pop("_length_function", None)
        return state

    def __deepcopy__(self, memo: dict[int, Any]) -> TokenWindowSplitter:
        clone = copy.copy(self)
        for shared in (self.tokenizer, self._tok):  # counting state is shared, never copied
            memo[id(shared)] = shared
        clone.__dict__.update(copy.deepcopy(self.__dict__, memo))
        return clone

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if self.__dict__.get("_tok") is None:
            self._tok = get_tokenizer(self.tokenizer)
            if _HAS_TEXT_SPLITTERS:
                self._length_function = self._tok.count
