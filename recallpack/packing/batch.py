"""Many independent packings on several cores, when asked: forked workers that inherit the batch.

One packing costs about a millisecond and its walk is Python: threads gain little (the GIL),
and a process pool pays in the caller to ship every candidate out and every result back
(docs/scaling.md has the measurements). A forked child inherits the packer, the candidate
lists and any callable the settings hold, as they are. So :func:`run` forks ``workers - 1``
children per call, packs a share itself, and takes the children's results back pickled
through a memory file. The shares are small chunks handed out through a pipe, first come,
first served, so a loaded core takes fewer. Nothing is sent to a child at all.

A library is a guest in its caller's process, and a forked child shares that process's
sockets, connection pools and signal handlers: so the plain loop is the default, and forking
happens only when the caller passes ``workers`` above 1. Even then it is the loop when forking
is unsafe or cannot pay: not Linux, another thread alive (a child inherits locks other threads
may hold), inside a forked batch already, a batch whose rest is estimated to cost less than
forking does, or settings that hold the caller's own code (a tokenizer function, ``embed``,
``join``), which runs in a child only when the caller says so (``fork_callables=True``). A
child resets every signal handler it inherited and the wakeup fd of an event loop, so a
signal it gets never runs the caller's handler. Whatever path runs, the results and the first
error are those of the loop.

This module knows nothing of packing: :func:`run` calls ``pack_one(i)`` for each index."""

from __future__ import annotations

import contextlib
import gc
import math
import os
import pickle
import signal
import struct
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, NoReturn, TypeVar

from recallpack.packing.errors import ConfigError, RecallpackWarning
from recallpack.packing.progress import Advance, counted, progress
from recallpack.packing.validation import is_int

__all__ = ["run", "usable_cores", "check_workers", "queries_per_list", "resident_bytes", "BatchStats"]

R = TypeVar("R")

#: Forking pays when the rest of the batch, after the first lists, is estimated to take longer
#: than this on one core. Measured on 2 cores: a fork, the child's exit and the first writes to
#: shared pages cost about 10 ms plus 34 ms per GB the process holds, so a batch breaks even
#: at twice that (about 35 ms of packing for a 190 MB process, 100 ms at 1.2 GB); the margin
#: makes sure a forked batch gains rather than merely breaks even.
_PAYS_FROM_SECONDS = 0.04
_PAYS_PER_GB_SECONDS = 0.1
#: A child's exit takes about this many times as long as its fork did (both copy or free the
#: page tables; measured 0.9 to 1.6 times): the caller keeps that much work to the end for itself.
_EXIT_PER_FORK = 1.0
#: The caller packs the first lists alone for this long to learn what one costs.
_PROBE_SECONDS = 0.004
#: A share handed out at a time: small enough that the last one keeps nobody waiting long.
_CHUNK_SECONDS = 0.004
#: The caller writes every ticket at once: they must fit a pipe's 64 KiB buffer.
_MAX_CHUNKS = 4096
_TICKET = struct.Struct("<I")
#: A child's note that a chunk is ready: worker, chunk, offset in its memory file, length.
_RECORD = struct.Struct("<IIQQ")
_MISSING: Any = object()

_fork: Callable[[], int] = os.fork  # tests count forks through this
_threads_alive: Callable[[], int] = threading.active_count
_inside = False  # in a forked run already, as its caller or one of its children


@dataclass
class BatchStats:
    """What the last :func:`run` in this process did (for tests and the bench, not a contract)."""

    lists: int = 0
    forked: int = 0
    from_children: int = 0
    fallback: str | None = None
    children_lost: list[int] = field(default_factory=list)


last_run = BatchStats()


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


def check_workers(workers: object) -> int:
    """``workers`` as a process count: None and 1 are the plain loop in this process."""
    if workers is None:
        return 1
    if not is_int(workers, 1):
        raise ConfigError(
            f"workers={workers!r} must be an int of at least 1 (more than 1 forks that many "
            f"processes; {usable_cores()} cores here), or None, like 1, for one list after "
            "another in this process",
            field="workers",
        )
    return workers


def queries_per_list(queries: object, n: int) -> list[str | None]:
    """``queries`` as one query (or None) per list; a str is one query, not a list of letters."""
    if queries is None:
        return [None] * n
    if isinstance(queries, (str, bytes, Mapping)) or not isinstance(queries, Sequence):
        raise ConfigError(
            f"queries={queries!r:.60} must be a list with one query (a str or None) per candidate "
            f"list, got {type(queries).__name__}"
        )
    if len(queries) != n:
        raise ConfigError(f"queries has {len(queries)} entries for {n} candidate lists")
    for i, query in enumerate(queries):
        if query is not None and not isinstance(query, str):
            raise ConfigError(f"queries[{i}]={query!r:.60} must be a str or None")
    return list(queries)


