"""Receipts v2 (seed 001): what the digest covers, keys, context, legacy receipts, any str."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recallpack import Candidate, ConfigError, ReceiptError, recall
from recallpack.allowance import (
    KEY_ENV,
    RECEIPT_KIND,
    Allowance,
    Block,
    Receipt,
    WithheldReason,
    assemble,
    coerce_receipt,
    digest_of,
    issue_receipt,
    receipt_for,
    verify,
)

ROOT = Path(__file__).resolve().parents[1]
KEY = "k" * 32
OTHER_KEY = "o" * 32
TEXT = "- **Source excerpt**\n\n    Alice works at Initech.\n"
SURROGATE = json.loads('"\\ud800"')  # a lone surrogate: a valid str, not valid UTF-8
ALICE = {"owner": "alice", "session": "s-1", "run": "r-7"}


@pytest.fixture(autouse=True)
def no_ambient_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test decides its own key: a key in the developer's environment must not leak in."""
    monkeypatch.delenv(KEY_ENV, raising=False)


def edited(receipt: Receipt, **changes: object) -> dict[str, object]:
    """The receipt as a checkpoint would hold it, with some fields changed by hand."""
    return {**receipt.model_dump(mode="json"), **changes}


# -- what the digest covers --------------------------------------------------------------------

EDITS = [
    {"tokens": 1},
    {"items": 0},
    {"items": 7},
    {"correction": True},
    {"tokenizer": "chars"},
    {"owner": "mallory"},
    {"session": "s-2"},
    {"run": None},
    {"keyed": "flip"},
]


@pytest.mark.parametrize("change", EDITS, ids=lambda c: next(iter(c)))
@pytest.mark.parametrize("key", [None, KEY], ids=["unkeyed", "keyed"])
def test_editing_any_field_of_a_receipt_makes_it_fail(change: dict[str, object], key: str | None) -> None:
    """Changing the counts, the correction flag, the tokenizer or the context breaks the receipt."""
    receipt = issue_receipt(TEXT, items=1, tokenizer="cl100k_base", context=ALICE, key=key)
    assert verify(TEXT, receipt, key=key)
    if change == {"keyed": "flip"}:
        change = {"keyed": not receipt.keyed}
    forged = edited(receipt, **change)
    assert not verify(TEXT, forged, key=key)
    assert assemble([Block(TEXT, forged)], key=key).reason(0) is WithheldReason.RECEIPT_MISMATCH


def test_a_digest_of_the_bytes_alone_is_not_a_receipt() -> None:
    """A receipt hand-built from digest_of(text) (the v1 scheme) does not verify, even unkeyed."""
    real = issue_receipt(TEXT, items=1, tokenizer="chars")
    minted = Receipt(items=1, tokens=real.tokens, size=real.size, digest=digest_of(TEXT), tokenizer="chars")
    assert not verify(TEXT, minted)
    assert assemble([Block(TEXT, minted)]).reason(0) is WithheldReason.RECEIPT_MISMATCH


def test_a_correction_that_grew_its_counts_is_withheld() -> None:
    """A 2,401-token block relabelled as a free correction cannot pass against 200 tokens."""
    big = "word " * 2400
    receipt = issue_receipt(big, items=1, tokenizer="cl100k_base")
    assert receipt.tokens == 2401
    relabelled = edited(receipt, correction=True)
    result = assemble([Block(big, relabelled)], Allowance(max_tokens=200))
    assert result.kept == () and result.corrections == ()
    assert result.reason(0) is WithheldReason.RECEIPT_MISMATCH


@settings(max_examples=60, deadline=None)
@given(
    text=st.text(max_size=200),
    items=st.integers(0, 50),
    field=st.sampled_from(["items", "tokens", "size"]),
    delta=st.integers(1, 1000),
)
def test_property_no_count_edit_verifies(text: str, items: int, field: str, delta: int) -> None:
    """Property: for any text (lone surrogates included), a receipt with any count changed fails."""
    receipt = issue_receipt(text, items=items, tokenizer="chars")
    assert verify(text, receipt)
    assert not verify(text, edited(receipt, **{field: getattr(receipt, field) + delta}))


