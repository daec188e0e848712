"""The shared evidence allowance (seed 001): receipts, assembly, and recall within the remainder."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recallpack import BudgetError, Candidate, ConfigError, ReceiptError, count_tokens, recall
from recallpack.allowance import (
    RECEIPT_KIND,
    Allowance,
    Block,
    Receipt,
    Remaining,
    WithheldReason,
    assemble,
    issue_receipt,
    receipt_for,
    verify,
)
from tests.conftest import make_tokenizer

TOK = "cl100k_base"
FACTS = [
    "Alice works at Initech as a payments engineer.",
    "Bob prefers green tea to coffee.",
    "The quarterly review moved to Thursday.",
    "Carol's flight to Lisbon leaves at 07:40.",
    "The staging database was migrated to Postgres 16.",
    "Dave is allergic to peanuts.",
    "The office wifi password rotates every Monday.",
    "Erin leads the onboarding working group.",
]
ITEM_LINE = re.compile(r"^- \*\*", re.MULTILINE)


def items_in(text: str) -> int:
    """Items in a rendered block: top-level labelled bullets (evidence lines are indented)."""
    return len(ITEM_LINE.findall(text))


def block_of(*texts: str, correction: bool = False, tokenizer: object = TOK, key: object = None) -> Block:
    """A real rendered block over ``texts`` with the receipt the packer issues for it."""
    result = recall([Candidate(text=t) for t in texts], max_tokens=4000, tokenizer=tokenizer)
    text, receipt = receipt_for(result, correction=correction)
    return Block(text, receipt, key=key)


# -- Allowance ---------------------------------------------------------------------------------


def test_allowance_defaults_are_the_seeds() -> None:
    """Default allowance: twenty items, two thousand tokens, four retained blocks."""
    allowance = Allowance()
    assert (allowance.max_items, allowance.max_tokens, allowance.max_blocks) == (20, 2000, 4)
    assert allowance.full() == Remaining(items=20, tokens=2000, blocks=4)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_items": 0},
        {"max_items": None},
        {"max_blocks": -1},
        {"max_blocks": True},
        {"max_tokens": 0},
        {"max_tokens": 2.5},
        {"max_tokens": 20_000},
        {"max_tokens": "2000"},
        {"budget": 5},
    ],
)
def test_allowance_rejects_invalid_values(kwargs: dict[str, object]) -> None:
    """Invalid allowance values raise the core's BudgetError, naming the field."""
    with pytest.raises(BudgetError, match=next(iter(kwargs))):
        Allowance(**kwargs)


def test_allowance_over_ceiling_needs_the_ceiling_raised() -> None:
    """Like recall(), an allowance past the ceiling is allowed only when the ceiling is raised."""
    assert Allowance(max_tokens=20_000, max_tokens_ceiling=20_000).max_tokens == 20_000


def test_allowance_is_frozen() -> None:
    """An allowance is a value: it cannot be changed after it is made."""
    allowance = Allowance()
    with pytest.raises(Exception):  # noqa: B017 - pydantic's frozen error type is internal
        allowance.max_items = 3  # type: ignore[misc]


# -- Receipts ----------------------------------------------------------------------------------


def test_receipt_counts_the_rendered_bytes_and_holds_no_content() -> None:
    """A receipt has the block's item and token counts and digest, and none of its text."""
    block = block_of(FACTS[0], FACTS[1])
    receipt = block.receipt
    assert isinstance(receipt, Receipt) and isinstance(block.text, str)
    assert receipt.items == 2 == items_in(block.text)
    assert receipt.tokens == count_tokens(block.text, TOK)
    assert receipt.size == len(block.text.encode("utf-8"))
    dumped = receipt.model_dump_json()
    assert "Alice" not in dumped and "Initech" not in dumped and "tea" not in dumped


def test_receipt_for_empty_result_is_zero() -> None:
    """A result with no evidence renders "" and its receipt counts nothing."""
    text, receipt = receipt_for(recall([], max_tokens=100))
    assert text == "" and (receipt.items, receipt.tokens, receipt.size) == (0, 0, 0)
    assert verify("", receipt)


