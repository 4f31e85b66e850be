"""PostgreSQL at a fleet's start: many stores opening a fresh store at once make the schema
and its partitions once, and no store queues on the server for the maker's lock or for
partition DDL (issue 30: 512 shippers waited 180 ms for the one making the first partition)."""

from __future__ import annotations

import datetime
import threading
import time
from typing import Any

import pytest

from mlgoodput.events import Event, EventBatch, Kind
from mlgoodput.store import _postgres, open_store
from tests.pgserver import fresh_database

pytestmark = pytest.mark.slow

STORES = 24


def _fresh_db(url: str) -> str:
    return fresh_database(url, "fresh")


class _Waiters(threading.Thread):
    """Polls pg_locks for the database's backends waiting on an advisory lock (the schema's and
    partitions' maker) or a table's lock (DDL), until stopped; what it saw."""

    def __init__(self, server_url: str, db: str) -> None:
        super().__init__(daemon=True)
        self.server_url, self.db = server_url, db
        self.seen: list[str] = []
        self.polls = 0
        self.halt = threading.Event()

    def run(self) -> None:
        import psycopg

        with psycopg.connect(self.server_url, autocommit=True) as c:
            while not self.halt.is_set():
                rows = c.execute(
                    "SELECT l.locktype || ' ' || l.mode || ': ' || left(a.query, 60) FROM pg_locks l"
                    " JOIN pg_stat_activity a ON a.pid = l.pid WHERE NOT l.granted AND a.datname = %s"
                    " AND l.locktype IN ('advisory', 'relation')",
                    (self.db,),
                ).fetchall()
                self.seen += [str(r[0]) for r in rows]
                self.polls += 1


def test_a_fleet_starting_on_a_fresh_store_makes_schema_and_partitions_once_and_never_queues(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = _fresh_db(postgres_url)
    schemas, partition_ddl = [0], [0]
    real_schema, real_add = _postgres._make_schema, _postgres._add_partition

    def make_schema(*args: Any) -> tuple[str, int, bool]:
        schemas[0] += 1
        return real_schema(*args)

    def add_partition(start: int, wait: bool, conn: Any) -> bool:
        if wait:  # the partition an append needs: a fleet's first appends must not need one
            partition_ddl[0] += 1
        return real_add(start, wait, conn)

    monkeypatch.setattr(_postgres, "_make_schema", make_schema)
    monkeypatch.setattr(_postgres, "_add_partition", add_partition)
    waiters = _Waiters(postgres_url, url.rsplit("/", 1)[1])
    waiters.start()
    stores = [open_store(url) for _ in range(STORES)]
    go = threading.Barrier(STORES)
    errors: list[BaseException] = []

    def ship(i: int) -> None:
        try:
            go.wait(60)
            for k in range(3):
                ev = Event(Kind.STEP_START, time.time(), host=i, step=k)
                stores[i].append_batches([("ns", "job", EventBatch(1000 + i, k, [ev]))])  # type: ignore[attr-defined]
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=ship, args=(i,)) for i in range(STORES)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    waiters.halt.set()
    waiters.join(30)
    assert errors == [] and not any(t.is_alive() for t in threads)
    assert waiters.polls > 0
    assert waiters.seen == []  # nobody queued on the server for the maker's lock or a table's lock
    assert schemas[0] == 1  # one store made the schema; the others found it made
    assert partition_ddl[0] == 0  # the schema came with this week's partition
    day = int(time.time() // 86400)
    start = day - day % _postgres.PARTITION_DAYS
    firsts = [(d - datetime.date(1970, 1, 1)).days for _, d, _ in stores[0].partitions()]  # type: ignore[attr-defined]
    assert firsts == [start, start + _postgres.PARTITION_DAYS]  # this week's and the next, made with it
    got = stores[0].read("ns", "job")
    assert sorted((e.host, e.step) for e in got.columns.events()) == [(i, k) for i in range(STORES) for k in range(3)]
    for st in stores:
        st.close()  # type: ignore[attr-defined]


def test_a_store_opened_on_a_made_store_reads_its_partitions_and_does_no_ddl(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store that connects finds the partitions in the catalog: its first append makes
    no partition and takes no maker's lock, and costs one transaction beyond the connect."""
    url = _fresh_db(postgres_url)
    first = open_store(url)
    first.append("ns", "job", EventBatch(1, 0, [Event(Kind.STEP_START, time.time(), host=0, step=0)]))
    calls = [0]
    real = _postgres._add_partition

    def add_partition(start: int, wait: bool, conn: Any) -> bool:
        calls[0] += 1
        return real(start, wait, conn)

    monkeypatch.setattr(_postgres, "_add_partition", add_partition)
    st = open_store(url)
    st.append("ns", "job", EventBatch(2, 0, [Event(Kind.STEP_START, time.time(), host=1, step=0)]))
    assert calls[0] == 0
    # connect (schema and partitions read), the new writer's and job's rows, the append
    assert st.transactions == 3  # type: ignore[attr-defined]
    st.append("ns", "job", EventBatch(2, 1, [Event(Kind.STEP_START, time.time(), host=1, step=1)]))
    assert st.transactions == 4  # type: ignore[attr-defined]  # later appends: one each
    first.close()  # type: ignore[attr-defined]
    st.close()  # type: ignore[attr-defined]
