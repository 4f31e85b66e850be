"""Progress bars on the console: `Progress.new(total=..., msg=...)`, advanced from any process.

A bar sends at most about ten updates a second; the newest state is always sent in the
end (at the latest by the client's sender thread a moment later). A `distributed=True`
bar can be handed to other processes (it pickles to a handle): each process sends what
it added, and the server sums them, so the final count is exact.
"""

from __future__ import annotations

import itertools
import threading
import time
import weakref
from collections.abc import Sequence
from typing import Any

from mlgoodput.console._current import current_client
from mlgoodput.console._protocol import ProgressRec

MIN_INTERVAL_S = 0.1  # at most ~10 updates a second per bar
_ids = itertools.count()
_dirty: weakref.WeakSet[Progress] = weakref.WeakSet()
_dirty_lock = threading.Lock()


def _client() -> Any:
    return current_client()


def _desc(msg: object) -> str:
    if isinstance(msg, str):
        return msg
    if isinstance(msg, Sequence):
        return " ".join(str(m) for m in msg)
    raise TypeError(f"msg must be a string or a tuple of strings, got {msg!r}")


class Progress:
    """One progress bar. Use `Progress.new(...)` as a context manager."""

    def __init__(self, bar: str, desc: str, total: float | None, *, distributed: bool, owner: bool) -> None:
        self.bar = bar
        self.desc = desc
        self.total = total
        self.distributed = distributed
        self._owner = owner
        self._completed = 0.0  # what this process added (distributed) or the absolute count
        self._unsent = 0.0  # distributed: added here since the last send
        self._last = 0.0
        self._closed = False
        self._lock = threading.Lock()

    @classmethod
    def new(cls, total: float | None = None, msg: str | Sequence[str] = "", *, distributed: bool = False) -> Progress:
        """A new bar of `total` steps (None: unknown) described by `msg` (a string or a tuple)."""
        if total is not None:
            if isinstance(total, bool) or not isinstance(total, (int, float)) or total < 0:
                raise ValueError(f"total must be a non-negative number or None, got {total!r}")
            total = float(total)
        import os
        import secrets

        bar = f"{os.getpid()}-{secrets.token_hex(4)}-{next(_ids)}"
        p = cls(bar, _desc(msg), total, distributed=bool(distributed), owner=True)
        p._send(force=True)
        return p

    # -- counting ------------------------------------------------------------------------
    @property
    def completed(self) -> float:
        """Steps done as this process knows them (a distributed bar: those added here)."""
        return self._completed

    def advance(self, n: float = 1) -> None:
        """Add `n` steps (safe from threads and, for distributed bars, from other processes)."""
        with self._lock:
            self._completed += n
            self._unsent += n
        self._maybe_send()

    def update(self, completed: float, *, total: float | None = None) -> None:
        """Set the count (and optionally the total). A distributed bar takes `advance` only."""
        if self.distributed:
            raise ValueError("a distributed bar is shared by processes: use advance(n), not update()")
        with self._lock:
            self._completed = float(completed)
            if total is not None:
                self.total = float(total)
        self._maybe_send()

    def close(self) -> None:
        """Send the final state; the owner's close marks the bar done."""
        if self._closed:
            return
        self._closed = True
        with _dirty_lock:
            _dirty.discard(self)
        self._send(force=True, done=self._owner)

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __reduce__(self) -> tuple[Any, ...]:
        if not self.distributed:
            raise TypeError("only a Progress made with distributed=True can be shared with other processes")
        return (_handle, (self.bar, self.desc, self.total))

    # -- sending -------------------------------------------------------------------------
    def _maybe_send(self) -> None:
        if time.monotonic() - self._last >= MIN_INTERVAL_S:
            self._send()
        else:
            with _dirty_lock:
                _dirty.add(self)

    def _send(self, *, force: bool = False, done: bool = False) -> None:
        client = _client()
        if client is None:
            return
        with self._lock:
            delta, self._unsent = self._unsent, 0.0
            completed = None if self.distributed else self._completed
            self._last = time.monotonic()
        client.put(ProgressRec(time.time(), self.bar, self.desc, self.total, completed, delta, done, self.distributed))


def _handle(bar: str, desc: str, total: float | None) -> Progress:
    """A distributed bar arriving in another process: adds to the same bar."""
    return Progress(bar, desc, total, distributed=True, owner=False)


def flush_dirty(force: bool = False) -> None:
    """Send the newest state of bars whose last update was held back (the sender calls this)."""
    now = time.monotonic()
    with _dirty_lock:
        bars = list(_dirty)
    for b in bars:
        if force or now - b._last >= MIN_INTERVAL_S:
            with _dirty_lock:
                _dirty.discard(b)
            if b._unsent or not b.distributed:
                b._send()
