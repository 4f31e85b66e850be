"""Where a run's events go: the process's durable journal for the run's stream.

`open_sink` returns the shared `Journal` for (store, `mlgoodput.run`, run name, host).
Until the journal module is available it falls back to a small in-memory shipper, so
the rest of diagnostics is written against one `append` signature either way.
"""

from __future__ import annotations

import collections
import random
import threading
from typing import Any, Protocol

from mlgoodput._worker import BackgroundWorker
from mlgoodput.events import Event, EventBatch, Kind
from mlgoodput.store import Store, StoreError

NAMESPACE = "mlgoodput.run"


class Sink(Protocol):
    """The journal's interface as diagnostics uses it."""

    def append(
        self,
        kind: Kind,
        time: float,
        step: int | None = None,
        value: float | None = None,
        name: str | None = None,
        attrs: dict[str, Any] | None = None,
    ) -> None: ...

    def flush(self, timeout_s: float | None = None) -> bool: ...

    def close(self) -> Any: ...


def open_sink(store: Store, job: str, host: int) -> Sink:
    """The journal for this run's stream (shared by every writer of it in this process)."""
    try:
        from mlgoodput._journal import Journal  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return _fallback(store, job, host)
    sink: Sink = Journal.for_stream(store, NAMESPACE, job, host)
    return sink


_fallbacks: dict[tuple[str, str, int], _Shipper] = {}
_fallback_lock = threading.Lock()


def _fallback(store: Store, job: str, host: int) -> Sink:
    key = (store.url, job, host)
    with _fallback_lock:
        s = _fallbacks.get(key)
        if s is None or s._closed:
            s = _fallbacks[key] = _Shipper(store, job, host)
            s.start()
        return s


class _Shipper(BackgroundWorker):
    """Stand-in for the journal: a deque drained into the store by a background thread."""

    def __init__(self, store: Store, job: str, host: int) -> None:
        super().__init__(f"mlgoodput-run-{job}", interval_s=0.5)
        self._store = store
        self._job = job
        self._host = host
        self._q: collections.deque[tuple[Any, ...]] = collections.deque()
        self._writer = random.getrandbits(62)
        self._seq = 0
        self._pending: list[Event] = []

    def append(
        self,
        kind: Kind,
        time: float,
        step: int | None = None,
        value: float | None = None,
        name: str | None = None,
        attrs: dict[str, Any] | None = None,
    ) -> None:
        self._q.append((kind, time, step, value, name, attrs))

    def _work(self) -> bool:
        q = self._q
        while q:
            k, t, s, v, n, a = q.popleft()
            self._pending.append(Event(k, t, self._host, s, v, n, a))
        if not self._pending:
            return True
        try:
            self._store.append(NAMESPACE, self._job, EventBatch(self._writer, self._seq, self._pending))
        except StoreError:
            raise
        self._seq += len(self._pending)
        self._pending = []
        return not q

