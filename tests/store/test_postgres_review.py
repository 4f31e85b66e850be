"""PostgreSQL store, review findings: a store made again is noticed by readers and by the
first append, the partition ahead is made by a store that lives for weeks, and appends that
make new jobs in opposite orders do not deadlock."""

from __future__ import annotations

import datetime
import threading
import uuid
from typing import Any

import pytest

from mlgoodput.events import Event, EventBatch, Kind
from mlgoodput.store import StoreError, _postgres, open_store
from tests.pgserver import fresh_database
from tests.waiting import wait_for

pytestmark = pytest.mark.slow


def _steps(first: int, n: int, host: int = 0) -> list[Event]:
    return [Event(Kind.STEP_START, 1.7e9 + (first + i) * 0.5, host, step=first + i) for i in range(n)]


def _writer() -> int:
    return uuid.uuid4().int >> 65


def _fresh_db(url: str) -> str:
    return fresh_database(url, "review")


def _drop_store(url: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as c:
        for t in ("mlgoodput_chunks", "mlgoodput_writers", "mlgoodput_jobs", "mlgoodput_meta"):
            c.execute(f"DROP TABLE {t} CASCADE")


def test_a_long_lived_reader_never_reads_another_jobs_rows_after_the_store_is_made_again(
    postgres_url: str,
) -> None:
    url = _fresh_db(postgres_url)
    a, reader = open_store(url), open_store(url)
    a.append("ns", "j", EventBatch(_writer(), 0, _steps(0, 3)))
    first = reader.read("ns", "j")
    assert len(first) == 3
    old_id = reader.identity()  # type: ignore[attr-defined]
    _drop_store(url)
    b = open_store(url)
    b.append("ns", "other", EventBatch(_writer(), 0, _steps(0, 5, host=7)))  # stream id 1 again
    again = reader.read("ns", "j", first.cursor)
    assert len(again) == 0  # job j has no rows in the new store; "other"'s are not j's
    assert reader.stream_position("ns", "j", first.cursor)[1] == 0  # type: ignore[attr-defined]
    assert list(reader.scan("ns", "j")) == []  # type: ignore[attr-defined]
    assert reader.identity() != old_id  # type: ignore[attr-defined]
    assert reader.identity() == b.identity()  # type: ignore[attr-defined]
    assert [e.host for e in reader.read("ns", "other").columns.events()] == [7] * 5
    for st in (a, b, reader):
        st.close()  # type: ignore[attr-defined]


def test_the_first_append_after_the_store_is_made_again_goes_to_the_new_store(postgres_url: str) -> None:
    url = _fresh_db(postgres_url)
    a = open_store(url)
    w = _writer()
    a.append_batches([("ns", "j", EventBatch(w, 0, _steps(0, 3)))])  # type: ignore[attr-defined]
    old_id = a.identity()  # type: ignore[attr-defined]
    _drop_store(url)
    b = open_store(url)
    b.read("ns", "x")  # makes the schema again
    a.append_batches([("ns", "j", EventBatch(w, 3, _steps(3, 3)))])  # type: ignore[attr-defined]
    assert a.identity() == b.identity() != old_id  # type: ignore[attr-defined]
    assert [e.step for e in b.read("ns", "j").columns.events()] == [3, 4, 5]
    a.close()  # type: ignore[attr-defined]
    b.close()  # type: ignore[attr-defined]


def test_a_store_living_for_weeks_makes_each_partition_ahead(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = _fresh_db(postgres_url)
    t0 = 20000 * 86400.0  # a period's first day (20000 % 7 == 1: any day works)
    now = [t0]
    monkeypatch.setattr(_postgres, "clock", lambda: now[0])
    st = open_store(url)
    w = _writer()
    p = _postgres.PARTITION_DAYS
    start = 20000 - 20000 % p
    for k in range(4):
        now[0] = t0 + k * p * 86400
        st.append("ns", "j", EventBatch(w, k, _steps(k, 1)))
        firsts = [(d - datetime.date(1970, 1, 1)).days for _, d, _ in st.partitions()]  # type: ignore[attr-defined]
        assert start + (k + 1) * p in firsts, k  # the one ahead exists before its first append
    assert [e.step for e in st.read("ns", "j").columns.events()] == [0, 1, 2, 3]
    st.close()  # type: ignore[attr-defined]


def _past_the_partition_ahead(postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Any, int, list[int]]:
    """A fresh store with one append, its clock then moved past the partition made ahead (the
    next append must make one), DDL giving way after 50 ms: (url, store, writer, [partitions
    made waiting])."""
    url = _fresh_db(postgres_url)
    now = [20000 * 86400.0]
    monkeypatch.setattr(_postgres, "clock", lambda: now[0])
    monkeypatch.setattr(_postgres, "DDL_LOCK_TIMEOUT_MS", 50)
    st = open_store(url)
    w = _writer()
    st.append("ns", "j", EventBatch(w, 0, _steps(0, 1)))
    tries = [0]
    real = _postgres._add_partition

    def counted(start: int, wait: bool, conn: Any) -> bool:
        if wait:
            tries[0] += 1
        return real(start, wait, conn)

    monkeypatch.setattr(_postgres, "_add_partition", counted)
    now[0] += 3 * _postgres.PARTITION_DAYS * 86400  # past the one made ahead
    return url, st, w, tries


def test_making_a_partition_waits_for_no_reader_or_appender(postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A partition is attached (SHARE UPDATE EXCLUSIVE on the table), not created in place
    (ACCESS EXCLUSIVE): a long reader and an unfinished append hold their locks on the table
    while the partition an append needs is made on the first try, and neither queues behind it."""
    import psycopg

    monkeypatch.setattr(_postgres, "DDL_RETRY_S", 5.0)  # a DDL that keeps giving way fails the append
    url, st, w, tries = _past_the_partition_ahead(postgres_url, monkeypatch)
    with psycopg.connect(url) as reader, psycopg.connect(url) as appender:
        reader.execute("SELECT count(*) FROM mlgoodput_chunks")  # holds ACCESS SHARE until it ends
        appender.execute(  # an append still open: ROW EXCLUSIVE on the table and this week's partition
            "INSERT INTO mlgoodput_chunks (stream, day, seq, n, data) VALUES (0, 20000, 1, 0, '')"
        )
        st.append("ns", "j", EventBatch(w, 1, _steps(1, 1)))
        assert tries[0] == 1  # made on the first try: it did not queue behind them
        appender.rollback()
        reader.rollback()
    assert [e.step for e in st.read("ns", "j").columns.events()] == [0, 1]
    st.close()  # type: ignore[attr-defined]


def test_making_a_partition_gives_way_to_a_conflicting_lock_and_retries(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What attaching a partition does queue behind (a VACUUM or ANALYZE of the table, other
    DDL: SHARE UPDATE EXCLUSIVE) makes it give up after DDL_LOCK_TIMEOUT_MS and try again, and
    reads meanwhile are not stuck behind it."""
    import psycopg

    url, st, w, tries = _past_the_partition_ahead(postgres_url, monkeypatch)
    errors: list[BaseException] = []
    with psycopg.connect(url) as holder:
        holder.execute("LOCK TABLE mlgoodput_chunks IN SHARE UPDATE EXCLUSIVE MODE")  # what VACUUM takes

        def append() -> None:
            try:
                st.append("ns", "j", EventBatch(w, 1, _steps(1, 1)))
            except BaseException as e:
                errors.append(e)

        t = threading.Thread(target=append)
        t.start()
        assert wait_for(lambda: tries[0] >= 3, timeout_s=60)  # gave up and tried again, more than once
        other = open_store(url)
        assert len(other.read("ns", "j")) == 1  # a read is not stuck behind the waiting DDL
        other.close()  # type: ignore[attr-defined]
        holder.rollback()
    t.join(60)
    assert not t.is_alive() and errors == []
    assert [e.step for e in st.read("ns", "j").columns.events()] == [0, 1]
    st.close()  # type: ignore[attr-defined]


def _one_race(url: str, monkeypatch: pytest.MonkeyPatch) -> list[BaseException]:
    """Two appends, new jobs X, Y against Y, X; each waits after making its first new job
    until the other has made its first too or is waiting on a lock. The errors they raised."""
    import psycopg

    x, y = "X" + uuid.uuid4().hex, "Y" + uuid.uuid4().hex
    stores = [open_store(url), open_store(url)]
    ws = [_writer(), _writer()]
    for s, w in zip(stores, ws, strict=True):
        s.append("ns", "warm", EventBatch(w, 0, _steps(0, 1)))
    made = [threading.Event(), threading.Event()]
    pids = [s._conn.info.backend_pid for s in stores]  # type: ignore[attr-defined]
    real = _postgres.PostgresStore._stream
    mon = psycopg.connect(url, autocommit=True)

    def blocked(pid: int) -> bool:
        row = mon.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone()
        return row is not None and row[0] == "Lock"

    def hooked(self: Any, conn: Any, ns: str, job: str, create: bool = True) -> int | None:
        got = real(self, conn, ns, job, create)
        i = stores.index(self) if self in stores else -1
        if i >= 0 and job in (x, y) and not made[i].is_set():
            made[i].set()
            wait_for(lambda: made[1 - i].is_set() or blocked(pids[1 - i]), timeout_s=60)
        return got

    errors: list[BaseException] = []

    def go(i: int, order: list[str]) -> None:
        try:
            stores[i].append_batches(  # type: ignore[attr-defined]
                [("ns", j, EventBatch(ws[i], 1 + k, _steps(1 + k, 1))) for k, j in enumerate(order)]
            )
        except BaseException as e:
            errors.append(e)

    with monkeypatch.context() as m:
        m.setattr(_postgres.PostgresStore, "_stream", hooked)
        ts = [threading.Thread(target=go, args=(0, [x, y])), threading.Thread(target=go, args=(1, [y, x]))]
        for t in ts:
            t.start()
        for t in ts:
            t.join(120)
    mon.close()
    for s in stores:
        s.close()  # type: ignore[attr-defined]
    return errors


def test_appends_making_new_jobs_in_opposite_orders_do_not_deadlock(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In call order (X, Y against Y, X) the jobs' rows deadlock on mlgoodput_jobs."""
    url = _fresh_db(postgres_url)
    for _ in range(3):
        assert _one_race(url, monkeypatch) == []


def test_a_server_older_than_13_is_refused_at_open(postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """No PostgreSQL 12 at hand: a connection that reports 12.5 stands in for one."""
    import types

    import psycopg

    class Older:
        def __init__(self, conn: Any) -> None:
            self._conn = conn
            self.info = types.SimpleNamespace(server_version=120005)

        def __getattr__(self, name: str) -> Any:
            return getattr(self._conn, name)

    fake = types.SimpleNamespace(
        connect=lambda *a, **k: Older(psycopg.connect(*a, **k)), Error=psycopg.Error, errors=psycopg.errors
    )
    monkeypatch.setattr(_postgres, "_psycopg", lambda: fake)
    st = open_store(postgres_url)
    with pytest.raises(StoreError, match=r"needs PostgreSQL 13 or newer; the server is 12\.5"):
        st.read("ns", "j")
