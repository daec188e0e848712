"""``python -m recallpack.bench``: what packing costs, as ratios against a baseline in one run.

The baseline is what a framework does when it caps documents by tokens after the fact (as
LangChain's ``max_tokens_limit`` does): count every candidate, then cut. recallpack's walk
counts only what it reaches. Texts are made unique per repetition so no count cache helps.

    python -m recallpack.bench            # everything, adapters included when installed
    python -m recallpack.bench --core     # the packer only
    python -m recallpack.bench --check    # exit 1 if a target is missed
    python -m recallpack.bench --check --quick  # only the targets, short and noise-aware (CI)
    python -m recallpack.bench --quality  # does the answer survive? SQuAD questions, every policy
    python -m recallpack.bench --quality --languages [ar,zh,...]  # the same in 12 languages (XQuAD)
    python -m recallpack.bench --small-budgets [en-squad,el,...]  # budgets under one paragraph, 13 languages
    python -m recallpack.bench --memory   # agent memory: a LangGraph store's search(limit=k) vs packing
    python -m recallpack.bench --docs-search [--languages ar,zh] [--client inprocess]  # serve --docs
"""

from __future__ import annotations

import argparse
import functools
import importlib
from collections.abc import Callable, Collection, Sequence
from itertools import accumulate, count
from pathlib import Path

from recallpack._bench import guard
from recallpack._bench.languages import LANGUAGES, SHAPES
from recallpack._bench.timing import best_time
from recallpack.packing.batch import resident_bytes, usable_cores
from recallpack.packing.candidate import Candidate
from recallpack.packing.counting.windows import split_token_windows
from recallpack.packing.packer import pack, recall, recall_many
from recallpack.packing.progress import Advance, progress
from recallpack.packing.tokenizers import TiktokenTokenizer, get_tokenizer
from recallpack.testing import stdlib_docs

MAX_TOKENS = 2048
SIZES = (100, 1_000, 10_000, 100_000)
#: The sections after the core, in order: each a module of recallpack._bench with a run().
SECTIONS = ("cuts", "growth", "langchain", "langgraph", "llamaindex", "splitters", "ray")
_run_ids = count()


def _windows() -> list[str]:
    """About-300-token windows of real text."""
    text = "\n\n".join(doc for _, doc in stdlib_docs())
    return split_token_windows(text, 300, 0, "cl100k_base")


def _candidates(windows: Sequence[str], n: int) -> list[Candidate]:
    run = next(_run_ids)  # a fresh prefix per call: every text is new to every cache
    return [Candidate(text=f"[{run}.{i}] {windows[i % len(windows)]}") for i in range(n)]


def _baseline(candidates: Sequence[Candidate], tokenizer: TiktokenTokenizer) -> list[Candidate]:
    """Count every candidate, then keep the prefix that fits."""
    counts = [len(tokenizer.encoding.encode_ordinary(c.text)) + 1 for c in candidates]
    return [c for c, total in zip(candidates, accumulate(counts)) if total <= MAX_TOKENS]


def _against_kept_texts(
    windows: Sequence[str], tokenizer: TiktokenTokenizer, repeat: int
) -> dict[tuple[str, bool], float]:
    """Best times of pack and recall on 1,000 candidates and of encoding only the texts they
    keep, as timeit times (False) and after a full collection (True). Runs of about a
    millisecond: many of them, each side in turn, so that load hits all of them alike."""

    def kept_only(candidates: list[Candidate]) -> int:
        # The least any exact packer must do: encode the texts it keeps and the one that ends it.
        total = 0
        for c in candidates:
            total += len(tokenizer.encoding.encode_ordinary(c.text)) + 1
            if total > MAX_TOKENS:
                break
        return total

    sides: dict[str, Callable[[list[Candidate]], object]] = {
        "kept": kept_only,
        "pack": lambda c: pack(c, MAX_TOKENS),
        "recall": lambda c: recall(c, max_tokens=MAX_TOKENS),
    }
    best = {(name, collect): float("inf") for name in sides for collect in (False, True)}
    for _ in range(6 * repeat):  # each run is short: more of them, for steadier minima
        for name, collect in best:
            run = best_time(sides[name], [_candidates(windows, 1_000)], collect=collect)
            best[name, collect] = min(best[name, collect], run)
    return best


