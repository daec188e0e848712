"""An evidence budget sized from the model it is for: its window, less its answer and its prompt.

``budget_for`` takes the window as an int, or a host's model object, which the host's reader
(found in the host table, :mod:`recallpack.packing.hosts`, and imported when such an object first
comes) reads into a :class:`ModelWindow`: a LangChain chat model's ``profile``, a LlamaIndex
LLM's ``metadata``. The core names no host's method, and calls nothing on the model but its
token counter, and that only to count a prompt.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any

from recallpack.packing.errors import ConfigError, TokenizerError
from recallpack.packing.hosts import read_host
from recallpack.packing.limits import MAX_TOKENS_CEILING
from recallpack.packing.tokenizers import Tokenizer, TokenizerSpec, get_tokenizer
from recallpack.packing.validation import is_int

__all__ = ["budget_for", "ModelWindow", "DEFAULT_RESERVE_OUTPUT"]

#: Tokens kept for the model's answer when neither the caller nor the model says how many.
DEFAULT_RESERVE_OUTPUT = 1024


@dataclass(frozen=True)
class ModelWindow:
    """What a host's model says of itself, as a host's reader hands it to :func:`budget_for`."""

    window: int | None
    """Its input window in tokens; None when it does not say."""
    reserved: int | None
    """The answer length it reserves itself; None when it does not say."""
    name: str
    """Where the window was read, for messages (``ChatX.profile['max_input_tokens']``)."""
    missing: str
    """The error message when the window is missing or is not one, saying what to pass."""
    counter: TokenizerSpec = None
    """What counts the prompt when no ``tokenizer=`` is given: the model itself (its own
    counter), a model name (cl100k_base when tiktoken does not know it), or None (cl100k_base)."""


def _int(value: object) -> int | None:
    return value if is_int(value) else None


def _window_of(model: object) -> tuple[int, ModelWindow]:
    """The model's input window, and what it says of itself (the answer it reserves, its name)."""
    window = _int(model)
    if window is not None:
        return window, ModelWindow(window, None, "the window", "")
    found: ModelWindow | None = read_host("model", model)
    if found is None:
        raise ConfigError(
            f"budget_for() takes a LangChain chat model, a LlamaIndex LLM or a window in tokens (an int), "
            f"got {type(model).__name__}"
        )
    if found.window is None or found.window < 1:
        raise ConfigError(found.missing)
    return found.window, found


def _prompt_tokenizer(counter: TokenizerSpec, tokenizer: TokenizerSpec) -> Tokenizer:
    """What counts the prompt: ``tokenizer`` when given; else the model's ``counter``; else cl100k_base."""
    if tokenizer is not None:
        return get_tokenizer(tokenizer)
    if isinstance(counter, str):
        try:
            return get_tokenizer(counter)
        except TokenizerError:
            return get_tokenizer(None)
    return get_tokenizer(counter)


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
    window, model = _window_of(model_or_window)
    own_reserve, name = model.reserved, model.name
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
    used = _prompt_tokenizer(model.counter, tokenizer).count(prompt) if prompt else 0
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
