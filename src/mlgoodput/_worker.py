"""The one background-worker pattern: every part of mlgoodput that works in rounds beside
its caller is a `BackgroundWorker` (the journal's shipper, the exporter process's supervisor
and finisher and its per-exporter threads, the Prometheus endpoint, the metric shipper, the
completion watcher, the console's client, sink, store process, usage sampler and display,
the diagnostics' feed, system sampler and profile uploader, the PostgreSQL store's call
deadlines, and the web UI's warmer and its goodput-over-time pieces).

Not workers, by design: the servers' own event-loop threads (`LimitedServer`, the console
server), which wait on sockets instead of running rounds, and threads that run one call
against a deadline (an exporter's shutdown in the exporter process, the console's SIGTERM
watcher, the torch FLOP advice, the on-demand profiler's requests).

A worker is a named daemon thread, woken by `submit`, `wake` or an interval, that calls
`_work()` until it says nothing is left. The contract, for the caller:

- `submit(item)` puts an item in a bounded queue (`BoundedQueue`) and never blocks: when the
  queue is full the policy (`drop-new` or `drop-oldest`) drops one item, counts it in
  `dropped` and logs a warning once.
- `flush(timeout_s)` and `close(timeout_s)` return by their deadline whatever the backend
  does. A round still stuck then is abandoned on its daemon thread (counted in `abandoned`;
  `close()` returns False); work a subclass keeps in a journal stays there for the next
  process, it is not lost.
- Fork safety lives here only: one `os.register_at_fork` hook resets every worker in the
  child, which then restarts (`after_fork = "restart"`) or stays stopped (`"stop"`); a
  subclass resets its own state in `_on_fork_in_child()`.
- Errors take one path, `_report_error`: logged once per kind, counted, the last one kept;
  `worker_status()` (a `WorkerStatus`) and `worker_statuses()` show them, and `mlgoodput --debug`
  (or MLGOODPUT_DEBUG=1) prints one line per worker at exit.

A failing round is retried with exponential backoff; it never kills the thread.
"""

from __future__ import annotations

import atexit
import inspect
import logging
import os
import sys
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Literal, TypeVar

from mlgoodput import _env
from mlgoodput._once import Once

__all__ = [
    "DEFAULT_DEADLINE_S",
    "EXIT_DEADLINE_S",
    "BackgroundWorker",
    "BoundedQueue",
    "WorkerStatus",
    "at_fork_in_child",
    "deadline_after",
    "enable_debug_report",
    "exit_time_left",
    "worker_statuses",
]

log = logging.getLogger("mlgoodput")

T = TypeVar("T")

#: How long `flush()` and `close()` wait when no `timeout_s` is given. Work not done by then
#: stays with the worker (a journal keeps it on disk for the next process); nothing waits forever.
DEFAULT_DEADLINE_S = 10.0

#: How long all at-exit closers together may take: the first one to run fixes the process's
#: exit deadline (`exit_time_left()`), the others share what is left of it.
EXIT_DEADLINE_S = 5.0

#: Environment variable: "1" prints one status line per worker at exit (as `mlgoodput --debug`).
DEBUG_ENV = _env.DEBUG

DropPolicy = Literal["drop-new", "drop-oldest"]
AfterFork = Literal["restart", "stop"]


def deadline_after(timeout_s: float | None, default_s: float, clock: Callable[[], float] = time.monotonic) -> float:
    """The clock time `timeout_s` from now; None means the bounded default, never forever."""
    return clock() + (default_s if timeout_s is None else max(0.0, timeout_s))


_exit_deadline: float | None = None


def exit_time_left() -> float:
    """Seconds an at-exit closer may still take: the first call fixes the deadline at
    EXIT_DEADLINE_S from then, so all closers of a process share one deadline."""
    global _exit_deadline
    now = time.monotonic()
    if _exit_deadline is None:
        _exit_deadline = now + EXIT_DEADLINE_S
    return max(0.0, _exit_deadline - now)


