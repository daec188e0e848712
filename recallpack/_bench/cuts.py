"""Cuts section of ``python -m recallpack.bench``: what cutting one long text costs.

The baseline is what any token-aware step pays at least once: tiktoken encoding the text.
- ``cut_focus`` of a ~1 MB document (distinct paragraphs of the standard library's own source)
  to 280 tokens, for a known-item query (a line from the middle, every third word dropped) and
  for a query of common words (the many matches are the expensive case), against one
  ``encode_ordinary`` of the same document. Target: below 1, the cut reads the text once.
- ``cut_head`` of a 10 MB text against one ``encode_ordinary`` of it: the head cut's work is
  bounded by the room, so the ratio is tiny and shrinks as the text grows.
- ``cut_focus`` of adversarial texts and queries (the query is end-user input), each against one
  ``encode_ordinary`` of the same text: a dotted capital I (whose lower case is longer) in 1 MB
  with a 1,000-word query, every word a match, words sharing every query term as a suffix, a
  10,000-word query, a 1 MB query word, a line per word, a sentence per letter, a text without a
  space. Target: the worst below 3x.

Every run gets a fresh tokenizer (an empty count cache), so no count carries over between runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from recallpack._bench.timing import best_time, interleaved_best
from recallpack.packing.choosing.cuts import cut_focus, cut_head
from recallpack.packing.tokenizers import TiktokenTokenizer, get_tokenizer
from recallpack.testing import source_paragraphs

if TYPE_CHECKING:
    import tiktoken

__all__ = ["run", "measure"]

ROOM = 280
DOCUMENT_CHARS = 1_000_000
HEAD_CHARS = 10_000_000
REPEAT = 5
FOCUS_TARGET = 1.0
HEAD_TARGET = 0.05
ADVERSARIAL_TARGET = 3.0
ADVERSARIAL_CHARS = 1_000_000


def _best(fn: Callable[[TiktokenTokenizer], object], encoding: tiktoken.Encoding, repeat: int) -> float:
    """Best wall time of ``fn`` over ``repeat`` runs; each run gets a tokenizer of its own, made
    (and its longest-token size read) before the clock starts."""
    tokenizers = [TiktokenTokenizer(encoding) for _ in range(repeat)]
    for tokenizer in tokenizers:
        _ = tokenizer.max_token_bytes
    return best_time(fn, tokenizers)


def _document() -> str:
    paragraphs: list[str] = []
    size = 0
    for _, _, paragraph in source_paragraphs(60_000):
        paragraphs.append(paragraph)
        size += len(paragraph) + 2
        if size >= DOCUMENT_CHARS:
            break
    return "\n\n".join(paragraphs)


def _known_item(document: str) -> tuple[str, str]:
    """A line from the middle of the document with at least eight words, and it as a query
    with every third word dropped."""
    middle = len(document) // 2
    for line in document[middle:].splitlines()[1:]:
        words = line.split()
        if len(words) >= 8:
            return line.strip(), " ".join(w for i, w in enumerate(words) if i % 3 != 2)
    return "", "return the value"


def _adversarial(chars: int = ADVERSARIAL_CHARS) -> list[tuple[str, str, str]]:
    """(what, text, query): texts and queries chosen to make a focus cut do the most work, the
    texts of ``chars`` characters and the long queries scaled with them (1 MB: as named)."""
    words = [f"w{i}x" for i in range(64)]
    shared = "a" * 16
    scale = chars / ADVERSARIAL_CHARS

    def repeated(unit: str) -> str:
        return unit * (chars // len(unit))

    return [
        ("dotted capital I, 1,000-word query", "\u0130 " + repeated("ab cd "),
         " ".join(f"ab{i}" for i in range(round(1_000 * scale)))),
        ("every word a match", repeated("a "), "a"),
        ("every query term a suffix of every word", repeated(shared + " "),
         " ".join(shared[i:] for i in range(16))),
        ("64 terms, every word a match", repeated(" ".join(words) + ". "), " ".join(words)),
        ("10,000-word query", repeated("the value of the name. "),
         "value " + " ".join(f"q{i}" for i in range(round(10_000 * scale)))),
        ("a 1 MB query word", repeated("the value of the name. "), "value " + "v" * chars),
        ("a line per word", repeated("value\n"), "value"),
        ("a sentence per letter", repeated("a. b. "), "a b"),
        ("no space, no break", repeated("value"), "value"),
    ]  # fmt: skip


def _adversarial_lines(
    encoding: tiktoken.Encoding, chars: int = ADVERSARIAL_CHARS, repeat: int = REPEAT
) -> tuple[list[str], float]:
    """Each adversarial focus cut against encoding its text once, and the worst ratio. The two
    run in turns, each the best of ``repeat``: some take a few milliseconds, and a busy spell
    of the machine then weighs on both alike."""
    size = "1 MB" if chars == ADVERSARIAL_CHARS else f"{chars:,} characters"
    lines = [f"  adversarial focus cuts to {ROOM} tokens, {size} each, vs encode_ordinary of the same text:"]
    cases = _adversarial(chars)
    tokenizer = TiktokenTokenizer(encoding)

    def fresh() -> None:  # an empty count cache for every run, made before the clock starts
        nonlocal tokenizer
        tokenizer = TiktokenTokenizer(encoding)
        _ = tokenizer.max_token_bytes

    def encoded(case: tuple[str, str]) -> object:
        return encoding.encode_ordinary(case[0])

    def focused(case: tuple[str, str]) -> object:
        return cut_focus(case[0], case[1], ROOM, tokenizer)

    pairs = [(text, query) for _, text, query in cases]
    encodes, focuses = interleaved_best(pairs, [encoded, focused], repeat, fresh)
    worst = 0.0
    for (what, _, _), encode, focus in zip(cases, encodes, focuses, strict=True):
        worst = max(worst, focus / encode)
        lines.append(f"    {what:<42} {focus * 1e3:8.1f} ms  {focus / encode:5.2f}x")
    verdict = "ok" if worst < ADVERSARIAL_TARGET else "MISS"
    lines.append(
        f"  {verdict:<4} cut_focus adversarial text and query / encode the text, worst: {worst:.2f}"
        f" (target < {ADVERSARIAL_TARGET})"
    )
    return lines, worst


def measure(chars: int = ADVERSARIAL_CHARS, repeat: int = REPEAT) -> tuple[list[str], dict[str, float]]:
    """The adversarial cuts alone (what the CI guard checks), over texts of ``chars`` characters:
    their lines and the worst ratio (``"adversarial"``); none when cl100k_base is not exact."""
    base = get_tokenizer("cl100k_base")
    if not isinstance(base, TiktokenTokenizer):
        return ["cuts: skipped, cl100k_base does not resolve exactly here"], {}
    lines, worst = _adversarial_lines(base.encoding, chars, repeat)
    return lines, {"adversarial": worst}


def run() -> list[str]:
    base = get_tokenizer("cl100k_base")
    if not isinstance(base, TiktokenTokenizer):
        return ["cuts: skipped, cl100k_base does not resolve exactly here"]
    encoding = base.encoding
    document = _document()
    answer, query = _known_item(document)
    common = "what is the value of the name in the list"

    encode = _best(lambda _: encoding.encode_ordinary(document), encoding, REPEAT)
    kept = cut_focus(document, query, ROOM, TiktokenTokenizer(encoding))
    focus = _best(lambda tok: cut_focus(document, query, ROOM, tok), encoding, REPEAT)
    focus_common = _best(lambda tok: cut_focus(document, common, ROOM, tok), encoding, REPEAT)

    huge = (document * (HEAD_CHARS // len(document) + 1))[:HEAD_CHARS]
    encode_huge = _best(lambda _: encoding.encode_ordinary(huge), encoding, 1)
    head = _best(lambda tok: cut_head(huge, ROOM, tok), encoding, REPEAT)

    found = kept is not None and answer in kept.text
    ratios = [
        ("cut_focus 1 MB, known-item query / encode 1 MB", focus / encode, FOCUS_TARGET),
        ("cut_focus 1 MB, common-word query / encode 1 MB", focus_common / encode, FOCUS_TARGET),
        ("cut_head 10 MB / encode 10 MB", head / encode_huge, HEAD_TARGET),
    ]
    lines = [
        f"cuts: one text cut to {ROOM} tokens (cl100k_base) vs tiktoken encoding it once; "
        f"best of {REPEAT}, a fresh tokenizer each run",
        f"  encode_ordinary 1 MB:  {encode * 1e3:8.1f} ms    10 MB: {encode_huge * 1e3:8.1f} ms",
        f"  cut_focus 1 MB:        {focus * 1e3:8.1f} ms    (common words: {focus_common * 1e3:.1f} ms;"
        f" the answer line {'kept' if found else 'NOT kept'})",
        f"  cut_head 10 MB:        {head * 1e3:8.1f} ms",
    ]
    for name, ratio, target in ratios:
        verdict = "ok" if ratio < target else "MISS"
        lines.append(f"  {verdict:<4} {name}: {ratio:.3f} (target < {target})")
    return lines + _adversarial_lines(encoding)[0]


if __name__ == "__main__":
    print("\n".join(run()))
