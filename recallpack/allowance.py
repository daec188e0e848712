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

The module is pure: it imports no host framework. Adapters turn their messages into
:class:`Block` values and map the :class:`Assembly` back.
"""

from __future__ import annotations

import difflib
import hashlib
import hmac
import json
import os
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from recallpack.packing.candidate import ValueEnum
from recallpack.packing.errors import BudgetError, ConfigError, RecallpackError, ReceiptError
from recallpack.packing.limits import Allowance, CheckedModel, Remaining, as_remaining
from recallpack.packing.packer import Packer
from recallpack.packing.result import RecallResult
from recallpack.packing.tokenizers import TokenizerSpec, get_tokenizer

__all__ = [
    "Allowance",
    "Remaining",
    "Receipt",
    "Block",
    "Withheld",
    "WithheldReason",
    "Assembly",
    "RECEIPT_KIND",
    "KEY_ENV",
    "CONTEXT_FIELDS",
    "ReceiptKey",
    "ReceiptContext",
    "ContextSource",
    "digest_of",
    "issue_receipt",
    "receipt_for",
    "verify",
    "coerce_receipt",
    "looks_like_receipt",
    "resolve_key",
    "resolve_context",
    "as_remaining",
    "assemble",
    "omission_texts",
    "Recaller",
    "recall_remaining",
    "arecall_remaining",
]

#: Marks a receipt once it has been turned into a plain mapping (a checkpoint, JSON), so an
#: adapter can tell a receipt from any other tool artifact without guessing from its fields.
#: v2 digests the counts and context too; a v1 receipt (bytes only) is legacy and never verifies.
RECEIPT_KIND: Final = "recallpack.receipt/v2"
_KIND_PREFIX: Final = "recallpack.receipt/"
#: The environment variable a key is read from when no ``key=`` is given.
KEY_ENV: Final = "RECALLPACK_RECEIPT_KEY"
#: The context a receipt may be bound to, and an assembly checked against.
CONTEXT_FIELDS: Final = ("owner", "session", "run")
#: Shorter keys are guessable; 32 random bytes (``secrets.token_hex(32)``) is the usual choice.
_MIN_KEY_BYTES: Final = 16

ReceiptContext = Mapping[str, str]
ReceiptKey = bytes | str


def _utf8(text: str) -> bytes:
    # A lone surrogate (json.loads('"\\ud800"')) is a valid Python str but not valid UTF-8; the
    # receipt binds the str exactly as given rather than raising, so no input can crash it.
    return text.encode("utf-8", "surrogatepass")


def _did_you_mean(name: str, valid: Sequence[str]) -> str:
    close = difflib.get_close_matches(name, valid, n=1)
    return f"did you mean {close[0]!r}?" if close else f"use one of: {', '.join(valid)}"


def resolve_key(key: object = None) -> bytes | None:
    """The key receipts are made and checked with: ``key``, else ``$RECALLPACK_RECEIPT_KEY``,
    else None (unkeyed: an integrity check only). A key is a str or bytes of at least 16 bytes.
    """
    source = "key"
    if key is None:
        key, source = os.environ.get(KEY_ENV) or None, f"${KEY_ENV}"
        if key is None:
            return None
    if isinstance(key, str):
        key = _utf8(key)
    if not isinstance(key, (bytes, bytearray)):
        raise ConfigError(
            f"key={key!r} must be a str or bytes secret (or None to read ${KEY_ENV}), "
            f"got {type(key).__name__}"
        )
    if len(key) < _MIN_KEY_BYTES:
        raise ConfigError(
            f"{source} is {len(key)} bytes; a receipt key needs at least {_MIN_KEY_BYTES} "
            "(make one with secrets.token_hex(32))"
        )
    return bytes(key)


def resolve_context(context: object) -> dict[str, str]:
    """``context`` (owner/session/run, each optional) as a plain dict, or a ConfigError."""
    if context is None:
        return {}
    if not isinstance(context, Mapping):
        raise ConfigError(
            f"context={context!r} must be a mapping such as {{'owner': ..., 'session': ..., 'run': ...}}"
        )
    checked: dict[str, str] = {}
    for name, value in context.items():
        if name not in CONTEXT_FIELDS:
            raise ConfigError(f"context key {name!r} is unknown; {_did_you_mean(str(name), CONTEXT_FIELDS)}")
        if value is None:
            continue
        if not isinstance(value, str) or not value:
            raise ConfigError(
                f"context[{name!r}]={value!r} must be a non-empty str (or None to leave it out)"
            )
        checked[name] = value
    return checked


#: A context, or a function an adapter calls each time with what its host gives it (a LangChain
#: tool's RunnableConfig, an agent's ModelRequest) to derive one: the session from a thread id.
ContextSource = Mapping[str, str] | Callable[[Any], Mapping[str, str] | None] | None


def _receipt_settings(key: object, context: object, per_call: bool) -> ContextSource:
    """Checks ``key`` (or ``$RECALLPACK_RECEIPT_KEY``) and ``context`` where they are given."""
    resolve_key(key)
    if callable(context) and not isinstance(context, Mapping):
        if not per_call:
            raise ConfigError("context= must be a mapping here (owner/session/run), not a function")
        return context
    resolve_context(context)
    return context  # type: ignore[return-value]


def _context_for(context: ContextSource, source: object) -> Mapping[str, str] | None:
    return context(source) if callable(context) and not isinstance(context, Mapping) else context


class Receipt(CheckedModel):
    """The counts of one rendered block, bound to its exact bytes. It holds no content.

    ``tokens`` is the block's whole rendered text counted by ``tokenizer``. ``correction`` marks
    a block of corrections: it is kept outside the allowance, because a correction must be read
    even when no optional evidence fits. ``owner``/``session``/``run`` are the context it was
    issued for, when the caller gave one. ``digest`` covers every other field and the SHA-256 of
    the block's bytes: an HMAC-SHA256 when ``keyed``, a plain SHA-256 otherwise.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    kind: Literal["recallpack.receipt/v2"] = RECEIPT_KIND
    items: int = Field(ge=0)
    tokens: int = Field(ge=0)
    size: int = Field(ge=0, description="Length of the block in UTF-8 bytes.")
    digest: str = Field(pattern=r"^[0-9a-f]{64}$")
    tokenizer: str = ""
    correction: bool = False
    owner: str | None = None
    session: str | None = None
    run: str | None = None
    keyed: bool = False

    @classmethod
    def _invalid(cls, exc: ValidationError) -> RecallpackError:
        return ReceiptError(f"invalid Receipt: {_first_error(exc)}")

    @property
    def context(self) -> dict[str, str]:
        """The owner/session/run this receipt was issued for (only those given)."""
        return {name: value for name in CONTEXT_FIELDS if (value := getattr(self, name)) is not None}