def _recall_many_ratio(windows: Sequence[str], repeat: int) -> tuple[str, float]:
    """recall_many against a loop of recall on 1,000 lists of 50, and the line that says so.

    Both sides get fresh batches of the same shape, in alternating runs so that load from
    elsewhere hits both alike; the best of each counts."""
    loop = many = float("inf")
    held = 0
    cores = usable_cores()  # asked for: by default recall_many is the loop
    for _ in range(repeat):
        batch = [_candidates(windows, 50) for _ in range(1_000)]
        loop = min(loop, best_time(lambda lists: [recall(c, max_tokens=MAX_TOKENS) for c in lists], [batch]))
        batch = [_candidates(windows, 50) for _ in range(1_000)]
        held = max(held, resident_bytes())
        forked = best_time(lambda lists: recall_many(lists, max_tokens=MAX_TOKENS, workers=cores), [batch])
        many = min(many, forked)
        del batch
    return (
        f"  recall_many(workers={cores}) on 1,000 lists of 50 (a {held / 2**20:.0f} MB process): "
        f"{many * 1e3:.0f}ms, a loop of recall {loop * 1e3:.0f}ms ({loop / many:.2f}x)",
        loop / many,
    )


def core(repeat: int = 5) -> tuple[list[str], dict[str, tuple[float, float, bool]]]:
    tokenizer = get_tokenizer("cl100k_base")
    assert isinstance(tokenizer, TiktokenTokenizer), "cl100k_base must resolve exactly to benchmark"
    windows = _windows()
    lines = [
        f"core: recall(max_tokens={MAX_TOKENS}, cl100k_base) vs count-everything-then-cut baseline",
        f"  candidates of ~300 tokens of stdlib docstrings; best of {repeat} runs, new texts each run",
        f"  {'candidates':>10}  {'recall':>10}  {'baseline':>10}  {'speedup':>8}",
    ]
    # First, while the process holds what a batch job's would (the library, its tokenizer, the
    # batches): the size table below leaves hundreds of MB behind, and every fork copies the
    # page tables of all of it (docs/scaling.md measures that cost).
    many_line, many_ratio = _recall_many_ratio(windows, repeat)
    recall_time: dict[int, float] = {}
    for n in SIZES:
        fresh = [_candidates(windows, n) for _ in range(repeat)]
        recall_time[n] = best_time(lambda c: recall(c, max_tokens=MAX_TOKENS), fresh)
        base_runs = fresh[:1] if n >= 100_000 else fresh  # the baseline at 100,000 takes seconds
        base = best_time(lambda c: _baseline(c, tokenizer), base_runs)
        # Not kept alive into the next timings: half a million dead candidates would make
        # every collection before a run walk them, and leave the caches cold for what follows.
        del fresh, base_runs
        ratio = base / recall_time[n]
        lines.append(f"  {n:>10,}  {recall_time[n] * 1e3:>8.2f}ms  {base * 1e3:>8.1f}ms  {ratio:>7.0f}x")
        if n == 1_000:
            speedup_1k = ratio

    def huge_head() -> list[Candidate]:
        head = Candidate(text=f"[{next(_run_ids)}] " + "lorem ipsum dolor sit amet " * 400_000)
        return [head, *_candidates(windows, 1_000)]

    kept = _against_kept_texts(windows, tokenizer, repeat)
    walk_ratio = kept["pack", False] / kept["kept", False]
    kept_ratio = kept["recall", False] / kept["kept", False]
    lines.append(
        f"  encoding only the kept texts of 1,000: {kept['kept', False] * 1e3:.2f}ms; pack (the prefix walk) "
        f"{walk_ratio:.2f}x that, recall (the rendered block) {kept_ratio:.2f}x"
    )
    cold = {name: kept[name, True] / kept["kept", True] for name in ("pack", "recall")}
    lines.append(
        f"    after a full collection (cold caches): {kept['kept', True] * 1e3:.2f}ms; "
        f"pack {cold['pack']:.2f}x, recall {cold['recall']:.2f}x"
    )
    lines.append(many_line)
    huge = best_time(lambda c: recall(c, max_tokens=MAX_TOKENS), [huge_head() for _ in range(repeat)])
    lines.append(f"  10 MB text at the head of 1,000: {huge * 1e3:.2f}ms")
    scale = recall_time[100_000] / recall_time[1_000]
    head_ratio = huge / recall_time[1_000]
    targets = {
        "speedup over baseline at 1,000 (>= 50x)": (speedup_1k, 50.0, speedup_1k >= 50),
        "time at 100,000 / time at 1,000 (<= 2x)": (scale, 2.0, scale <= 2),
        "10 MB head / normal list of 1,000 (<= 5x)": (head_ratio, 5.0, head_ratio <= 5),
        "pack (the prefix walk) / encoding only the kept texts (<= 1.1x)": (
            walk_ratio,
            1.1,
            walk_ratio <= 1.1,
        ),
        # The rendered block holds more tokens than the raw texts (labels, indentation), and its
        # last item is counted again without its joining newline: that is most of the gap.
        "recall / encoding only the kept texts (<= 1.3x)": (kept_ratio, 1.3, kept_ratio <= 1.3),
        # Forked workers on 2 cores (docs/scaling.md): fork, pickling and copy-on-write cost
        # about a tenth of the work, so 2x is out of reach, 1.6x is not.
        "recall_many / loop of recall (>= 1.6x)": (many_ratio, 1.6, many_ratio >= 1.6),
    }
    return lines, targets


