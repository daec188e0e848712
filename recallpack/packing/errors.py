"""The one error tree. Every message names the field, the value it got, and what is allowed."""

from __future__ import annotations


class RecallpackError(Exception):
    """Base class of every error recallpack raises on purpose.

    ``field`` names the setting or input the error is about when it is known (``"max_tokens"``,
    ``"policy"``, ``"text"``), and ``index`` the candidate's position when it is about one
    candidate, so a front end can point at them in its own words (a flag, a line of a file)
    without reading the message.
    """

    def __init__(self, *args: object, field: str | None = None, index: int | None = None) -> None:
        super().__init__(*args)
        # In __dict__, so a pickled error (from a worker process) keeps them.
        self.field = field
        self.index = index


class ConfigError(RecallpackError, ValueError):
    """A setting has a value recallpack cannot use."""


class BudgetError(ConfigError):
    """A budget (max_tokens, max_items, lane_budgets, overlap_tokens) is out of range."""


class PolicyError(ConfigError):
    """An unknown policy, or a decision a policy made that breaks a rule of the ledger's.

    For a broken decision, ``rule`` names the rule (``"rank order"``, ``"end"``, ``"decision"``...),
    ``policy`` the policy's name and ``index`` the candidate's rank when it is about one.
    """

    def __init__(
        self,
        *args: object,
        field: str | None = "policy",
        index: int | None = None,
        rule: str | None = None,
        policy: str | None = None,
    ) -> None:
        super().__init__(*args, field=field, index=index)
        self.rule = rule
        self.policy = policy


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
