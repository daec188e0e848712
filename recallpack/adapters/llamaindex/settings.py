"""What a LlamaIndex component is configured with: its settings (every Packer setting but
``join``, and LlamaIndex's own), a LlamaIndex retriever as a pipeline source, the tokenizer a
user set in ``Settings``, and the checks of what LlamaIndex hands the adapters (a metadata mode,
a callback manager)."""

from __future__ import annotations

import functools
import warnings
from collections.abc import Mapping

import llama_index.core
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.llms import LLM
from llama_index.core.prompts import BasePromptTemplate
from llama_index.core.prompts.default_prompt_selectors import DEFAULT_TEXT_QA_PROMPT_SEL
from llama_index.core.schema import MetadataMode
from pydantic import BaseModel, ConfigDict

from recallpack.adapters.shared.components import PackSettings
from recallpack.adapters.shared.depth import corpus_size, own_depth
from recallpack.packing.candidate import LaneKind
from recallpack.packing.errors import ConfigError, RecallpackWarning
from recallpack.packing.fusion import DEFAULT_RRF_K
from recallpack.packing.pipeline import Source
from recallpack.packing.tokenizers import CallableTokenizer, Tokenizer, is_known_encoding

__all__ = [
    "RetrieverSettings", "LanesSettings", "source_of", "settings_tokenizer", "metadata_mode_of",
    "callback_manager_of",
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


def source_of(retriever: object, fetch_k: int | None, where: str, lane: LaneKind | None = None) -> Source:
    """A LlamaIndex retriever as a pipeline source: its own ``similarity_top_k``, whether a depth
    reaches it (it has one), and how many nodes it holds (a BM25 retriever refuses more)."""
    if not isinstance(retriever, BaseRetriever):
        raise ConfigError(
            f"{where}={retriever!r} must be a LlamaIndex BaseRetriever (for example index.as_retriever())"
        )
    forwards = hasattr(retriever, "similarity_top_k")
    if fetch_k is not None and not forwards:
        warnings.warn(
            f"fetch_k={fetch_k} cannot be forwarded to {where} ({type(retriever).__name__}): it has no "
            "similarity_top_k; it returns its own number of results",
            RecallpackWarning,
            stacklevel=4,
        )
    return Source(lane, own_depth(retriever), forwards, corpus_size(retriever))


class RetrieverSettings(PackSettings):
    """What ``BudgetedRetriever`` takes by keyword: every setting but ``join``, and these."""

    fetch_k: int | None = None
    metadata_mode: MetadataMode = MetadataMode.NONE
    callback_manager: CallbackManager | None = None


class EngineOptions(BaseModel):
    """What ``EvidenceQueryEngine`` takes by keyword after its retriever (for type checkers: the
    signature pydantic's mypy plugin would otherwise write, of keywords only, is not seen)."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    llm: LLM | None = None
    text_qa_template: BasePromptTemplate = DEFAULT_TEXT_QA_PROMPT_SEL
    callback_manager: CallbackManager | None = None


class EngineKeywords(EngineOptions):
    """What ``EvidenceQueryEngine`` takes when its retriever is given by keyword too (a
    BudgetedRetriever, checked at run time: this module cannot import it, which imports this)."""

    retriever: BaseRetriever


class LanesSettings(RetrieverSettings):
    """What ``BudgetedRetriever.from_lanes`` takes by keyword (for type checkers)."""

    weights: Mapping[LaneKind | str, float] | None = None
    rrf_k: int = DEFAULT_RRF_K
