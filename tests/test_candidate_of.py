"""candidate_of: the Candidate an adapter's checked values make, built without a second validation,
is exactly the validated one (fields, their order, the fields set), and what validation would
change or refuse goes through validation, with its own error."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from recallpack import Candidate, LaneKind, recall
from recallpack.packing.candidate import Span, candidate_of
from recallpack.packing.errors import RecallpackError
from recallpack.packing.translate import candidate_from


class Name(str):
    """A str subclass: validation hands back a plain str, so it must not be taken as it is."""


TEXTS = st.one_of(
    st.text(max_size=30), st.sampled_from(["caf\u00e9", "lone \ud800 half", "", "   "]),
    st.text(max_size=8).map(Name), st.integers(), st.none(), st.binary(max_size=4),
)
OPTIONAL = st.one_of(st.none(), TEXTS)
LANES = st.one_of(st.sampled_from(list(LaneKind)), st.sampled_from(["facts", "derived", "nope", 3]))
SCOPES = st.one_of(
    st.tuples(st.sampled_from(["org-1", "me", "x\ud800"])),
    st.lists(st.sampled_from(["org-1", "me", "", " "]), max_size=3).map(tuple),
    st.lists(st.sampled_from(["org-1", "me"]), max_size=2),
    st.sampled_from(["org-1", None, 0, (Name("org-1"),)]),
)
SCORES = st.one_of(
    st.none(), st.floats(allow_nan=True, allow_infinity=True), st.integers(-5, 5), st.booleans(),
    st.sampled_from(["0.5", 10**400]),
)
KEYS = st.one_of(st.sampled_from(["source", "page", "lane"]), st.integers(0, 3), st.text(max_size=4).map(Name))
METADATA = st.one_of(
    st.dictionaries(KEYS, st.one_of(st.integers(), st.text(max_size=5), st.lists(st.integers(), max_size=2)), max_size=4),
    st.sampled_from([None, [], "meta"]),
)
SPANS = st.one_of(
    st.none(),
    st.builds(lambda s, n: Span(parent="source:a.txt", start=s, end=s + n), st.integers(0, 50), st.integers(0, 40)),
    st.sampled_from([{"parent": "p", "start": 0, "end": 1}, "span"]),
)
FIELDS = st.fixed_dictionaries(
    {"text": TEXTS},
    optional={
        "lane": LANES, "scope_ids": SCOPES, "artifact_id": OPTIONAL, "artifact_content_id": OPTIONAL,
        "score": SCORES, "citation": OPTIONAL, "metadata": METADATA, "modality": OPTIONAL,
        "scope_error": OPTIONAL, "content": OPTIONAL, "span": SPANS,
    },
)  # fmt: skip
#: Fields as an adapter makes them: mostly of the types validation keeps as they are.
PLAIN = st.one_of(st.text(max_size=30), st.sampled_from(["lone \ud800 half", ""]))
ADAPTED = st.fixed_dictionaries(
    {"text": PLAIN, "lane": st.sampled_from(list(LaneKind))},
    optional={
        "scope_ids": st.lists(st.sampled_from(["org-1", "me"]), min_size=1, max_size=2).map(tuple),
        "artifact_id": st.one_of(st.none(), PLAIN), "artifact_content_id": st.one_of(st.none(), PLAIN),
        "score": st.one_of(st.none(), st.floats(allow_nan=False, allow_infinity=False)),
        "metadata": st.dictionaries(st.text(max_size=4), st.integers(), max_size=3),
        "modality": st.sampled_from(["text", "image"]), "scope_error": st.one_of(st.none(), PLAIN),
        "content": st.one_of(st.none(), PLAIN), "span": SPANS,
    },
)  # fmt: skip


def made(build: Any, fields: dict[str, Any]) -> Candidate | tuple[type, str]:
    """What ``build(fields)`` gives: the Candidate, or the error's type and message."""
    try:
        return build(fields)  # type: ignore[no-any-return]
    except RecallpackError as exc:
        return type(exc), str(exc)


def state(candidate: Candidate) -> tuple[object, ...]:
    """All a Candidate holds, in order: its fields, which were given, its private and extra parts,
    its dumps (a modality with a lone surrogate, kept as given, cannot be JSON: the error then)."""
    try:
        as_json = candidate.model_dump_json()
    except ValueError as exc:
        as_json = str(exc)
    return (
        list(candidate.__dict__.items()), candidate.model_fields_set, candidate.__pydantic_private__,
        candidate.__pydantic_extra__, candidate.model_dump(), as_json,
    )


@given(st.one_of(FIELDS, ADAPTED))
def test_candidate_of_is_the_validated_candidate_or_its_error(fields: dict[str, Any]) -> None:
    """Any fields, right or wrong: candidate_of gives what Candidate(**fields) gives, the same
    values in the same order with the same fields set, or the same error with the same message."""
    direct, validated = made(candidate_of, dict(fields)), made(lambda f: Candidate(**f), dict(fields))
    if isinstance(validated, Candidate):
        assert isinstance(direct, Candidate)
        assert direct == validated and state(direct) == state(validated)
        assert direct.metadata is not fields.get("metadata")  # a copy, as validation makes
    else:
        assert direct == validated


def test_an_adapters_item_is_not_validated_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    """A host's item with scopes, ids, a score and a span becomes a Candidate without running
    Candidate's validation (what the adapter made is already as a Candidate holds it)."""
    metadata = {"scope_ids": ["org-1"], "artifact_id": "guide.md", "artifact_content_id": 3,
                "source": "guide.md", "start_index": 7}  # fmt: skip
    expected = Candidate(
        text="Paris is in France.", scope_ids=("org-1",), scope_error=None, artifact_id="guide.md",
        artifact_content_id="3", score=0.5, metadata=metadata, modality="text", content=None,
        span=Span(parent="source:guide.md", start=7, end=26, source="metadata['start_index']"),
        lane=LaneKind.SOURCES,
    )
    monkeypatch.setattr(Candidate, "__init__", lambda self, **data: pytest.fail("validated again"))
    made = candidate_from("Paris is in France.", metadata, position=0, score=0.5)
    assert made == expected and made.model_fields_set == expected.model_fields_set
    assert math.isclose(made.score or 0, 0.5)
    monkeypatch.undo()
    assert recall([made], max_tokens=200, reader={"id": "org-1"}).evidence[0].text == "Paris is in France."
