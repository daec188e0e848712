"""recall_many on several processes: the results, the first error and the process's state are a
loop's, whichever path it takes."""

from __future__ import annotations

import os
import re
import select
import signal
import threading
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recallpack import (
    Candidate,
    CandidateError,
    ConfigError,
    Packer,
    Reader,
    RecallpackWarning,
    RecallResult,
    Scope,
    TokenizerError,
    recall_many,
)
from recallpack.packing import batch
from recallpack.testing import paragraphs

TEXTS = [text for _, text in paragraphs()][:300]
READER = Reader(id="me", scopes={"org": Scope(name="team", description="the team's notes")})
QUERIES = ["parse the command line arguments", "read a file line by line", None, "sort a list"]
TEMPLATE = "{% for e in evidence %}* [{{ e.label }}] {{ e.text }}\n{% endfor %}"


def lists(n: int, size: int = 30) -> list[list[Candidate]]:
    """``n`` candidate lists of real paragraphs, each in another order, some of them scoped."""
    return [
        [
            Candidate(text=TEXTS[(i * 7 + j * 13) % len(TEXTS)], **({"scope_ids": ("org",)} if j % 9 == 4 else {}))
            for j in range(size)
        ]
        for i in range(n)
    ]


def fingerprint(result: RecallResult) -> tuple[Any, ...]:
    """Everything a caller can read from a result."""
    return (
        result.to_markdown(),
        result.report,
        list(result.trace),
        result.selected_ranks,
        result.evidence,
        result.shared_scopes,
    )


def words(text: str) -> int:
    return len(text.split()) + text.count("\n")


