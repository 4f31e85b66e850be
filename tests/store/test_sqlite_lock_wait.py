"""A writer waiting for the SQLite write lock takes it within a few milliseconds of its
release, and the store counts how long it waited (SQLite's own busy handler sleeps up to
100 ms between tries)."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import pytest

from mlgoodput.events import Event, EventBatch, Kind
from mlgoodput.store import open_store
from mlgoodput.store._sqlite import SQLiteStore


def _hold_lock(path: str, held: threading.Event, release: threading.Event, released_at: list[float]) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    held.set()
    release.wait(30)
    conn.execute("COMMIT")
    released_at.append(time.monotonic())
    conn.close()


@pytest.mark.slow
def test_a_waiting_writer_takes_the_lock_soon_after_its_release(tmp_path: Path) -> None:
    path = str(tmp_path / "s.db")
    st = open_store(path)
    assert isinstance(st, SQLiteStore)
    st.append("ns", "job", EventBatch(1, 0, [Event(Kind.JOB_START, 1.0)]))  # schema made, connection open
    late: list[float] = []
    for r in range(3):
        held, release, released_at = threading.Event(), threading.Event(), []  # type: list[float]
        holder = threading.Thread(target=_hold_lock, args=(path, held, release, released_at))
        holder.start()
        assert held.wait(30)
        done_at: list[float] = []

        def append(r: int = r, done_at: list[float] = done_at) -> None:
            st.append("ns", "job", EventBatch(1, 1 + r, [Event(Kind.STEP_START, 2.0 + r, step=r)]))
            done_at.append(time.monotonic())

        waiter = threading.Thread(target=append)
        waiter.start()
        time.sleep(0.45)  # how long the other writer holds the lock (not a synchronization)
        assert not done_at  # still waiting
        release.set()
        waiter.join(30)
        holder.join(30)
        assert done_at and released_at
        late.append(done_at[0] - released_at[0])
    # SQLite's busy handler, by then sleeping 100 ms between tries, comes back about 80 ms
    # after a release 0.45 s into the wait; polling every 2 ms comes back within a few ms
    assert min(late) < 0.03, late
    assert st.lock_waits == 4 and 0.45 <= st.lock_wait_max_s <= st.lock_wait_total_s
    assert [e.step for e in st.read("ns", "job").columns.events()] == [None, 0, 1, 2]
    st.close()


def test_a_lock_held_past_the_busy_timeout_is_a_store_error(tmp_path: Path) -> None:
    import pytest

    from mlgoodput.store import StoreError

    path = str(tmp_path / "s.db")
    st = SQLiteStore(path, busy_timeout_s=0.2)
    st.append("ns", "job", EventBatch(1, 0, [Event(Kind.JOB_START, 1.0)]))
    held, release, released_at = threading.Event(), threading.Event(), []  # type: list[float]
    holder = threading.Thread(target=_hold_lock, args=(path, held, release, released_at))
    holder.start()
    assert held.wait(30)
    t = time.monotonic()
    with pytest.raises(StoreError, match="locked"):
        st.append("ns", "job", EventBatch(1, 1, [Event(Kind.STEP_START, 2.0, step=0)]))
    assert 0.2 <= time.monotonic() - t < 5
    release.set()
    holder.join(30)
    st.append("ns", "job", EventBatch(1, 1, [Event(Kind.STEP_START, 2.0, step=0)]))  # and then it works
    assert len(st.read("ns", "job")) == 2
    st.close()


def test_an_open_that_waits_for_another_process_says_so_while_it_waits(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Opening a store whose lock another process holds (a first open switches the file to
    WAL, which needs it) used to wait up to 30 s in silence."""
    import logging

    from mlgoodput.store import _sqlite
    from waiting import wait_for

    monkeypatch.setattr(_sqlite, "OPEN_WAIT_LOG_S", 0.2)
    path = str(tmp_path / "new.db")
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # a fresh file, held: the open cannot switch it to WAL
    caplog.set_level(logging.WARNING, logger="mlgoodput")
    opened: list[object] = []
    t = threading.Thread(target=lambda: opened.append(SQLiteStore(path, busy_timeout_s=30).jobs()))
    t.start()
    try:
        wait_for(lambda: any("has waited" in m for m in caplog.messages), what="a warning while it waits")
        assert not opened
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    t.join(30)
    assert opened == [[]]
    assert any("opened after" in m for m in caplog.messages)