class BoundedQueue(Generic[T]):
    """A thread-safe FIFO of at most `maxsize` items whose `put` never blocks.

    When full, `drop-new` refuses the new item and `drop-oldest` drops the oldest one to
    make room; either way the drop is counted in `dropped` and a warning is logged once."""

    def __init__(self, maxsize: int, policy: DropPolicy = "drop-new", name: str = "queue") -> None:
        if isinstance(maxsize, bool) or not isinstance(maxsize, int) or maxsize < 1:
            raise ValueError(f"maxsize must be a positive integer, got {maxsize!r}")
        if policy not in ("drop-new", "drop-oldest"):
            raise ValueError(f"policy must be 'drop-new' or 'drop-oldest', got {policy!r}")
        self.maxsize = maxsize
        self.policy: DropPolicy = policy
        self.name = name
        self.dropped = 0
        self.put_count = 0
        self._items: deque[T] = deque()
        self._lock = threading.Lock()
        self._full = Once()  # the warning that it is full, said once

    def put(self, item: T) -> bool:
        """Add `item`; False when the queue was full and an item was dropped (this one under
        `drop-new`, the oldest under `drop-oldest`)."""
        with self._lock:
            self.put_count += 1
            if len(self._items) < self.maxsize:
                self._items.append(item)
                return True
            self.dropped += 1
            if self.policy == "drop-oldest":
                self._items.popleft()
                self._items.append(item)
        self._full.warning(
            log,
            "full",
            "mlgoodput: %s is full (%d items): dropping the %s items (counted; logged once)",
            self.name,
            self.maxsize,
            "newest" if self.policy == "drop-new" else "oldest",
        )
        return False

    def put_front(self, items: Iterable[T]) -> None:
        """Give back items taken but not done (a failed round), ahead of newer ones; what
        does not fit is dropped and counted, the newest first."""
        with self._lock:
            back = list(items)
            room = self.maxsize - len(self._items)
            if len(back) > room:
                self.dropped += len(back) - max(0, room)
                back = back[: max(0, room)]
            self._items.extendleft(reversed(back))

    def take(self, max_items: int | None = None) -> list[T]:
        """Remove and return up to `max_items` items (all when None), oldest first."""
        with self._lock:
            if max_items is None or max_items >= len(self._items):
                out = list(self._items)
                self._items.clear()
                return out
            return [self._items.popleft() for _ in range(max_items)]

    def items(self) -> list[T]:
        """A copy of the queued items, oldest first."""
        with self._lock:
            return list(self._items)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        return len(self._items)

    def _after_fork(self) -> None:
        self._lock = threading.Lock()
        self._items.clear()  # the parent's items: the parent does them


@dataclass(frozen=True)
class WorkerStatus:
    """One worker as operators see it (`worker_statuses()`, `mlgoodput --debug`)."""

    name: str
    kind: str
    running: bool
    closed: bool
    pending: int
    submitted: int
    dropped: int
    failures: int
    abandoned: int
    last_error: str | None

    def line(self) -> str:
        state = "running" if self.running else ("closed" if self.closed else "idle")
        err = f" last_error={self.last_error!r}" if self.last_error else ""
        return (
            f"{self.name} ({self.kind}): {state} pending={self.pending} submitted={self.submitted}"
            f" dropped={self.dropped} failures={self.failures} abandoned={self.abandoned}{err}"
        )


_workers: weakref.WeakSet[BackgroundWorker] = weakref.WeakSet()


def worker_statuses() -> list[WorkerStatus]:
    """The status of every worker of this process (closed ones included while they exist)."""
    return sorted((w.worker_status() for w in list(_workers)), key=lambda s: (s.name, s.kind))


