"""An evidence budget sized from the model it is for: its window, less its answer and its prompt.

It lives with the adapters because it reads host objects (the core names no host's method), and
it imports no host framework either: ``budget_for`` takes the hosts' model objects as they are
(it is used before, and without, any other adapter), reading what each host documents as the
model's own description, by duck typing: a LangChain 1.x chat model's ``profile``
(``max_input_tokens``), a LlamaIndex LLM's ``metadata`` (``context_window``, ``num_output``).
Nothing is imported and nothing is called on the model but its token counter.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any

from recallpack.packing.errors import ConfigError, TokenizerError
from recallpack.packing.limits import MAX_TOKENS_CEILING
from recallpack.packing.tokenizers import Tokenizer, TokenizerSpec, get_tokenizer
from recallpack.packing.validation import is_int

__all__ = ["budget_for", "DEFAULT_RESERVE_OUTPUT"]

#: Tokens kept for the model's answer when neither the caller nor the model says how many.
DEFAULT_RESERVE_OUTPUT = 1024


def _int(value: object) -> int | None:
    return value if is_int(value) else None


def _window_of(model: object) -> tuple[int, int | None, str]:
    """The model's input window, the answer it reserves itself (None: it does not say), and what
    it is, for messages."""
    if _int(model) is not None:
        return _int(model), None, "the window"  # type: ignore[return-value]
    metadata = getattr(model, "metadata", None)
    if hasattr(metadata, "context_window"):  # a LlamaIndex LLM (LLMMetadata)
        window = _int(getattr(metadata, "context_window", None))
        output = _int(getattr(metadata, "num_output", None))
        reserved = output if output is not None and output >= 0 else None
        name = f"{type(model).__name__}.metadata.context_window"
        message = f"{name}={window!r} is not a window; pass the window as an int: budget_for(8192, ...)"
    elif hasattr(model, "profile"):  # a LangChain chat model (langchain-core 1.x)
        profile = getattr(model, "profile", None)
        window = _int(profile.get("max_input_tokens")) if isinstance(profile, Mapping) else None
        own = _int(getattr(model, "max_tokens", None))  # the answer length it was configured with
        reserved = own if own is not None and own > 0 else None
        name = f"{type(model).__name__}.profile['max_input_tokens']"
        message = (
            f"{type(model).__name__} does not say its window ({name} is not set): pass "
            "profile={'max_input_tokens': ...} to the model, or the window as an int: "
            "budget_for(128_000, ...)"
        )
    else:
        raise ConfigError(
            f"budget_for() takes a LangChain chat model, a LlamaIndex LLM or a window in tokens (an int), "
            f"got {type(model).__name__}"
        )
    if window is None or window < 1:
        raise ConfigError(message)
    return window, reserved, name


def _prompt_tokenizer(model: object, tokenizer: TokenizerSpec) -> Tokenizer:
    """What counts the prompt: ``tokenizer`` when given; a LangChain model's own counter; a
    LlamaIndex LLM's model name when tiktoken knows it; else cl100k_base."""
    if tokenizer is not None:
        return get_tokenizer(tokenizer)
    if callable(getattr(model, "get_num_tokens", None)):
        return get_tokenizer(model)  # a LangChain model counts its own
    name = getattr(getattr(model, "metadata", None), "model_name", None)
    if isinstance(name, str) and name:
        try:
            return get_tokenizer(name)
        except TokenizerError:
            pass
    return get_tokenizer(None)


def budget_for(
    model_or_window: Any,
    *,
    reserve_output: int | None = None,
    prompt: str | None = None,
    share: float = 1.0,
    tokenizer: TokenizerSpec = None,
    ceiling: int | None = MAX_TOKENS_CEILING,
) -> int:
    """The evidence budget for a model: ``(window - reserve_output - prompt tokens) * share``,
    rounded down.

    ``model_or_window`` is a LangChain chat model (its ``profile["max_input_tokens"]``), a
    LlamaIndex LLM (``metadata.context_window``) or the window itself, an int. ``reserve_output``
    is kept for the answer: by default what the model says (a LlamaIndex LLM's ``num_output``, a
    LangChain model's ``max_tokens``), else 1024. ``prompt`` is the prompt's own text (the template
    with its placeholders empty), counted by the model's tokenizer where it has one (a LangChain
    model's ``get_num_tokens``; else ``tokenizer=``, else cl100k_base). ``share`` is the part of
    what is left that evidence may take (0 < share <= 1).

    The result is at most ``ceiling``: by default 16384, the ``max_tokens_ceiling`` every Packer,
    retriever and postprocessor has unless told otherwise, so the budget can be passed to any of
    them as is, also for a model whose window is far larger (a 128k model gets 16384, not about
    127k, and an INFO record on the ``recallpack`` logger says what was capped). For more, say
    how much twice, on purpose: ``budget_for(llm, ceiling=None)`` (or a number) and
    ``max_tokens_ceiling=`` of that size where the budget is used.

    >>> budget_for(8192, reserve_output=1024, share=0.5)
    3584
    >>> budget_for(128_000)
    16384
    """
    if ceiling is not None and (_int(ceiling) is None or ceiling < 1):
        raise ConfigError(
            f"ceiling={ceiling!r} must be an int of at least 1 (the most the budget may be), or None "
            "for no cap"
        )
    window, own_reserve, name = _window_of(model_or_window)
    if window < 1:
        raise ConfigError(f"{name}={window} must be at least 1 (a window in tokens)")
    reserve = own_reserve if reserve_output is None and own_reserve is not None else reserve_output
    reserve = DEFAULT_RESERVE_OUTPUT if reserve is None else reserve
    if _int(reserve) is None or reserve < 0:
        raise ConfigError(
            f"reserve_output={reserve!r} must be an int of at least 0 (tokens kept for the answer)"
        )
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not (0 < share <= 1):
        raise ConfigError(
            f"share={share!r} must be a number above 0 and at most 1 (the part evidence may take)"
        )
    if prompt is not None and not isinstance(prompt, str):
        raise ConfigError(
            f"prompt={type(prompt).__name__} must be the prompt's own text, a str (a template: format "
            "it with its placeholders empty)"
        )
    used = _prompt_tokenizer(model_or_window, tokenizer).count(prompt) if prompt else 0
    budget = math.floor((window - reserve - used) * share)
    if budget < 1:
        raise ConfigError(
            f"{name}={window} leaves no room for evidence: reserve_output={reserve} and the prompt's "
            f"{used} tokens take it all; lower reserve_output or shorten the prompt"
        )
    if ceiling is not None and budget > ceiling:
        logging.getLogger("recallpack").info(
            "budget_for: %s=%d leaves %d tokens for evidence; capped at ceiling=%d (pass "
            "ceiling=None, and max_tokens_ceiling where the budget is used, to take more)",
            name, window, budget, ceiling,
        )
        return ceiling
    return budget
