"""PostgreSQL at fleet scale: no shared counter row, many writers through pgbouncer, rounds of
many writers' batches in one transaction, partitions dropped by date, older stores read."""

from __future__ import annotations

import math
import struct
import threading
import time
import uuid
from collections import Counter
from typing import Any

import pytest

from mlgoodput.events import Event, EventBatch, Kind
from mlgoodput.store import _exactly_once, _postgres, open_store
from mlgoodput.store._columns import Columns
from mlgoodput.store._exactly_once import NewPart
from tests.pgserver import fresh_database
from tests.waiting import wait_for

pytestmark = pytest.mark.slow


def _steps(first: int, n: int, host: int, t0: float = 1.7e9) -> list[Event]:
    return [Event(Kind.STEP_START, t0 + (first + i) * 0.5, host, step=first + i) for i in range(n)]


def _writer() -> int:
    return uuid.uuid4().int >> 65


def _fresh_db(url: str) -> str:
    return fresh_database(url, "fleet")


def test_a_reader_never_passes_a_row_a_slower_transaction_commits_later(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A slow append (its transaction open, rows written, not committed) holds back every
    reader: a faster append that commits first is not read until the slow one commits, then
    both are read, the slow one's rows first (its transaction id is the smaller)."""
    job = uuid.uuid4().hex
    slow, fast = _writer(), _writer()
    written, release = threading.Event(), threading.Event()
    real = _exactly_once.before_mark

    def hold(part: NewPart) -> None:
        if part.writer == slow:
            written.set()
            assert release.wait(30)
        real(part)

    monkeypatch.setattr(_exactly_once, "before_mark", hold)
    a, b, reader = open_store(postgres_url), open_store(postgres_url), open_store(postgres_url)
    b.append("ns", job, EventBatch(fast, 0, _steps(0, 1, 1)))  # the job exists, its writer too
    first = reader.read("ns", job)
    assert [e.host for e in first.columns.events()] == [1]
    t = threading.Thread(target=a.append, args=("ns", job, EventBatch(slow, 0, _steps(0, 3, 2))))
    t.start()
    try:
        assert written.wait(30)
        b.append("ns", job, EventBatch(fast, 1, _steps(1, 2, 1)))  # commits while the slow one is open
        held = reader.read("ns", job, first.cursor)
        assert len(held) == 0 and held.cursor == first.cursor  # an empty read: the cursor stays
        assert reader.stream_position("ns", job, first.cursor) == (first.cursor, 1)
    finally:
        release.set()
        t.join(30)
    after = reader.read("ns", job, first.cursor)
    assert [(e.host, e.step) for e in after.columns.events()] == [(2, 0), (2, 1), (2, 2), (1, 1), (1, 2)]
    assert len(reader.read("ns", job, after.cursor)) == 0
    assert reader.stream_position("ns", job, after.cursor) == (after.cursor, 6)
    (info,) = [j for j in reader.jobs() if j.job == job]
    assert info.events == 6
    for st in (a, b, reader):
        st.close()


def test_a_round_of_many_writers_is_one_row_per_job_and_each_batch_once(postgres_url: str) -> None:
    import psycopg

    st = open_store(postgres_url)
    jobs = [uuid.uuid4().hex for _ in range(2)]
    writers = [_writer() for _ in range(16)]
    sent: list[tuple[str, int, int]] = []
    for rnd in range(5):
        items = []
        for i, w in enumerate(writers):
            job = jobs[i % 2]
            items.append(("ns", job, EventBatch(w, rnd, _steps(rnd, 1, i))))
            sent.append((job, i, rnd))
        st.append_batches(items)  # type: ignore[attr-defined]
        st.append_batches(items[:5])  # type: ignore[attr-defined]  # a retried round: stored already
    with psycopg.connect(postgres_url) as c:
        rows = c.execute(
            "SELECT j.job, count(*) FROM mlgoodput_chunks c JOIN mlgoodput_jobs j ON j.id = c.stream"
            " WHERE j.job = ANY(%s) GROUP BY j.job",
            (jobs,),
        ).fetchall()
    assert dict(rows) == {jobs[0]: 5, jobs[1]: 5}  # one row per job and round
    got = Counter((job, e.host, e.step) for job in jobs for e in st.read("ns", job).columns.events())
    assert got == Counter(sent)
    assert {j.job: j.events for j in st.jobs() if j.job in jobs} == {jobs[0]: 40, jobs[1]: 40}
    st.close()


def test_two_shippers_with_the_same_writers_in_any_order_never_deadlock(postgres_url: str) -> None:
    job = uuid.uuid4().hex
    writers = [_writer() for _ in range(8)]
    errors: list[BaseException] = []

    def ship(order: list[int]) -> None:
        st = open_store(postgres_url)
        try:
            for rnd in range(30):
                st.append_batches(  # type: ignore[attr-defined]
                    [("ns", job, EventBatch(writers[i], rnd, _steps(rnd, 1, i))) for i in order]
                )
        except BaseException as e:
            errors.append(e)
        finally:
            st.close()

    ts = [threading.Thread(target=ship, args=(o,)) for o in (list(range(8)), list(range(7, -1, -1)))]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    assert errors == []
    st = open_store(postgres_url)
    got = sorted((e.host, e.step) for e in st.read("ns", job).columns.events())
    assert got == sorted((i, r) for i in range(8) for r in range(30))
    st.close()


def test_odd_values_round_trip_bit_for_bit(postgres_url: str) -> None:
    """Small rows take compact forms (XOR, differences): every bit comes back, NaN payloads,
    -0.0, infinities, the empty step and extreme integers included."""
    odd = [0.0, -0.0, math.inf, -math.inf, math.nan, 5e-324, 1.7976931348623157e308, 1.7e9, -1.0]
    odd.append(struct.unpack("<d", struct.pack("<Q", 0x7FF8_0000_DEAD_BEEF))[0])  # a NaN with a payload
    evs = [
        Event(Kind.METRIC, t, h, step=s, value=v, name=nm, attrs=a)
        for t, h, s, v, nm, a in zip(
            [1.7e9 + i for i in range(len(odd))],
            [0, -1, 2**31 - 1, -(2**31), 7, 7, 8, 0, 3, 1],
            [None, 0, 2**62, -(2**62), 1, None, -1, 5, 6, 7],
            odd,
            [None, "a", None, "é", None, None, None, None, None, "z"],
            [None, None, {"k": [1, 2]}, None, None, None, None, None, None, None],
            strict=True,
        )
    ]
    st = open_store(postgres_url)
    job = uuid.uuid4().hex
    w1, w2 = _writer(), _writer()
    st.append_batches([("ns", job, EventBatch(w1, 0, evs[:4])), ("ns", job, EventBatch(w2, 0, evs[4:]))])  # type: ignore[attr-defined]
    st.append("ns", job, EventBatch(w1, 4, evs[3:4]))
    got = st.read("ns", job).columns
    want = Columns.from_events([*evs, evs[3]])
    assert (bytes(got.kinds), got.times.tobytes(), got.hosts.tobytes()) == (
        bytes(want.kinds),
        want.times.tobytes(),
        want.hosts.tobytes(),
    )
    assert (got.steps.tobytes(), got.values.tobytes()) == (want.steps.tobytes(), want.values.tobytes())
    assert (got.names, got.attrs) == (want.names, want.attrs)
    st.close()


def test_dropping_old_partitions_leaves_newer_jobs_reads_intact(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = _fresh_db(postgres_url)
    now = time.time()
    old_job, new_job = uuid.uuid4().hex, uuid.uuid4().hex
    st = open_store(url)
    monkeypatch.setattr(_postgres, "clock", lambda: now - 60 * 86400)
    st.append("ns", old_job, EventBatch(_writer(), 0, _steps(0, 100, 0)))
    monkeypatch.setattr(_postgres, "clock", lambda: now)
    w = _writer()
    st.append("ns", new_job, EventBatch(w, 0, _steps(0, 100, 1)))
    before = st.partitions()  # type: ignore[attr-defined]
    assert len(before) >= 3  # the old one and the one ahead of it, today's and the one ahead
    gone = st.drop_before(now - 30 * 86400)  # type: ignore[attr-defined]
    assert gone and all(n in [p[0] for p in before] for n in gone)
    assert len(st.read("ns", old_job)) == 0
    r = st.read("ns", new_job)
    assert [e.step for e in r.columns.events()] == list(range(100))
    st.append("ns", new_job, EventBatch(w, 100, _steps(100, 5, 1)))
    assert [e.step for e in st.read("ns", new_job, r.cursor).columns.events()] == list(range(100, 105))
    assert st.drop_before(now - 30 * 86400) == []  # type: ignore[attr-defined]
    st.close()
    fresh = open_store(url)  # another store object: writes today's rows without a partition made
    fresh.append("ns", new_job, EventBatch(w, 105, _steps(105, 1, 1)))
    assert len(fresh.read("ns", new_job, r.cursor)) == 6
    st = open_store(url)
    st.drop_before(now + 30 * 86400)  # type: ignore[attr-defined]  # every partition, today's too
    fresh.append("ns", new_job, EventBatch(w, 106, _steps(106, 1, 1)))  # its partition made again
    assert [e.step for e in fresh.read("ns", new_job).columns.events()] == [106]
    fresh.close()
    st.close()


def test_an_older_store_is_moved_aside_and_read_in_order(postgres_url: str) -> None:
    """A store that format 2 wrote (one row per batch, numbered under the job's row) opens:
    its rows read first and a reader's cursor carries on into new rows; its writers' marks
    still hold (a replay stores nothing twice); jobs() counts both."""
    import psycopg

    url = _fresh_db(postgres_url)
    job, w = uuid.uuid4().hex, _writer()
    evs = _steps(0, 10, 3)
    from mlgoodput.store._columns import encode

    ch = encode(Columns.from_events(evs))
    with psycopg.connect(url) as c:  # the format-2 schema, as that release made it
        c.execute(
            "CREATE TABLE mlgoodput_streams (ns TEXT NOT NULL, job TEXT NOT NULL, next_seq BIGINT NOT NULL DEFAULT 1,"
            " events BIGINT NOT NULL DEFAULT 0, first_time DOUBLE PRECISION, last_time DOUBLE PRECISION,"
            " PRIMARY KEY (ns, job));"
            "CREATE TABLE mlgoodput_chunks (ns TEXT NOT NULL, job TEXT NOT NULL, seq BIGINT NOT NULL,"
            " writer BIGINT NOT NULL, first_seq BIGINT NOT NULL, n INTEGER NOT NULL,"
            " stored_at DOUBLE PRECISION NOT NULL, kinds BYTEA NOT NULL, times BYTEA NOT NULL, hosts BYTEA NOT NULL,"
            " steps BYTEA NOT NULL, vals BYTEA NOT NULL, names TEXT, attrs TEXT, PRIMARY KEY (ns, job, seq));"
            "CREATE TABLE mlgoodput_writers (writer BIGINT PRIMARY KEY, next_seq BIGINT NOT NULL);"
            "CREATE TABLE mlgoodput_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
        )
        for seq, lo, hi in ((1, 0, 6), (2, 6, 10)):
            part = encode(Columns.from_events(evs[lo:hi]))
            c.execute(
                "INSERT INTO mlgoodput_chunks VALUES ('ns', %s, %s, %s, %s, %s, 0, %s, %s, %s, %s, %s, NULL, NULL)",
                (job, seq, w, lo, part.n, part.kinds, part.times, part.hosts, part.steps, part.values),
            )
        c.execute("INSERT INTO mlgoodput_streams VALUES ('ns', %s, 3, 10, %s, %s)", (job, ch.t_min, ch.t_max))
        c.execute("INSERT INTO mlgoodput_writers VALUES (%s, 10)", (w,))
        c.execute("INSERT INTO mlgoodput_meta VALUES ('store_id', 'old'), ('format', '2')")
    st = open_store(url)
    first = st.read("ns", job)
    assert [e.step for e in first.columns.events()] == list(range(10))
    part = next(iter(st.scan("ns", job)))  # type: ignore[attr-defined]
    assert part[0] == 1
    assert st.identity() == "old"  # type: ignore[attr-defined]
    st.append("ns", job, EventBatch(w, 5, _steps(5, 10, 3)))  # a replay that overlaps: 10..14 new
    got = st.read("ns", job, first.cursor)
    assert [e.step for e in got.columns.events()] == list(range(10, 15))
    assert [e.step for _, cols in st.scan("ns", job) for e in cols.events()] == list(range(15))  # type: ignore[attr-defined]
    assert st.stream_position("ns", job, first.cursor) == (got.cursor, 10)  # type: ignore[attr-defined]
    assert [j.events for j in st.jobs() if j.job == job] == [15]
    st.close()
    with psycopg.connect(url) as c:
        assert c.execute("SELECT value FROM mlgoodput_meta WHERE key = 'format'").fetchone() == ("3",)
        assert c.execute("SELECT count(*) FROM mlgoodput_chunks_v2").fetchone() == (2,)


def test_many_writers_through_pgbouncer_use_at_most_the_pool(pgbouncer: Any) -> None:
    """32 writers (threads, each its own client connection) append small batches through
    pgbouncer in transaction mode with 4 server connections: every event is stored once, and
    the server never sees more than the pool's connections."""
    import psycopg

    url = pgbouncer.url
    job = uuid.uuid4().hex
    stop = threading.Event()
    seen: list[int] = []

    def watch() -> None:
        with psycopg.connect(pgbouncer.server.url, autocommit=True) as c:
            while not stop.is_set():
                # this pool's database only: other tests' databases on this server (the call
                # deadline's, test_postgres_deadline.py) keep pooled connections of their own
                n = c.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'"
                    " AND pid <> pg_backend_pid() AND datname = current_database()"
                ).fetchone()[0]
                pools = [p for p in pgbouncer.pools() if p["database"] == "postgres"]
                used = sum(
                    int(p[k]) for p in pools for k in ("sv_active", "sv_idle", "sv_used", "sv_tested", "sv_login")
                )
                seen.append(max(int(n), used))
                stop.wait(0.01)

    errors: list[BaseException] = []

    def write(i: int) -> None:
        st = open_store(url)
        try:
            w = 1_000_000 + i
            for b in range(20):
                st.append("ns", job, EventBatch(w, b * 3, _steps(b * 3, 3, i)))
        except BaseException as e:
            errors.append(e)
        finally:
            st.close()

    watcher = threading.Thread(target=watch)
    watcher.start()
    wait_for(lambda: len(seen) > 0, 30, "the watcher's first look")
    ts = [threading.Thread(target=write, args=(i,)) for i in range(32)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(300)
    stop.set()
    watcher.join(30)
    assert errors == []
    st = open_store(url)
    got = Counter((e.host, e.step) for e in st.read("ns", job).columns.events())
    assert got == Counter((i, s) for i in range(32) for s in range(60))
    assert [j.events for j in st.jobs() if j.job == job] == [32 * 60]
    st.close()
    assert seen and max(seen) <= pgbouncer.pool_size