# -- the quick check of the targets (--check --quick; the mechanism is _bench/guard.py) ----------

#: Runs per timing in the quick core checks (the full bench takes 5).
GUARD_REPEAT = 3


@functools.cache
def _guard_windows() -> tuple[str, ...]:
    """The core checks' texts, cut once per process (seconds of tokenizer work)."""
    return tuple(_windows())


def _exact_tokenizer() -> TiktokenTokenizer:
    tokenizer = get_tokenizer("cl100k_base")
    assert isinstance(tokenizer, TiktokenTokenizer), "cl100k_base must resolve exactly to benchmark"
    return tokenizer


def _walk_figures() -> dict[str, float]:
    """pack and recall of 1,000 candidates against encoding only the texts they keep."""
    kept = _against_kept_texts(_guard_windows(), _exact_tokenizer(), GUARD_REPEAT)
    return {
        "pack / kept texts": kept["pack", False] / kept["kept", False],
        "recall / kept texts": kept["recall", False] / kept["kept", False],
    }


def _scale_figures() -> dict[str, float]:
    """recall at 1,000 candidates against the baseline, at 100,000 and with a 10 MB head, each
    run in turn so that load hits all of them alike."""
    tokenizer, windows = _exact_tokenizer(), _guard_windows()

    def packed(candidates: list[Candidate]) -> object:
        return recall(candidates, max_tokens=MAX_TOKENS)

    def huge_head() -> list[Candidate]:
        head = Candidate(text=f"[{next(_run_ids)}] " + "lorem ipsum dolor sit amet " * 400_000)
        return [head, *_candidates(windows, 1_000)]

    # A run of about a millisecond is the likeliest to be cut by another process: the short ones
    # are taken more often than the long ones, whose fresh lists cost a second to build.
    best = dict.fromkeys(("1k", "100k", "base", "head"), float("inf"))
    for _ in range(GUARD_REPEAT):
        short = [_candidates(windows, 1_000) for _ in range(2 * GUARD_REPEAT)]
        best["1k"] = min(best["1k"], best_time(packed, short))
        best["100k"] = min(best["100k"], best_time(packed, [_candidates(windows, 100_000)]))
        base = best_time(lambda c: _baseline(c, tokenizer), [_candidates(windows, 1_000)])
        best["base"] = min(best["base"], base)
        best["head"] = min(best["head"], best_time(packed, [huge_head() for _ in range(2)]))
    return {
        "speedup over the baseline at 1,000": best["base"] / best["1k"],
        "time at 100,000 / at 1,000": best["100k"] / best["1k"],
        "10 MB head / a list of 1,000": best["head"] / best["1k"],
    }


def _batch_figures() -> dict[str, float]:
    """recall_many with a worker per core against a loop; nothing on one core."""
    if usable_cores() < 2:
        return {}
    # Best of three runs a side: two forked workers need both cores free, and a CI rehearsal
    # read 1.13 once where other runs read 1.4 to 1.9 (the check's retry then passed it).
    return {"recall_many / a loop": _recall_many_ratio(_guard_windows(), 3)[1]}


