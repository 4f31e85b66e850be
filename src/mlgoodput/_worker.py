"""The one background-worker pattern used everywhere in mlgoodput.

A worker is a named daemon thread, woken by an Event or an interval, that repeatedly calls
`_work()`. Callers get `flush(timeout_s) -> bool`, a `close()` that is safe to call twice and
shares one deadline across its steps, fork safety, and errors raised once on their own
thread through `check_for_errors()`. A failing round is retried with exponential backoff;
it never kills the thread.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from collections.abc import Callable

log = logging.getLogger("mlgoodput")

#: How long `flush()` and `close()` wait when no `timeout_s` is given. Work not done by then
#: stays with the worker (a journal keeps it on disk for the next process); nothing waits forever.
DEFAULT_DEADLINE_S = 10.0


def deadline_after(timeout_s: float | None, default_s: float, clock: Callable[[], float] = time.monotonic) -> float:
    """The clock time `timeout_s` from now; None means the bounded default, never forever."""
    return clock() + (default_s if timeout_s is None else max(0.0, timeout_s))


class BackgroundWorker:
    """Subclass and implement `_work()`; return True when nothing is left to do.

    `flush()` and `close()` without a timeout wait at most `deadline_s` (a class attribute,
    DEFAULT_DEADLINE_S unless a subclass says otherwise) and then return False.
    """

    deadline_s: float = DEFAULT_DEADLINE_S
    #: Whether close()'s last flush stops at the first failing round (a backend that is down
    #: is tried once on the way out) instead of retrying until the deadline.
    close_gives_up_on_failure: bool = False

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
        self._init_sync()
        self._thread: threading.Thread | None = None
        self._closing = False
        self._closed = False
        self._error: BaseException | None = None
        self._error_reported = False
        self.failures = 0  # rounds that raised, for operators and tests
        self._logged: set[str] = set()
        ref = weakref.ref(self)

        def _child() -> None:
            w = ref()
            if w is not None:
                w._after_fork_in_child()

        os.register_at_fork(after_in_child=_child)

    def _init_sync(self) -> None:
        self._wake = threading.Event()
        self._cond = threading.Condition()
        self._requested = 0  # flush generation asked for
        self._done = 0  # flush generation completed with nothing pending
        self._failed = 0  # latest flush generation whose round raised

    # -- lifecycle -------------------------------------------------------------------
    def start(self) -> None:
        """Start the thread (idempotent)."""
        if self._thread is not None or self._closed:
            return
        t = threading.Thread(target=self._loop, name=self.name, daemon=True)
        self._thread = t
        t.start()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

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

    def _flush(self, timeout_s: float | None, *, give_up_on_failure: bool) -> bool:
        if self._thread is None:
            if self._closed:
                return self._work_safely()
            self.start()
        with self._cond:
            self._requested += 1
            gen = self._requested
        self._wake.set()
        deadline = deadline_after(timeout_s, self.deadline_s, self._clock)
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

    def close(self, timeout_s: float | None = None) -> bool:
        """Do a last round, stop the thread and release resources; True if all was done.
        Returns within `timeout_s` (default: `deadline_s`); a round still stuck then (in a
        hung backend) is left behind on its daemon thread."""
        if self._closed:
            return True
        deadline = deadline_after(timeout_s, self.deadline_s, self._clock)
        if self._thread is None:
            ok = self._work_safely()
        else:
            ok = self._flush(deadline - self._clock(), give_up_on_failure=self.close_gives_up_on_failure)
        self._closing = True
        self._wake.set()
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(max(0.0, deadline - self._clock()))
        self._closed = True
        self._thread = None
        try:
            self._on_close()
        except Exception as e:  # a cleanup failure is reported, not raised into the caller
            self._note_error(e)
        return ok

    def check_for_errors(self) -> None:
        """Raise, once, the first error the worker met (a later round may have recovered)."""
        if self._error is not None and not self._error_reported:
            self._error_reported = True
            raise self._error

    # -- for subclasses --------------------------------------------------------------
    def _work(self) -> bool:
        raise NotImplementedError

    def _on_close(self) -> None:
        """Release resources; runs once, on the closing thread."""

    def _after_fork_in_child(self) -> None:
        """Runs in a forked child. By default the child gets a fresh, stopped worker that
        restarts if the parent's was running; subclasses reset their own state first."""
        was_running = self._thread is not None and not self._closed
        self._init_sync()
        self._thread = None
        if was_running:
            self.start()

    # -- internals -------------------------------------------------------------------
    def _note_error(self, e: BaseException) -> None:
        self.failures += 1
        if self._error is None:
            self._error = e
        key = type(e).__name__
        if key not in self._logged:
            self._logged.add(key)
            log.warning("%s: %s (will retry; logged once)", self.name, e)

    def _work_safely(self) -> bool:
        try:
            return bool(self._work())
        except Exception as e:
            self._note_error(e)
            return False

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
            if self._closing:
                return
            wait = backoff if backoff else self.interval_s
            self._wake.wait(wait)
            self._wake.clear()
            if self._closing:
                # one last round so close() delivers what was handed over meanwhile
                self._work_safely()
                with self._cond:
                    self._done = max(self._done, self._requested)
                    self._cond.notify_all()
                return
