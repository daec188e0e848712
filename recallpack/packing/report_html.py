"""HTML for notebooks: a PackReport and a Trace, readable at a glance.

``PackReport._repr_html_`` and ``Trace._repr_html_`` call these, so Jupyter shows a report as
a summary line with counts per outcome and per reason, and a trace as a table of candidates
colour-coded by outcome. Pure standard library; every value is escaped (lane names, reasons
and tokenizer names can come from the caller). Styles are inline, because notebook viewers
drop ``<style>`` blocks.

A trace can be long (100,000 candidates), but the walk only reaches the ones it decides on:
the table shows the reached rows (at most ``max_rows`` of them, the rest counted in one row)
and sums up the unreached tail, which all share the reason that ended the walk, in one row.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from html import escape
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from recallpack.packing.result import PackReport, Trace, TraceEntry

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

_BOX = "font-family:system-ui,sans-serif;font-size:13px;line-height:1.4"
_CELL = "padding:2px 8px;text-align:left;border-bottom:1px solid #ddd"
_NUM = "padding:2px 8px;text-align:right;border-bottom:1px solid #ddd"


def _text(value: object) -> str:
    return escape("" if value is None else str(value))


def _badge(outcome: str, label: str) -> str:
    background, colour = COLOURS.get(outcome, _TAIL)
    return (
        f'<span style="background:{background};color:{colour};border-radius:3px;'
        f'padding:1px 6px;margin-right:6px;font-weight:600">{_text(label)}</span>'
    )


def _reasons(counts: Iterable[tuple[str, int]]) -> str:
    return ", ".join(f"{count} {_text(reason)}" for reason, count in counts)


def report_html(report: PackReport) -> str:
    """The report as HTML: the summary line, a badge per outcome, the reasons, a budget bar."""
    budget = report.max_tokens
    badges = "".join(
        [
            _badge("selected", f"{report.items_selected} selected"),
            _badge("dropped", f"{report.items_dropped} dropped"),
            _badge("withheld", f"{report.items_withheld} withheld"),
        ]
    )
    reasons = _reasons(sorted(report.reasons.items())) or "none"
    lines = [
        f'<div class="recallpack-report" style="{_BOX}">',
        f"<div><strong>recallpack</strong>: {_text(report.summary())}</div>",
        f'<div style="margin:4px 0">{badges}</div>',
        f"<div>not kept, by reason: {reasons}</div>",
        "<div>tokens: "
        + _text(report.tokens_used)
        + (f" of {_text(budget)}" if budget is not None else " (no budget)")
        + f" &middot; tokenizer <code>{_text(report.tokenizer_used)}</code>"
        + f" &middot; policy <code>{_text(report.policy)}</code>"
        + (" &middot; <strong>last item truncated</strong>" if report.truncated else "")
        + "</div>",
    ]
    if budget:
        share = min(100.0, 100.0 * report.tokens_used / budget)
        lines.append(
            '<div style="width:240px;height:8px;background:#eee;border-radius:4px;margin-top:4px"'
            f' title="{report.tokens_used} of {budget} tokens">'
            f'<div style="width:{share:.1f}%;height:8px;background:#34a853;border-radius:4px">'
            "</div></div>"
        )
    lines.append("</div>")
    return "\n".join(lines)


def _score(value: float | None) -> str:
    return "" if value is None else f"{value:.4g}"


def _row(entry: TraceEntry) -> str:
    outcome = entry.outcome.value
    background, colour = COLOURS.get(outcome, _TAIL)
    reason = entry.reason.value if entry.reason is not None else ("cut to fit" if entry.truncated else "")
    cells = [
        (_NUM, _text(entry.rank)),
        (_CELL, f'<span style="color:{colour};font-weight:600">{_text(outcome)}</span>'),
        (_CELL, _text(reason)),
        (_CELL, _text(entry.lane)),
        (_NUM, _text(_score(entry.score))),
        (_NUM, _text(entry.tokens) if entry.tokens is not None else "&mdash;"),
        (_CELL, _preview(entry)),
    ]
    tds = "".join(f'<td style="{style}">{content}</td>' for style, content in cells)
    return f'<tr class="recallpack-{_text(outcome)}" style="background:{background}">{tds}</tr>'


def _preview(entry: TraceEntry) -> str:
    """Which item a row is: its first words, for kept and dropped items only. A withheld item's
    text is for readers who hold its scopes, and whoever reads the trace may not."""
    if entry.outcome.value == "withheld":
        return '<span style="font-style:italic">withheld: not shown</span>'
    if not entry.preview:
        return "&mdash;"
    words = " ".join(entry.preview.split())
    return f'<span style="font-family:monospace">{_text(words)}&hellip;</span>'


def _summary_row(text: str) -> str:
    background, colour = _TAIL
    return (
        f'<tr class="recallpack-summary" style="background:{background};color:{colour}">'
        f'<td colspan="7" style="{_CELL};font-style:italic">{text}</td></tr>'
    )


def trace_html(trace: Trace, max_rows: int = MAX_ROWS) -> str:
    """The trace as HTML: a summary line, then one row per reached candidate, colour-coded by
    outcome, and one row for the unreached tail (and for any reached rows past ``max_rows``)."""
    total, reached = len(trace), trace.reached
    shown = trace[: min(reached, max_rows)]
    hidden = trace[len(shown) : reached] if reached > max_rows else []
    outcomes = Counter(entry.outcome.value for entry in trace[:reached])
    tail = total - reached
    tail_reason = trace[reached].reason if tail else None
    if tail:
        outcomes["dropped"] += tail

    counts = ", ".join(f"{outcomes[name]} {name}" for name in COLOURS)
    head = (
        f"<div><strong>{total:,}</strong> candidate{'s' if total != 1 else ''}: {counts}"
        f" &middot; the walk reached {reached:,}</div>"
    )
    header = "".join(
        f'<th style="padding:2px 8px;text-align:{align};border-bottom:2px solid #999">{name}</th>'
        for align, name in (
            ("right", "rank"),
            ("left", "outcome"),
            ("left", "reason"),
            ("left", "lane"),
            ("right", "score"),
            ("right", "tokens"),
            ("left", "preview"),
        )
    )
    rows = [_row(entry) for entry in shown]
    if hidden:
        by_outcome = Counter(entry.outcome.value for entry in hidden)
        by_reason = Counter(entry.reason.value for entry in hidden if entry.reason is not None)
        rows.append(
            _summary_row(
                f"&hellip; {len(hidden):,} more reached candidates (ranks {len(shown):,}&ndash;"
                f"{reached - 1:,}): "
                + ", ".join(f"{by_outcome[name]} {name}" for name in COLOURS if by_outcome[name])
                + (f"; reasons: {_reasons(sorted(by_reason.items()))}" if by_reason else "")
            )
        )
    if tail:
        first = reached
        ranks = f"rank {first:,}" if tail == 1 else f"ranks {first:,}&ndash;{total - 1:,}"
        reason = tail_reason.value if tail_reason is not None else "unknown"
        rows.append(
            _summary_row(
                f"{ranks}: {tail:,} not reached, all dropped ({_text(reason)}): "
                "the walk had ended"
            )
        )
    return "\n".join(
        [
            f'<div class="recallpack-trace" style="{_BOX}">',
            head,
            '<table style="border-collapse:collapse;margin-top:4px">',
            f"<thead><tr>{header}</tr></thead>",
            "<tbody>",
            *rows,
            "</tbody></table></div>",
        ]
    )
