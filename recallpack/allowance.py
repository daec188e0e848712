"""One evidence allowance per model request, and receipts that bind counts to bytes (seed 001).

In an agent, automatic recall and every deliberate memory search each pack within their own
budget, so the evidence a single model request carries has no bound of its own. An
:class:`Allowance` is that bound: every evidence block retained in one request, plus the
automatic recall for the new turn, shares it.

Each rendered block carries a :class:`Receipt`: its item and token counts and the SHA-256 of its
exact UTF-8 bytes, never its content. :func:`assemble` charges a block by its receipt, and only
when the receipt verifies against the bytes the model would see, so a block that was edited,
excerpted or pasted under another block's receipt cannot pass for counted evidence.

The module is pure: it imports no host framework. Adapters turn their messages into
:class:`Block` values and map the :class:`Assembly` back.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from recallpack.packing.candidate import ValueEnum
from recallpack.packing.errors import BudgetError, ReceiptError
from recallpack.packing.limits import Allowance, Remaining, as_remaining
from recallpack.packing.result import RecallResult
from recallpack.packing.tokenizer import TokenizerSpec, get_tokenizer

__all__ = [
    "Allowance",
    "Remaining",
    "Receipt",
    "Block",
    "Withheld",
    "WithheldReason",
    "Assembly",
    "RECEIPT_KIND",
    "digest_of",
    "issue_receipt",
    "receipt_for",
    "verify",
    "coerce_receipt",
    "looks_like_receipt",
    "as_remaining",
    "assemble",
]

#: Marks a receipt once it has been turned into a plain mapping (a checkpoint, JSON), so an
#: adapter can tell a receipt from any other tool artifact without guessing from its fields.
RECEIPT_KIND: Final = "recallpack.receipt/v1"


class Receipt(BaseModel):
    """The counts of one rendered block, bound to its exact bytes. It holds no content.

    ``tokens`` is the block's whole rendered text counted by ``tokenizer``; ``digest`` is the
    SHA-256 of its UTF-8 bytes. ``correction`` marks a block of corrections: it is kept outside
    the allowance, because a correction must be read even when no optional evidence fits.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["recallpack.receipt/v1"] = RECEIPT_KIND
    items: int = Field(ge=0)
    tokens: int = Field(ge=0)
    size: int = Field(ge=0, description="Length of the block in UTF-8 bytes.")
    digest: str = Field(pattern=r"^[0-9a-f]{64}$")
    tokenizer: str = ""
    correction: bool = False


