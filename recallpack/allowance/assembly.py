"""Which of a conversation's evidence blocks one model request may show, and what it left.

:func:`assemble` charges a block by its receipt, and only when the receipt verifies against the
bytes the model would see, so a block that was edited, excerpted, pasted under another block's
receipt, or whose receipt was edited, cannot pass for counted evidence. Adapters turn their
messages into :class:`Block` values and map the :class:`Assembly` back.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict

from recallpack.allowance.receipts import (
    Receipt,
    ReceiptContext,
    ReceiptKey,
    WithheldReason,
    check_receipt,
    resolve_context,
    resolve_key,
)
from recallpack.packing.allowance import Allowance, Remaining, as_allowance
from recallpack.packing.errors import ConfigError

__all__ = ["Block", "Withheld", "Assembly", "assemble", "omission_texts"]


@dataclass(frozen=True)
class Block:
    """One evidence block already in a conversation: the text a model would see, the receipt
    that came with it (``None`` for a legacy result, or any raw artifact), and a ``key`` the
    caller uses to find it again (a message id, a tool call id, a position).

    ``failed`` marks a recall whose tool reported an error, and ``foreign`` a result that
    presents a receipt but did not come from a recall tool the application made: both are
    withheld whatever their receipt says.
    """

    text: object
    receipt: object = None
    key: Hashable = None
    failed: bool = False
    foreign: bool = False


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


def _blocks(blocks: object) -> Sequence[Block]:
    if isinstance(blocks, (str, bytes)) or not isinstance(blocks, Iterable):
        raise ConfigError(f"blocks must be a list of recallpack Blocks, got {type(blocks).__name__}")
    items = blocks if isinstance(blocks, Sequence) else list(blocks)
    for index, block in enumerate(items):
        if not isinstance(block, Block):
            raise ConfigError(
                f"blocks[{index}] is a {type(block).__name__}; wrap each text and its receipt "
                "in recallpack.allowance.Block(text, receipt)"
            )
        if not isinstance(block.failed, bool) or not isinstance(block.foreign, bool):
            raise ConfigError(f"blocks[{index}].failed and .foreign must be True or False")
    return items


def assemble(
    blocks: Iterable[Block],
    allowance: Allowance | None = None,
    *,
    key: ReceiptKey | None = None,
    context: ReceiptContext | None = None,
) -> Assembly:
    """Decide which of a conversation's evidence blocks (oldest first) one request may show.

    Newest first, because the latest search is the one the model is acting on: a block is kept
    whole when its receipt verifies (with ``key``, default ``$RECALLPACK_RECEIPT_KEY``), it was
    issued for ``context`` when one is given, its bytes are not a repeat of a newer kept block,
    and its counts fit what is left of ``allowance``; otherwise it is withheld whole, with a
    reason, and older blocks still get their chance (a smaller one may fit). A block is never
    cut: a cut block would no longer match its receipt. Verified correction blocks are always
    kept and never charged. Same input, same output.

    >>> a = "- **Derived memory**\\n\\n    Alice moved to Berlin.\\n"
    >>> b = "- **Derived memory**\\n\\n    Alice lives in Paris.\\n"
    >>> blocks = [Block(t, issue_receipt(t, items=1, tokenizer="chars")) for t in (a, b, b)]
    >>> result = assemble(blocks, Allowance(max_items=1))
    >>> result.kept, [(w.index, w.reason.value) for w in result.withheld]
    ((2,), [(0, 'over_items'), (1, 'duplicate')])
    """
    allowance = as_allowance(allowance)
    items = _blocks(blocks)
    secret, expected = resolve_key(key), resolve_context(context)
    kept: list[int] = []
    corrections: list[int] = []
    withheld: list[Withheld] = []
    seen: set[str] = set()  # SHA-256 of the bytes kept: a repeat is the same bytes, any receipt

    def withhold(index: int, reason: WithheldReason) -> None:
        withheld.append(Withheld(index=index, key=items[index].key, reason=reason))

    def keep(index: int, content: str) -> None:
        seen.add(content)
        kept.append(index)

    # First every receipt is checked, and corrections are kept: they are read whatever the
    # allowance, so an optional block repeating a correction's bytes is the repeat.
    optional: list[tuple[int, Receipt, str]] = []
    for index in range(len(items) - 1, -1, -1):
        block = items[index]
        if block.failed or block.foreign:
            withhold(index, WithheldReason.FAILED if block.failed else WithheldReason.FOREIGN)
            continue
        checked = check_receipt(block.text, block.receipt, secret, expected)
        if isinstance(checked, WithheldReason):
            withhold(index, checked)
            continue
        receipt, content = checked
        if not receipt.correction:
            optional.append((index, receipt, content))
        elif content in seen:
            withhold(index, WithheldReason.DUPLICATE)
        else:
            keep(index, content)
            corrections.append(index)

    used_blocks, used_items, used_tokens = _charge(optional, allowance, seen, keep, withhold)
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


def _charge(
    optional: Sequence[tuple[int, Receipt, str]],
    allowance: Allowance,
    seen: set[str],
    keep: Callable[[int, str], None],
    withhold: Callable[[int, WithheldReason], None],
) -> tuple[int, int, int]:
    """Keep the optional blocks (newest first) that fit what is left; return blocks, items, tokens."""
    used_blocks = used_items = used_tokens = 0
    for index, receipt, content in optional:
        if content in seen:
            withhold(index, WithheldReason.DUPLICATE)
        elif used_blocks >= allowance.max_blocks:
            withhold(index, WithheldReason.OVER_BLOCKS)
        elif used_items + receipt.items > allowance.max_items:
            withhold(index, WithheldReason.OVER_ITEMS)
        elif used_tokens + receipt.tokens > allowance.max_tokens:
            withhold(index, WithheldReason.OVER_TOKENS)
        else:
            keep(index, content)
            used_blocks += 1
            used_items += receipt.items
            used_tokens += receipt.tokens
    return used_blocks, used_items, used_tokens


def omission_texts(
    assembly: Assembly, marker: str, count: Callable[[str], int]
) -> tuple[dict[int, str], Remaining]:
    """What each withheld block's place shows, and what the allowance has left after that.

    A marker (``marker`` with ``{reason}`` and ``{code}`` filled in, counted with ``count``) costs
    tokens like any evidence, so the markers are charged to what the kept blocks left, newest
    first: a block gets its marker while one fits, the newest withheld block gets its marker even
    when none does, and the rest are left empty. So kept blocks and markers stay within the
    allowance plus one marker, however many blocks were withheld (200 withheld search results put
    over 3,000 tokens of markers into a request whose allowance was 400)."""
    left = assembly.remaining.tokens
    texts: dict[int, str] = {}
    for entry in sorted(assembly.withheld, key=lambda w: w.index, reverse=True):
        text = marker.format(reason=entry.reason.text, code=entry.reason.value)
        cost = count(text)
        if cost <= left:
            left -= cost
        elif not texts:  # the newest: the one marker the allowance need not hold
            left = 0
        else:
            text = ""
        texts[entry.index] = text
    room = assembly.remaining
    return texts, Remaining(items=room.items, tokens=left, blocks=room.blocks)
