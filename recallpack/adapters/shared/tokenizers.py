"""The hosts' own tokenizers as recallpack Tokenizers: LangChain language models and Hugging
Face tokenizers, recognised by their shape (no host framework is imported here).

The core resolves names, tiktoken Encodings and plain callables; the hosts' readers
(``langchain.reader``, ``shared.hugging_face``, named in the core's host table,
``recallpack.packing.hosts``) read the rest with these, so ``get_tokenizer(chat_model)`` and
``Packer(tokenizer=chat_model)`` work while the core names no host's methods, and nothing here is
imported before the core first meets such an object.
"""

from __future__ import annotations

from typing import Any, Protocol

from recallpack.packing.errors import TokenizerError
from recallpack.packing.tokenizers.base import Tokenizer
from recallpack.packing.tokenizers.simple import CallableTokenizer

__all__ = ["CountsTokens", "EncodesText", "read_host_tokenizer", "read_language_model", "read_hugging_face"]


class CountsTokens(Protocol):
    """A LangChain language model, as far as counting goes."""

    def get_num_tokens(self, text: str) -> int: ...


class EncodesText(Protocol):
    """A Hugging Face ``tokenizers.Tokenizer`` or ``transformers`` tokenizer, as far as counting goes."""

    def encode(self, text: str, /, *args: Any, **kwargs: Any) -> Any: ...


class _EncodeCounter:
    """Counts with a Hugging Face tokenizer: ``tokenizers.Tokenizer.encode`` returns an object
    with ``.ids``, a ``transformers`` tokenizer's ``encode`` a list. Special tokens (BOS, CLS)
    are left out: they frame a whole prompt, not each piece of evidence in it."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer

    def __call__(self, text: str) -> int:
        encoded = self.tokenizer.encode(text, add_special_tokens=False)
        return len(getattr(encoded, "ids", encoded))


def _hugging_face_name(tokenizer: Any) -> str:
    path = getattr(tokenizer, "name_or_path", None)  # transformers
    if isinstance(path, str) and path:
        return f"huggingface:{path}"
    model = getattr(tokenizer, "model", None)  # tokenizers.Tokenizer: WordLevel, BPE, Unigram ...
    kind = f"({type(model).__name__})" if model is not None else ""
    return f"huggingface:{type(tokenizer).__qualname__}{kind}"


def _langchain_name(model: Any) -> str:
    for attribute in ("model_name", "model"):
        value = getattr(model, attribute, None)
        if isinstance(value, str) and value:
            return f"langchain:{type(model).__name__}({value})"
    return f"langchain:{type(model).__name__}"


def read_language_model(spec: object) -> Tokenizer | None:
    """A Tokenizer for a LangChain language model (its ``get_num_tokens``); None for anything else."""
    get_num_tokens = getattr(spec, "get_num_tokens", None)
    if not callable(get_num_tokens):
        return None
    name = _langchain_name(spec)
    try:
        # Without a counter of its own LangChain falls back to GPT-2 from transformers:
        # better to say so now than in the middle of a retrieval.
        get_num_tokens("a")
    except ImportError as exc:
        raise TokenizerError(
            f"tokenizer={name} cannot count tokens here ({exc}); give the model "
            "custom_get_token_ids=..., or pass tokenizer= an encoding name or a callable"
        ) from None
    return CallableTokenizer(get_num_tokens, name=name)


def read_hugging_face(spec: object) -> Tokenizer | None:
    """A Tokenizer for a Hugging Face tokenizer (its ``encode``, special tokens left out); None
    for anything else."""
    if callable(getattr(spec, "encode", None)):
        return CallableTokenizer(_EncodeCounter(spec), name=_hugging_face_name(spec))
    return None


def read_host_tokenizer(spec: object) -> Tokenizer | None:
    """A Tokenizer for a LangChain language model (its ``get_num_tokens``) or a Hugging Face
    tokenizer (its ``encode``, special tokens left out); None for anything else."""
    found = read_language_model(spec)
    return found if found is not None else read_hugging_face(spec)
