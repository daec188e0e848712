"""The Packer (packing/packer.py): every setting validated once, when it is built; a call's
bounds are values handed down to the same plan.

A bad setting is refused when the Packer is built, naming its field; an unknown one says what it
may have meant. ``replace`` never lifts a configured reader. A per-call ``max_tokens`` or
``max_items`` packs to the same bytes as a Packer built with them, and is refused with the same
error; it shares the plan (the tokenizer is resolved once). ``least_tokens_for`` is the least
budget that keeps an item, and ``arecall`` is ``recall``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recallpack import (
    POLICIES,
    BudgetError,
    Candidate,
    ConfigError,
    Packer,
    PolicyError,
    Reader,
    RecallpackError,
    Scope,
)
from recallpack.packing.limits import MAX_TOKENS_CEILING
from recallpack.packing.results.result import RecallResult
from recallpack.packing.tokenizers import CallableTokenizer, get_tokenizer
from recallpack.testing import paragraphs
from tests.conftest import words

QUERY = "parse command line arguments"
READER = Reader(scopes={"team": Scope(name="team")})
#: Settings other than the defaults, so that a per-call bound is seen to keep every one of them.
SETTINGS: dict[str, Any] = {
    "policy": "passages",
    "tokenizer": "o200k_base",
    "reader": READER,
    "lane_budgets": {"facts": 200},
    "citation_keys": ("source",),
    "language": "en",
}


def _candidates(n: int = 14) -> list[Candidate]:
    return [
        Candidate(
            text=text,
            lane="facts" if i % 4 == 1 else "sources",
            metadata={"source": module},
            **({"scope_ids": ["team"]} if i % 5 == 2 else {}),  # type: ignore[arg-type]
        )
        for i, (module, text) in enumerate(paragraphs()[60 : 60 + n])
    ]


def _same(a: RecallResult, b: RecallResult) -> None:
    """Byte for byte: the block, and the result's every field (evidence, report, trace)."""
    assert a.to_markdown() == b.to_markdown()
    assert json.dumps(a.to_dict(), sort_keys=True) == json.dumps(b.to_dict(), sort_keys=True)


def _outcome(call: Callable[[], RecallResult]) -> RecallResult | tuple[type, str | None, str]:
    """The result of ``call``, or the error it raised as (type, field, message)."""
    try:
        return call()
    except RecallpackError as exc:
        return type(exc), exc.field, str(exc)


# --- settings, validated once --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("typo", "meant"),
    [("max_token", "max_tokens"), ("polciy", "policy"), ("lane_budget", "lane_budgets"), ("tokeniser", "tokenizer")],
)
def test_an_unknown_setting_is_refused_with_what_it_may_have_meant(typo: str, meant: str) -> None:
    """A misspelt setting is a ConfigError on that name, saying the setting it resembles."""
    misspelt: dict[str, Any] = {typo: 1}
    with pytest.raises(ConfigError, match=f"unknown setting '{typo}'; did you mean '{meant}'") as caught:
        Packer(**misspelt)
    assert caught.value.field == typo


BAD_SETTINGS: list[tuple[str, Any, type[RecallpackError]]] = [
    ("max_tokens", 0, BudgetError),
    ("max_tokens", "512", BudgetError),
    ("max_tokens", MAX_TOKENS_CEILING + 1, BudgetError),
    ("max_tokens", 3, BudgetError),  # below the least that holds any evidence
    ("max_items", 0, BudgetError),
    ("max_items", True, BudgetError),
    ("policy", "passage", PolicyError),
    ("floor", "yes", ConfigError),
    ("cut", "middle", ConfigError),
    ("language", "xx-bogus", ConfigError),
    ("tokenizer", 5, ConfigError),
    ("tokenizer", "no-such-encoding", ConfigError),
    ("embed", 5, ConfigError),
    ("reader", "bob", ConfigError),
    ("lane_budgets", {"nope": 1}, ConfigError),
    ("lane_budgets", {"facts": -1}, BudgetError),
    ("dedupe", 1, ConfigError),
    ("template", 5, ConfigError),
    ("resource_uri_template", 5, ConfigError),
    ("citation_keys", [1], ConfigError),
    ("max_tokens_ceiling", 0, BudgetError),
    ("join", 5, ConfigError),
]


@pytest.mark.parametrize(("field", "value", "error"), BAD_SETTINGS, ids=lambda v: repr(v)[:20])
def test_each_bad_setting_is_refused_when_built_naming_its_field(
    field: str, value: Any, error: type[RecallpackError]
) -> None:
    """Every setting's bad value: the error of its kind, its ``field`` the setting, and a
    message that says the setting."""
    with pytest.raises(error) as caught:
        Packer(**{field: value})
    assert caught.value.field == field
    assert field in str(caught.value)