def _first_error(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(p) for p in error["loc"]) or "receipt"
    return f"{where}: {error['msg']}"


def digest_of(text: str) -> str:
    """SHA-256 of ``text``'s UTF-8 bytes, in hex (lone surrogates passed through, never an error).

    A receipt's ``digest`` is not this: it also covers the counts and context (see
    :class:`Receipt`), so a digest of the bytes alone does not make a receipt.
    """
    if not isinstance(text, str):
        raise ReceiptError(f"text must be a str, got {type(text).__name__}")
    return hashlib.sha256(_utf8(text)).hexdigest()


def _canonical(fields: Mapping[str, object], content_sha256: str) -> bytes:
    # Sorted keys, no spaces, ASCII only: the same fields give the same bytes in every process
    # and Python version, whatever characters the context holds.
    body = {name: value for name, value in fields.items() if name != "digest"}
    body["sha256"] = content_sha256
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode("ascii")


def _seal(fields: Mapping[str, object], content_sha256: str, key: bytes | None) -> str:
    data = _canonical(fields, content_sha256)
    if key is None:
        return hashlib.sha256(data).hexdigest()
    return hmac.new(key, data, hashlib.sha256).hexdigest()


def _check_count(value: object, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ReceiptError(f"{field}={value!r} must be an int of at least 0")
    return value


def _issue(
    data: bytes,
    *,
    items: object,
    tokens: int,
    tokenizer: str,
    correction: object,
    context: object,
    key: object,
) -> Receipt:
    if not isinstance(correction, bool):
        raise ReceiptError(f"correction={correction!r} must be True or False")
    fields: dict[str, Any] = {
        "kind": RECEIPT_KIND,
        "items": _check_count(items, "items"),
        "tokens": tokens,
        "size": len(data),
        "tokenizer": tokenizer,
        "correction": correction,
        "owner": None,
        "session": None,
        "run": None,
        **resolve_context(context),
    }
    secret = resolve_key(key)
    fields["keyed"] = secret is not None
    return Receipt(**fields, digest=_seal(fields, hashlib.sha256(data).hexdigest(), secret))


def issue_receipt(
    text: str,
    *,
    items: int,
    tokenizer: TokenizerSpec = None,
    correction: bool = False,
    context: ReceiptContext | None = None,
    key: ReceiptKey | None = None,
) -> Receipt:
    """A receipt for ``text`` as rendered, counting its tokens with ``tokenizer``.

    ``context`` (``owner``/``session``/``run``) binds it to who and where it was issued for;
    ``key`` (default ``$RECALLPACK_RECEIPT_KEY``) makes it a keyed MAC.
    """
    if not isinstance(text, str):
        raise ReceiptError(f"a receipt is issued for rendered text (a str), got {type(text).__name__}")
    tok = get_tokenizer(tokenizer)
    return _issue(
        _utf8(text),
        items=items,
        tokens=tok.count(text),
        tokenizer=tok.name,
        correction=correction,
        context=context,
        key=key,
    )


def receipt_for(
    result: RecallResult,
    *,
    correction: bool = False,
    context: ReceiptContext | None = None,
    key: ReceiptKey | None = None,
) -> tuple[str, Receipt]:
    """The rendered block of ``result`` and its receipt (``context``, ``key`` as for
    :func:`issue_receipt`).

    The token count is the one the packer measured on these same bytes (``to_markdown()``
    renders with the result's own template), so nothing is counted twice.
    """
    if not isinstance(result, RecallResult):
        raise ReceiptError(
            f"result must be a RecallResult (what recall() returns), got {type(result).__name__}"
        )
    text = result.to_markdown()
    receipt = _issue(
        _utf8(text),
        items=len(result.evidence),
        tokens=result.report.tokens_used if text else 0,
        tokenizer=result.report.tokenizer_used,
        correction=correction,
        context=context,
        key=key,
    )
    return text, receipt


def coerce_receipt(value: object) -> Receipt:
    """``value`` as a Receipt: a Receipt, or the mapping a checkpoint turned one into.

    Raises ReceiptError when it is neither, or when it is an older format, so a malformed
    receipt is never mistaken for a missing one.
    """
    if isinstance(value, Receipt):
        return value
    if isinstance(value, Mapping):
        if _is_legacy(value):
            raise ReceiptError(
                f"legacy receipt {value['kind']!r}: it binds the bytes only, not the counts; "
                f"search again to get a {RECEIPT_KIND} receipt"
            )
        try:
            return Receipt.model_validate(dict(value))
        except ValidationError as exc:
            raise ReceiptError(f"malformed receipt: {_first_error(exc)}") from None
    raise ReceiptError(f"a receipt must be a recallpack.Receipt or its mapping, got {type(value).__name__}")


def _is_legacy(value: object) -> bool:
    return looks_like_receipt(value) and isinstance(value, Mapping) and value["kind"] != RECEIPT_KIND


def looks_like_receipt(value: object) -> bool:
    """True for a Receipt or a mapping that says it is one, of any version (well formed or not)."""
    if isinstance(value, Receipt):
        return True
    if not isinstance(value, Mapping):
        return False
    kind = value.get("kind")
    return isinstance(kind, str) and kind.startswith(_KIND_PREFIX)


class WithheldReason(ValueEnum):
    """Why a block is not shown in this request."""

    NO_RECEIPT = "no_receipt"
    LEGACY_RECEIPT = "legacy_receipt"
    MALFORMED_RECEIPT = "malformed_receipt"
    RECEIPT_MISMATCH = "receipt_mismatch"
    OTHER_CONTEXT = "other_context"
    FAILED = "failed"
    FOREIGN = "foreign"
    DUPLICATE = "duplicate"
    OVER_BLOCKS = "over_blocks"
    OVER_ITEMS = "over_items"
    OVER_TOKENS = "over_tokens"

    @property
    def text(self) -> str:
        """The reason in words, for the omission marker a model sees instead of the block."""
        return _REASON_TEXT[self]


_OVER = "over this request's evidence allowance"
_REASON_TEXT: Final = {
    WithheldReason.NO_RECEIPT: "no receipt for its contents",
    WithheldReason.LEGACY_RECEIPT: "an older receipt that no longer counts; search again",
    WithheldReason.MALFORMED_RECEIPT: "no valid receipt for its contents",
    WithheldReason.RECEIPT_MISMATCH: "its contents do not match its receipt",
    WithheldReason.OTHER_CONTEXT: "issued for another owner, session or run",
    WithheldReason.FAILED: "the search failed",
    WithheldReason.FOREIGN: "not from a memory search tool",
    WithheldReason.DUPLICATE: "the same result appears later in this conversation",
    WithheldReason.OVER_BLOCKS: _OVER,
    WithheldReason.OVER_ITEMS: _OVER,
    WithheldReason.OVER_TOKENS: _OVER,
}


def _check(
    text: object, value: object, key: bytes | None, context: Mapping[str, str]
) -> tuple[Receipt, str] | WithheldReason:
    """The receipt and the SHA-256 of ``text`` when ``value`` verifies, else why not."""
    if value is None:
        return WithheldReason.NO_RECEIPT
    if _is_legacy(value):
        return WithheldReason.LEGACY_RECEIPT
    try:
        receipt = coerce_receipt(value)
    except ReceiptError:
        return WithheldReason.MALFORMED_RECEIPT
    if not isinstance(text, str):
        return WithheldReason.RECEIPT_MISMATCH
    data = _utf8(text)
    if len(data) != receipt.size or receipt.keyed != (key is not None):
        return WithheldReason.RECEIPT_MISMATCH
    content = hashlib.sha256(data).hexdigest()
    expected = _seal(receipt.model_dump(), content, key)
    if not hmac.compare_digest(expected, receipt.digest):
        return WithheldReason.RECEIPT_MISMATCH
    if any(receipt.context.get(name) != value for name, value in context.items()):
        return WithheldReason.OTHER_CONTEXT
    return receipt, content


def verify(
    block_text: object,
    receipt: Receipt | Mapping[str, Any],
    *,
    key: ReceiptKey | None = None,
    context: ReceiptContext | None = None,
) -> bool:
    """True only when ``receipt`` was issued for exactly these bytes, unchanged, with this key,
    and (when ``context`` is given) for that owner/session/run.

    An edited or excerpted block, another block's text, or an edited receipt does not verify.
    ``key`` defaults to ``$RECALLPACK_RECEIPT_KEY``; a keyed receipt never verifies without its
    key, nor an unkeyed one with a key. A malformed or legacy receipt raises ReceiptError.

    >>> text = "- **Source excerpt**\\n\\n    Alice works at Initech.\\n"
    >>> receipt = issue_receipt(text, items=1, tokenizer="chars")
    >>> verify(text, receipt), verify(text.replace("Alice", "Bob"), receipt)
    (True, False)
    """
    checked = coerce_receipt(receipt)
    return isinstance(_check(block_text, checked, resolve_key(key), resolve_context(context)), tuple)


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


def _allowance(allowance: object) -> Allowance:
    if allowance is not None and not isinstance(allowance, Allowance):
        raise BudgetError(f"allowance={allowance!r} must be a recallpack.allowance.Allowance (or None)")
    return allowance or Allowance()


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
    allowance = _allowance(allowance)
    items = _blocks(blocks)
    secret, expected = resolve_key(key), resolve_context(context)
    kept: list[int] = []
    corrections: list[int] = []
    withheld: list[Withheld] = []
    seen: set[str] = set()  # SHA-256 of the bytes kept: a repeat is the same bytes, any receipt

    def withhold(index: int, reason: WithheldReason) -> None:
        withheld.append(Withheld(index=index, key=items[index].key, reason=reason))

    # First every receipt is checked, and corrections are kept: they are read whatever the
    # allowance, so an optional block repeating a correction's bytes is the repeat.
    optional: list[tuple[int, Receipt, str]] = []
    for index in range(len(items) - 1, -1, -1):
        block = items[index]
        if block.failed or block.foreign:
            withhold(index, WithheldReason.FAILED if block.failed else WithheldReason.FOREIGN)
            continue
        checked = _check(block.text, block.receipt, secret, expected)
        if isinstance(checked, WithheldReason):
            withhold(index, checked)
            continue
        receipt, content = checked
        if not receipt.correction:
            optional.append((index, receipt, content))
        elif content in seen:
            withhold(index, WithheldReason.DUPLICATE)
        else:
            seen.add(content)
            kept.append(index)
            corrections.append(index)

    used_blocks, used_items, used_tokens = _charge(optional, allowance, seen, kept, withhold)
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
    kept: list[int],
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
            seen.add(content)
            kept.append(index)
            used_blocks += 1
            used_items += receipt.items
            used_tokens += receipt.tokens
    return used_blocks, used_items, used_tokens


# -- what the model sees instead of a withheld block --------------------------------------------


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


# -- automatic recall within what is left ------------------------------------------------------


class Recaller(Protocol):
    """Anything that recalls for a query: an adapter's retriever (``BudgetedRetriever``), or any
    object with ``recall(query, **overrides) -> RecallResult`` (and, optionally, ``arecall``)."""

    def recall(self, query: str, **kwargs: Any) -> RecallResult: ...


def _recaller(retriever: object) -> Recaller:
    if not callable(getattr(retriever, "recall", None)):
        raise ConfigError(
            f"retriever={type(retriever).__name__} has no recall(query) -> RecallResult; wrap it in "
            "a recallpack adapter (recallpack.adapters.langchain.BudgetedRetriever for LangChain)"
        )
    return retriever  # type: ignore[return-value]


def _capped(retriever: object, overrides: dict[str, Any], room: Remaining) -> dict[str, Any]:
    """``overrides`` with max_tokens/max_items lowered to ``room`` where the retriever's own
    (or the overridden) values are larger. ``k`` is LangChain's name for max_items."""
    if "k" in overrides:
        overrides["max_items"] = overrides.pop("k")
    for field, room_left in (("max_tokens", room.tokens), ("max_items", room.items)):
        own = overrides.get(field, getattr(retriever, field, None))
        overrides[field] = room_left if own is None else min(own, room_left)
    return overrides


async def _arecall(retriever: Recaller, query: str, kwargs: Mapping[str, Any]) -> RecallResult:
    arecall = getattr(retriever, "arecall", None)
    if arecall is None:
        return retriever.recall(query, **kwargs)
    result: RecallResult = await arecall(query, **kwargs)
    return result


def _room(retriever: object, query: object, remaining: object) -> Remaining | None:
    _recaller(retriever)
    if not isinstance(query, str):
        raise ConfigError(f"query={query!r} must be a str")
    room = as_remaining(remaining)  # type: ignore[arg-type]
    # Below what one item needs (the block's header and label), nothing found could be shown.
    packer = getattr(retriever, "packer", None)
    least = packer.least_tokens if isinstance(packer, Packer) else 1
    return None if room.exhausted or room.tokens < least else room


def recall_remaining(
    retriever: Recaller | None, query: str, remaining: Remaining | Allowance, **overrides: Any
) -> RecallResult | None:
    """Automatic recall for ``query`` within the retriever's own budget and ``remaining``.

    ``None`` when the allowance has nothing left: the retriever is not even called, since
    nothing it found could be shown.
    """
    room = _room(retriever, query, remaining)
    if room is None or retriever is None:
        return None
    return retriever.recall(query, **_capped(retriever, dict(overrides), room))


async def arecall_remaining(
    retriever: Recaller | None, query: str, remaining: Remaining | Allowance, **overrides: Any
) -> RecallResult | None:
    """:func:`recall_remaining` through the retriever's ``arecall`` when it has one."""
    room = _room(retriever, query, remaining)
    if room is None or retriever is None:
        return None
    return await _arecall(retriever, query, _capped(retriever, dict(overrides), room))
