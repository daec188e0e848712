"""One evidence allowance per model request, and receipts that bind counts to bytes.

In an agent, automatic recall and every deliberate memory search each pack within their own
budget, so the evidence a single model request carries has no bound of its own. An
:class:`Allowance` is that bound: every evidence block retained in one request, plus the
automatic recall for the new turn, shares it.

Each rendered block carries a :class:`Receipt`: its item and token counts, the correction flag,
the tokenizer, the owner/session/run it was issued for, and a digest over all of them and the
SHA-256 of the block's exact bytes, never its content. :func:`assemble` charges a block by its
receipt, and only when the receipt verifies against the bytes the model would see, so a block
that was edited, excerpted, pasted under another block's receipt, or whose receipt was edited,
cannot pass for counted evidence.

With a key (``key=``, or the ``RECALLPACK_RECEIPT_KEY`` environment variable shared by the
processes that share checkpoints) the digest is an HMAC-SHA256, so code without the key cannot
mint a receipt. Without a key it is an integrity check only: anyone can compute it.

The package is pure: it imports no host framework. Adapters turn their messages into
:class:`Block` values and map the :class:`Assembly` back. Its parts: ``receipts`` (Receipt,
keys, contexts, verify), ``assembly`` (assemble, omission markers) and ``recall`` (recall within
what is left). Allowance and Remaining, the values a recall takes as ``allowance=``, are the
core's arithmetic (:mod:`recallpack.packing.allowance`), handed on here.
"""

from recallpack.allowance import assembly, recall, receipts
from recallpack.allowance.assembly import *  # noqa: F403
from recallpack.allowance.recall import *  # noqa: F403
from recallpack.allowance.receipts import *  # noqa: F403
from recallpack.packing.allowance import Allowance, Remaining, as_allowance, as_remaining

# Each part lists its public names once, in its own __all__; the package is their union. The
# arithmetic of an allowance (Allowance, Remaining) is the core's: the Packer takes it.
__all__ = ["Allowance", "Remaining", "as_remaining", "as_allowance"]
__all__ += receipts.__all__
__all__ += assembly.__all__
__all__ += recall.__all__
