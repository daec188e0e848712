"""HTML for notebooks: a PackReport and a Trace, readable at a glance.

``PackReport._repr_html_`` and ``Trace._repr_html_`` call these, so Jupyter shows a report as
a summary line with counts per outcome and per reason, and a trace as a table of candidates
colour-coded by outcome. The markup is two Jinja templates (``templates/*.html.j2``) rendered
with autoescape on, so every value (lane names, reasons, tokenizer names and previews can come
from the caller) is text, never markup. Styles are inline, because notebook viewers drop
``<style>`` blocks.

The module reads results through the small protocols below and imports nothing of them: the
result module calls it, never the other way round.

A trace can be long (100,000 candidates), but the walk only reaches the ones it decides on:
the table shows the reached rows (at most ``max_rows`` of them, the rest counted in one row)
and sums up the unreached tail, which all share the reason that ended the walk, in one row.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from enum import Enum
from importlib import resources
from typing import Protocol

import jinja2

__all__ = ["report_html", "trace_html", "MAX_ROWS", "COLOURS"]

#: Reached rows shown before the rest are summed up in one row.
MAX_ROWS = 500

#: Background and text colour per outcome: green kept, amber dropped, red withheld.
COLOURS = {
    "selected": ("#e6f4ea", "#137333"),
    "dropped": ("#fef7e0", "#8a5a00"),
    "withheld": ("#fce8e6", "#a50e0e"),
}
_TAIL = ("#f1f3f4", "#5f6368")
_STYLES = {
    "box": "font-family:system-ui,sans-serif;font-size:13px;line-height:1.4",
    "cell": "padding:2px 8px;text-align:left;border-bottom:1px solid #ddd",
    "num": "padding:2px 8px;text-align:right;border-bottom:1px solid #ddd",
    "colours": {**COLOURS, "tail": _TAIL},
}
_COLUMNS = (
    ("right", "rank"),
    ("left", "outcome"),
    ("left", "reason"),
    ("left", "lane"),
    ("right", "score"),
    ("right", "tokens"),
    ("left", "preview"),
)


class Report(Protocol):
    """What the report's HTML reads of a PackReport."""

    @property
    def items_selected(self) -> int: ...
    @property
    def items_dropped(self) -> int: ...
    @property
    def items_withheld(self) -> int: ...
    @property
    def reasons(self) -> Mapping[str, int]: ...
    @property
    def max_tokens(self) -> int | None: ...
    @property
    def tokens_used(self) -> int: ...
    @property
    def tokenizer_used(self) -> str: ...
    @property
    def policy(self) -> str: ...
    @property
    def truncated(self) -> bool: ...
    def summary(self) -> str: ...


class Entry(Protocol):
    """What a trace row reads of a TraceEntry."""

    @property
    def rank(self) -> int: ...
    @property
    def outcome(self) -> Enum: ...
    @property
    def reason(self) -> Enum | None: ...
    @property
    def truncated(self) -> bool: ...
    @property
    def lane(self) -> str | None: ...
    @property
    def score(self) -> float | None: ...
    @property
    def tokens(self) -> int | None: ...
    @property
    def preview(self) -> str | None: ...


@functools.cache
def _template(name: str) -> jinja2.Template:
    source = (resources.files("recallpack.packing") / "templates" / name).read_text("utf-8")
    # Our own markup, never the caller's: a plain environment, autoescaped, no loader.
    return jinja2.Environment(autoescape=True, keep_trailing_newline=False).from_string(source)


def _reasons(counts: Iterable[tuple[str, int]]) -> str:
    return ", ".join(f"{count} {reason}" for reason, count in counts)


def report_html(report: Report) -> str:
    """The report as HTML: the summary line, a badge per outcome, the reasons, a budget bar."""
    budget = report.max_tokens
    return _template("report.html.j2").render(
        report=report,
        budget=budget,
        share=min(100.0, 100.0 * report.tokens_used / budget) if budget else 0.0,
        badges=[
            ("selected", f"{report.items_selected} selected"),
            ("dropped", f"{report.items_dropped} dropped"),
            ("withheld", f"{report.items_withheld} withheld"),
        ],
        reasons=_reasons(sorted(report.reasons.items())),
        **_STYLES,
    )


def _row(entry: Entry) -> dict[str, object]:
    reason = entry.reason.value if entry.reason is not None else ("cut to fit" if entry.truncated else "")
    # Which item a row is: its first words, for kept and dropped items only (the template shows
    # none for a withheld one: its text is for readers who hold its scopes).
    preview = " ".join(entry.preview.split()) if entry.preview else ""
    return {
        "outcome": entry.outcome.value,
        "rank": entry.rank,
        "reason": reason,
        "lane": entry.lane,
        "score": "" if entry.score is None else f"{entry.score:.4g}",
        "tokens": entry.tokens,
        "preview": preview,
    }


def _summaries(trace: Sequence[Entry], reached: int, shown: int, max_rows: int) -> list[str]:
    """The summary rows: reached rows past ``max_rows``, then the tail the walk never reached."""
    total = len(trace)
    summaries = []
    if reached > max_rows:
        hidden = trace[shown:reached]
        by_outcome = Counter(entry.outcome.value for entry in hidden)
        by_reason = Counter(entry.reason.value for entry in hidden if entry.reason is not None)
        summaries.append(
            f"… {len(hidden):,} more reached candidates (ranks {shown:,}–{reached - 1:,}): "
            + ", ".join(f"{by_outcome[name]} {name}" for name in COLOURS if by_outcome[name])
            + (f"; reasons: {_reasons(sorted(by_reason.items()))}" if by_reason else "")
        )
    tail = total - reached
    if tail:
        ranks = f"rank {reached:,}" if tail == 1 else f"ranks {reached:,}–{total - 1:,}"
        tail_reason = trace[reached].reason
        reason = tail_reason.value if tail_reason is not None else "unknown"
        # "not reached, all dropped (not_reached)" said one thing twice; the reason only adds
        # something when the walk ended for another one (the budget, the item cap).
        why = "" if reason == "not_reached" else f" ({reason})"
        summaries.append(f"{ranks}: {tail:,} not reached, all dropped{why}: the walk had ended")
    return summaries


def trace_html(trace: Sequence[Entry], max_rows: int = MAX_ROWS) -> str:
    """The trace as HTML: a summary line, then one row per reached candidate, colour-coded by
    outcome, and one row for the unreached tail (and for any reached rows past ``max_rows``)."""
    # A Trace says how far the walk got; any other sequence of entries was reached whole.
    total = len(trace)
    reached: int = getattr(trace, "reached", total)
    shown = trace[: min(reached, max_rows)]
    outcomes = Counter(entry.outcome.value for entry in trace[:reached])
    outcomes["dropped"] += total - reached
    return _template("trace.html.j2").render(
        total=total,
        reached=reached,
        counts=", ".join(f"{outcomes[name]} {name}" for name in COLOURS),
        columns=_COLUMNS,
        rows=[_row(entry) for entry in shown],
        summaries=_summaries(trace, reached, len(shown), max_rows),
        **_STYLES,
    )
