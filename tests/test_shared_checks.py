"""The shared checks (``check_each``, ``check_known``) say each caller's own words, to the letter."""

from __future__ import annotations

import io
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from recallpack import ConfigError, UpstreamError
from recallpack.cli import main
from recallpack.packing.validation import check_each, check_known, did_you_mean

FIELDS = "text, lane, score, artifact_id, artifact_content_id, citation, scope_ids, metadata, modality, content, span"


@pytest.mark.parametrize(
    ("line", "said"),
    [
        (b'{"txt": "a"}', f'<stdin>:1: unknown field "txt"; did you mean "text"? the fields are: {FIELDS}'),
        (b'{"text": "a", "zzzzzz": 1}', f'<stdin>:1: unknown field "zzzzzz"; the fields are: {FIELDS}'),
    ],
    ids=["close", "none-close"],
)
def test_cli_unknown_field_words(monkeypatch, capsys, line: bytes, said: str) -> None:
    """recallpack pack names an unknown field, the closest one when there is one, and all fields."""
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(line)))
    assert main(["pack"]) == 2
    assert capsys.readouterr().err == f"recallpack: error: {said}\n"


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        ({"query": "q", "max_token": 9}, "unknown argument 'max_token'; did you mean 'max_tokens'? "
         "recall takes query and max_tokens"),
        ({"query": "q", "reader": "x"}, "unknown argument 'reader'; recall takes query and max_tokens"),
    ],
    ids=["close", "none-close"],
)
def test_mcp_unknown_argument_words(arguments: dict[str, object], said: str) -> None:
    """The MCP recall tool names an unknown argument (and the field it is about) in its own words."""
    mcp = pytest.importorskip("recallpack.adapters.mcp")
    with pytest.raises(ConfigError) as raised:
        mcp.check_arguments(arguments, default=100, ceiling=1000)
    assert str(raised.value) == said
    assert raised.value.field == next(name for name in arguments if name != "query")


def test_langchain_non_message_words() -> None:
    """assemble_messages names the position and type of an item that is not a BaseMessage."""
    pytest.importorskip("langchain_core")
    from langchain_core.messages import HumanMessage

    from recallpack.adapters.langchain.memory import assemble_messages

    with pytest.raises(ConfigError) as raised:
        assemble_messages([HumanMessage("hi"), HumanMessage("again"), 7])  # type: ignore[list-item]
    assert str(raised.value) == "messages[2] is a int; expected a LangChain BaseMessage"


def test_langchain_non_document_words() -> None:
    """render_evidence names the position and type of an input that is not a Document."""
    pytest.importorskip("langchain_core")
    from langchain_core.documents import Document

    from recallpack.adapters.langchain import render_evidence

    with pytest.raises(UpstreamError) as raised:
        render_evidence.invoke([Document(page_content="ok"), "plain"])
    assert str(raised.value) == (
        "render_evidence input returned a str at position 1; expected a langchain_core.documents.Document "
        "(wrap plain texts as Document(page_content=...))"
    )


def raised_text(call: Callable[[], None]) -> str | None:
    """What ``call`` raised, as text (None: it returned)."""
    try:
        call()
    except ConfigError as error:
        return str(error)
    return None


@given(st.lists(st.one_of(st.integers(), st.text(max_size=3), st.none()), max_size=8))
def test_check_each_raises_for_the_first_stray(items: list[object]) -> None:
    """check_each raises for the first item that is not of the kind, and only if there is one."""
    strays = [f"{i}:{item!r}" for i, item in enumerate(items) if not isinstance(item, int)]
    said = raised_text(lambda: check_each(items, int, lambda i, item: ConfigError(f"{i}:{item!r}")))
    assert said == (strays[0] if strays else None)


@given(st.lists(st.sampled_from(["query", "max_tokens", "max_token", "qurey", "zzz"]), max_size=6))
def test_check_known_raises_for_the_first_unknown(names: list[str]) -> None:
    """check_known raises for the first unknown name, with did_you_mean's closest known one."""
    known = ("query", "max_tokens")
    unknown = [f"{name}->{did_you_mean(name, known)}" for name in names if name not in known]
    said = raised_text(lambda: check_known(names, known, lambda name, close: ConfigError(f"{name}->{close}")))
    assert said == (unknown[0] if unknown else None)
