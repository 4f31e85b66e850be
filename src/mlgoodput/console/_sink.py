"""The server's store writer: everything received goes to the store in batches, then is acked.

A client's records are acknowledged only once they are in the store, so a client keeps
(and resends) whatever a crashed server never stored. The store drops a resent record it
already has, because each client is a store writer and its record numbers are sequences.
"""

from __future__ import annotations

import collections
import itertools
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from mlgoodput._worker import BackgroundWorker
from mlgoodput.events import Event, EventBatch
from mlgoodput.store import ColumnEvents, Store

NAMESPACE = "mlgoodput.console"


@dataclass(slots=True)
class _Item:
    writer: int
    first_seq: int
    events: Sequence[Event]
    on_stored: Callable[[], None] | None


class StoreSink(BackgroundWorker):
    """Appends submitted event runs to `store` under (NAMESPACE, job), merging runs per writer."""

    after_fork = "stop"  # the server's process stores what it received

    def __init__(self, store: Store, job: str, *, interval_s: float = 0.05) -> None:
        super().__init__("mlgoodput-console-store", interval_s=interval_s, max_backoff_s=2.0)
        self.store = store
        self.job = job
        self._items: collections.deque[_Item] = collections.deque()
        self._lock = threading.Lock()
        self._settled = threading.Condition(self._lock)  # notified when a round stored runs
        self.pending_events = 0
        self.stored_events = 0

    def submit_run(
        self, writer: int, first_seq: int, events: Sequence[Event], on_stored: Callable[[], None] | None = None
    ) -> None:
        with self._lock:
            self._items.append(_Item(writer, first_seq, events, on_stored))
            self.pending_events += len(events)
        self._wake.set()  # a round as soon as the last one ends: runs that come meanwhile go in together

    def wait_below(self, events: int, timeout_s: float) -> bool:
        """Wait until at most `events` are pending (a writer ahead of the store slows down to
        it, while the store keeps writing): False if still more after `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        with self._settled:
            while self.pending_events > events:
                left = deadline - time.monotonic()
                if left <= 0 or not self.running:
                    return False
                self._settled.wait(min(left, 0.1))
        return True

    def _work(self) -> bool:
        with self._lock:
            items = list(self._items)
        if not items:
            return True
        # merge contiguous runs of the same writer into one append (one transaction each)
        runs: list[tuple[int, int, list[_Item]]] = []  # (writer, first seq, its items)
        open_by_writer: dict[int, int] = {}
        ends: dict[int, int] = {}
        for it in items:
            gi = open_by_writer.get(it.writer)
            if gi is not None and ends[gi] == it.first_seq:
                runs[gi][2].append(it)
                ends[gi] += len(it.events)
                continue
            open_by_writer[it.writer] = len(runs)
            ends[len(runs)] = it.first_seq + len(it.events)
            runs.append((it.writer, it.first_seq, [it]))
        groups = [(w, first, _merged([it.events for it in its]), its) for w, first, its in runs]
        many = getattr(self.store, "append_many", None)
        if many is not None:  # every client's run in one transaction: one commit per round
            many(NAMESPACE, self.job, [EventBatch(w, first, evs) for w, first, evs, _ in groups if evs])
        for writer, first, evs, its in groups:
            if evs and many is None:
                self.store.append(NAMESPACE, self.job, EventBatch(writer, first, evs))
            with self._lock:
                for it in its:
                    self._items.remove(it)
                    self.pending_events -= len(it.events)
                    self.stored_events += len(it.events)
                self._settled.notify_all()
            for it in its:
                if it.on_stored is not None:
                    try:
                        it.on_stored()
                    except Exception:
                        pass
        with self._lock:
            return not self._items

    def _on_fork_in_child(self) -> None:
        # the server's process stores what it received; a forked child has no part in it
        self._items.clear()
        self._lock = threading.Lock()
        self._settled = threading.Condition(self._lock)


def _merged(parts: list[Sequence[Event]]) -> Sequence[Event]:
    """Consecutive runs of one writer as one: columns stay columns (no event objects made)."""
    if len(parts) == 1:
        return parts[0]
    if all(isinstance(p, ColumnEvents) for p in parts):
        return ColumnEvents.join(parts)  # type: ignore[arg-type]
    return list(itertools.chain.from_iterable(parts))
