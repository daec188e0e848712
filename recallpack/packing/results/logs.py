"""What a packing says to the log: one DEBUG record per call, and a WARNING only for what the
caller should act on. recallpack/__init__.py gives the ``recallpack`` logger a NullHandler and
nothing else.
"""

from __future__ import annotations

import logging

from recallpack.packing.results.result import RecallResult

__all__ = ["logger", "log_result"]

#: Where recallpack logs.
logger = logging.getLogger("recallpack")
#: Under this share of the budget used while items were dropped for size, the caller is told.
_UNFILLED_SHARE = 0.5


def log_result(result: RecallResult) -> None:
    """One DEBUG record per packing (counts, reasons, kept ranks; the whole event, text-free, in
    ``record.recallpack``), and a WARNING when the budget went largely unused because items
    did not fit. Both are checked before anything is formatted: logging off costs two lookups."""
    report = result.report
    if logger.isEnabledFor(logging.DEBUG):
        logger.debug(
            "recall: kept %d, dropped %d, withheld %d of %d candidates in %d/%s tokens (%s, %s); "
            "reasons: %s; kept ranks: %s",
            report.items_selected,
            report.items_dropped,
            report.items_withheld,
            report.candidates,
            report.tokens_used,
            report.max_tokens,
            report.tokenizer_used,
            report.policy,
            ", ".join(f"{n} {r}" for r, n in sorted(report.reasons.items())) or "none",
            list(result.selected_ranks),
            extra={"recallpack": result.to_event()},
        )
    budget = report.max_tokens
    if (
        budget
        and report.largest_dropped_chars
        and report.tokens_used < budget * _UNFILLED_SHARE
        and logger.isEnabledFor(logging.WARNING)
    ):
        fix = (
            "policy='skip' passes over an item that does not fit and policy='truncate' cuts it; "
            if report.policy == "prefix"
            else ""
        )
        logger.warning(
            "recall used %d of %d tokens (%s), and candidates that did not fit: %d (the largest "
            "reached has %s characters); %ssplit long documents with split_token_windows so their "
            "chunks fit",
            report.tokens_used,
            budget,
            report.policy,
            report.did_not_fit,
            f"{report.largest_dropped_chars:,}",
            fix,
        )