class BackgroundWorker:
    """Subclass and implement `_work()` (return True when nothing is left to do), or, for a
    queue worker, `_handle(items)`, which the default `_work` calls with submitted items.

    `flush()` and `close()` without a timeout wait at most `deadline_s` (a class attribute,
    DEFAULT_DEADLINE_S unless a subclass says otherwise) and then return False.
    """

    deadline_s: ClassVar[float] = DEFAULT_DEADLINE_S
    #: Whether close()'s last flush stops at the first failing round (a backend that is down
    #: is tried once on the way out) instead of retrying until the deadline.
    close_gives_up_on_failure: ClassVar[bool] = False
    #: In a forked child: "restart" gives the child a fresh worker of its own (started if the
    #: parent's was running); "stop" leaves it closed (the work belongs to the parent).
    after_fork: ClassVar[AfterFork] = "restart"
    #: The submit queue: its size, what a full queue drops, and how many items a round takes.
    queue_size: ClassVar[int] = 10_000
    queue_policy: ClassVar[DropPolicy] = "drop-new"
    batch_size: ClassVar[int | None] = None

    def __init__(
        self,
        name: str,
        *,
        interval_s: float = 1.0,
        max_backoff_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not interval_s > 0:
            raise ValueError(f"interval_s must be > 0, got {interval_s!r}")
        self.name = name
        self.interval_s = float(interval_s)
        self.max_backoff_s = float(max_backoff_s)
        self._clock = clock
        self._queue: BoundedQueue[Any] = BoundedQueue(self.queue_size, self.queue_policy, f"{name} queue")
        self._init_sync()
        self._thread: threading.Thread | None = None
        self._closing = False
        self._closed = False
        self._clean = True  # the last round left nothing to do
        self.failures = 0  # rounds (and cleanups) that raised
        self.abandoned = 0  # rounds left stuck on their thread when a deadline passed
        self.last_error: BaseException | None = None
        self._logged = Once()  # what was logged: each kind of error once
        _workers.add(self)

    def _init_sync(self) -> None:
        self._wake = threading.Event()
        self._cond = threading.Condition()
        self._requested = 0  # flush generation asked for
        self._done = 0  # flush generation completed with nothing pending
        self._failed = 0  # latest flush generation whose round raised
        self._close_lock = threading.Lock()

    # -- the contract ----------------------------------------------------------------
    def start(self) -> None:
        """Start the thread (idempotent; nothing after close)."""
        self._start_thread()

    def _start_thread(self) -> None:
        """What `start` does here; submit and close call this one, so that a subclass's
        `start` (which may open a backend) runs only when its owner asks for it."""
        if self._thread is not None or self._closed:
            return
        t = threading.Thread(target=self._loop, name=self.name, daemon=True)
        self._thread = t
        t.start()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def dropped(self) -> int:
        """Items dropped: by the full queue, after close, or counted by a subclass."""
        return self._queue.dropped

    @dropped.setter
    def dropped(self, n: int) -> None:
        self._queue.dropped = n

    def submit(self, item: Any) -> bool:
        """Queue `item` for the worker thread; never blocks and never raises. False when an
        item was dropped (a full queue, counted in `dropped`) or the worker is closed."""
        if self._closed or self._closing:
            self._queue.dropped += 1
            self._logged.warning(
                log, "closed", "mlgoodput: %s: an item submitted after close was dropped (logged once)", self.name
            )
            return False
        ok = self._queue.put(item)
        if self._thread is None:
            self._start_thread()
        self._wake.set()
        return ok

    def wake(self) -> None:
        self._wake.set()

    def flush(self, timeout_s: float | None = None) -> bool:
        """Wait until everything handed to the worker before this call is done; False when
        that takes longer than `timeout_s` (default: `deadline_s`)."""
        return self._flush(timeout_s, give_up_on_failure=False)

    def final_flush(self, timeout_s: float | None = None) -> bool:
        """Like `flush`, but False as soon as a round started after this call fails: on the
        way out a failing backend is tried once, not retried until the deadline."""
        return self._flush(timeout_s, give_up_on_failure=True)

    def close(self, timeout_s: float | None = None) -> bool:
        """Do a last round, stop the thread and release resources; True if all was done.

        Returns within `timeout_s` (default: `deadline_s`) whatever the backend does: a round
        still stuck then is abandoned on its daemon thread (counted in `abandoned`) and
        close() returns False. Safe to call twice."""
        if self._closed:
            return True
        deadline = deadline_after(timeout_s, self.deadline_s, self._clock)
        # one closer at a time (the program's and the at-exit one): the second waits its turn
        # within its own deadline, then finds the worker closed
        if not self._close_lock.acquire(timeout=max(0.0, deadline - self._clock())):
            return False
        try:
            if self._closed:
                return True
            return self._close_locked(deadline)
        finally:
            self._close_lock.release()

    def _close_locked(self, deadline: float) -> bool:
        self._start_thread()  # the last round runs on the worker thread, never on the caller's
        ok = True
        if self._thread is not None:
            ok = self._flush(deadline - self._clock(), give_up_on_failure=self.close_gives_up_on_failure)
        self._closing = True
        self._wake.set()
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(max(0.0, deadline - self._clock()))
            if t.is_alive():
                self.abandoned += 1
                ok = False
                log.debug("mlgoodput: %s: a round still running at close was left behind", self.name)
        self._closed = True
        self._thread = None
        try:
            if self._on_close(max(0.0, deadline - self._clock())) is False:
                ok = False
        except Exception as e:  # a cleanup failure is reported, not raised into the caller
            self._report_error(e)
            ok = False
        return ok

    def worker_status(self) -> WorkerStatus:
        e = self.last_error
        return WorkerStatus(
            name=self.name,
            kind=type(self).__name__,
            running=self.running and not self._closed,
            closed=self._closed,
            pending=self._backlog(),
            submitted=self._queue.put_count,
            dropped=self.dropped,
            failures=self.failures,
            abandoned=self.abandoned,
            last_error=None if e is None else f"{type(e).__name__}: {e}",
        )

    # -- for subclasses --------------------------------------------------------------
    def _work(self) -> bool:
        """One round; True when nothing is left. The default hands queued items to
        `_handle`; items of a round that raises go back to the queue for the next one."""
        items = self._queue.take(self.batch_size)
        if items:
            try:
                self._handle(items)
            except BaseException:
                self._queue.put_front(items)
                raise
        left = len(self._queue)
        if left and items:
            self._wake.set()  # more than one batch (or more came): the next round now, not after a back-off
        return left == 0

    def _handle(self, items: list[Any]) -> None:
        raise NotImplementedError(f"{type(self).__name__} implements neither _work nor _handle")

    def _backlog(self) -> int:
        """Work not done yet (default: the queue's length), for `worker_status()`."""
        return len(self._queue)

    def _take(self, max_items: int | None = None) -> list[Any]:
        """Queued items, oldest first (for a subclass's own `_work`)."""
        return self._queue.take(max_items)

    def _on_close(self, timeout_s: float) -> bool | None:
        """Release resources; runs once, on the closing thread, with the time left of
        close()'s deadline (it must return within it). False makes close() return False."""
        return None

    def _on_fork_in_child(self) -> None:
        """Runs in a forked child after the worker's own state was reset, before it restarts
        (`after_fork = "restart"`); a subclass drops what belongs to the parent here."""

    def log_once(
        self, key: str, msg: str, *args: object, level: int = logging.WARNING, logger: logging.Logger | None = None
    ) -> bool:
        """For subclasses: log `msg` (to `logger`, default "mlgoodput") the first time `key`
        comes to this worker (the errors' keys, their type names, share the same record); True
        when it was logged now."""
        return self._logged.log(log if logger is None else logger, key, msg, *args, level=level)

    def _report_error(self, e: BaseException) -> None:
        """The one path for errors: counted, kept as `last_error`, logged once per kind."""
        self.failures += 1
        self.last_error = e
        self._logged.warning(log, type(e).__name__, "%s: %s (will retry; logged once)", self.name, e)

    # -- internals -------------------------------------------------------------------
    def _clean_now(self) -> bool:
        return self._clean and len(self._queue) == 0

    def _flush(self, timeout_s: float | None, *, give_up_on_failure: bool) -> bool:
        deadline = deadline_after(timeout_s, self.deadline_s, self._clock)
        if self._closed:
            return self._clean_now()
        if self._thread is None:
            self.start()
        with self._cond:
            self._requested += 1
            gen = self._requested
        self._wake.set()
        with self._cond:
            while self._done < gen:
                if self._thread is None or not self._thread.is_alive():
                    return False
                if give_up_on_failure and self._failed >= gen:
                    return False
                left = deadline - self._clock()
                if left <= 0:
                    return False
                self._cond.wait(min(left, 0.05))
        return True

    def _work_safely(self) -> bool:
        try:
            done = bool(self._work())
        except Exception as e:
            self._report_error(e)
            done = False
        self._clean = done
        return done

    def _loop(self) -> None:
        backoff = 0.0
        while True:
            with self._cond:
                gen = self._requested
            failures = self.failures
            done = self._work_safely()
            if self.failures != failures:
                with self._cond:
                    self._failed = max(self._failed, gen)
                    self._cond.notify_all()
            if done:
                backoff = 0.0
                with self._cond:
                    if gen > self._done:
                        self._done = gen
                    self._cond.notify_all()
            else:
                backoff = min(self.max_backoff_s, max(0.05, backoff * 2 or 0.1))
            if self._closing or self._closed:
                if self._closing and done and len(self._queue):
                    self._work_safely()  # handed over while this round ran: delivered too
                return
            wait = backoff if backoff else self.interval_s
            self._wake.wait(wait)
            self._wake.clear()
            if self._closing:
                # one last round so close() delivers what was handed over meanwhile
                if self._work_safely():
                    with self._cond:
                        self._done = max(self._done, self._requested)
                        self._cond.notify_all()
                return

    def _reset_in_child(self) -> None:
        was_running = self._thread is not None and not self._closed
        self._init_sync()
        self._queue._after_fork()
        self._thread = None
        self._closing = False
        self._clean = True
        if self.after_fork == "stop":
            self._closed = True
        self._on_fork_in_child()
        if self.after_fork == "restart" and was_running and not self._closed:
            self._start_thread()


# -- fork and exit: one hook each for all workers ------------------------------------------
_fork_resets: list[Callable[[], Callable[[], None] | None]] = []


def at_fork_in_child(fn: Callable[[], None]) -> None:
    """Run `fn` in a forked child before the workers are reset (state that is not a worker's:
    a class-level lock, a server's flag), so that fork handling stays in this one hook. A
    bound method is held weakly: it stops running when its object is gone."""
    if inspect.ismethod(fn):
        _fork_resets.append(weakref.WeakMethod(fn))
    else:
        _fork_resets.append(lambda: fn)


def _after_fork_in_child() -> None:
    live = []
    for ref in _fork_resets:
        fn = ref()
        if fn is None:
            continue
        live.append(ref)
        try:
            fn()
        except Exception as e:
            log.debug("mlgoodput: reset after fork failed: %s", e)
    _fork_resets[:] = live
    for w in list(_workers):
        try:
            w._reset_in_child()
        except Exception as e:  # one worker's reset must not stop the others'
            log.debug("mlgoodput: %s: reset after fork failed: %s", w.name, e)


os.register_at_fork(after_in_child=_after_fork_in_child)

_debug_report = False  # `mlgoodput --debug`; $MLGOODPUT_DEBUG is read at exit, not at import


def enable_debug_report() -> None:
    """Print one status line per worker to stderr at exit (`mlgoodput --debug`)."""
    global _debug_report
    _debug_report = True


def _print_debug_report() -> None:
    if not (_debug_report or _env.debug_on()):
        return
    try:
        statuses = worker_statuses()
        for s in statuses:
            print(f"mlgoodput: worker {s.line()}", file=sys.stderr)
        if not statuses:
            print("mlgoodput: no background workers in this process", file=sys.stderr)
    except Exception:  # at exit, never raise
        pass


# Registered at import, before any closer (they all import this module): atexit runs it last.
atexit.register(_print_debug_report)
