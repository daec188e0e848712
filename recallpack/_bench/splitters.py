"""Splitter section of ``python -m recallpack.bench``: token windows against the hosts' own
token splitters, on the same text in the same run.

The text is the standard library's module docstrings joined (real prose and code, some
non-ASCII, on every machine). Each splitter cuts it into chunks of at most 300 cl100k_base
tokens with 30 tokens of overlap. Rounds run every splitter in turn and each keeps its best
time, so the machine's speed (and a busy moment) cancels out of the ratios. The lines also
say what each splitter's chunks are: how many count over 300 when counted again, and how many
contain a character broken by the cut (a U+FFFD the text does not have), which recallpack's
windows never do. A host that is not installed is skipped.
"""

from __future__ import annotations

from collections.abc import Callable

from recallpack._bench.timing import timed
from recallpack.packing.counting.windows import token_windows
from recallpack.packing.tokenizers import TiktokenTokenizer, get_tokenizer
from recallpack.testing import stdlib_docs

__all__ = ["run"]

MAX_TOKENS = 300
OVERLAP = 30
REPEAT = 7


def _langchain(encoding: object) -> dict[str, Callable[[str], list[str]]]:
    from langchain_text_splitters import TokenTextSplitter as LangChainSplitter

    from recallpack.adapters.langchain.splitter import TokenWindowSplitter

    # tiktoken keeps the encoding recallpack resolved, so this loads nothing from disk.
    lc = LangChainSplitter(encoding_name="cl100k_base", chunk_size=MAX_TOKENS, chunk_overlap=OVERLAP)
    return {
        "LangChain TokenTextSplitter": lc.split_text,
        "recallpack TokenWindowSplitter": TokenWindowSplitter(MAX_TOKENS, OVERLAP).split_text,
    }


def _llamaindex(encoding: object) -> dict[str, Callable[[str], list[str]]]:
    from llama_index.core.node_parser import TokenTextSplitter as LlamaSplitter

    from recallpack.adapters.llamaindex.splitter import TokenWindowNodeParser

    encode = encoding.encode  # type: ignore[attr-defined]
    li = LlamaSplitter(chunk_size=MAX_TOKENS, chunk_overlap=OVERLAP, tokenizer=encode)
    parser = TokenWindowNodeParser(max_tokens=MAX_TOKENS, overlap_tokens=OVERLAP)
    return {
        "LlamaIndex TokenTextSplitter": li.split_text,
        "recallpack TokenWindowNodeParser": parser.split_text,
    }


def _splitters(encoding: object) -> tuple[dict[str, Callable[[str], list[str]]], list[str]]:
    """The hosts' token splitters that are installed, and a line for each that is not."""
    found: dict[str, Callable[[str], list[str]]] = {}
    skipped = []
    for host, splitters_of in (("langchain", _langchain), ("llamaindex", _llamaindex)):
        try:
            found.update(splitters_of(encoding))
        except ImportError as exc:
            skipped.append(f"  {host}: skipped ({exc})")
    return found, skipped


def run(repeat: int = REPEAT) -> list[str]:
    """Printable lines: each splitter's time on the same text, and recallpack's as a ratio."""
    tokenizer = get_tokenizer("cl100k_base")
    if not isinstance(tokenizer, TiktokenTokenizer):
        return ["splitters: skipped, cl100k_base does not resolve exactly here (see `recallpack doctor`)"]
    text = "\n\n".join(doc for _, doc in stdlib_docs())
    hosts, skipped = _splitters(tokenizer.encoding)
    splitters: dict[str, Callable[[str], list[str]]] = {
        "recallpack token_windows": lambda t: [w.text for w in token_windows(t, MAX_TOKENS, OVERLAP)],
        **hosts,
    }
    splitters["recallpack token_windows"](text)  # warm: the encoding's token table is built once
    mb = len(text.encode("utf-8")) / 1e6
    lines = [
        f"splitters: {mb:.2f} MB of stdlib docstrings, chunks of <= {MAX_TOKENS} cl100k_base tokens, "
        f"overlap {OVERLAP}; best of {repeat} runs",
        f"  {'splitter':<34} {'time':>9} {'MB/s':>7} {'chunks':>7} {'over':>5} {'broken':>7}",
    ]
    # Rounds take every splitter in turn, so a busy moment of the machine hits all of them.
    times = dict.fromkeys(splitters, float("inf"))
    chunks: dict[str, list[str]] = {}
    for _ in range(repeat):
        for name, split in splitters.items():
            seconds, chunks[name] = timed(split, text)
            times[name] = min(times[name], seconds)
    for name, seconds in times.items():
        over = sum(tokenizer.count(chunk) > MAX_TOKENS for chunk in chunks[name])
        broken = sum("\ufffd" in chunk for chunk in chunks[name]) if "\ufffd" not in text else 0
        row = f"{seconds * 1e3:>7.1f}ms {mb / seconds:>7.2f} {len(chunks[name]):>7} {over:>5} {broken:>7}"
        lines.append(f"  {name:<34} {row}")
    pairs = (
        ("recallpack TokenWindowSplitter", "LangChain TokenTextSplitter"),
        ("recallpack TokenWindowNodeParser", "LlamaIndex TokenTextSplitter"),
    )
    for ours, theirs in pairs:
        if ours in times and theirs in times:
            lines.append(f"  {ours} / {theirs}: {times[ours] / times[theirs]:.2f}x the time")
    return lines + skipped


if __name__ == "__main__":
    print("\n".join(run()))