# -- keys --------------------------------------------------------------------------------------


def test_keyed_receipt_cannot_be_minted_without_the_key() -> None:
    """Under a keyed verify, a receipt issued without the key (or with another key) fails."""
    keyed = issue_receipt(TEXT, items=1, tokenizer="chars", key=KEY)
    unkeyed = issue_receipt(TEXT, items=1, tokenizer="chars")
    other = issue_receipt(TEXT, items=1, tokenizer="chars", key=OTHER_KEY)
    assert keyed.keyed and not unkeyed.keyed
    assert verify(TEXT, keyed, key=KEY)
    assert not verify(TEXT, unkeyed, key=KEY)
    assert not verify(TEXT, other, key=KEY)
    # Claiming to be keyed does not help: the digest is still a plain SHA-256.
    assert not verify(TEXT, edited(unkeyed, keyed=True), key=KEY)
    result = assemble([Block(TEXT, unkeyed), Block(TEXT, other), Block(TEXT, keyed)], key=KEY)
    assert result.kept == (2,)
    assert [w.reason for w in result.withheld] == [WithheldReason.RECEIPT_MISMATCH] * 2


def test_keyed_receipt_does_not_verify_without_its_key() -> None:
    """A keyed receipt checked by code that has no key fails: it cannot be checked there."""
    keyed = issue_receipt(TEXT, items=1, tokenizer="chars", key=KEY)
    assert not verify(TEXT, keyed)
    assert assemble([Block(TEXT, keyed)]).reason(0) is WithheldReason.RECEIPT_MISMATCH


def test_key_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """With $RECALLPACK_RECEIPT_KEY set, issue and verify use it; key= overrides it."""
    monkeypatch.setenv(KEY_ENV, KEY)
    receipt = issue_receipt(TEXT, items=1, tokenizer="chars")
    assert receipt.keyed and verify(TEXT, receipt) and verify(TEXT, receipt, key=KEY)
    assert not verify(TEXT, receipt, key=OTHER_KEY)
    monkeypatch.delenv(KEY_ENV)
    assert not verify(TEXT, receipt)


def test_str_and_bytes_keys_agree() -> None:
    """A str key is its UTF-8 bytes: either form checks the other's receipts."""
    receipt = issue_receipt(TEXT, items=1, tokenizer="chars", key=KEY)
    assert verify(TEXT, receipt, key=KEY.encode())


REPLAY = """
import json, sys
from recallpack.allowance import Block, assemble, issue_receipt, verify
if sys.argv[1] == "issue":
    text = "- **Derived memory**\\n\\n    Alice moved to Berlin.\\n"
    receipt = issue_receipt(text, items=1, tokenizer="chars", context={"session": "s-1"})
    print(json.dumps({"text": text, "receipt": receipt.model_dump(mode="json")}))
else:
    saved = json.loads(sys.stdin.read())
    result = assemble([Block(saved["text"], saved["receipt"])], context={"session": "s-1"})
    print(json.dumps([verify(saved["text"], saved["receipt"]), list(result.kept),
                      [w.reason.value for w in result.withheld]]))
"""