def test_settings_are_resolved_once_not_per_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tokenizer is resolved when the Packer is built; calls (and a bounds-only replace)
    resolve nothing again."""
    resolved: list[object] = []

    def counting(spec: object) -> Any:
        resolved.append(spec)
        return get_tokenizer(spec)

    monkeypatch.setattr("recallpack.packing.packer.get_tokenizer", counting)
    packer = Packer(max_tokens=300, tokenizer="o200k_base")
    assert resolved == ["o200k_base"]
    for budget in (100, 200, 300):
        packer.recall(_candidates(4), query=QUERY, max_tokens=budget, max_items=2)
    packer.replace(max_tokens=250)
    assert resolved == ["o200k_base"]


# --- replace never lifts a reader ----------------------------------------------------------------


@pytest.mark.parametrize("other", [None, Reader(), Reader.everyone(), Reader(scopes={"ops": Scope(name="ops")})], ids=repr)
def test_replace_refuses_to_lift_a_configured_reader(other: Reader | None) -> None:
    """A configured reader cannot be replaced, per Packer or per call, whatever the other reader."""
    packer = Packer(reader=READER)
    with pytest.raises(ConfigError, match="reader is configured"):
        packer.replace(reader=other)
    with pytest.raises(ConfigError, match="reader is configured"):
        packer.recall(_candidates(3), reader=other)


def test_replace_may_set_a_reader_where_none_was_and_keep_the_same_one() -> None:
    """No reader configured: a call may name one (items in its scopes then show); the same
    reader again is no lift."""
    candidates = _candidates(6)
    scoped = sum(1 for c in candidates if c.scope_ids)
    opened = Packer(max_tokens=4000).recall(candidates, reader=READER)
    assert opened.report.items_withheld == 0 and scoped > 0
    assert Packer(max_tokens=4000).recall(candidates).report.items_withheld == scoped
    same = Packer(max_tokens=4000, reader=READER)
    _same(same.replace(reader=READER).recall(candidates), opened)


def test_replace_refuses_an_unknown_setting_and_returns_itself_for_nothing() -> None:
    """An unknown override is refused with its did-you-mean; no override is the same Packer."""
    packer = Packer(max_tokens=300)
    assert packer.replace() is packer
    with pytest.raises(ConfigError, match="did you mean 'max_items'"):
        packer.replace(max_item=3)


# --- per-call bounds: a value handed down, the same bytes and the same errors ----------------------

BOUND_VALUES = st.one_of(
    st.integers(min_value=1, max_value=3000),
    st.sampled_from([0, -1, True, False, "5", 5.0, None, 12, 30, MAX_TOKENS_CEILING, MAX_TOKENS_CEILING + 1]),
)


@settings(max_examples=80, deadline=None)
@given(
    m=BOUND_VALUES,
    k=st.one_of(st.none(), st.integers(min_value=1, max_value=8), st.sampled_from([0, -1, True, "5", 5.0])),
    policy=st.sampled_from(POLICIES),
)
def test_a_per_call_bound_packs_as_a_packer_built_with_it(m: Any, k: Any, policy: str) -> None:
    """packer.recall(c, max_tokens=m, max_items=k) is Packer(max_tokens=m, max_items=k, same
    settings).recall(c): byte for byte, or the same error type, field and message."""
    candidates = _candidates()
    same = {**SETTINGS, "policy": policy}
    packer = Packer(max_tokens=700, **same)
    per_call = _outcome(lambda: packer.recall(candidates, query=QUERY, max_tokens=m, max_items=k))
    built = _outcome(lambda: Packer(max_tokens=m, max_items=k, **same).recall(candidates, query=QUERY))
    if isinstance(per_call, RecallResult) and isinstance(built, RecallResult):
        _same(per_call, built)
        assert per_call.report.tokens_used <= m
    else:
        assert per_call == built


def test_a_per_call_bound_below_the_least_is_refused_as_a_packer_refuses_it() -> None:
    """The least budget holds per call: one token under is the BudgetError a Packer gives."""
    packer = Packer(**SETTINGS)
    least = packer.least_tokens
    with pytest.raises(BudgetError, match=f"use max_tokens={least} or more") as per_call:
        packer.recall(_candidates(3), max_tokens=least - 1)
    with pytest.raises(BudgetError) as built:
        Packer(max_tokens=least - 1, **SETTINGS)
    assert str(per_call.value) == str(built.value)
    assert packer.recall(_candidates(3), max_tokens=least).report.tokens_used <= least


def test_a_bounds_only_replace_shares_the_plan() -> None:
    """replace(max_tokens=..., max_items=...) keeps the resolved tokenizer itself, and so does
    another setting's replace; the bounds are the new ones."""
    packer = Packer(max_tokens=700, **SETTINGS)
    bounded = packer.replace(max_tokens=300, max_items=2)
    assert bounded.tokenizer_used is packer.tokenizer_used
    assert (bounded.max_tokens, bounded.max_items, bounded.policy) == (300, 2, "passages")
    assert packer.replace(policy="skip").tokenizer_used is packer.tokenizer_used
    _same(bounded.recall(_candidates(), query=QUERY), packer.recall(_candidates(), query=QUERY, max_tokens=300, max_items=2))


