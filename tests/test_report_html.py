"""A report and a trace render as HTML a person can read in a notebook, with content escaped."""

from __future__ import annotations

import re

from recallpack import Candidate, Reader, Scope, Trace, TraceEntry, recall
from recallpack.packing.results.report_html import trace_html
from recallpack.packing.tokenizers import CallableTokenizer

# Seed 000's table: 612/430/880/190/40 tokens under the "chars" tokenizer (4 chars a token).
SEED = [612, 430, 880, 190, 40]


def seed_candidates() -> list[Candidate]:
    return [Candidate(text=chr(ord("a") + i) * (4 * n), score=1.0 - i / 10) for i, n in enumerate(SEED)]


def rows(html: str) -> list[str]:
    return re.findall(r"<tr class=\"recallpack-(selected|dropped|withheld)\"", html)


def test_report_html_shows_summary_counts_and_reasons() -> None:
    """The report's HTML carries its summary line, a count per outcome and each reason."""
    reader = Reader(id="me", scopes={"club": Scope(name="book-club")})
    candidates = [
        Candidate(text="Alice moved to Berlin.", lane="facts", scope_ids=("me",)),
        Candidate(text="A secret of another team.", scope_ids=("other-team",)),
        Candidate(text="Alice moved to Berlin.", lane="facts", scope_ids=("me",)),
        Candidate(text="word " * 5000),
    ]
    result = recall(candidates, max_tokens=200, reader=reader)
    html = result.report._repr_html_()
    assert result.report.summary() in html
    assert "1 selected" in html and "2 dropped" in html and "1 withheld" in html
    for reason in ("unreadable", "duplicate", "over_budget"):
        assert reason in html
    assert "cl100k_base" in html and "prefix" in html


def test_report_html_marks_a_truncated_item() -> None:
    """Under the truncate policy the report says the last item was cut."""
    result = recall([Candidate(text="word " * 5000)], max_tokens=100, policy="truncate")
    assert result.report.truncated
    assert "truncated" in result.report._repr_html_()


def test_trace_html_has_one_coloured_row_per_reached_candidate() -> None:
    """Each reached candidate is a row with its rank, outcome, reason and tokens, coloured by outcome."""
    result = recall(seed_candidates(), max_tokens=2048, tokenizer="chars", policy="skip")
    html = result.trace._repr_html_()
    outcomes = [entry.outcome.value for entry in result.trace]
    assert rows(html) == outcomes
    assert "over_budget" in html
    for entry in result.trace:
        if entry.tokens is not None:
            assert f">{entry.tokens}</td>" in html
    # Kept and dropped rows look different.
    selected = re.search(r'<tr class="recallpack-selected" style="background:([^"]+)"', html)
    dropped = re.search(r'<tr class="recallpack-dropped" style="background:([^"]+)"', html)
    assert selected and dropped and selected.group(1) != dropped.group(1)


def test_trace_html_shows_withheld_rows() -> None:
    """A candidate the reader may not read shows as a withheld row with reason unreadable."""
    result = recall(
        [Candidate(text="ours", scope_ids=("me",)), Candidate(text="theirs", scope_ids=("them",))],
        reader=Reader(id="me"),
    )
    html = result.trace._repr_html_()
    assert rows(html) == ["selected", "withheld"]
    assert "unreadable" in html


def test_trace_html_sums_up_an_unreached_tail_in_one_row() -> None:
    """100,000 candidates after a prefix cut render as the reached rows plus one tail row."""
    candidates = [Candidate(text=f"item {i} " + "word " * 100) for i in range(100_000)]
    result = recall(candidates, max_tokens=1000)
    trace = result.trace
    html = trace._repr_html_()
    assert len(rows(html)) == trace.reached < 100
    tail = len(trace) - trace.reached
    assert html.count('class="recallpack-summary"') == 1
    assert f"{tail:,} not reached" in html and "over_budget" in html
    assert "100,000" in html


def test_trace_html_names_a_tail_past_the_reach_once() -> None:
    """A tail the ``passages`` walk never read says "not reached" once, not again as its reason."""
    candidates = [Candidate(text=f"The harbour opened in {1800 + i} for grain ships.") for i in range(300)]
    result = recall(candidates, query="harbour grain ships", max_tokens=200, policy="passages")
    assert result.report.not_reached > 0
    tail_row = re.search(r'class="recallpack-summary"[^>]*>(.*?)</', result.trace._repr_html_(), re.S)
    assert tail_row is not None
    assert tail_row.group(1).count("not reached") + tail_row.group(1).count("not_reached") == 1


def test_trace_html_caps_a_long_reached_run() -> None:
    """Reached rows past max_rows are counted in one summary row instead of listed."""
    candidates = [Candidate(text="same text") for _ in range(50)]
    trace = recall(candidates).trace  # one kept, 49 duplicates: all reached
    html = trace_html(trace, max_rows=10)
    assert len(rows(html)) == 10
    assert "40 more reached candidates" in html and "40 dropped" in html
    assert "duplicate" in html


def test_report_html_escapes_the_tokenizer_name() -> None:
    """A tokenizer name with markup in it comes out as text, not as HTML."""
    evil = CallableTokenizer(len, name="<script>alert(1)</script>")
    html = recall([Candidate(text="x")], tokenizer=evil).report._repr_html_()
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_trace_html_escapes_row_values() -> None:
    """A lane string with markup in a trace entry is escaped in its row."""
    trace = Trace(
        [TraceEntry(rank=0, outcome="dropped", reason="empty", lane="<img src=x onerror=alert(1)>")],
        1,
        None,
    )
    html = trace._repr_html_()
    assert "<img" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html


def test_content_never_appears_in_the_html_beyond_an_escaped_preview() -> None:
    """The report shows decisions only; the trace a row's first words, escaped, and no more."""
    result = recall([Candidate(text="hello <b>there</b> " + "filler " * 20 + "unique-marker")])
    assert "hello" not in result.report._repr_html_()
    trace = result.trace._repr_html_()
    assert "unique-marker" not in trace and "<b>" not in trace and "hello &lt;b&gt;there&lt;/b&gt;" in trace


def test_trace_html_says_which_item_was_cut() -> None:
    """A truncated selection reads 'cut to fit' in the trace table."""
    from recallpack import Candidate, recall

    result = recall([Candidate(text="word " * 2000)], max_tokens=200, policy="truncate")
    assert result.trace[0].truncated
    assert "cut to fit" in result.trace._repr_html_()


def test_trace_html_shows_which_item_each_kept_or_dropped_row_is() -> None:
    """A preview column names kept and dropped items by their first words; a withheld row shows none."""
    secret = "Board minutes: the merger closes in May."
    candidates = [
        Candidate(text="Alice moved to the Berlin office in March.", lane="facts"),
        Candidate(text=secret, scope_ids=("board",)),
        Candidate(text="The cafeteria <menu> changes every Monday. " * 400),
    ]
    html = recall(candidates, max_tokens=100).trace._repr_html_()
    assert "<th" in html and ">preview</th>" in html
    assert "Alice moved to the Berlin office" in html and "The cafeteria &lt;menu&gt; changes" in html
    assert "Board minutes" not in html and "merger" not in html and "withheld: not shown" in html