def test_verify_accepts_only_the_exact_bytes() -> None:
    """verify() is true for the exact bytes and false for edits, excerpts and whitespace."""
    block = block_of(FACTS[0], FACTS[2])
    text = block.text
    assert isinstance(text, str)
    assert verify(text, block.receipt)  # type: ignore[arg-type]
    for changed in (
        text.replace("Thursday", "Friday"),
        text[: len(text) // 2],
        text + "\n",
        text.replace("\n", "\r\n"),
        text.upper(),
    ):
        assert not verify(changed, block.receipt)  # type: ignore[arg-type]


def test_verify_rejects_another_blocks_text() -> None:
    """One block's receipt never validates another block."""
    first, second = block_of(FACTS[0]), block_of(FACTS[1])
    assert not verify(second.text, first.receipt)  # type: ignore[arg-type]
    assert not verify(first.text, second.receipt)  # type: ignore[arg-type]


def test_verify_non_text_is_false() -> None:
    """A payload that is not a str (content blocks, bytes) cannot match a receipt."""
    block = block_of(FACTS[0])
    assert not verify([{"type": "text", "text": block.text}], block.receipt)  # type: ignore[arg-type]
    assert not verify(str(block.text).encode(), block.receipt)  # type: ignore[arg-type]


def test_verify_raises_on_malformed_receipt() -> None:
    """A malformed receipt raises ReceiptError rather than quietly failing to verify."""
    with pytest.raises(ReceiptError):
        verify("text", {"kind": RECEIPT_KIND, "items": 1})
    with pytest.raises(ReceiptError):
        verify("text", "not a receipt")  # type: ignore[arg-type]


def test_receipt_survives_a_round_trip_as_a_mapping() -> None:
    """A receipt turned into a dict (a checkpoint, JSON) still verifies and assembles."""
    block = block_of(FACTS[3])
    as_dict = block.receipt.model_dump(mode="json")  # type: ignore[union-attr]
    assert verify(block.text, as_dict)
    assert assemble([Block(block.text, as_dict)]).kept == (0,)


def test_issue_receipt_counts_with_the_given_tokenizer() -> None:
    """issue_receipt counts tokens with the tokenizer it is given and records which."""
    receipt = issue_receipt("abcdefgh", items=1, tokenizer="chars")
    assert (receipt.tokens, receipt.tokenizer) == (2, "chars")


def test_receipts_are_deterministic() -> None:
    """Rendering the same evidence again gives byte-identical blocks with equal receipts."""
    assert block_of(FACTS[0], FACTS[4]) == block_of(FACTS[0], FACTS[4])


# -- assemble ----------------------------------------------------------------------------------


def test_keeps_newest_blocks_first_within_tokens() -> None:
    """When only two of three blocks fit, the two newest are kept and the oldest withheld."""
    blocks = [block_of(FACTS[0]), block_of(FACTS[1]), block_of(FACTS[2])]
    cost = [b.receipt.tokens for b in blocks]  # type: ignore[union-attr]
    result = assemble(blocks, Allowance(max_tokens=cost[1] + cost[2]))
    assert result.kept == (1, 2)
    assert result.reason(0) is WithheldReason.OVER_TOKENS
    assert result.tokens_used == cost[1] + cost[2] and result.remaining.tokens == 0


def test_withholds_whole_blocks_and_lets_older_smaller_ones_fit() -> None:
    """A newer block too big to fit is withheld whole; an older smaller one still fits."""
    small, big = block_of(FACTS[1]), block_of(*FACTS)
    allowance = Allowance(max_tokens=small.receipt.tokens + 5)  # type: ignore[union-attr]
    result = assemble([small, big], allowance)
    assert result.kept == (0,)
    assert result.reason(1) is WithheldReason.OVER_TOKENS


def test_repeated_search_blocks_are_kept_once() -> None:
    """Byte-identical repeats are kept once (the newest) and charged once."""
    repeat = block_of(FACTS[0], FACTS[1])
    other = block_of(FACTS[2])
    result = assemble([repeat, other, repeat, repeat], Allowance())
    assert result.kept == (1, 3)
    assert [(w.index, w.reason) for w in result.withheld] == [
        (0, WithheldReason.DUPLICATE),
        (2, WithheldReason.DUPLICATE),
    ]
    assert result.items_used == 3


def test_at_most_max_blocks_are_kept() -> None:
    """Five small blocks with max_blocks=4: the oldest is withheld for the block cap."""
    blocks = [block_of(fact) for fact in FACTS[:5]]
    result = assemble(blocks, Allowance(max_blocks=4))
    assert result.kept == (1, 2, 3, 4)
    assert result.reason(0) is WithheldReason.OVER_BLOCKS
    assert result.remaining.blocks == 0


def test_item_cap_withholds_blocks_with_too_many_items() -> None:
    """A block whose items would pass max_items is withheld; a smaller older one fits."""
    blocks = [block_of(FACTS[0]), block_of(*FACTS[1:4])]
    result = assemble(blocks, Allowance(max_items=2))
    assert result.kept == (0,)
    assert result.reason(1) is WithheldReason.OVER_ITEMS
    assert result.remaining.items == 1


def test_legacy_blocks_without_receipt_are_withheld() -> None:
    """Results without a receipt (legacy) are withheld, never charged or shown."""
    good = block_of(FACTS[0])
    legacy = Block(good.text, None)
    result = assemble([legacy, good])
    assert result.kept == (1,)
    assert result.reason(0) is WithheldReason.NO_RECEIPT


def test_malformed_receipt_is_withheld_not_raised() -> None:
    """A receipt that is not well formed withholds its block; assembly itself never fails."""
    good = block_of(FACTS[0])
    malformed = {"kind": RECEIPT_KIND, "items": -1}
    result = assemble([Block(good.text, malformed), Block(good.text, 42)])
    assert result.kept == ()
    assert {w.reason for w in result.withheld} == {WithheldReason.MALFORMED_RECEIPT}


def test_byte_receipt_mismatch_is_withheld() -> None:
    """Edited or excerpted bytes cannot borrow the receipt they came with."""
    block = block_of(FACTS[0], FACTS[1])
    text = str(block.text)
    edited = Block(text.replace("green tea", "whisky"), block.receipt)
    excerpt = Block(text[: text.index("Bob")], block.receipt)
    result = assemble([edited, excerpt])
    assert result.kept == ()
    assert [w.reason for w in result.withheld] == [WithheldReason.RECEIPT_MISMATCH] * 2


def test_one_payload_cannot_present_anothers_receipt() -> None:
    """A big payload presenting a small block's receipt is withheld; the real block is kept."""
    small = block_of(FACTS[0])
    big = block_of(*FACTS)
    impostor = Block(big.text, small.receipt)
    result = assemble([small, impostor], Allowance(max_items=1))
    assert result.kept == (0,)
    assert result.reason(1) is WithheldReason.RECEIPT_MISMATCH


def test_corrections_are_kept_after_the_allowance_is_exhausted() -> None:
    """With the allowance spent, a correction block is still kept and charged nothing."""
    evidence = block_of(*FACTS[:4])
    correction = block_of("Correction: Alice left Initech in May.", correction=True)
    allowance = Allowance(max_items=4, max_tokens=evidence.receipt.tokens)  # type: ignore[union-attr]
    result = assemble([correction, evidence], allowance)
    assert result.kept == (0, 1) and result.corrections == (0,)
    assert result.remaining == Remaining(items=0, tokens=0, blocks=3)
    # Even when nothing optional fits at all:
    tiny = assemble([evidence, correction], Allowance(max_items=1, max_tokens=1, max_blocks=1))
    assert tiny.kept == (1,) and tiny.reason(0) is WithheldReason.OVER_ITEMS


def test_optional_block_repeating_a_correction_is_the_duplicate() -> None:
    """An optional block with a correction's exact bytes is dropped as a repeat, not charged."""
    correction = block_of(FACTS[0], correction=True)
    repeat = block_of(FACTS[0])
    assert repeat.text == correction.text
    result = assemble([correction, repeat], Allowance(max_items=1, max_tokens=1, max_blocks=1))
    assert result.kept == (0,) and result.reason(1) is WithheldReason.DUPLICATE
    assert result.items_used == 0


def test_a_correction_needs_a_valid_receipt_too() -> None:
    """A block that claims to be a correction but does not verify is withheld."""
    correction = block_of("Correction: the review is on Friday.", correction=True)
    forged = Block(str(correction.text).replace("Friday", "Sunday"), correction.receipt)
    assert assemble([forged]).reason(0) is WithheldReason.RECEIPT_MISMATCH


def test_a_request_at_exactly_the_allowance() -> None:
    """Blocks summing to exactly the allowance are all kept; one token less withholds one."""
    blocks = [block_of(FACTS[0]), block_of(FACTS[1], FACTS[2])]
    items = sum(b.receipt.items for b in blocks)  # type: ignore[union-attr]
    tokens = sum(b.receipt.tokens for b in blocks)  # type: ignore[union-attr]
    exact = assemble(blocks, Allowance(max_items=items, max_tokens=tokens, max_blocks=2))
    assert exact.kept == (0, 1)
    assert exact.remaining == Remaining(items=0, tokens=0, blocks=0) and exact.remaining.exhausted
    short = assemble(blocks, Allowance(max_items=items, max_tokens=tokens - 1, max_blocks=2))
    assert short.kept == (1,) and short.reason(0) is WithheldReason.OVER_TOKENS
    # Automatic recall then gets nothing, and says why.
    auto = recall([Candidate(text=FACTS[5])], allowance=exact.remaining)
    assert auto.to_markdown() == "" and auto.report.reasons == {"over_item_cap": 1}


def test_replaying_the_same_conversation_gives_the_same_assembly() -> None:
    """Assembling the same blocks again, even re-rendered from scratch, gives the same result."""

    def conversation() -> list[Block]:
        return [
            block_of(FACTS[0], key="call-1"),
            block_of(*FACTS[1:5], key="call-2"),
            Block("legacy text", None, key="call-3"),
            block_of(FACTS[0], key="call-4"),
            block_of(FACTS[6], FACTS[7], key="call-5"),
        ]

    allowance = Allowance(max_items=4, max_tokens=120, max_blocks=2)
    first, second = assemble(conversation(), allowance), assemble(conversation(), allowance)
    assert first == second
    assert [w.key for w in first.withheld] == ["call-1", "call-2", "call-3"]


def test_assemble_rejects_things_that_are_not_blocks() -> None:
    """Passing raw strings instead of Blocks is a recallpack error naming the position and the fix."""
    with pytest.raises(ConfigError, match=r"blocks\[0\].*Block\(text, receipt\)"):
        assemble(["text"])  # type: ignore[list-item]


# -- recall within the remainder --------------------------------------------------------------


def test_automatic_plus_deliberate_evidence_share_one_allowance() -> None:
    """Search blocks plus automatic recall within the remainder never pass the allowance."""
    allowance = Allowance(max_items=6, max_tokens=160)
    searches = [block_of(FACTS[0], FACTS[1]), block_of(FACTS[2], FACTS[3])]
    result = assemble(searches, allowance)
    candidates = [Candidate(text=f) for f in FACTS[4:]] * 2
    alone = recall(candidates, max_tokens=2000, tokenizer=TOK)
    auto = recall(candidates, max_tokens=2000, tokenizer=TOK, allowance=result.remaining)
    shown = [str(searches[i].text) for i in result.kept] + [auto.to_markdown()]
    assert sum(count_tokens(t, TOK) for t in shown) <= allowance.max_tokens
    assert sum(items_in(t) for t in shown) <= allowance.max_items
    assert 0 < auto.report.items_selected < alone.report.items_selected
    assert auto.report.max_tokens == result.remaining.tokens


def test_recall_takes_the_smaller_of_its_budget_and_the_allowance() -> None:
    """recall(allowance=) keeps its own max_tokens/max_items when they are the tighter bound."""
    candidates = [Candidate(text=f) for f in FACTS]
    own = recall(candidates, max_tokens=60, max_items=2, allowance=Allowance())
    assert own.report.max_tokens == 60 and own.report.items_selected <= 2
    capped = recall(candidates, max_tokens=2000, allowance=Allowance(max_items=3, max_tokens=500))
    assert capped.report.max_tokens == 500 and capped.report.items_selected == 3


def test_recall_rejects_a_non_allowance() -> None:
    """recall(allowance=) with something else says what it takes."""
    with pytest.raises(BudgetError, match="allowance"):
        recall([Candidate(text="x")], allowance={"max_items": 3})  # type: ignore[arg-type]


def test_allowance_module_imports_no_host_framework() -> None:
    """The allowance core loads neither LangChain nor LlamaIndex."""
    code = (
        "import sys, recallpack, recallpack.allowance\n"
        "bad = [m for m in sys.modules if m.startswith(('langchain', 'llama_index'))]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# -- the invariant -----------------------------------------------------------------------------

MUTATIONS = ["none", "none", "none", "legacy", "tamper", "swap", "correction", "repeat"]


@st.composite
def conversations(draw: st.DrawFn) -> tuple[list[tuple[list[str], str]], Allowance]:
    blocks = draw(
        st.lists(
            st.tuples(
                st.lists(st.sampled_from(FACTS), min_size=1, max_size=5),
                st.sampled_from(MUTATIONS),
            ),
            max_size=8,
        )
    )
    allowance = Allowance(
        max_items=draw(st.integers(1, 12)),
        max_tokens=draw(st.integers(1, 400)),
        max_blocks=draw(st.integers(1, 5)),
    )
    return blocks, allowance


@pytest.mark.parametrize("spec", ["cl100k_base", "chars", "words"])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=conversations(), auto=st.lists(st.sampled_from(FACTS), max_size=8))
def test_evidence_in_one_request_never_exceeds_the_allowance(
    spec: str, case: tuple[list[tuple[list[str], str]], Allowance], auto: list[str]
) -> None:
    """Property: kept blocks plus automatic recall stay within max_items and max_tokens."""
    tok = make_tokenizer(spec)
    specs, allowance = case
    blocks: list[Block] = []
    for texts, mutation in specs:
        block = block_of(*texts, tokenizer=tok, correction=mutation == "correction")
        if mutation == "legacy":
            block = Block(block.text, None)
        elif mutation == "tamper":
            block = Block(str(block.text).replace("a", "4", 1), block.receipt)
        elif mutation == "swap" and blocks:
            block = Block(block.text, blocks[-1].receipt)
        elif mutation == "repeat" and blocks:
            block = blocks[-1]
        blocks.append(block)

    result = assemble(blocks, allowance)
    assert result == assemble(blocks, allowance)
    optional = [str(blocks[i].text) for i in result.kept if i not in result.corrections]
    for i in result.kept:
        assert verify(blocks[i].text, blocks[i].receipt)  # type: ignore[arg-type]
    assert len(optional) <= allowance.max_blocks
    automatic = recall([Candidate(text=t) for t in auto], tokenizer=tok, allowance=result.remaining)
    shown = [*optional, automatic.to_markdown()]
    assert sum(tok.count(text) for text in shown) <= allowance.max_tokens
    assert sum(items_in(text) for text in shown) <= allowance.max_items
    # Every verified correction is shown, whatever the allowance (a repeat only once).
    shown_corrections = {str(blocks[i].text) for i in result.corrections}
    for block in blocks:
        receipt = block.receipt
        if isinstance(receipt, Receipt) and receipt.correction and verify(block.text, receipt):
            assert str(block.text) in shown_corrections