def test_a_callable_tokenizer_is_not_resolved_again() -> None:
    """A str -> int tokenizer: one CallableTokenizer for the Packer and every replace of it, and
    a bounds-only replace counts nothing (the least budget is the plan's, not worked out again)."""
    calls: list[str] = []

    def counting(text: str) -> int:
        calls.append(text)
        return words(text)

    packer = Packer(max_tokens=400, tokenizer=counting)
    assert isinstance(packer.tokenizer_used, CallableTokenizer) and calls
    before = len(calls)
    bounded = [packer.replace(max_tokens=300), packer.replace(max_items=2), packer.replace(max_tokens=50, max_items=1)]
    assert len(calls) == before
    for other in (*bounded, packer.replace(policy="skip")):
        assert other.tokenizer_used is packer.tokenizer_used
    _same(bounded[0].recall(_candidates(5)), packer.recall(_candidates(5), max_tokens=300))


# --- the least budget ----------------------------------------------------------------------------


@pytest.mark.parametrize("tokenizer", ["cl100k_base", "o200k_base", "chars"])
def test_least_tokens_is_the_least_budget_a_packer_takes(tokenizer: str) -> None:
    """least_tokens is accepted, one fewer is refused naming it, and at least_tokens the floor
    still shows a long item."""
    least = Packer(tokenizer=tokenizer).least_tokens
    with pytest.raises(BudgetError, match=f"below the least that holds any evidence, {least} tokens"):
        Packer(max_tokens=least - 1, tokenizer=tokenizer)
    long = [Candidate(text=text) for _, text in paragraphs() if len(text) > 1000][:2]
    result = Packer(max_tokens=least, tokenizer=tokenizer).recall(long)
    assert result.report.items_selected == 1 and result.report.tokens_used <= least


@settings(max_examples=30, deadline=None)
@given(
    i=st.integers(min_value=0, max_value=400),
    policy=st.sampled_from(POLICIES),
    scoped=st.booleans(),
    query=st.sampled_from([None, QUERY]),
)
def test_least_tokens_for_is_the_least_budget_that_keeps_the_item(
    i: int, policy: str, scoped: bool, query: str | None
) -> None:
    """At least_tokens_for(c) a call given c keeps it; one token fewer it does not (or that is
    below what any Packer takes)."""
    module, text = paragraphs()[i]
    candidate = Candidate(text=text, metadata={"source": module}, **({"scope_ids": ["team"]} if scoped else {}))  # type: ignore[arg-type]
    packer = Packer(policy=policy, reader=READER)
    least = packer.least_tokens_for(candidate, query=query)
    assert least is not None and least >= packer.least_tokens
    assert packer.recall([candidate], query=query, max_tokens=least).report.items_selected == 1
    if least > packer.least_tokens:
        assert packer.recall([candidate], query=query, max_tokens=least - 1).report.items_selected == 0


@pytest.mark.parametrize(
    ("candidate", "kwargs"),
    [
        (Candidate(text="Held in a scope the reader lacks.", scope_ids=["secret"]), {}),
        (Candidate(text="   "), {}),
        (Candidate(text="Fits, but the floor is off."), {"floor": False}),
    ],
    ids=["withheld", "blank", "floor off"],
)
def test_least_tokens_for_an_item_never_shown_is_none(candidate: Candidate, kwargs: dict[str, Any]) -> None:
    """Withheld, blank, or with the floor off: no budget is promised to keep it."""
    assert Packer(reader=READER, **kwargs).least_tokens_for(candidate) is None


# --- recall and arecall ----------------------------------------------------------------------------


@pytest.mark.parametrize("policy", POLICIES)
def test_arecall_gives_what_recall_gives(policy: str) -> None:
    """The async call packs to the same bytes, with the same per-call bounds, and raises the
    same error for a bad one."""
    packer = Packer(max_tokens=600, **{**SETTINGS, "policy": policy})
    candidates = _candidates()
    each: list[dict[str, Any]] = [{}, {"max_tokens": 250, "max_items": 3}]
    for bounds in each:
        _same(asyncio.run(packer.arecall(candidates, query=QUERY, **bounds)), packer.recall(candidates, query=QUERY, **bounds))

    async def bad() -> RecallResult:
        return await packer.arecall(candidates, max_tokens=0)

    assert _outcome(lambda: asyncio.run(bad())) == _outcome(lambda: packer.recall(candidates, max_tokens=0))