def guard_checks() -> list[guard.Check]:
    """Every target of the bench as a check: the core's here, the sections' from their modules."""
    return [
        guard.Check("core walk", _walk_figures, (
            guard.Target("pack / kept texts", 1.1, limit=1.6),
            guard.Target("recall / kept texts", 1.3, limit=1.9),
        )),
        guard.Check("core scale", _scale_figures, (
            guard.Target("speedup over the baseline at 1,000", 50.0, at_least=True, limit=40.0),
            guard.Target("time at 100,000 / at 1,000", 2.0),
            guard.Target("10 MB head / a list of 1,000", 5.0, limit=20.0),
        )),
        guard.Check("core batch", _batch_figures, (
            # Met at 1.76x and missed at 1.60x in two CI rehearsals: two workers on two cores.
            guard.Target("recall_many / a loop", 1.6, at_least=True, limit=1.25),
        )),
        *guard.section_checks(),
    ]


def _articles(value: str) -> range:
    """``--articles 1-6`` as the positions of those articles (0 to 5)."""
    first, _, last = value.partition("-")
    try:
        span = range(int(first) - 1, int(last or first))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r}: give FIRST-LAST, as 1-6") from None
    if not 0 <= span.start < span.stop <= 12:
        raise argparse.ArgumentTypeError(f"{value!r}: the articles are 1 to 12, first before last")
    return span


def _codes(value: str, known: Collection[str], what: str) -> tuple[str, ...]:
    """A comma list of names, each one of ``known``; an unknown one is named with the choices."""
    codes = tuple(code.strip() for code in value.split(","))
    unknown = [code for code in codes if code not in known]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown {what} {', '.join(map(repr, unknown))}: give a comma list of {','.join(known)}"
        )
    return codes


def _languages(value: str) -> tuple[str, ...]:
    """``--languages zh,th`` as those codes, each one XQuAD has."""
    return _codes(value, LANGUAGES, "language")


def _small_languages(value: str) -> tuple[str, ...]:
    """``--small-budgets en-squad,th`` as those codes: SQuAD's English or an XQuAD language."""
    from recallpack._bench.small_budgets import LANGUAGES as SMALL

    return _codes(value, SMALL, "language")


def _shapes(value: str) -> tuple[str, ...]:
    """``--shapes articles`` as shape names of the languages section."""
    return _codes(value, SHAPES, "shape")


