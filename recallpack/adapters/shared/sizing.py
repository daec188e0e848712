"""What the hosts' model objects say of their window, for :func:`recallpack.budget_for`.

Read by duck typing, so no host framework is imported: what each host documents as the model's
own description, a LangChain 1.x chat model's ``profile`` (``max_input_tokens``), a LlamaIndex
LLM's ``metadata`` (``context_window``, ``num_output``). Nothing is called on the model. The
hosts' readers hand these to the core's ``budget_for`` (:mod:`recallpack.packing.counting.model_budget`),
which is also importable from here, its home of the last release.
"""

from __future__ import annotations

from collections.abc import Mapping

from recallpack.packing.counting.model_budget import DEFAULT_RESERVE_OUTPUT, ModelWindow, budget_for
from recallpack.packing.validation import is_int

__all__ = ["budget_for", "DEFAULT_RESERVE_OUTPUT", "chat_model_window", "llm_window"]


def _int(value: object) -> int | None:
    return value if is_int(value) else None


def llm_window(model: object) -> ModelWindow | None:
    """A LlamaIndex LLM's window (``metadata.context_window``) and the answer it reserves
    (``num_output``); None when ``model`` has no such metadata."""
    metadata = getattr(model, "metadata", None)
    if not hasattr(metadata, "context_window"):
        return None
    window = _int(getattr(metadata, "context_window", None))
    output = _int(getattr(metadata, "num_output", None))
    name = f"{type(model).__name__}.metadata.context_window"
    model_name = getattr(metadata, "model_name", None)
    return ModelWindow(
        window,
        output if output is not None and output >= 0 else None,
        name,
        f"{name}={window!r} is not a window; pass the window as an int: budget_for(8192, ...)",
        # Its prompt is counted by its model's name when tiktoken knows it.
        counter=model_name if isinstance(model_name, str) and model_name else None,
    )


def chat_model_window(model: object) -> ModelWindow | None:
    """A LangChain chat model's window (``profile["max_input_tokens"]``, langchain-core 1.x) and the
    answer length it was configured with (``max_tokens``); None when ``model`` has no profile."""
    if not hasattr(model, "profile"):
        return None
    profile = getattr(model, "profile", None)
    window = _int(profile.get("max_input_tokens")) if isinstance(profile, Mapping) else None
    own = _int(getattr(model, "max_tokens", None))
    kind = type(model).__name__
    name = f"{kind}.profile['max_input_tokens']"
    return ModelWindow(
        window,
        own if own is not None and own > 0 else None,
        name,
        f"{kind} does not say its window ({name} is not set): pass profile={{'max_input_tokens': ...}} "
        "to the model, or the window as an int: budget_for(128_000, ...)",
        counter=model if callable(getattr(model, "get_num_tokens", None)) else None,  # it counts its own
    )