@pytest.fixture
def forks(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Every batch takes the forked path however small (chunks of one list), every child it
    forks packs at least one chunk, and their pids are listed."""
    others = [t for t in threading.enumerate() if t is not threading.main_thread()]
    if others:
        # An earlier test may leave an idle daemon thread in this process (tqdm's monitor waits
        # on an Event, holding no lock a child takes): fork anyway. The guard that keeps a batch
        # in one process while a thread is alive has its own test.
        assert all(t.daemon for t in others), f"a thread left alive by another test: {others}"
        monkeypatch.setattr(batch, "_threads_alive", lambda: 1)
    pids: list[int] = []

    def counting_fork() -> int:
        pid = os.fork()
        if pid:
            pids.append(pid)
        return pid

    # The caller would race its children for the chunks, and on a slow machine it could take
    # them all before a child had started: a test of what a child does would then see nothing
    # (CI once did). So each child says when it has taken its first chunk, and the caller takes
    # none of its own until every child it forked has.
    caller = os.getpid()
    started_read, started_write = os.pipe()
    took_one: list[bool] = []
    take = batch._ticket

    def ticket_then_say_so(tickets: int) -> int | None:
        chunk = take(tickets)
        if chunk is not None and os.getpid() != caller and not took_one:
            took_one.append(True)  # in the child's copy of this list only
            os.write(started_write, b"!")
        return chunk

    pack_own = batch._Forked._pack_own

    def pack_own_once_children_started(self: Any) -> None:
        for _ in self.pids:
            ready, _, _ = select.select([started_read], [], [], 60.0)
            if not ready:
                break  # a child that never started: the test's own assertions say what is wrong
            os.read(started_read, 1)
        pack_own(self)

    monkeypatch.setattr(batch, "_fork", counting_fork)
    monkeypatch.setattr(batch, "_ticket", ticket_then_say_so)
    monkeypatch.setattr(batch._Forked, "_pack_own", pack_own_once_children_started)
    for name in ("_PAYS_FROM_SECONDS", "_PAYS_PER_GB_SECONDS", "_PROBE_SECONDS", "_CHUNK_SECONDS", "_EXIT_PER_FORK"):
        monkeypatch.setattr(batch, name, 0.0)
    yield pids
    os.close(started_read)
    os.close(started_write)
    for pid in pids:  # every child was reaped by the call that forked it: none is left a zombie
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


SETTINGS: dict[str, tuple[dict[str, Any], bool]] = {
    "reader": ({"max_tokens": 600, "reader": READER}, False),
    "queries": ({"max_tokens": 400, "reader": READER}, True),
    "template": ({"max_tokens": 500, "template": TEMPLATE, "reader": READER}, False),
    "truncate": ({"max_tokens": 700, "policy": "truncate", "floor": False}, True),
    "skip, caps": ({"max_tokens": 900, "policy": "skip", "max_items": 4, "lane_budgets": {"sources": 500}}, False),
    "join": ({"max_tokens": 500, "join": "\n---\n".join}, False),
    "callable tokenizer": ({"max_tokens": 300, "tokenizer": words, "cut": "head"}, True),
}


@pytest.mark.parametrize("name", list(SETTINGS))
def test_forked_batch_equals_a_loop_of_recall(name: str, forks: list[int]) -> None:
    """Across settings, a batch packed by forked workers gives a loop's results, list by list."""
    config, with_queries = SETTINGS[name]
    batch_lists = lists(120)
    queries = [QUERIES[i % len(QUERIES)] for i in range(len(batch_lists))] if with_queries else None
    packer = Packer(**config)
    # Every setting here is data or code that holds nothing of the process: it may run in a child.
    many = packer.recall_many(batch_lists, queries=queries, workers=2, fork_callables=True)
    assert len(forks) == 1 and batch.last_run.forked == 1
    assert batch.last_run.from_children > 0, "the child packed nothing: the test proves nothing"
    loop = [packer.recall(c, query=None if queries is None else queries[i]) for i, c in enumerate(batch_lists)]
    assert [fingerprint(r) for r in many] == [fingerprint(r) for r in loop]


def test_module_recall_many_forks_with_the_same_results(forks: list[int]) -> None:
    """The module-level recall_many takes workers too, and three workers give the loop's results."""
    batch_lists = lists(90)
    many = recall_many(batch_lists, max_tokens=500, reader=READER, queries=[QUERIES[0]] * 90, workers=3)
    assert len(forks) == 2
    loop = Packer(max_tokens=500, reader=READER)
    assert [fingerprint(r) for r in many] == [fingerprint(loop.recall(c, query=QUERIES[0])) for c in batch_lists]


def test_repeated_calls_leave_no_process_file_or_output(forks: list[int], capfd: pytest.CaptureFixture[str]) -> None:
    """Called again and again, recall_many closes every file it opened, reaps every child, prints nothing."""
    packer = Packer(max_tokens=400)
    batch_lists = lists(40)
    expected = [fingerprint(packer.recall(c)) for c in batch_lists]
    before = sorted(os.listdir("/proc/self/fd"))
    for _ in range(4):
        assert [fingerprint(r) for r in packer.recall_many(batch_lists, workers=2)] == expected
    assert sorted(os.listdir("/proc/self/fd")) == before
    assert len(forks) == 4
    assert capfd.readouterr() == ("", "")


def bad_batch(n: int, bad: dict[int, object]) -> list[list[Any]]:
    """``n`` lists whose list ``i`` starts with ``bad[i]`` (reached first, so it raises)."""
    out: list[list[Any]] = [list(c) for c in lists(n, size=10)]
    for i, item in bad.items():
        out[i].insert(0, item)
    return out


def error_of(call: Callable[[], object]) -> tuple[type[BaseException], str]:
    with pytest.raises(Exception) as info:
        call()
    return info.type, str(info.value)


@pytest.mark.parametrize("first", [5, 537])
def test_the_first_failing_list_raises_its_error_in_the_caller(first: int, forks: list[int]) -> None:
    """Bad candidates in several lists raise the first one's error, as the loop does, whoever packed it."""
    # Every list from `first` on is bad, each in its own words, so whichever process reaches one
    # first, only list `first`'s error is the loop's.
    broken = bad_batch(600, {i: {"text": i} for i in range(first, 600, 3)})
    packer = Packer(max_tokens=300)
    loop = error_of(lambda: [packer.recall(c) for c in broken])
    assert loop == (CandidateError, f"candidates[0]: invalid Candidate: text: text must be a str, got int {first}")
    assert error_of(lambda: packer.recall_many(broken, workers=2)) == loop
    assert forks


def test_an_error_from_a_callable_is_raised_as_the_loop_raises_it(forks: list[int]) -> None:
    """A user tokenizer's own exception in a late list comes out as the loop raises it: a
    TokenizerError carrying its type and message."""

    def fussy(text: str) -> int:
        found = re.search(r"#(53[78]) ", text)
        if found:
            raise KeyError(f"no count for list {found[1]}")
        return len(text) // 4 + 1

    batch_lists = [[Candidate(text=f"#{i} {TEXTS[i % len(TEXTS)]}")] for i in range(600)]
    packer = Packer(max_tokens=300, tokenizer=fussy)
    loop = error_of(lambda: [packer.recall(c) for c in batch_lists])
    assert loop[0] is TokenizerError and "raised KeyError" in loop[1] and "'no count for list 537'" in loop[1]
    assert error_of(lambda: packer.recall_many(batch_lists, workers=2, fork_callables=True)) == loop
    assert forks


def test_a_child_that_dies_costs_time_not_results(forks: list[int]) -> None:
    """A worker killed mid-batch is reported, and the caller packs its lists itself: same results."""
    caller = os.getpid()

    def deadly(text: str) -> int:
        if os.getpid() != caller:
            os.kill(os.getpid(), signal.SIGKILL)
        return len(text) // 4 + 1

    packer = Packer(max_tokens=300, tokenizer=deadly)
    batch_lists = lists(50)
    with pytest.warns(RecallpackWarning, match="killed by signal 9"):
        many = packer.recall_many(batch_lists, workers=2, fork_callables=True)
    assert batch.last_run.children_lost == [0]
    assert [fingerprint(r) for r in many] == [fingerprint(packer.recall(c)) for c in batch_lists]


def test_a_warning_in_a_child_reaches_the_caller(forks: list[int]) -> None:
    """What a worker warns is warned in the caller's process, not printed by the child."""
    caller = os.getpid()

    def chatty(text: str) -> int:
        if os.getpid() != caller:
            warnings.warn("counted in a worker", UserWarning, stacklevel=1)
        return len(text) // 4 + 1

    with pytest.warns(UserWarning, match="counted in a worker"):
        Packer(max_tokens=300, tokenizer=chatty).recall_many(lists(40), workers=2, fork_callables=True)
    assert batch.last_run.from_children > 0


def test_a_live_thread_keeps_the_batch_in_one_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """With another thread alive, forking could copy a lock it holds: the batch is the plain loop."""
    forked: list[int] = []
    monkeypatch.setattr(batch, "_fork", lambda: forked.append(1) or os.fork())
    monkeypatch.setattr(batch, "_PAYS_FROM_SECONDS", 0.0)
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        packer = Packer(max_tokens=400)
        with pytest.warns(RecallpackWarning, match=r"workers=2\) packed in this process only: another thread"):
            many = packer.recall_many(lists(60), workers=2)
        assert batch.last_run.fallback == "another thread is alive"
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # by default (workers=None) the loop, quietly
            quiet = packer.recall_many(lists(60))
    finally:
        stop.set()
        thread.join()
    assert forked == [] and batch.last_run.fallback == "one worker"
    assert [fingerprint(r) for r in many] == [fingerprint(packer.recall(c)) for c in lists(60)]
    assert [fingerprint(r) for r in quiet] == [fingerprint(r) for r in many]


def test_one_worker_or_a_small_batch_is_the_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """workers=1 never forks, nor does a batch whose rest would cost less than a fork."""
    monkeypatch.setattr(batch, "_fork", lambda: pytest.fail("forked"))
    monkeypatch.setattr(batch, "_threads_alive", lambda: 1)  # whatever other tests left running
    packer = Packer(max_tokens=400)
    assert len(packer.recall_many(lists(200), workers=1)) == 200
    assert batch.last_run.fallback == "one worker"
    monkeypatch.setattr(batch, "_PAYS_FROM_SECONDS", 3600.0)
    assert len(packer.recall_many(lists(20), workers=2)) == 20
    assert batch.last_run.fallback == "too small to pay for a fork"
    assert packer.recall_many([], workers=2) == []


@pytest.mark.parametrize("workers", [0, -2, 1.5, True, "2"])
def test_workers_is_checked_before_any_work(workers: object) -> None:
    """A workers value that is not a positive int (or None) is refused with what to pass."""
    with pytest.raises(ConfigError, match=r"workers=.* must be an int of at least 1 .* or None"):
        Packer().recall_many(lists(2), workers=workers)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="workers="):
        recall_many(None, workers=workers)  # type: ignore[arg-type]