def run(
    pack_one: Callable[[int], R], n: int, workers: int, asked: bool = False, callers: Sequence[str] = (),
    show_progress: bool = False,
) -> list[R]:
    """``[pack_one(i) for i in range(n)]``, the same results and the same first error, on up to
    ``workers`` processes. ``asked``: the caller chose ``workers`` itself, so when forking is
    unsafe here a warning says that the batch ran in this process only. ``callers``: the settings
    that hold the caller's own code, which must not run in a child (empty: none, or they may).
    ``show_progress``: a bar of the lists packed on stderr, drawn by this process only."""
    with progress(n, "recall_many", show_progress) as advance:
        return _run(pack_one, n, workers, asked, callers, advance)


def _run(
    pack_one: Callable[[int], R], n: int, workers: int, asked: bool, callers: Sequence[str], advance: Advance
) -> list[R]:
    global last_run
    stats = last_run = BatchStats(lists=n)
    # Each list this process packs is told as it is packed; a child's, as the caller takes it in.
    pack_one = counted(pack_one, advance)
    keep_here = f"{CALLER_CODE} ({', '.join(callers)})" if callers else None
    stats.fallback = _unsafe(n, workers, keep_here)
    if stats.fallback is not None:
        _say_why(stats.fallback, workers, asked)
        return [pack_one(i) for i in range(n)]
    # The first lists tell what one costs; they are the caller's own share, not a rehearsal.
    results: list[R] = []
    start = time.perf_counter()
    while len(results) < n and (not results or time.perf_counter() - start < _PROBE_SECONDS):
        results.append(pack_one(len(results)))
    each = max((time.perf_counter() - start) / len(results), 1e-7)
    plan = _Plan.make(len(results), n, workers, each)
    # Asked again: a callable of the settings may have started a thread in the first lists.
    stats.fallback = "too small to pay for a fork" if plan is None else _unsafe(n, workers, keep_here)
    if plan is None or stats.fallback is not None:
        _say_why(stats.fallback, workers, asked)
        return results + [pack_one(i) for i in range(len(results), n)]
    return results + _Forked(pack_one, plan, stats, advance).run()


#: Why a batch stays in one process that a caller who asked for workers should hear, and what to
#: do; the others (one worker, a small batch, a nested call) are the right choice, not a limit.
_UNSAFE_HERE = {
    "not Linux": "forking is unsafe here (docs/scaling.md)",
    "another thread is alive": (
        "a forked worker could deadlock on a lock it inherits (docs/scaling.md: run the batch "
        "from a script whose process starts no other thread)"
    ),
}
#: The start of the reason a batch stays here when the caller's own code would run in a child.
CALLER_CODE = "the settings hold the caller's own code"


def _say_why(fallback: str | None, workers: int, asked: bool) -> None:
    if not asked or fallback is None:
        return
    if fallback in _UNSAFE_HERE:
        why = f"{fallback}, and {_UNSAFE_HERE[fallback]}"
    elif fallback.startswith(CALLER_CODE):
        why = (
            f"{fallback}, which would run in forked copies of this process and share its "
            "sockets, connection pools and locks; pass fork_callables=True if that code holds none"
        )
    else:
        return
    warnings.warn(
        f"recall_many(workers={workers}) packed in this process only: {why}",
        RecallpackWarning,
        stacklevel=5,  # the caller of Packer.recall_many (of the module's, one more)
    )


