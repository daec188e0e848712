"""Rank the standard library's docstrings for a question, then pack the evidence into a token budget.

Offline and with nothing but recallpack installed: the corpus is the stdlib's own module
docstrings (from ``recallpack.testing``), the scorer is BM25 (written out below), and the
tokenizer is cl100k_base.

    python examples/stdlib_demo.py "how do I parse command line arguments" --max-tokens 1024
"""

from __future__ import annotations

import argparse
import math
import re
from collections import Counter

from recallpack import Candidate, RecallResult, recall
from recallpack.testing import paragraphs

WORD = re.compile(r"[a-z0-9]+")


def tokenize(text: str) -> list[str]:
    return WORD.findall(text.lower())


class BM25:
    """Okapi BM25 (k1=1.5, b=0.75) over a fixed list of texts."""

    def __init__(self, texts: list[str], k1: float = 1.5, b: float = 0.75) -> None:
        self.docs = [Counter(tokenize(t)) for t in texts]
        self.lengths = [sum(d.values()) for d in self.docs]
        self.average = sum(self.lengths) / len(self.docs)
        frequency = Counter(term for doc in self.docs for term in doc)
        n = len(self.docs)
        self.idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in frequency.items()}
        self.k1, self.b = k1, b

    def scores(self, query: str) -> list[float]:
        terms = tokenize(query)
        out = []
        for doc, length in zip(self.docs, self.lengths):
            norm = self.k1 * (1 - self.b + self.b * length / self.average)
            out.append(
                sum(self.idf.get(t, 0.0) * doc[t] * (self.k1 + 1) / (doc[t] + norm) for t in terms if t in doc)
            )
        return out


def main(query: str, max_tokens: int = 2048) -> str:
    corpus = paragraphs()
    scores = BM25([text for _, text in corpus]).scores(query)
    ranked = sorted(range(len(corpus)), key=lambda i: -scores[i])
    candidates = [
        Candidate(
            text=f"{corpus[i][0]}: {corpus[i][1]}",
            score=round(scores[i], 3),
            artifact_id=corpus[i][0],
            artifact_content_id=f"p{i}",
        )
        for i in ranked
        if scores[i] > 0
    ]
    # What was asked and with what budget comes first: the block below is long.
    print(f'question:   "{query}"')
    print(f"corpus:     {len(corpus)} paragraphs of the standard library's module docstrings, ranked by BM25")
    print(f"candidates: {len(candidates)} (the paragraphs that share a word with the question), best first")
    print(f"budget:     {max_tokens} tokens (cl100k_base) for the whole block, header and labels included")
    result = recall(candidates, max_tokens=max_tokens)
    block = result.to_markdown()
    print(f"\n{RULE} the evidence block: what the model reads {RULE}")
    print(block)
    print("---")
    print(result.report.summary())
    print(f"\n{RULE} what happened to each candidate the walk reached {RULE}")
    print(trace_table(result, candidates))
    return block


RULE = "=" * 12


def trace_table(result: RecallResult, candidates: list[Candidate]) -> str:
    """One row per reached candidate: its rank, fate, tokens, score, and which paragraph it is
    (module and paragraph id, and its first words; never the words of a withheld item)."""
    rows = [f"  {'rank':<5} {'outcome':<9} {'reason':<12} {'tokens':>6} {'score':>7}  document"]
    for entry in result.trace[: result.trace.reached]:
        candidate = candidates[entry.rank]
        document = f"{candidate.artifact_id} {candidate.artifact_content_id}"
        if entry.outcome.value != "withheld":
            words = candidate.text.split(": ", 1)[-1].split()
            document += '  "' + " ".join(words[:7]) + ('…"' if len(words) > 7 else '"')
        reason = entry.reason.value if entry.reason else ""
        rows.append(
            f"  #{entry.rank:<4} {entry.outcome.value:<9} {reason:<12} {entry.tokens or '':>6} "
            f"{entry.score:>7}  {document}"
        )
    unreached = len(result.trace) - result.trace.reached
    if unreached:
        rows.append(f"  ... and {unreached} more, never reached: the walk had ended ({result.trace[-1].reason})")
    return "\n".join(rows)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "query", nargs="*", help='the question, in words (default: "how do I parse command line arguments")'
    )
    parser.add_argument("--max-tokens", type=int, default=2048, help="the budget (default: %(default)s)")
    args = parser.parse_args()
    main(" ".join(args.query) or "how do I parse command line arguments", max_tokens=args.max_tokens)