def test_workers_none_is_one_process() -> None:
    """None means what 1 means, one list after another here; a number above 1 is taken as given."""
    assert batch.check_workers(None) == 1
    assert batch.check_workers(3) == 3


texts = st.text(alphabet="ab .\nxyz", min_size=0, max_size=60)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    batch_lists=st.lists(st.lists(texts, max_size=8), min_size=3, max_size=10),
    room=st.integers(0, 40),
    policy=st.sampled_from(["prefix", "skip", "truncate"]),
)
def test_small_random_batches_match_the_loop(
    forks: list[int], batch_lists: list[list[str]], room: int, policy: str
) -> None:
    """Any small batch, packed by two processes, gives the loop's results."""
    least = Packer(tokenizer="chars").least_tokens
    packer = Packer(max_tokens=least + room, policy=policy, tokenizer="chars")
    candidates = [[Candidate(text=t) for t in row] for row in batch_lists]
    many = packer.recall_many(candidates, workers=2)
    assert batch.last_run.forked == 1
    assert [fingerprint(r) for r in many] == [fingerprint(packer.recall(c)) for c in candidates]


def test_an_interrupt_in_the_caller_ends_its_workers(forks: list[int]) -> None:
    """Ctrl-C while the caller packs its share: the children are killed and reaped, no file is left open."""
    caller = os.getpid()

    def interrupted(text: str) -> int:
        found = re.search(r"#(\d+) ", text)
        if os.getpid() == caller and found and int(found[1]) >= 30:
            raise KeyboardInterrupt
        return len(text) // 4 + 1

    batch_lists = [[Candidate(text=f"#{i} {TEXTS[i % len(TEXTS)]}")] for i in range(200)]
    before = sorted(os.listdir("/proc/self/fd"))
    with pytest.raises(KeyboardInterrupt):
        Packer(max_tokens=300, tokenizer=interrupted).recall_many(batch_lists, workers=2, fork_callables=True)
    assert forks and sorted(os.listdir("/proc/self/fd")) == before


