"""A configured reader is replaced by nothing but itself: compared by identity and value, never by ==."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from recallpack import Candidate, ConfigError, Packer, Reader, Scope, recall

TEAM_PLAN = Candidate(text="Team plan: the merger closes on Friday.", scope_ids=("org-2",))


class Agreeable(Reader):
    """A reader that says it equals every other: its __eq__ and __ne__ lie."""

    def __eq__(self, other: object) -> bool:
        return True

    def __ne__(self, other: object) -> bool:
        return False

    __hash__ = Reader.__hash__


HELD = Reader(id="u-7", scopes={"org-1": Scope(name="book-club")})


@pytest.mark.parametrize(
    "call",
    [
        lambda packer, reader: packer.replace(reader=reader),
        lambda packer, reader: packer.recall([TEAM_PLAN], reader=reader),
    ],
    ids=["replace", "recall"],
)
@pytest.mark.parametrize(
    "liar", [Agreeable(open=True), Agreeable(id="u-7", scopes={"org-2": Scope(name="x")})], ids=["open", "more-scopes"]
)
def test_a_reader_whose_equality_lies_cannot_replace_the_configured_one(call: Any, liar: Reader) -> None:
    """A Reader subclass whose __ne__ says it is the configured reader is refused, naming the field."""
    packer = Packer(reader=HELD)
    with pytest.raises(ConfigError, match="per-call reader cannot replace it") as raised:
        call(packer, liar)
    assert raised.value.field == "reader"


def test_the_configured_reader_itself_or_its_twin_is_taken() -> None:
    """The same reader object, or a plain Reader with the same values, passes per call and reads as before."""
    packer = Packer(reader=HELD)
    twin = Reader(id="u-7", scopes={"org-1": Scope(name="book-club")})
    mine = Candidate(text="Sam prefers morning study blocks.", scope_ids=("u-7",))
    for given_reader in (HELD, twin):
        assert packer.recall([mine, TEAM_PLAN], reader=given_reader).report.items_selected == 1


ids = st.one_of(st.none(), st.sampled_from(["u-7", "u-8", "org-1"]))
scopes = st.dictionaries(
    st.sampled_from(["org-1", "org-2"]), st.builds(Scope, name=st.sampled_from(["book-club", "x"]))
)


@given(reader_id=ids, reader_scopes=scopes, open_=st.booleans())
def test_a_per_call_reader_passes_only_when_it_is_the_configured_one(reader_id, reader_scopes, open_) -> None:
    """Any other reader per call is refused, and one with the configured values is taken."""
    packer = Packer(reader=HELD)
    given_reader = Reader(id=reader_id, scopes=reader_scopes, open=open_)
    same = given_reader.model_dump() == HELD.model_dump()
    if same:
        assert packer.replace(reader=given_reader).reader == HELD
    else:
        with pytest.raises(ConfigError, match="reader"):
            packer.replace(reader=given_reader)


def test_recall_with_no_configured_reader_takes_one_per_call() -> None:
    """Where no reader is configured, a per-call reader (any Reader) is the call's reader."""
    assert recall([TEAM_PLAN], reader=Agreeable(open=True)).report.items_selected == 1