def digest_of(text: str) -> str:
    """SHA-256 of ``text``'s UTF-8 bytes, in hex: what a receipt binds to."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def issue_receipt(
    text: str, *, items: int, tokenizer: TokenizerSpec = None, correction: bool = False
) -> Receipt:
    """A receipt for ``text`` as rendered, counting its tokens with ``tokenizer``."""
    if not isinstance(text, str):
        raise ReceiptError(f"a receipt is issued for rendered text (a str), got {type(text).__name__}")
    tok = get_tokenizer(tokenizer)
    return Receipt(
        items=items,
        tokens=tok.count(text),
        size=len(text.encode("utf-8")),
        digest=digest_of(text),
        tokenizer=tok.name,
        correction=correction,
    )


def receipt_for(result: RecallResult, *, correction: bool = False) -> tuple[str, Receipt]:
    """The rendered block of ``result`` and its receipt.

    The token count is the one the packer measured on these same bytes (``to_markdown()``
    renders with the result's own template), so nothing is counted twice.
    """
    text = result.to_markdown()
    receipt = Receipt(
        items=len(result.evidence),
        tokens=result.report.tokens_used if text else 0,
        size=len(text.encode("utf-8")),
        digest=digest_of(text),
        tokenizer=result.report.tokenizer_used,
        correction=correction,
    )
    return text, receipt


def coerce_receipt(value: object) -> Receipt:
    """``value`` as a Receipt: a Receipt, or the mapping a checkpoint turned one into.

    Raises ReceiptError when it is neither, so a malformed receipt is never mistaken for a
    missing one.
    """
    if isinstance(value, Receipt):
        return value
    if isinstance(value, Mapping):
        try:
            return Receipt.model_validate(dict(value))
        except ValidationError as exc:
            raise ReceiptError(f"malformed receipt: {exc.errors()[0]['msg']}") from None
    raise ReceiptError(f"a receipt must be a recallpack.Receipt or its mapping, got {type(value).__name__}")


def looks_like_receipt(value: object) -> bool:
    """True for a Receipt or a mapping that says it is one (well formed or not)."""
    if isinstance(value, Receipt):
        return True
    return isinstance(value, Mapping) and value.get("kind") == RECEIPT_KIND


def verify(block_text: object, receipt: Receipt | Mapping[str, Any]) -> bool:
    """True only when ``receipt`` was issued for exactly these bytes.

    An edited or excerpted block, or another block's text, does not verify. A malformed receipt
    raises ReceiptError.

    >>> text = "- **Source excerpt**\\n\\n    Alice works at Initech.\\n"
    >>> receipt = issue_receipt(text, items=1, tokenizer="chars")
    >>> verify(text, receipt), verify(text.replace("Alice", "Bob"), receipt)
    (True, False)
    """
    checked = coerce_receipt(receipt)
    if not isinstance(block_text, str):
        return False
    data = block_text.encode("utf-8")
    if len(data) != checked.size:
        return False
    return hmac.compare_digest(hashlib.sha256(data).hexdigest(), checked.digest)


@dataclass(frozen=True)
class Block:
    """One evidence block already in a conversation: the text a model would see, the receipt
    that came with it (``None`` for a legacy result, or any raw artifact), and a ``key`` the
    caller uses to find it again (a message id, a tool call id, a position)."""

    text: object
    receipt: object = None
    key: Hashable = None


class WithheldReason(ValueEnum):
    """Why a block is not shown in this request."""

    NO_RECEIPT = "no_receipt"
    MALFORMED_RECEIPT = "malformed_receipt"
    RECEIPT_MISMATCH = "receipt_mismatch"
    DUPLICATE = "duplicate"
    OVER_BLOCKS = "over_blocks"
    OVER_ITEMS = "over_items"
    OVER_TOKENS = "over_tokens"


class Withheld(BaseModel):
    """One withheld block: its position in the input, its key, and why."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    index: int
    key: Any = None
    reason: WithheldReason


class Assembly(BaseModel):
    """What one request may show: kept blocks, withheld blocks with reasons, what is left.

    Positions are into the input, ascending (conversation order). ``kept`` includes the
    corrections; ``corrections`` lists those among them, which the totals do not charge.
    """

    model_config = ConfigDict(frozen=True)

    kept: tuple[int, ...]
    corrections: tuple[int, ...] = ()
    withheld: tuple[Withheld, ...] = ()
    items_used: int
    tokens_used: int
    blocks_used: int
    allowance: Allowance
    remaining: Remaining

    def reason(self, index: int) -> WithheldReason | None:
        """Why block ``index`` is withheld, or None when it is kept."""
        for entry in self.withheld:
            if entry.index == index:
                return entry.reason
        return None


def assemble(blocks: Iterable[Block], allowance: Allowance | None = None) -> Assembly:
    """Decide which of a conversation's evidence blocks (oldest first) one request may show.

    Newest first, because the latest search is the one the model is acting on: a block is kept
    whole when its receipt verifies, its bytes are not a repeat of a newer kept block, and its
    counts fit what is left of ``allowance``; otherwise it is withheld whole, with a reason,
    and older blocks still get their chance (a smaller one may fit). A block is never cut: a
    cut block would no longer match its receipt. Verified correction blocks are always kept and
    never charged. Same input, same output.

    >>> a = "- **Derived memory**\\n\\n    Alice moved to Berlin.\\n"
    >>> b = "- **Derived memory**\\n\\n    Alice lives in Paris.\\n"
    >>> blocks = [Block(t, issue_receipt(t, items=1, tokenizer="chars")) for t in (a, b, b)]
    >>> result = assemble(blocks, Allowance(max_items=1))
    >>> result.kept, [(w.index, w.reason.value) for w in result.withheld]
    ((2,), [(0, 'over_items'), (1, 'duplicate')])
    """
    allowance = Allowance() if allowance is None else allowance
    if not isinstance(allowance, Allowance):
        raise BudgetError(f"allowance={allowance!r} must be a recallpack.Allowance")
    items: Sequence[Block] = blocks if isinstance(blocks, Sequence) else list(blocks)
    kept: list[int] = []
    corrections: list[int] = []
    withheld: list[Withheld] = []
    seen: set[str] = set()
    used_items = used_tokens = used_blocks = 0

    def withhold(index: int, reason: WithheldReason) -> None:
        withheld.append(Withheld(index=index, key=items[index].key, reason=reason))

    # First every receipt is checked, and corrections are kept: they are read whatever the
    # allowance, so an optional block repeating a correction's bytes is the repeat.
    optional: list[tuple[int, Receipt]] = []
    for index in range(len(items) - 1, -1, -1):
        block = items[index]
        if not isinstance(block, Block):
            raise TypeError(f"blocks[{index}] must be a recallpack Block, got {type(block).__name__}")
        if block.receipt is None:
            withhold(index, WithheldReason.NO_RECEIPT)
            continue
        try:
            receipt = coerce_receipt(block.receipt)
            valid = verify(block.text, receipt)
        except ReceiptError:
            withhold(index, WithheldReason.MALFORMED_RECEIPT)
            continue
        if not valid:
            withhold(index, WithheldReason.RECEIPT_MISMATCH)
        elif not receipt.correction:
            optional.append((index, receipt))
        elif receipt.digest in seen:
            withhold(index, WithheldReason.DUPLICATE)
        else:
            seen.add(receipt.digest)
            kept.append(index)
            corrections.append(index)

    for index, receipt in optional:  # newest first
        if receipt.digest in seen:
            withhold(index, WithheldReason.DUPLICATE)
        elif used_blocks >= allowance.max_blocks:
            withhold(index, WithheldReason.OVER_BLOCKS)
        elif used_items + receipt.items > allowance.max_items:
            withhold(index, WithheldReason.OVER_ITEMS)
        elif used_tokens + receipt.tokens > allowance.max_tokens:
            withhold(index, WithheldReason.OVER_TOKENS)
        else:
            seen.add(receipt.digest)
            kept.append(index)
            used_blocks += 1
            used_items += receipt.items
            used_tokens += receipt.tokens

    return Assembly(
        kept=tuple(sorted(kept)),
        corrections=tuple(sorted(corrections)),
        withheld=tuple(sorted(withheld, key=lambda w: w.index)),
        items_used=used_items,
        tokens_used=used_tokens,
        blocks_used=used_blocks,
        allowance=allowance,
        remaining=Remaining(
            items=allowance.max_items - used_items,
            tokens=allowance.max_tokens - used_tokens,
            blocks=allowance.max_blocks - used_blocks,
        ),
    )