def test_a_thread_started_by_the_first_lists_keeps_the_rest_in_one_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """A callable that starts a thread while the first lists are packed is seen before any fork."""
    started: list[threading.Thread] = []
    stop = threading.Event()

    def threaded(text: str) -> int:
        if not started:
            started.append(threading.Thread(target=stop.wait, daemon=True))
            started[0].start()
        return len(text) // 4 + 1

    monkeypatch.setattr(batch, "_fork", lambda: pytest.fail("forked with a thread alive"))
    monkeypatch.setattr(batch, "_threads_alive", lambda: 1 + len(started))  # the threads this test knows
    monkeypatch.setattr(batch, "_PAYS_FROM_SECONDS", 0.0)
    monkeypatch.setattr(batch, "_PAYS_PER_GB_SECONDS", 0.0)
    monkeypatch.setattr(batch, "_CHUNK_SECONDS", 0.0)
    monkeypatch.setattr(batch, "_PROBE_SECONDS", 0.0)
    packer = Packer(max_tokens=300, tokenizer=threaded)
    try:
        with pytest.warns(RecallpackWarning, match="another thread is alive"):
            many = packer.recall_many(lists(40), workers=2, fork_callables=True)
    finally:
        stop.set()
    assert started and batch.last_run.fallback == "another thread is alive"
    assert [fingerprint(r) for r in many] == [fingerprint(packer.recall(c)) for c in lists(40)]


def test_recall_many_inside_a_forked_batch_is_the_loop(forks: list[int]) -> None:
    """A callable that calls recall_many while a batch is shared out gets the loop, and the outer
    batch its results."""
    inner = Packer(max_tokens=50, tokenizer="chars")
    paths: list[str | None] = []

    def nested(text: str) -> int:
        if batch._inside:
            assert len(inner.recall_many([[Candidate(text=text)]] * 3, workers=2, fork_callables=True)) == 3
            paths.append(batch.last_run.fallback)
        return len(text) // 4 + 1

    packer = Packer(max_tokens=300, tokenizer=nested)
    batch_lists = [[Candidate(text=f"#{i} {TEXTS[i]}")] for i in range(30)]
    many = packer.recall_many(batch_lists, workers=2, fork_callables=True)
    assert len(forks) == 1 and paths and set(paths) == {"inside a forked batch already"}
    assert [fingerprint(r) for r in many] == [fingerprint(packer.recall(c)) for c in batch_lists]


# -- a guest in its caller's process: no fork unless asked, and never the caller's code unasked ----


