"""The ranges a ``--docs`` item shows and cites (:mod:`recallpack.adapters.mcp.windows`), as
invariants: a file's windows become ranges in file order, apart and trimmed; the URI that names
them reads back as them; a call takes every file once, its best window first."""

from __future__ import annotations

import pytest

pytest.importorskip("mcp")

from hypothesis import given
from hypothesis import strategies as st

from recallpack import ConfigError
from recallpack.adapters.mcp.windows import (
    MAX_SPANS,
    one_per_file,
    parse_spans,
    runs,
    shown,
    spans_template,
    spans_uri,
    split_spans,
)
from recallpack.packing.counting.windows import Window
from recallpack.packing.reading.units import MARK, sentence_start

FILE_URI = "recallpack://artifacts/notes%2Fa.md/contents/0123456789abcdef"
TEXT = st.text(alphabet="ab \n…é", min_size=1, max_size=80)


def _window(start: int, end: int, text: str = "", tokens: int = 1) -> Window:
    return Window(text=text[start:end], start=start, end=end, chunk_index=0, chunk_count=1,
                  token_count=tokens, parent_hash="0" * 64, chunk_id="c")  # fmt: skip


@st.composite
def _text_and_windows(draw: st.DrawFn) -> tuple[str, list[Window]]:
    text = draw(TEXT)
    bounds = st.tuples(st.integers(0, len(text) - 1), st.integers(1, len(text)))
    pairs = draw(st.lists(bounds.filter(lambda p: p[0] < p[1]), min_size=1, max_size=8))
    return text, [_window(start, end, text) for start, end in pairs]


@given(_text_and_windows())
def test_runs_are_in_order_apart_trimmed_and_cover_every_window(case: tuple[str, list[Window]]) -> None:
    """Runs come in file order, with text between each two, no white space at their ends, and
    every character a window holds that is not white space is in one."""
    text, windows = case
    spans = runs(text, windows)
    for start, end in spans:
        assert 0 <= start < end <= len(text)
        assert not text[start].isspace() and not text[end - 1].isspace()
    for (_, end), (start, _) in zip(spans, spans[1:]):
        assert end < start and text[end:start].strip()
    for window in windows:
        for i in range(window.start, window.end):
            # Left out: white space, and a sentence's end at a run's head (" …" here: "…" ends one).
            assert text[i].isspace() or any(s <= i < e for s, e in spans) or text[i] == MARK
    for start, _ in spans:
        assert sentence_start(text, start, len(text)) == start


@given(_text_and_windows())
def test_the_uri_of_the_runs_reads_back_as_the_item_shows_them(case: tuple[str, list[Window]]) -> None:
    """spans_uri names the runs; split_spans and parse_spans give them back, and shown() of them
    is each run's text in file order, one mark on a line of its own between two."""
    text, windows = case
    spans = runs(text, windows)
    if not spans:
        return
    uri = spans_uri(FILE_URI, spans)
    file_uri, named = split_spans(uri)
    assert file_uri == FILE_URI and named is not None
    assert parse_spans(named, len(text)) == spans
    # Runs are trimmed, so each mark stands between two line breaks of its own; one more ends
    # the item where the text goes on after the last run.
    after = f"\n{MARK}" if text[spans[-1][1] :].strip() else ""
    assert shown(text, spans) == f"\n{MARK}\n".join(text[start:end] for start, end in spans) + after


@pytest.mark.parametrize(
    ("template", "uri"),
    [
        ("recallpack://artifacts/{artifact_id}/contents/{artifact_content_id}", FILE_URI),
        ("https://docs.example/view?id={artifact_id}&v={artifact_content_id}", "https://docs.example/view?id=a.md&v=1"),
        ("https://docs.example/{artifact_id}#v{artifact_content_id}", "https://docs.example/a.md#v1"),
    ],
)  # fmt: skip
def test_spans_join_any_resource_uri_template(template: str, uri: str) -> None:
    """A template with a query gets &spans=, one with a fragment gets spans before it; the
    template of span URIs is RFC 6570's query expansion in the same place; split_spans undoes it."""
    made = spans_uri(uri, [(1, 4), (9, 12)])
    assert split_spans(made) == (uri, "1-4,9-12")
    base, _, fragment = made.partition("#")
    assert base.endswith("spans=1-4,9-12") and ("?" in base)
    assert spans_template(template).replace("{?spans}", "").replace("{&spans}", "") == template
    assert ("{&spans}" in spans_template(template)) == ("?" in template.split("#")[0])


