"""Receipts that bind a block's counts to its exact bytes.

Each rendered block carries a :class:`Receipt`: its item and token counts, the correction flag,
the tokenizer, the owner/session/run it was issued for, and a digest over all of them and the
SHA-256 of the block's exact bytes, never its content.

With a key (``key=``, or the ``RECALLPACK_RECEIPT_KEY`` environment variable shared by the
processes that share checkpoints) the digest is an HMAC-SHA256, so code without the key cannot
mint a receipt. Without a key it is an integrity check only: anyone can compute it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from collections.abc import Callable, Mapping
from typing import Any, Final, Literal

from pydantic import ConfigDict, Field, ValidationError

from recallpack.packing.candidate import ValueEnum
from recallpack.packing.errors import ConfigError, RecallpackError, ReceiptError
from recallpack.packing.results.result import RecallResult
from recallpack.packing.tokenizers import TokenizerSpec, get_tokenizer
from recallpack.packing.validation import (
    CheckedModel,
    NonNegativeInt,
    check_count,
    did_you_mean,
    recallpack_error,
)

__all__ = [
    "Receipt",
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
    "check_receipt_settings",
    "context_for",
    "check_receipt",
    "WithheldReason",
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
            close = did_you_mean(str(name), CONTEXT_FIELDS)
            hint = f"did you mean {close!r}?" if close else f"use one of: {', '.join(CONTEXT_FIELDS)}"
            raise ConfigError(f"context key {name!r} is unknown; {hint}", field="context")
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


def check_receipt_settings(key: object, context: object, *, per_call: bool) -> ContextSource:
    """``context`` once ``key`` (or ``$RECALLPACK_RECEIPT_KEY``) and it are checked: what an
    adapter keeps at construction. ``per_call`` allows a function of the host's call (a
    LangChain RunnableConfig) in place of a mapping; :func:`context_for` applies it."""
    resolve_key(key)
    if callable(context) and not isinstance(context, Mapping):
        if not per_call:
            raise ConfigError("context= must be a mapping here (owner/session/run), not a function")
        return context
    resolve_context(context)
    return context  # type: ignore[return-value]


def context_for(context: ContextSource, source: object) -> Mapping[str, str] | None:
    """The context for one call: ``context`` itself, or what it returns for ``source``."""
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
    items: NonNegativeInt
    tokens: NonNegativeInt
    size: NonNegativeInt = Field(description="Length of the block in UTF-8 bytes.")
    digest: str = Field(pattern=r"^[0-9a-f]{64}$")
    tokenizer: str = ""
    correction: bool = False
    owner: str | None = None
    session: str | None = None
    run: str | None = None
    keyed: bool = False

    @classmethod
    def _invalid(cls, exc: ValidationError) -> RecallpackError:
        return _receipt_error(exc, "invalid Receipt")

    @property
    def context(self) -> dict[str, str]:
        """The owner/session/run this receipt was issued for (only those given)."""
        return {name: value for name in CONTEXT_FIELDS if (value := getattr(self, name)) is not None}


def _receipt_error(exc: ValidationError, heading: str) -> RecallpackError:
    # Every problem is a ReceiptError: a receipt's fields are not settings (its "tokenizer" is
    # a name it records, not a tokenizer to resolve).
    return recallpack_error(heading, exc, ReceiptError, {}, Receipt.model_fields)


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
        "items": check_count(items, "items", error=ReceiptError),
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
            raise _receipt_error(exc, "malformed receipt") from None
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


def check_receipt(
    text: object, value: object, key: bytes | None, context: Mapping[str, str]
) -> tuple[Receipt, str] | WithheldReason:
    """The receipt and the SHA-256 of ``text`` when ``value`` verifies (with ``key``, for
    ``context``), else why the block cannot be shown: what :func:`verify` and an assembly ask."""
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
    return isinstance(check_receipt(block_text, checked, resolve_key(key), resolve_context(context)), tuple)
