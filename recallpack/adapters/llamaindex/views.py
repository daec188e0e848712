"""What a LlamaIndex synthesizer shows its LLM of the kept nodes, in each response mode: the view
:class:`~recallpack.adapters.llamaindex.BudgetPostprocessor` prices its nodes by.

The walk calls it (it is the Packer's ``join``) while the postprocessor's pack is on the stack,
so it lives apart from the translation of nodes (``nodes.py``): it only returns
strings and calls nothing of recallpack's but the tokenizer.
"""

from __future__ import annotations

from collections.abc import Sequence

from recallpack.packing.tokenizers import TokenizerSpec, get_tokenizer

__all__ = ["EveryModeView", "compact_view", "simple_summarize_view"]


def compact_view(texts: Sequence[str]) -> str:
    """What compact, tree_summarize, compact_accumulate (PromptHelper.repack) and the context chat
    engine show: the stripped texts joined by a blank line."""
    return "\n\n".join(t.strip() for t in texts if t.strip())


def simple_summarize_view(texts: Sequence[str]) -> str:
    """What simple_summarize shows: it joins the texts with "\\n" and passes the one-item list
    from PromptHelper.truncate as context_str, so the prompt holds the list's str(): quoted, with
    escaped newlines."""
    return str(["\n".join(texts)])


class EveryModeView:
    """The context as the LLM sees it in whichever response mode the engine runs, which a node
    postprocessor cannot know: the longest, by this tokenizer, of compact's view,
    simple_summarize's, and each node alone (refine and accumulate repack each node by itself,
    stripped as compact strips it). Budgeting it bounds what every mode shows.

    With a tiktoken encoding, compact's count is the sum of its stripped parts' (each starts a
    pre-token), so a node alone never counts more and is not counted again."""

    def __init__(self, tokenizer: TokenizerSpec) -> None:
        self.tokenizer = get_tokenizer(tokenizer)
        self._parts_add_up = self.tokenizer.splits_at_line_starts

    def __call__(self, texts: Sequence[str]) -> str:
        views = [compact_view(texts), simple_summarize_view(texts)]
        if not self._parts_add_up:
            views += [t.strip() for t in texts]
        return max(views, key=self.tokenizer.count)

    @staticmethod
    def item_view(text: str) -> str:
        """One text as it appears in the view that is usually longest, simple_summarize's."""
        return repr(text)[1:-1]