@pytest.mark.parametrize("named", ["", "x", "3-3", "4-2", "0-11", "0-2,2-4", "0-3,1-4", "5-6,0-1", "01-2-3",
                                   "0-1," * MAX_SPANS + "0-1"])  # fmt: skip
def test_wrong_spans_are_a_config_error_naming_spans(named: str) -> None:
    """Empty, backwards, past the end, touching, overlapping, out of order, garbled or too many
    ranges are a ConfigError on the field spans, saying how to name them."""
    with pytest.raises(ConfigError) as caught:
        parse_spans(named, 10)
    assert caught.value.field == "spans" and "spans=START-END" in str(caught.value)


@given(st.lists(st.tuples(st.sampled_from("abcd"), st.integers(1, 50)), max_size=20), st.integers(0, 200))
def test_a_call_takes_every_file_once_its_best_window_first(found: list[tuple[str, int]], room: int) -> None:
    """Every file found is taken once, in the order of its best window, with that window; the
    others are taken best first while they and those before them fit the room."""
    hits = [(name, _window(i, i + 1, "\n" * (i + 1), tokens)) for i, (name, tokens) in enumerate(found)]
    taken = one_per_file(hits, room)
    assert list(taken) == list(dict.fromkeys(name for name, _ in hits))
    for name, windows in taken.items():
        assert windows[0] is next(w for n, w in hits if n == name)
    spent = 0
    for name, window in hits:
        cost = window.token_count + window.text.count("\n")  # a token a line, for the indent
        fits = spent + cost <= room
        assert (window in taken[name]) == (fits or window is taken[name][0])
        spent += cost if fits else 0


@pytest.mark.parametrize(
    ("spans", "expected"),
    [([(0, 2), (6, 8)], "ab\n…\nef"), ([(0, 3), (5, 8)], "ab\n…\nef"), ([(0, 3), (6, 8)], "ab\n…\nef")],
)
def test_the_mark_takes_a_line_of_its_own_without_blank_lines(spans: list[tuple[int, int]], expected: str) -> None:
    """Between ranges the mark stands on its own line: a line break is added only where a range
    does not already end or begin with one."""
    assert shown("ab\ncd\nef", spans) == expected


@pytest.mark.parametrize(
    ("spans", "expected"),
    [([(3, 5)], "cd\n…"), ([(0, 5)], "ab\ncd\n…"), ([(3, 8)], "cd\nef"), ([(1, 4)], "b\nc\n…"), ([(0, 1)], "a\n…")],
)
def test_an_item_cut_before_its_file_ends_ends_with_the_mark(spans: list[tuple[int, int]], expected: str) -> None:
    """A last run that ends before the file does has the mark on a line after it: an item cut
    mid-line ("- Arg") or mid-word never reads as if that were all."""
    assert shown("ab\ncd\nef", spans) == expected


def test_a_run_begins_after_the_sentence_a_window_cut_into() -> None:
    """A window that begins at the ". " ending the sentence before it shows no stray full stop."""
    text = "The block lives in render.py. The walk keeps what it reaches. Next।  अगला वाक्य।"
    start = text.index(". The walk")
    assert [text[s:e] for s, e in runs(text, [_window(start, len(text), text)])] == [text[start + 2 :]]
    hindi = text.index("।")
    assert [text[s:e] for s, e in runs(text, [_window(hindi, len(text), text)])] == ["अगला वाक्य।"]
