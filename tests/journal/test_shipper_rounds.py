"""The shipper's rounds: each ships what was journaled when it began, and a backlog left
by appends made meanwhile starts the next round at once (no idle wait under load)."""

from __future__ import annotations

import threading

from mlgoodput._journal import Journal
from mlgoodput.events import EventBatch, Kind
from mlgoodput.store import MemoryStore


def test_the_shipper_goes_again_at_once_while_a_backlog_remains() -> None:
    """A round ships what was journaled when it began and reports done; events appended
    meanwhile wake the next round at once instead of waiting for the interval."""
    j: Journal | None = None
    shipped: list[int] = []

    class AppendingStore(MemoryStore):
        def append(self, namespace: str, job: str, batch: EventBatch) -> None:
            super().append(namespace, job, batch)
            shipped.append(len(batch.events))
            if len(shipped) == 1:  # while the first batch is being shipped, the loop records on
                assert j is not None
                for i in range(10):
                    j.append(Kind.STEP_START, 2.0 + i, 100 + i)

    store = AppendingStore()
    j = Journal(store, "ns", "job", 0, interval_s=3600)
    j._thread = threading.current_thread()  # no shipper thread: this test runs the rounds itself
    for i in range(5):
        j.append(Kind.STEP_START, 1.0 + i, i)
    j._wake.clear()
    assert j._work() is True  # all that was there when the round began is stored
    assert shipped == [5] and j.pending() == 10
    assert j._wake.is_set()  # and the next round starts at once
    j._wake.clear()
    assert j._work() is True and j.pending() == 0 and shipped == [5, 10]
    assert not j._wake.is_set()  # nothing left: the shipper sleeps for its interval
    assert [e.step for e in store.read("ns", "job").columns.events()] == [*range(5), *range(100, 110)]
    j._thread = None
    j.close(5)