def run_with_key(key: str, *args: str, stdin: str = "") -> str:
    """Run the replay script in a fresh interpreter with ``key`` in the environment."""
    env = {**os.environ, KEY_ENV: key, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", REPLAY, *args],
        input=stdin,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def test_receipt_survives_a_checkpoint_replay_in_a_new_process_with_the_same_key() -> None:
    """Issued in one process, checked in another: kept with the same key, withheld with another."""
    saved = run_with_key(KEY, "issue")
    assert json.loads(saved)["receipt"]["keyed"] is True
    assert json.loads(run_with_key(KEY, "check", stdin=saved)) == [True, [0], []]
    assert json.loads(run_with_key(OTHER_KEY, "check", stdin=saved)) == [False, [], ["receipt_mismatch"]]


# -- context -----------------------------------------------------------------------------------


def test_assembly_withholds_a_receipt_issued_for_another_context() -> None:
    """A receipt for bob, another session or another run is withheld from alice's assembly."""
    blocks = [
        Block(TEXT, issue_receipt(TEXT, items=1, tokenizer="chars", context={**ALICE, "owner": "bob"})),
        Block(TEXT, issue_receipt(TEXT, items=1, tokenizer="chars", context={**ALICE, "session": "s-9"})),
        Block(TEXT, issue_receipt(TEXT, items=1, tokenizer="chars", context={**ALICE, "run": "r-1"})),
        Block(TEXT, issue_receipt(TEXT, items=1, tokenizer="chars")),  # bound to no one
        Block(TEXT, issue_receipt(TEXT, items=1, tokenizer="chars", context=ALICE)),
    ]
    result = assemble(blocks, context=ALICE)
    assert result.kept == (4,)
    assert [w.reason for w in result.withheld] == [WithheldReason.OTHER_CONTEXT] * 4


def test_assembly_checks_only_the_context_it_is_given() -> None:
    """An assembly that knows only the session accepts any run of that session."""
    receipt = issue_receipt(TEXT, items=1, tokenizer="chars", context=ALICE)
    assert assemble([Block(TEXT, receipt)], context={"session": "s-1"}).kept == (0,)
    assert assemble([Block(TEXT, receipt)]).kept == (0,)
    assert verify(TEXT, receipt, context={"owner": "alice"})
    assert not verify(TEXT, receipt, context={"owner": "bob"})


def test_receipt_keeps_its_context_and_no_content() -> None:
    """The receipt records owner/session/run and never the block's text."""
    receipt = issue_receipt(TEXT, items=1, tokenizer="chars", context=ALICE)
    assert receipt.context == ALICE and (receipt.owner, receipt.run) == ("alice", "r-7")
    assert "Initech" not in receipt.model_dump_json()


# -- legacy receipts ---------------------------------------------------------------------------


def test_a_v1_receipt_is_legacy_with_a_clear_reason() -> None:
    """A v1 receipt (bytes only) is withheld as legacy, and coerce_receipt says to search again."""
    v1 = {"kind": "recallpack.receipt/v1", "items": 1, "tokens": 9, "size": len(TEXT.encode()),
          "digest": digest_of(TEXT), "tokenizer": "chars", "correction": False}  # fmt: skip
    assert RECEIPT_KIND == "recallpack.receipt/v2"
    assert assemble([Block(TEXT, v1)]).reason(0) is WithheldReason.LEGACY_RECEIPT
    with pytest.raises(ReceiptError, match=r"legacy receipt 'recallpack.receipt/v1'.*search again"):
        coerce_receipt(v1)


# -- any str, even one that is not valid UTF-8 -------------------------------------------------


def test_lone_surrogates_never_raise_from_receipts() -> None:
    """Text and ids with a lone surrogate get receipts that verify, and edits still fail."""
    text = f"- **Source excerpt**\n\n    broken {SURROGATE} text\n"
    receipt = issue_receipt(text, items=1, tokenizer="cl100k_base", context={"owner": f"a{SURROGATE}"})
    assert verify(text, receipt) and not verify(text.replace("broken", "fixed"), receipt)
    assert receipt.size == len(text.encode("utf-8", "surrogatepass"))
    assert digest_of(text) == digest_of(text)
    result = recall(
        [Candidate(text=f"hello {SURROGATE} there", artifact_id=f"doc-{SURROGATE}")], max_tokens=200
    )
    shown, issued = receipt_for(result, key=KEY)
    assert SURROGATE not in shown and "\ufffd" in shown and verify(shown, issued, key=KEY)
    assert assemble([Block(shown, issued)], key=KEY).kept == (0,)


def test_bad_context_names_the_key_and_the_closest_field() -> None:
    """A misspelled context key is refused, suggesting the field meant."""
    with pytest.raises(ConfigError, match=r"'sesion'.*did you mean 'session'"):
        issue_receipt(TEXT, items=1, context={"sesion": "s-1"})


def test_every_withheld_reason_has_words_for_the_marker() -> None:
    """Each reason a block can be withheld for has a short explanation a model can read."""
    texts = {reason: reason.text for reason in WithheldReason}
    assert all(isinstance(t, str) and 0 < len(t) < 80 for t in texts.values())
    assert "another owner, session or run" in WithheldReason.OTHER_CONTEXT.text
