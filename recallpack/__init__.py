"""recallpack: retrieved context that fits the model.

A token budget instead of a top-k, cut in merit order, each kept item labelled with its
provenance and scopes, rendered as a Markdown block that says it is evidence, not instructions.

>>> from recallpack import Candidate, recall
>>> result = recall([Candidate(text="Paris is the capital of France.")], max_tokens=100)
>>> result.report.items_selected
1
"""

import logging

from recallpack.packing._compat import moved_names
from recallpack.packing.candidate import Candidate, LaneKind, Provenance
from recallpack.packing.choosing.policies import POLICIES, Policy
from recallpack.packing.counting.model_budget import budget_for
from recallpack.packing.counting.windows import Window, chunk_size_for, split_token_windows, token_windows
from recallpack.packing.errors import (
    BudgetError,
    CandidateError,
    ConfigError,
    LaneError,
    PolicyError,
    RecallpackError,
    RecallpackWarning,
    ReceiptError,
    TemplateError,
    TokenizerError,
    UpstreamError,
)
from recallpack.packing.fusion import Fused, fuse
from recallpack.packing.limits import DEFAULT_MAX_TOKENS, MAX_TOKENS_CEILING
from recallpack.packing.packer import Packer, pack, recall, recall_many
from recallpack.packing.results.result import (
    Evidence,
    Outcome,
    PackReport,
    Reason,
    RecallResult,
    Trace,
    TraceEntry,
)
from recallpack.packing.scopes import Reader, Scope
from recallpack.packing.tokenizers.base import Tokenizer
from recallpack.packing.tokenizers.resolve import (
    count_tokens,
    get_tokenizer,
    resolve_encoding,
    truncate_to_tokens,
)

__version__ = "0.1.0"

# A library leaves logging to its application (the logging HOWTO's advice for libraries): no
# handler but this one. Without it, Python's last-resort handler would print recallpack's
# WARNING records to stderr of every program that never configured logging; with it they reach
# whatever handlers the application configures, and nowhere else. The fallback tokenizer is
# also a RecallpackWarning, which Python shows once by default.
logging.getLogger("recallpack").addHandler(logging.NullHandler())

#: Names that moved (the allowance's, to :mod:`recallpack.allowance`) keep working for one
#: release, each with a DeprecationWarning naming its new home: see :mod:`recallpack.packing._compat`.
__getattr__ = moved_names(__name__)

__all__ = [
    "Candidate",
    "LaneKind",
    "Provenance",
    "Scope",
    "Reader",
    "Packer",
    "pack",
    "recall",
    "recall_many",
    "budget_for",
    "fuse",
    "Fused",
    "Policy",
    "POLICIES",
    "DEFAULT_MAX_TOKENS",
    "MAX_TOKENS_CEILING",
    "RecallResult",
    "Evidence",
    "PackReport",
    "Trace",
    "TraceEntry",
    "Outcome",
    "Reason",
    "Tokenizer",
    "get_tokenizer",
    "resolve_encoding",
    "count_tokens",
    "truncate_to_tokens",
    "split_token_windows",
    "token_windows",
    "Window",
    "chunk_size_for",
    "RecallpackError",
    "ConfigError",
    "BudgetError",
    "PolicyError",
    "LaneError",
    "TokenizerError",
    "TemplateError",
    "CandidateError",
    "UpstreamError",
    "ReceiptError",
    "RecallpackWarning",
    "__version__",
]
