"""A deadline on every call a store makes to its database server.

A call that waits on the server past its deadline (a lock that is never released, a
backend that stopped reading, a network that drops packets without a reset) would hold its
caller for good: a shipper's round, and with the node shipper every process's hand-over on
that machine. The watch ends such a wait in two stages, so the caller gets an error and
retries later while the events stay in the journal:

1. past the deadline, the query is cancelled on the server (the cancel request goes over a
   connection of its own), which ends a lock wait or a long statement at once;
2. when even that brings no answer within CANCEL_GRACE_S, the connection's socket is shut,
   which ends the client's wait on it whatever the server does.

One watcher thread a process (a `BackgroundWorker`), started by the first watched call.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from mlgoodput._worker import BackgroundWorker

log = logging.getLogger("mlgoodput")

#: How long a cancelled call may still take to answer before its socket is shut.
CANCEL_GRACE_S = 5.0
#: How often the watcher looks at the calls in flight (their deadlines are this late at most;
#: a training process that journals to PostgreSQL has this thread, so it wakes seldom).
CHECK_EVERY_S = 1.0


@dataclass
class Call:
    """One watched call: its connection, when it is cut, and what was done to it."""

    conn: Any
    deadline: float
    timeout_s: float
    cancelled: bool = False  # the server was asked to cancel its query
    shut: bool = False  # the socket was shut

    @property
    def cut(self) -> bool:
        return self.cancelled or self.shut

    def why(self) -> str:
        """What the caller's error says when the watch ended the call."""
        how = "the connection was closed" if self.shut else "the query was cancelled"
        return f"no answer from the server within {self.timeout_s:g} s ({how})"


class CallWatch(BackgroundWorker):
    """Cancels, then cuts off, store calls still in flight past their deadline."""

    def __init__(self) -> None:
        super().__init__("mlgoodput-store-deadlines", interval_s=CHECK_EVERY_S)
        self._calls: dict[int, Call] = {}
        self._guard = threading.Lock()  # held while a socket is shut: its call (and connection) stays
        self._next = 0

    @contextlib.contextmanager
    def watch(self, conn: Any, timeout_s: float) -> Iterator[Call]:
        """Watch the calls made on `conn` inside the block; the block's connection must stay
        open until it ends (its owner closes it after, on an error)."""
        call = Call(conn, time.monotonic() + timeout_s, timeout_s)
        with self._guard:
            self._next += 1
            key = self._next
            self._calls[key] = call
            if self._thread is None:  # (under the guard: one thread, however many first calls)
                self.start()
        try:
            yield call
        finally:
            with self._guard:  # (waits while its socket is being shut)
                self._calls.pop(key, None)

    def in_flight(self) -> int:
        with self._guard:
            return len(self._calls)

    def _work(self) -> bool:
        now = time.monotonic()
        cancel = []
        with self._guard:
            for c in [c for c in self._calls.values() if c.deadline <= now and not c.shut]:
                if not c.cancelled:
                    c.cancelled = True
                    c.deadline = now + CANCEL_GRACE_S
                    cancel.append(c.conn)
                else:  # (under the guard: the call's connection, so its socket, is still open)
                    c.shut = True
                    _shut(c.conn)
        for conn in cancel:  # (a connection of its own: harmless if the call ended meanwhile)
            _cancel(conn)
        return True

    def _on_fork_in_child(self) -> None:
        self._calls.clear()  # the parent's calls and connections
        self._guard = threading.Lock()


def _cancel(conn: Any) -> None:
    try:
        if hasattr(conn, "cancel_safe"):  # psycopg 3.2+
            conn.cancel_safe(timeout=CANCEL_GRACE_S)
        else:
            conn.cancel()
    except Exception as e:  # the socket is shut CANCEL_GRACE_S later anyway
        log.debug("mlgoodput: cancelling a late store call failed: %s", e)


def _shut(conn: Any) -> None:
    try:
        fd = int(conn.pgconn.socket)
        s = socket.socket(fileno=os.dup(fd))
    except Exception as e:
        log.debug("mlgoodput: the socket of a late store call is gone: %s", e)
        return
    try:
        s.shutdown(socket.SHUT_RDWR)  # the connection itself, not only this duplicate
    except OSError as e:
        log.debug("mlgoodput: shutting the socket of a late store call failed: %s", e)
    finally:
        s.close()


_watch: CallWatch | None = None
_watch_lock = threading.Lock()


def watcher() -> CallWatch:
    """This process's watcher (made on first use)."""
    global _watch
    if _watch is None:
        with _watch_lock:
            if _watch is None:
                _watch = CallWatch()
    return _watch