def _budgets(value: str) -> tuple[int, ...]:
    """``--budgets 256,1024`` as positive token budgets."""
    try:
        budgets = tuple(int(budget) for budget in value.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r}: give budgets, comma-separated, as 256,1024") from None
    if not all(budget > 0 for budget in budgets):
        raise argparse.ArgumentTypeError(f"{value!r}: every budget must be a positive number of tokens")
    return budgets


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m recallpack.bench", description=__doc__.split("\n")[0])
    parser.add_argument("--core", action="store_true", help="only the packer, not the adapters")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument(
        "--quick", action="store_true",
        help="only the ratios that have a target, each the best of a few runs and measured again "
        "before it counts as missed (about a minute; what CI runs with --check)",
    )
    parser.add_argument(
        "--quality", action="store_true",
        help="only the quality section: how often the answer survives packing, on SQuAD questions",
    )
    parser.add_argument(
        "--questions", type=int, default=600, metavar="N",
        help="questions the quality section asks, spread over the articles (0: all 3,320; with "
        "--languages, a language: 361 is all)",
    )
    parser.add_argument("--markdown", action="store_true", help="the quality table as Markdown too")
    parser.add_argument(
        "--memory", action="store_true",
        help="only the memory section: MemoryBank questions through a LangGraph store, search(limit=k) "
        "against packing at three budgets",
    )
    parser.add_argument(
        "--progress", action="store_true",
        help="a bar on stderr of the questions asked, or of the sections run (tqdm's; default: none)",
    )
    parser.add_argument(
        "--articles", type=_articles, default=None, metavar="FIRST-LAST",
        help="ask only the questions of articles FIRST to LAST (1 to 12; the retriever still reads "
        "all 12): does a result hold on other articles than it was tuned on? (default: all)",
    )
    parser.add_argument(
        "--languages", type=_languages, nargs="?", const=LANGUAGES, default=None, metavar="LANGS",
        help="the quality section in other languages instead (XQuAD): a comma list of "
        f"{','.join(LANGUAGES)} (default: all 12)",
    )
    parser.add_argument(
        "--shapes", type=_shapes, default=None, metavar="SHAPES",
        help="with --languages: paragraphs, articles or both, comma-separated (default: both)",
    )
    parser.add_argument(
        "--budgets", type=_budgets, default=None, metavar="N,N",
        help="with --languages: these token budgets for every shape (default: 256,512,1024 over "
        "paragraphs and 512,1024,2048 over articles)",
    )
    parser.add_argument(
        "--json", type=Path, default=None, metavar="PATH",
        help="with --languages or --small-budgets: write every cell, and which questions kept their "
        "answer, to PATH",
    )
    parser.add_argument(
        "--small-budgets", type=_small_languages, nargs="?", const=(), default=None, metavar="LANGS",
        help="only the small-budgets section: paragraphs at 0.25 to 1.5 times the mean paragraph, prefix "
        "against passages, in English (en-squad) and XQuAD's 12 languages (default: all 13); --json too",
    )
    parser.add_argument(
        "--docs-search", action="store_true",
        help="only the serve --docs section: the dev articles as files, asked through the MCP "
        "client, answer kept %% in every language (--languages: only those, without SQuAD's English)",
    )
    parser.add_argument(
        "--client", choices=("stdio", "inprocess"), default="stdio",
        help="with --docs-search: the MCP SDK's client over stdio, or the server's recall in process",
    )
    args = parser.parse_args(argv)
    if args.quick and (args.quality or args.languages is not None or args.core):
        parser.error("--quick runs the targets of every section: leave out --quality, --languages and --core")
    if args.docs_search:
        from recallpack._bench import docs_search

        lines = docs_search.run(
            args.languages or LANGUAGES, limit=args.questions or None, client=args.client,
            squad=args.languages is None, as_markdown=args.markdown, json_path=args.json,
        )
        print("\n".join(lines))
        return 1 if args.check and any("MISS" in line for line in lines) else 0
    if args.small_budgets is not None:
        from recallpack._bench import small_budgets

        lines = small_budgets.run(
            args.small_budgets or small_budgets.LANGUAGES,
            limit=args.questions or None,
            as_markdown=args.markdown,
            json_path=args.json,
        )
        print("\n".join(lines))
        return 1 if args.check and any("MISS" in line for line in lines) else 0
    if args.languages is None and (args.shapes or args.budgets or args.json):
        parser.error("--shapes, --budgets and --json need --languages")
    if args.languages is not None:
        from recallpack._bench import languages

        lines = languages.run(
            args.languages,
            args.shapes or tuple(SHAPES),
            args.budgets,
            limit=args.questions or None,
            as_markdown=args.markdown,
            json_path=args.json,
            show_progress=args.progress,
        )
        print("\n".join(lines))
        return 1 if args.check and any("MISS" in line for line in lines) else 0
    if args.quick:
        print("bench targets, quick: best of a few runs each, a miss measured once more")
        passed = guard.run_checks(guard_checks())
        return 1 if args.check and not passed else 0
    if args.memory:
        from recallpack._bench import memory

        lines = memory.run()
        print("\n".join(lines))
        return 1 if args.check and any("MISS" in line for line in lines) else 0
    if args.quality:
        from recallpack._bench import quality

        lines = quality.run(
            limit=args.questions or None,
            as_markdown=args.markdown,
            only=args.articles,
            show_progress=args.progress,
        )
        print("\n".join(lines))
        return 1 if args.check and any("MISS" in line for line in lines) else 0

    sections = () if args.core else SECTIONS
    with progress(1 + len(sections), "bench: sections", args.progress) as advance:
        missed = _run_sections(args.repeat, sections, advance)
    if args.check and missed:
        return 1
    return 0


def _run_sections(repeat: int, sections: Sequence[str], advance: Advance) -> list[str]:
    """Print the core section and then each of ``sections``, telling ``advance`` of each; the
    targets missed."""
    lines, targets = core(repeat)
    print("\n".join(lines))
    missed = [name for name, (_, _, ok) in targets.items() if not ok]
    print("\ntargets:")
    for name, (value, _, ok) in targets.items():
        print(f"  {'ok  ' if ok else 'MISS'} {name}: {value:.2f}")
    advance(1)
    for section in sections:
        print()
        try:
            module = importlib.import_module(f"recallpack._bench.{section}")
        except ImportError as exc:
            print(f"{section}: skipped ({exc})")
        else:
            for line in module.run():
                print(line)
                if "MISS" in line:
                    missed.append(line)
        advance(1)
    return missed


if __name__ == "__main__":
    raise SystemExit(main())
