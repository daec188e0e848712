"""Moved to :mod:`recallpack.testing`; kept so existing imports go on working."""

from __future__ import annotations

from recallpack.testing import hashed_bag_of_words, paragraphs, source_paragraphs, stdlib_docs

__all__ = ["stdlib_docs", "paragraphs", "source_paragraphs", "hashed_bag_of_words"]