def test_the_default_is_the_loop_in_this_process(forks: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    """Without workers, a batch that would pay for a fork is still packed here, quietly."""
    monkeypatch.setattr(batch, "_fork", lambda: pytest.fail("forked without being asked"))
    batch_lists = lists(120)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        many = Packer(max_tokens=400).recall_many(batch_lists)
        module = recall_many(batch_lists, max_tokens=400)
    assert batch.last_run.fallback == "one worker" and batch.last_run.forked == 0
    loop = [fingerprint(Packer(max_tokens=400).recall(c)) for c in batch_lists]
    assert [fingerprint(r) for r in many] == loop == [fingerprint(r) for r in module]


class PidLog:
    """A callable's record of the processes it ran in, kept in a file so a child's calls count."""

    def __init__(self, path: Any) -> None:
        self.path = str(path)

    def note(self) -> None:
        with open(self.path, "a") as log:
            log.write(f"{os.getpid()}\n")

    def pids(self) -> set[int]:
        with open(self.path) as log:
            return {int(line) for line in log}


def callers_code(log: PidLog) -> dict[str, dict[str, Any]]:
    """Settings that each hold a piece of the caller's code, which notes where it runs."""

    def count(text: str) -> int:
        log.note()
        return len(text) // 4 + 1

    class Encoder:  # what a Hugging Face tokenizer looks like to get_tokenizer
        def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
            log.note()
            return list(range(len(text) // 4 + 1))

    def embed(texts: list[str]) -> list[list[float]]:
        log.note()
        return [[float(len(t) % 7), 1.0] for t in texts]

    def join(texts: Any) -> str:
        log.note()
        return "\n".join(texts)

    return {
        "tokenizer function": {"tokenizer": count},
        "tokenizer object": {"tokenizer": Encoder()},
        "embed": {"embed": embed, "cut": "focus", "policy": "truncate"},
        "join": {"join": join},
    }


@pytest.mark.parametrize("setting", ["tokenizer function", "tokenizer object", "embed", "join"])
def test_the_callers_code_never_runs_in_a_child_unless_asked(
    setting: str, forks: list[int], tmp_path: Any
) -> None:
    """workers=2 with a setting holding the caller's code: the batch stays here, a warning names
    the setting; fork_callables=True lets that code run in the forked workers."""
    log = PidLog(tmp_path / "pids")
    packer = Packer(max_tokens=300, **callers_code(log)[setting])
    batch_lists = lists(60, size=12)
    queries = [QUERIES[0]] * len(batch_lists)
    expected = [fingerprint(packer.recall(c, query=QUERIES[0])) for c in batch_lists]
    name = setting.split()[0]
    with pytest.warns(RecallpackWarning, match=rf"the settings hold the caller's own code \({name}\)"):
        many = packer.recall_many(batch_lists, queries=queries, workers=2)
    assert forks == [] and log.pids() == {os.getpid()}
    assert [fingerprint(r) for r in many] == expected
    # New texts: what the tokenizer counted above is in its cache, which a child inherits.
    fresh = [[Candidate(text=f"again {i}: {c.text}") for c in row] for i, row in enumerate(batch_lists)]
    forked = packer.recall_many(fresh, queries=queries, workers=2, fork_callables=True)
    assert len(forks) == 1 and log.pids() == {os.getpid(), *forks}
    assert [fingerprint(r) for r in forked] == [fingerprint(packer.recall(c, query=QUERIES[0])) for c in fresh]


EMBEDDING_SERVER = """
import json, os, socket, sys
conn = socket.socket(fileno=int(sys.argv[1]))
reader = conn.makefile("r")
with open(sys.argv[2], "a") as log:
    for line in reader:
        request = json.loads(line)
        log.write(f"{request['pid']}\\n")
        log.flush()
        vectors = [[float(len(t) % 11), float(t.count("e")), 1.0] for t in request["texts"]]
        conn.sendall((json.dumps({"for": request["id"], "vectors": vectors}) + "\\n").encode())
"""


class KeepAliveEmbeddings:
    """An embedding client as a server process holds one: a connection it keeps open across calls,
    each request answered on it in turn (a socket pair to a subprocess: no network)."""

    def __init__(self, conn: Any) -> None:
        self.conn, self.reader, self.calls = conn, conn.makefile("r"), 0

    def __call__(self, texts: list[str]) -> list[list[float]]:
        import json

        self.calls += 1
        request = {"id": f"{os.getpid()}-{self.calls}", "pid": os.getpid(), "texts": texts}
        self.conn.sendall((json.dumps(request) + "\n").encode())
        answer = json.loads(self.reader.readline())
        assert answer["for"] == request["id"], "another process's answer"
        return [list(map(float, v)) for v in answer["vectors"]]


def test_a_keep_alive_embedding_client_is_only_used_by_its_own_process(forks: list[int], tmp_path: Any) -> None:
    """An embed= client holding a keep-alive connection (a server's setup): with the default, and
    with workers=2, every request is this process's, and every answer comes back to it."""
    import socket
    import subprocess
    import sys

    ours, theirs = socket.socketpair()
    log = tmp_path / "requests"
    server = subprocess.Popen(
        [sys.executable, "-c", EMBEDDING_SERVER, str(theirs.fileno()), str(log)], pass_fds=[theirs.fileno()]
    )
    theirs.close()
    client = KeepAliveEmbeddings(ours)
    try:
        packer = Packer(max_tokens=200, embed=client, policy="truncate", cut="focus")
        batch_lists = lists(80, size=8)
        queries = [QUERIES[i % 2] for i in range(len(batch_lists))]
        expected = [fingerprint(packer.recall(c, query=q)) for c, q in zip(batch_lists, queries)]
        default = packer.recall_many(batch_lists, queries=queries)
        with pytest.warns(RecallpackWarning, match=r"caller's own code \(embed\)"):
            asked = packer.recall_many(batch_lists, queries=queries, workers=2)
    finally:
        client.reader.close()
        ours.close()  # the server reads to the end of its stream and exits
        server.wait(timeout=60)
    assert forks == []
    assert {int(line) for line in log.read_text().split()} == {os.getpid()}
    assert [fingerprint(r) for r in default] == expected == [fingerprint(r) for r in asked]


@pytest.mark.parametrize("caller_sigint", ["handled", "ignored"])
def test_a_child_resets_the_signal_handlers_it_inherits(forks: list[int], tmp_path: Any, caller_sigint: str) -> None:
    """A forked worker runs none of the caller's signal handlers, nor writes to its event loop's
    wakeup fd: both are reset before it packs; a signal the caller ignores (SIGINT under
    ``make test &``) stays ignored, as it would across exec, whatever the test runner inherited."""
    import socket

    seen = tmp_path / "seen"
    caller = os.getpid()
    watched = (signal.SIGTERM, signal.SIGUSR1, signal.SIGINT)

    def count(text: str) -> int:
        if os.getpid() != caller:
            handlers = [signal.getsignal(s) for s in watched]
            wakeup = signal.set_wakeup_fd(-1)
            with open(seen, "a") as out:
                out.write(" ".join(str(int(h)) if isinstance(h, int) else "callable" for h in handlers))
                out.write(f" {wakeup}\n")
        return len(text) // 4 + 1

    def handler(number: int, frame: Any) -> None:
        raise AssertionError("the caller's handler ran")

    wake_read, wake_write = socket.socketpair()
    wake_write.setblocking(False)
    given = {signal.SIGTERM: handler, signal.SIGUSR1: handler}
    given[signal.SIGINT] = handler if caller_sigint == "handled" else signal.SIG_IGN
    old = {s: signal.signal(s, disposition) for s, disposition in given.items()}
    old_wakeup = signal.set_wakeup_fd(wake_write.fileno())
    try:
        Packer(max_tokens=300, tokenizer=count).recall_many(lists(40), workers=2, fork_callables=True)
    finally:
        signal.set_wakeup_fd(old_wakeup)
        for number, previous in old.items():
            signal.signal(number, previous)
        wake_read.close()
        wake_write.close()
    sigint = signal.SIG_DFL if caller_sigint == "handled" else signal.SIG_IGN
    expected = f"{int(signal.SIG_DFL)} {int(signal.SIG_DFL)} {int(sigint)} -1"
    assert forks and set(seen.read_text().split("\n")) - {""} == {expected}


def test_a_forked_batch_shows_each_list_once_on_the_callers_bar(forks: list[int], capfd: Any) -> None:
    """show_progress=True with workers: the caller's bar counts its own lists and its children's,
    each once, and a child draws nothing (stderr is the caller's only)."""
    import re

    Packer(max_tokens=300).recall_many(lists(40), workers=2, show_progress=True)
    out, err = capfd.readouterr()
    assert forks and batch.last_run.from_children > 0
    assert out == "" and re.search(r"\b40/40\b", err), err
    assert not re.search(r"\b(4[1-9]|[5-9]\d)/40\b", err), err