@dataclass(frozen=True)
class _Plan:
    """How lists ``start .. stop - 1`` are shared out: in chunks of ``chunk`` lists, numbered
    from 0, among the caller and ``children`` forked workers."""

    start: int
    stop: int
    chunk: int
    children: int
    each: float  # what one list took the caller in the first ones, in seconds

    @classmethod
    def make(cls, start: int, stop: int, workers: int, each: float) -> _Plan | None:
        """A plan, or None when forking would not pay for itself."""
        held = resident_bytes() / 2**30
        if (stop - start) * each < _PAYS_FROM_SECONDS + _PAYS_PER_GB_SECONDS * held:
            return None
        chunk = max(1, int(_CHUNK_SECONDS / each), -(-(stop - start) // _MAX_CHUNKS))
        chunks = -(-(stop - start) // chunk)
        children = min(workers - 1, chunks - 1)
        return cls(start, stop, chunk, children, each) if children >= 1 else None

    @property
    def chunks(self) -> int:
        return -(-(self.stop - self.start) // self.chunk)

    def indexes(self, chunk: int) -> range:
        begin = self.start + chunk * self.chunk
        return range(begin, min(begin + self.chunk, self.stop))


def _unsafe(n: int, workers: int, keep_here: str | None = None) -> str | None:
    """Why this call must not fork, or None."""
    if workers < 2 or n < 2:
        return "one worker" if workers < 2 else "fewer than two lists"
    if keep_here is not None:
        return keep_here
    if not sys.platform.startswith("linux") or not hasattr(os, "fork"):
        return "not Linux"  # elsewhere fork is missing or unsafe with system frameworks
    if _inside:
        return "inside a forked batch already"  # a callable of the settings called recall_many
    if _threads_alive() > 1:
        # A child gets a copy of every lock, held or not, and only this thread to release them.
        return "another thread is alive"
    return None


def resident_bytes() -> int:
    """The memory this process holds (0 where /proc does not say)."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _memory_file() -> int:
    """A file in memory for a child's pickled results: it never blocks a writer, as a pipe does
    when the caller is busy packing."""
    try:
        return os.memfd_create("recallpack-recall-many", os.MFD_CLOEXEC)
    except (AttributeError, OSError):
        with tempfile.TemporaryFile() as spare:
            return os.dup(spare.fileno())


class _Forked(Generic[R]):
    """One forked run of a plan: the caller's side and, after the fork, each child's."""

    def __init__(self, pack_one: Callable[[int], R], plan: _Plan, stats: BatchStats, advance: Advance):
        self.pack_one, self.plan, self.stats, self.advance = pack_one, plan, stats, advance
        self.results: list[Any] = [_MISSING] * (plan.stop - plan.start)
        self.failure: tuple[int, Exception] | None = None
        self.pids: dict[int, int] = {}  # pid -> worker
        self.files: list[int] = []
        self.tickets = self.status = -1
        self.own_tail = 0  # the last chunks, which the caller packs itself
        self.pending = b""
        self.collected = False
        self.registry: dict[Any, Any] = {}  # warnings the children saw, shown once as the loop would

    def run(self) -> list[R]:
        global _inside
        unfreeze = gc.get_freeze_count() == 0
        if unfreeze:
            # Collections in either process would otherwise walk every inherited object and
            # write to its page, copying it: the faults that made an earlier attempt slower.
            gc.freeze()
        _inside = True
        try:
            self._fork()
            self._pack_own()
            self._collect()
        finally:
            _inside = False
            self._end()
            if unfreeze:
                gc.unfreeze()
        return self._in_order()

    # -- the caller ---------------------------------------------------------------------------

    def _fork(self) -> None:
        self.tickets, tickets = os.pipe()
        self.status, status = os.pipe()
        try:
            for stream in (sys.stdout, sys.stderr):
                # A child that flushed would print the caller's buffered output a second time.
                with contextlib.suppress(AttributeError, OSError, ValueError):  # None, or closed
                    stream.flush()
            forking = time.perf_counter()
            for worker in range(self.plan.children):
                self.files.append(_memory_file())
                try:
                    pid = _fork()
                except OSError:
                    break  # out of processes or memory: the caller packs what is left
                if pid == 0:
                    os.close(tickets)  # or no child would see the tickets end
                    _child(self, worker, status)
                self.pids[pid] = worker
                self.stats.forked += 1
            # A child's exit, once it runs out of chunks, takes about as long as its fork: the
            # caller keeps the last chunks, packing them meanwhile, and never waits it out idle.
            tail = _EXIT_PER_FORK * (time.perf_counter() - forking) / max(1, len(self.pids))
            self.own_tail = min(self.plan.chunks, math.ceil(tail / (self.plan.chunk * self.plan.each)))
            shared = self.plan.chunks - self.own_tail
            os.write(tickets, b"".join(_TICKET.pack(c) for c in range(shared)))
        finally:
            os.close(tickets)  # the tickets end when the last is taken
            os.close(status)  # the children's copies end the stream when they are done
        os.set_blocking(self.status, False)

    def _pack_own(self) -> None:
        chunks = self.plan.chunks
        while self.failure is None and (chunk := _ticket(self.tickets)) is not None:
            self._pack_chunk(chunk)
        for chunk in range(chunks - self.own_tail, chunks):
            if self.failure is None:
                self._pack_chunk(chunk)
        if self.failure is not None:
            while _ticket(self.tickets) is not None:
                pass  # nothing after a failure is needed: the children stop after their chunk

    def _pack_chunk(self, chunk: int) -> None:
        for i in self.plan.indexes(chunk):
            try:
                self.results[i - self.plan.start] = self.pack_one(i)
            except Exception as exc:  # the loop raises it later, once all before it are in
                self.failure = (i, exc)
                break
        self._absorb()

    def _collect(self) -> None:
        os.set_blocking(self.status, True)
        while self._absorb():
            pass
        self.collected = True  # every child has closed its end of the pipe: it is exiting

    def _absorb(self) -> bool:
        """Take in every chunk the children have finished; False once they all are done."""
        try:
            data = os.read(self.status, _RECORD.size * 256)
        except BlockingIOError:
            return True
        self.pending += data
        whole = len(self.pending) - len(self.pending) % _RECORD.size
        for offset in range(0, whole, _RECORD.size):
            self._take(*_RECORD.unpack_from(self.pending, offset))
        self.pending = self.pending[whole:]
        return bool(data)

    def _take(self, worker: int, chunk: int, offset: int, length: int) -> None:
        payload = bytearray()
        while len(payload) < length:
            part = os.pread(self.files[worker], length - len(payload), offset + len(payload))
            if not part:
                return  # cannot happen (the record follows the write); the loop packs it
            payload += part
        try:
            packed, shown = pickle.loads(payload)
        except Exception:
            return  # as if the child had not packed them: _in_order does
        for i, result in zip(self.plan.indexes(chunk), packed):
            self.results[i - self.plan.start] = result
        self.stats.from_children += len(packed)
        self.advance(len(packed))
        for message, category, filename, lineno in shown:
            warnings.warn_explicit(message, category, filename, lineno, registry=self.registry)

    def _end(self) -> None:
        """Reap every child (killing it first if the caller leaves early) and close every file."""
        for pid, worker in self.pids.items():
            try:
                if not self.collected:
                    os.kill(pid, signal.SIGKILL)  # only our own child, on the way out of an error
                _, status = os.waitpid(pid, 0)
            except (ChildProcessError, ProcessLookupError):
                continue  # reaped already: the caller ignores SIGCHLD
            code = os.waitstatus_to_exitcode(status)
            if code < 0 and self.collected:
                self.stats.children_lost.append(worker)
                warnings.warn(
                    f"recall_many: worker process {pid} was killed by signal {-code}; "
                    "what it had not finished was packed in this process",
                    RecallpackWarning,
                    stacklevel=6,  # the caller of recall_many
                )
        self.pids.clear()
        for fd in (self.tickets, self.status, *self.files):
            if fd >= 0:
                os.close(fd)
        self.tickets = self.status = -1
        self.files = []

    def _in_order(self) -> list[R]:
        """The results in order; what no process finished is packed here, as the loop would, so
        the first failing list raises its own error in the caller's process."""
        out: list[R] = []
        for k, result in enumerate(self.results):
            if result is _MISSING:
                i = self.plan.start + k
                if self.failure is not None and self.failure[0] == i:
                    raise self.failure[1]
                result = self.pack_one(i)
            out.append(result)
        return out


# -- a child ----------------------------------------------------------------------------------


def _child(forked: _Forked[R], worker: int, status: int) -> NoReturn:
    """Pack chunks until the tickets run out; never return, never run the caller's exit."""
    code = 1
    try:
        _reset_signals()
        gc.freeze()  # a collection here must not copy the inherited pages either
        os.close(forked.status)
        code = _serve(forked, worker, status)
        # Done: say so now, not when the exit has torn the address space down.
        os.close(status)
    except BaseException:  # noqa: B036 - a child reports by what it wrote, then leaves
        pass
    finally:
        os._exit(code)


def _reset_signals() -> None:
    """Every Python signal handler the child inherited back to the default, and no wakeup fd: a
    signal sent to the child (a SIGTERM to the process group) must not run the caller's handler,
    nor write to the caller's event loop through the socket they share. A signal the caller
    ignores (SIG_IGN: SIGINT under ``cmd &`` from a script, SIGHUP under nohup) stays ignored,
    as it would across exec: that is the caller's environment, not a handler of its code."""
    with contextlib.suppress(ValueError):  # not the main thread: Python runs no handler there
        signal.set_wakeup_fd(-1)
        for number in signal.valid_signals():
            with contextlib.suppress(OSError, ValueError, TypeError):
                if callable(signal.getsignal(number)):
                    signal.signal(number, signal.SIG_DFL)


def _serve(forked: _Forked[R], worker: int, status: int) -> int:
    out, offset = forked.files[worker], 0
    with warnings.catch_warnings(record=True) as caught:
        while (chunk := _ticket(forked.tickets)) is not None:
            packed: list[R] = []
            failed = False
            for i in forked.plan.indexes(chunk):
                try:
                    packed.append(forked.pack_one(i))
                except Exception:
                    failed = True  # the caller packs this list again and raises its error
                    break
            shown = [(str(w.message), w.category, w.filename, w.lineno) for w in caught]
            caught.clear()
            payload = pickle.dumps((packed, shown), protocol=pickle.HIGHEST_PROTOCOL)
            written = 0
            while written < len(payload):
                written += os.pwrite(out, memoryview(payload)[written:], offset + written)
            os.write(status, _RECORD.pack(worker, chunk, offset, len(payload)))
            offset += len(payload)
            if failed:
                break
    return 0


def _ticket(tickets: int) -> int | None:
    """The next chunk to pack, or None when every one is taken."""
    data = os.read(tickets, _TICKET.size)
    return _TICKET.unpack(data)[0] if len(data) == _TICKET.size else None
