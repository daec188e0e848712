"""Bad input to the allowance API: each a recallpack error naming the field and the fix.

``BAD_INPUTS`` is importable, so a suite-wide table can include these rows.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from recallpack import BudgetError, Candidate, ConfigError, RecallpackError, ReceiptError, recall
from recallpack.allowance import (
    KEY_ENV,
    Allowance,
    Block,
    Receipt,
    assemble,
    issue_receipt,
    recall_remaining,
    receipt_for,
    verify,
)

TEXT = "- **Source excerpt**\n\n    Alice works at Initech.\n"


def receipt() -> Receipt:
    """A good receipt for TEXT, to pair with one bad argument."""
    return issue_receipt(TEXT, items=1, tokenizer="chars")


class Recalls:
    """A minimal recaller, so only the argument under test is wrong."""

    def recall(self, query: str, **kwargs: object) -> object:
        return recall([Candidate(text=TEXT)], max_tokens=100)


BAD_INPUTS: list[object] = [
    pytest.param(lambda: issue_receipt(123, items=1), ReceiptError, r"rendered text", id="issue-text-int"),  # type: ignore[arg-type]
    pytest.param(lambda: issue_receipt(TEXT, items=-1), ReceiptError, r"items=-1", id="issue-items-negative"),
    pytest.param(lambda: issue_receipt(TEXT, items="3"), ReceiptError, r"items='3'", id="issue-items-str"),  # type: ignore[arg-type]
    pytest.param(lambda: issue_receipt(TEXT, items=True), ReceiptError, r"items=True", id="issue-items-bool"),
    pytest.param(
        lambda: issue_receipt(TEXT, items=1, correction="yes"),  # type: ignore[arg-type]
        ReceiptError,
        r"correction='yes' must be True or False",
        id="issue-correction-str",
    ),
    pytest.param(
        lambda: issue_receipt(TEXT, items=1, key=123),
        ConfigError,
        r"key=123 must be a str or bytes",
        id="key-int",
    ),  # type: ignore[arg-type]
    pytest.param(
        lambda: issue_receipt(TEXT, items=1, key="short"),
        ConfigError,
        r"key is 5 bytes.*token_hex",
        id="key-short",
    ),
    pytest.param(
        lambda: issue_receipt(TEXT, items=1, context="alice"),
        ConfigError,
        r"context='alice' must be a mapping",
        id="context-str",
    ),  # type: ignore[arg-type]
    pytest.param(
        lambda: issue_receipt(TEXT, items=1, context={"owner": 5}),
        ConfigError,
        r"context\['owner'\]=5",
        id="context-value-int",
    ),  # type: ignore[dict-item]
    pytest.param(
        lambda: issue_receipt(TEXT, items=1, context={"owner": ""}),
        ConfigError,
        r"non-empty str",
        id="context-value-empty",
    ),
    pytest.param(
        lambda: issue_receipt(TEXT, items=1, context={"ownr": "a"}),
        ConfigError,
        r"did you mean 'owner'",
        id="context-key-typo",
    ),
    pytest.param(
        lambda: receipt_for("block"), ReceiptError, r"result must be a RecallResult", id="receipt-for-str"
    ),  # type: ignore[arg-type]
    pytest.param(
        lambda: verify(TEXT, "not a receipt"), ReceiptError, r"receipt must be", id="verify-receipt-str"
    ),  # type: ignore[arg-type]
    pytest.param(lambda: verify(TEXT, receipt(), key=1.5), ConfigError, r"key=1.5", id="verify-key-float"),  # type: ignore[arg-type]
    pytest.param(
        lambda: verify(TEXT, receipt(), context=["owner"]),
        ConfigError,
        r"context=\['owner'\]",
        id="verify-context-list",
    ),  # type: ignore[arg-type]
    pytest.param(
        lambda: Receipt(items=-1, tokens=0, size=0, digest="0" * 64),
        ReceiptError,
        r"items",
        id="receipt-model-items",
    ),
    pytest.param(
        lambda: assemble(["text"]), ConfigError, r"blocks\[0\] is a str; wrap", id="assemble-block-str"
    ),  # type: ignore[list-item]
    pytest.param(lambda: assemble(42), ConfigError, r"blocks must be a list", id="assemble-blocks-int"),  # type: ignore[arg-type]
    pytest.param(
        lambda: assemble([], {"max_items": 3}),
        BudgetError,
        r"allowance=.*Allowance",
        id="assemble-allowance-dict",
    ),  # type: ignore[arg-type]
    pytest.param(lambda: assemble([], key=b""), ConfigError, r"key is 0 bytes", id="assemble-key-empty"),
    pytest.param(
        lambda: assemble([], context={"run": 7}),
        ConfigError,
        r"context\['run'\]=7",
        id="assemble-context-int",
    ),  # type: ignore[dict-item]
    pytest.param(
        lambda: assemble([Block(TEXT, receipt(), failed="no")]),
        ConfigError,
        r"failed",
        id="assemble-failed-str",
    ),  # type: ignore[arg-type]
    pytest.param(
        lambda: recall_remaining(object(), "q", Allowance()),
        ConfigError,
        r"retriever=object has no recall",
        id="recall-remaining-retriever",
    ),  # type: ignore[arg-type]
    pytest.param(
        lambda: recall_remaining(Recalls(), None, Allowance()),
        ConfigError,
        r"query=None",
        id="recall-remaining-query",
    ),  # type: ignore[arg-type]
    pytest.param(
        lambda: recall_remaining(Recalls(), "q", {"items": 3}),
        BudgetError,
        r"allowance=",
        id="recall-remaining-allowance",
    ),  # type: ignore[arg-type]
]


@pytest.mark.parametrize(("probe", "error", "match"), BAD_INPUTS)
def test_bad_input_raises_a_recallpack_error(
    probe: Callable[[], object], error: type[RecallpackError], match: str
) -> None:
    """Each bad input raises the named recallpack error (never a bare TypeError), naming the field."""
    with pytest.raises(error, match=match) as caught:
        probe()
    assert isinstance(caught.value, RecallpackError)


def test_a_short_key_in_the_environment_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """A too-short $RECALLPACK_RECEIPT_KEY is refused, naming the variable, not silently used."""
    monkeypatch.setenv(KEY_ENV, "tiny")
    with pytest.raises(ConfigError, match=r"\$RECALLPACK_RECEIPT_KEY is 4 bytes"):
        issue_receipt(TEXT, items=1)


def test_an_empty_key_variable_means_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """An empty $RECALLPACK_RECEIPT_KEY is unset (as shells treat it): receipts are unkeyed."""
    monkeypatch.setenv(KEY_ENV, "")
    assert not issue_receipt(TEXT, items=1).keyed
