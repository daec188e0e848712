"""The one error tree. Every message names the field, the value it got, and what is allowed."""

from __future__ import annotations


class RecallpackError(Exception):
    """Base class of every error recallpack raises on purpose."""


class ConfigError(RecallpackError, ValueError):
    """A setting has a value recallpack cannot use."""


class BudgetError(ConfigError):
    """A budget (max_tokens, max_items, lane_budgets, overlap_tokens) is out of range."""


class PolicyError(ConfigError):
    """An unknown oversize policy."""


class LaneError(ConfigError):
    """An unknown lane kind or provenance."""


class TokenizerError(ConfigError):
    """An unknown encoding, model name or tokenizer spec."""


class TemplateError(ConfigError):
    """A template that cannot be found or rendered."""


class CandidateError(RecallpackError, ValueError):
    """A candidate that is not well formed (for example, text that is not a string)."""


class UpstreamError(RecallpackError, TypeError):
    """An upstream retriever returned something recallpack cannot pack."""


class ReceiptError(RecallpackError, ValueError):
    """A receipt that is malformed (not merely one that does not verify)."""


class RecallpackWarning(UserWarning):
    """Something works, but less exactly than asked (for example, the heuristic tokenizer)."""
