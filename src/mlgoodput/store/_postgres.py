"""A PostgreSQL store, for many hosts writing one job at once (needs `mlgoodput[postgres]`).

Built for fleets: thousands of hosts (or their per-node aggregators) appending to one job,
through a transaction-mode pooler (pgbouncer). What that asks of the layout:

- **No shared counter.** A stored row's cursor (`seq`) is `xid << 20 | k`: the 64-bit id of
  the transaction that wrote it and the row's index in that transaction. Appends of one job
  take no common lock; each locks only its own writers' rows (the exactly-once marks, which
  also carry the per-writer figures that `jobs()` sums). A reader reads, in one statement,
  the rows after its cursor whose transaction is below its snapshot's `xmin`: every such
  transaction has finished, and any transaction still running (or started later) has a
  larger xid, so its rows land after the cursor and are read later, never skipped.
- **One row per job per append.** `append_batches` writes every writer's new events of one
  job in one round as one row (a 4-column row whose events are packed into one value), so
  a round of tiny batches costs tens of bytes per event, not a row each.
- **Partitions by day.** `mlgoodput_chunks` is partitioned by RANGE on the UTC day a row
  was stored (`PARTITION_DAYS` days a partition, made ahead as needed), so old data is
  dropped or detached a partition at a time (`drop_before`). The schema comes with this
  week's and next week's partitions, and a partition is made apart and then attached, which
  appends and reads never wait for (nor it for them).
- **Pooler-safe.** No server-side prepared statements, no session state (`SET LOCAL` and
  `_xact_` advisory locks only), and a schema check of three reads when the schema is there.
  The maker's advisory lock is only ever tried: no backend queues on the server (holding a
  pooled connection) while another store makes the schema or a partition.
- **Identity in the append.** Every append reads the store id in its own transaction; the
  store remembers it, so `identity()` costs no transaction and a replaced store is noticed
  by the append that first touches it (which then writes to the new store). A read reads the
  store id in the statement that reads the rows: a reader of a store made again drops its
  cached job ids and reads the new store (`identity()` tells it so), never another job's
  rows under a stale id.
- **PostgreSQL 13 or newer** (`pg_current_xact_id`, `pg_current_snapshot`); an older
  server is refused when the store opens.

Older stores (format 2 and before: one row per batch under a per-job counter) are moved
aside on first open (`mlgoodput_chunks_v2`, `mlgoodput_streams`) and still read: their
cursors are small numbers, below every new row's.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import re
import secrets
import threading
import time
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import partial
from typing import Any, TypeVar

from mlgoodput import _env
from mlgoodput.events import EventBatch
from mlgoodput.store import _exactly_once
from mlgoodput.store._columns import Chunk, Columns, decode, encode_batch
from mlgoodput.store._deadline import watcher
from mlgoodput.store._exactly_once import NewPart, new_part
from mlgoodput.store._packed import pack, unpack
from mlgoodput.store._protocol import JobInfo, ReadResult, StoreError
from mlgoodput.store._registry import StoreBackend, register
from mlgoodput.store._state import PAGE_ROWS, SavedPieces

# events per stored row (SQLite's chunk size too); a batch's rows go in one transaction. Rows of
# 65,536 cost the server twice the CPU per event (fresh memory for each large value it receives,
# copies and compresses); older rows of any size still read.
MAX_CHUNK_EVENTS = 16384
#: The newest form of a stored row this code writes and reads (3: one packed value per row,
#: cursors from transaction ids, partitions by day; 2: the short forms of `_packed`). A store
#: records the newest form it holds (`format` in mlgoodput_meta), so a reader older than a
#: future form refuses the store with a clear message instead of misreading it.
FORMAT = 3
#: Days of rows one partition of mlgoodput_chunks holds (the unit of `drop_before`).
PARTITION_DAYS = 7
SEQ_SHIFT = 20  # seq = xid << SEQ_SHIFT | row index in the transaction
_MAX_ROWS_PER_TX = 1 << SEQ_SHIFT
_MAX_XID = 1 << (63 - SEQ_SHIFT)
#: Where the day a row is stored on comes from (its partition); tests set another clock.
clock: Callable[[], float] = time.time
#: How long making a partition waits for the table's lock before it gives up and tries again
#: (CREATE ... PARTITION OF queues behind a long reader, and every append and read behind it).
DDL_LOCK_TIMEOUT_MS = 2000
#: How long a partition an append needs is tried for before the append fails.
DDL_RETRY_S = 300.0
#: How often a store object tries (without waiting) to make the partition ahead it lacks.
AHEAD_RETRY_S = 60.0
#: How long one call (a transaction) may wait on the server before the deadline watch cancels
#: it, then cuts its connection (_deadline): the caller gets a StoreError and retries later.
CALL_TIMEOUT_S = 30.0
#: The advisory lock that one maker of the schema or a partition holds (tried, never waited for).
_MAKER_LOCK = 4242424242
SMALL_ROW = 256  # events up to which a row's columns take the compact forms (deltas, XOR)
T = TypeVar("T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS mlgoodput_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS mlgoodput_jobs (
    id INTEGER GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    ns TEXT NOT NULL,
    job TEXT NOT NULL,
    UNIQUE (ns, job)
);
CREATE TABLE IF NOT EXISTS mlgoodput_writers (writer BIGINT PRIMARY KEY, next_seq BIGINT NOT NULL);
ALTER TABLE mlgoodput_writers
    ADD COLUMN IF NOT EXISTS stream INTEGER,
    ADD COLUMN IF NOT EXISTS events BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS first_time DOUBLE PRECISION,
    ADD COLUMN IF NOT EXISTS last_time DOUBLE PRECISION;
CREATE TABLE IF NOT EXISTS mlgoodput_chunks (
    stream INTEGER NOT NULL,
    day INTEGER NOT NULL,
    seq BIGINT NOT NULL,
    n INTEGER NOT NULL,
    data BYTEA NOT NULL
) PARTITION BY RANGE (day);
CREATE INDEX IF NOT EXISTS mlgoodput_chunks_stream_seq ON mlgoodput_chunks (stream, seq);
"""

# rows below every running transaction: a reader never passes a row committed later
_VISIBLE = "seq < (pg_snapshot_xmin(pg_current_snapshot())::text::bigint << 20)"
_LEGACY_COLS = "seq, n, kinds, times, hosts, steps, vals, names, attrs"
# a read in one statement: the store id its cached stream id must have been resolved under
# (ids start at 1 again in a store made again), then the stream's rows after the cursor
_READ_NEW = (
    "SELECT NULL::bigint, NULL::int, NULL::bytea, value FROM mlgoodput_meta WHERE key = 'store_id'"
    " UNION ALL (SELECT seq, n, data, NULL FROM mlgoodput_chunks WHERE stream = %s AND seq > %s"
    " AND {visible} ORDER BY seq{limit})"
)
_POSITION = (
    "SELECT coalesce(max(seq) FILTER (WHERE {visible}), 0), coalesce(sum(n) FILTER (WHERE seq <= %s), 0),"
    " (SELECT value FROM mlgoodput_meta WHERE key = 'store_id') FROM mlgoodput_chunks WHERE stream = %s"
)


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError:
        raise ImportError("the PostgreSQL store needs psycopg: pip install 'mlgoodput[postgres]'") from None
    return psycopg


class _Replaced(Exception):
    """The store id changed under a transaction that had resolved ids from the old one."""


class _Busy(Exception):
    """Making a partition gave up (another store is making one, or the table's lock took
    longer than DDL_LOCK_TIMEOUT_MS): look again."""


class PostgresStore:
    """A store in a PostgreSQL database (`postgresql://user@host:port/dbname`), directly or
    through a transaction-mode pooler such as pgbouncer."""

    def __init__(self, url: str, *, connect_timeout_s: float = 10.0, call_timeout_s: float | None = None) -> None:
        _psycopg()  # fail at configuration time when the extra is missing
        if call_timeout_s is None:  # $MLGOODPUT_PG_CALL_TIMEOUT_S, else CALL_TIMEOUT_S (child processes too)
            call_timeout_s = _env.pg_call_timeout_s(CALL_TIMEOUT_S)
        for arg, v in (("connect_timeout_s", connect_timeout_s), ("call_timeout_s", call_timeout_s)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < float("inf"):
                raise ValueError(f"{arg} must be a positive number of seconds, got {v!r}")
        self.url = url
        self._timeout = connect_timeout_s
        self._call_timeout = float(call_timeout_s)
        self._lock = threading.RLock()
        self._conn: Any = None
        self._pid = -1
        self._id: str | None = None  # the store id the last transaction that read it saw
        self._legacy = False  # older rows kept aside (mlgoodput_chunks_v2)
        self._streams: dict[tuple[str, str], int] = {}  # (ns, job) -> stream id, under self._id
        self._writers: set[int] = set()  # writers whose row exists, under self._id
        self._parts: set[int] = set()  # partition starts (days) that exist, under self._id
        self._ahead_try = (-1, 0.0)  # the partition ahead last tried, and when (monotonic)
        self.lock_waits = 0  # appends that took their writers' row locks, and how long that took
        self.lock_wait_total_s = 0.0
        self.lock_wait_max_s = 0.0
        self._state_ready = False  # the saved-state tables are known to exist
        self.transactions = 0  # transactions this store ran (appends, reads, schema checks)

    # -- connection and schema -----------------------------------------------------------
    def _connect(self) -> Any:
        if self._conn is not None and self._pid == os.getpid() and not self._conn.closed:
            return self._conn
        psycopg = _psycopg()
        try:
            # no server-side prepared statements: a transaction-mode pooler hands each
            # transaction to any server connection, where a prepared name would not exist
            conn = psycopg.connect(
                self.url, connect_timeout=int(max(1, self._timeout)), autocommit=False, prepare_threshold=None
            )
        except psycopg.Error as e:
            raise StoreError(f"cannot open PostgreSQL store {self._safe_url()}: {e}") from e
        try:
            found, parts = self._open_schema(conn)
        except (psycopg.Error, StoreError) as e:
            conn.close()
            raise StoreError(f"cannot open PostgreSQL store {self._safe_url()}: {e}") from e
        store_id, have, legacy = found
        version = int(conn.info.server_version)
        if version < 130000:  # pg_current_xact_id, pg_current_snapshot
            conn.close()
            raise StoreError(
                f"the PostgreSQL store {self._safe_url()} needs PostgreSQL 13 or newer; the server is"
                f" {version // 10000}.{version % 10000}"
            )
        if have > FORMAT:
            conn.close()
            raise StoreError(
                f"the PostgreSQL store {self._safe_url()} holds rows in format {have}, written by a newer"
                f" mlgoodput; this one reads formats up to {FORMAT}: upgrade mlgoodput to read or write it"
            )
        self._saw_id(store_id)
        self._parts.update(parts)  # a fleet's first appends find their partition here: no DDL
        self._legacy = legacy
        self._conn, self._pid = conn, os.getpid()
        return conn

    def _open_schema(self, conn: Any) -> tuple[tuple[str, int, bool], list[int]]:
        """The schema found (or made) and the partitions' first days, each try one transaction.
        A store that finds the schema there reads the catalog only (no lock, no DDL). One store
        at a time makes it (with this week's and next week's partitions, in the same
        transaction); the others do not queue on the server for the maker's lock (a queued
        backend holds a pooled connection and counts as a lock wait): they try it, and when
        another store holds it, look again a moment later."""
        deadline = time.monotonic() + DDL_RETRY_S
        delay = 0.01
        while True:
            with self._watched(conn), conn.transaction():
                self.transactions += 1
                found = _schema_found(conn)
                if found is None and conn.execute("SELECT pg_try_advisory_xact_lock(%s)", (_MAKER_LOCK,)).fetchone()[0]:
                    found = _schema_found(conn) or _make_schema(conn)  # made meanwhile, or made here
                if found is not None:
                    return found, [s for s, _, _ in _partitions(conn)] if found[1] == FORMAT else []
            if time.monotonic() > deadline:
                raise StoreError(f"another store kept making the schema for {DDL_RETRY_S:.0f} s")
            time.sleep(delay)
            delay = min(0.2, delay * 2)

    def _saw_id(self, store_id: str) -> None:
        """Remember the store id a transaction read; another one drops what was resolved
        under the old one (stream ids, writer rows, partitions)."""
        if store_id != self._id:
            self._streams.clear()
            self._writers.clear()
            self._parts.clear()
            self._id = store_id

    def _safe_url(self) -> str:
        head, sep, tail = self.url.partition("@")
        if not sep:
            return self.url
        scheme, _, user = head.partition("://")
        return f"{scheme}://{user.split(':', 1)[0]}@{tail}"

    def _in_transaction(self, what: str, work: Callable[[Any], T]) -> T:
        """Run `work(conn)` in one transaction; a database error drops the connection (the next
        call reconnects) and becomes a StoreError."""
        psycopg = _psycopg()
        with self._lock:
            try:
                conn = self._connect()
                with self._watched(conn), conn.transaction():
                    self.transactions += 1
                    return work(conn)
            except psycopg.Error as e:
                self._drop_broken()
                raise StoreError(f"cannot {what} PostgreSQL store {self._safe_url()}: {e}") from e

    @contextlib.contextmanager
    def _watched(self, conn: Any) -> Iterator[None]:
        """The block's calls on `conn` under the deadline watch (_deadline): one still waiting
        on the server after `call_timeout_s` is cancelled, then cut off, and the database
        error that ends the block then says so."""
        psycopg = _psycopg()
        with watcher().watch(conn, self._call_timeout) as call:
            try:
                yield
            except psycopg.Error as e:
                if call.cut:
                    raise psycopg.OperationalError(f"{call.why()}: {e}") from e
                raise

    def identity(self) -> str:
        """The store id written when the schema was made: a dropped and recreated schema (or
        another database at the URL) has another one. The id the store's last transaction
        read (every append reads it in its own transaction); read afresh when none has yet."""
        with self._lock:
            if self._id is None or self._conn is None:
                self._in_transaction("read", lambda conn: None)  # connecting reads it
            return self._id or ""

    def _drop_broken(self) -> None:
        self._state_ready = False  # a broken connection may mean a store made again
        self._parts.clear()  # looked up again: a failed append may have lacked its partition
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:
                pass
        self._conn = None

    def close(self) -> None:
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._drop_broken()
            self._conn = None

    # -- appends ---------------------------------------------------------------------------
    def append(self, namespace: str, job: str, batch: EventBatch) -> None:
        self.append_batches([(namespace, job, batch)])

    def append_batches(self, items: Sequence[tuple[str, str, EventBatch]]) -> None:
        """Every (namespace, job, batch) in one transaction, all or nothing, each batch kept
        exactly once per writer as `append` keeps it. The new events of one job go in one row
        (rows of at most MAX_CHUNK_EVENTS); the writers' rows are locked in writer order, so
        two callers sharing writers never deadlock."""
        items = [it for it in items if len(it[2].events)]
        if not items:
            return
        # encoded before any lock is taken, as if nothing were stored yet (the usual case)
        first_try = [encode_batch(b.events, MAX_CHUNK_EVENTS) for _, _, b in items]
        day = _day(clock())
        start = day - day % PARTITION_DAYS
        writers = sorted({b.writer for _, _, b in items})
        for attempt in range(2):
            if start not in self._parts:
                self._ensure_partitions(start)
            elif start + PARTITION_DAYS not in self._parts:  # a store living for weeks
                self._try_ahead(start + PARTITION_DAYS)
            new = [w for w in writers if w not in self._writers]
            jobs = sorted({(ns, job) for ns, job, _ in items} - self._streams.keys())
            if new or jobs:
                self._in_transaction("append to", partial(self._prepare, new, jobs))
                self._writers.update(new)
            try:
                self._in_transaction("append to", partial(self._append_all, items, first_try, writers, day))
                return
            except _Replaced:  # the store was made again meanwhile: resolve ids afresh, once
                if attempt:
                    raise StoreError(f"the PostgreSQL store {self._safe_url()} keeps changing") from None
            except StoreError as e:  # its partition was dropped meanwhile: made again, once
                if attempt or not isinstance(e.__cause__, _psycopg().errors.CheckViolation):
                    raise

    def _append_all(
        self,
        items: list[tuple[str, str, EventBatch]],
        first_try: list[list[Chunk]],
        writers: list[int],
        day: int,
        conn: Any,
    ) -> None:
        t0 = time.monotonic()
        locked = conn.execute(
            "SELECT writer, next_seq, pg_current_xact_id()::text::bigint,"
            " (SELECT value FROM mlgoodput_meta WHERE key = 'store_id')"
            " FROM mlgoodput_writers WHERE writer = ANY(%s) ORDER BY writer FOR UPDATE",
            (writers,),
        ).fetchall()
        waited = time.monotonic() - t0
        self.lock_waits += 1
        self.lock_wait_total_s += waited
        self.lock_wait_max_s = max(self.lock_wait_max_s, waited)
        if len(locked) != len(writers):  # a writer row vanished: the schema was made again
            self._writers.clear()
            row = conn.execute("SELECT value FROM mlgoodput_meta WHERE key = 'store_id'").fetchone()
            if row is not None:
                self._saw_id(str(row[0]))  # the retry resolves under the new id, not "keeps changing"
            raise _Replaced
        xid, store_id = int(locked[0][2]), str(locked[0][3])
        if store_id != self._id:
            self._saw_id(store_id)
            raise _Replaced
        if xid >= _MAX_XID:
            raise StoreError(f"transaction id {xid} is beyond what a cursor of this store holds")
        marks = {int(w): int(m) for w, m, _, _ in locked}
        # what of each batch is new, in call order (a writer's later batch after its earlier one)
        per_job: dict[tuple[str, str], list[tuple[NewPart, list[Chunk]]]] = {}
        for (ns, job, batch), chunks in zip(items, first_try, strict=True):
            part = new_part(batch.writer, batch.first_seq, len(batch.events), marks[batch.writer])
            if part is None:
                continue
            if part.skip:  # a replay that overlaps what is stored: encode the rest (rare)
                chunks = encode_batch(batch.events[part.skip :], MAX_CHUNK_EVENTS)
            marks[batch.writer] = part.mark
            per_job.setdefault((ns, job), []).append((part, chunks))
        if not per_job:
            return
        # new jobs' rows made in one order (ns, job), whatever the call order: two appends making
        # the same new jobs in opposite orders would otherwise deadlock on mlgoodput_jobs
        streams = {key: self._stream(conn, *key) for key in sorted(per_job)}
        figures: dict[int, list[Any]] = {}  # writer -> [mark, stream, events, lo, hi]
        k = 0
        with conn.cursor().copy("COPY mlgoodput_chunks (stream, day, seq, n, data) FROM STDIN (FORMAT BINARY)") as cp:
            cp.set_types(["int4", "int4", "int8", "int4", "bytea"])
            for key, parts in per_job.items():
                for ch in _merge([c for _, chunks in parts for c in chunks]):
                    if k >= _MAX_ROWS_PER_TX:
                        raise StoreError(f"more than {_MAX_ROWS_PER_TX} rows in one transaction")
                    cp.write_row((streams[key], day, xid << SEQ_SHIFT | k, ch.n, _blob(ch)))
                    k += 1
                for part, chunks in parts:
                    f = figures.setdefault(part.writer, [0, streams[key], 0, float("inf"), float("-inf")])
                    f[0] = part.mark
                    f[2] += part.n
                    f[3] = min([f[3], *(c.t_min for c in chunks)])
                    f[4] = max([f[4], *(c.t_max for c in chunks)])
        for part, _ in (p for parts in per_job.values() for p in parts):
            _exactly_once.before_mark(part)
        ws = sorted(figures)
        conn.execute(  # the writers' rows are locked already (FOR UPDATE above)
            "UPDATE mlgoodput_writers w SET next_seq = v.mark, stream = v.stream, events = w.events + v.n,"
            " first_time = LEAST(coalesce(w.first_time, v.lo), v.lo),"
            " last_time = GREATEST(coalesce(w.last_time, v.hi), v.hi)"
            " FROM unnest(%s::bigint[], %s::bigint[], %s::int[], %s::bigint[], %s::float8[], %s::float8[])"
            " AS v(writer, mark, stream, n, lo, hi) WHERE w.writer = v.writer",
            (
                ws,
                [figures[w][0] for w in ws],
                [figures[w][1] for w in ws],
                [figures[w][2] for w in ws],
                [figures[w][3] for w in ws],
                [figures[w][4] for w in ws],
            ),
        )

    def _prepare(self, writers: list[int], jobs: list[tuple[str, str]], conn: Any) -> None:
        """Rows for writers and jobs new to this store object, in a short transaction of their
        own before the append's: an append then locks rows that exist, in one order, and
        stores that make the same new job at once wait (on its unique key) only for this
        transaction, not for another's whole append. Jobs are made in (ns, job) order, so two
        stores making the same new jobs never deadlock."""
        if writers:
            _add_writers(writers, conn)
        for ns, job in jobs:
            self._stream(conn, ns, job)

    def _stream(self, conn: Any, ns: str, job: str, create: bool = True) -> int | None:
        """The job's stream id (made on its first append), cached under the store id."""
        got = self._streams.get((ns, job))
        if got is not None:
            return got
        row = conn.execute("SELECT id FROM mlgoodput_jobs WHERE ns = %s AND job = %s", (ns, job)).fetchone()
        if row is None and create:
            row = (
                conn.execute(
                    "INSERT INTO mlgoodput_jobs (ns, job) VALUES (%s, %s) ON CONFLICT (ns, job) DO NOTHING RETURNING id",
                    (ns, job),
                ).fetchone()
                or conn.execute("SELECT id FROM mlgoodput_jobs WHERE ns = %s AND job = %s", (ns, job)).fetchone()
            )
        if row is None:
            return None
        self._streams[(ns, job)] = int(row[0])
        return int(row[0])

    def _ensure_partitions(self, start: int) -> None:
        """The partition for rows stored in the days from `start` on, and the next one made
        ahead (so a week's first appends do no DDL); the one ahead gives up on a busy table.
        Connecting reads the partitions: a store's first append finds them there."""
        with self._lock:
            self._connect()
        if start not in self._parts:
            self._parts.update(s for s, _, _ in self._in_transaction("read", _partitions))
        if start not in self._parts:
            deadline = time.monotonic() + DDL_RETRY_S
            delay = 0.02
            while True:
                try:
                    self._in_transaction("add a partition to", partial(_add_partition, start, True))
                    break
                except _Busy:  # another store is making it, or the table was busy: look again
                    if time.monotonic() > deadline:
                        raise StoreError(
                            f"cannot add a partition to PostgreSQL store {self._safe_url()}: the table"
                            f" stayed locked for {DDL_RETRY_S:.0f} s"
                        ) from None
                    time.sleep(delay)
                    delay = min(1.0, delay * 2)
            self._parts.add(start)
        self._try_ahead(start + PARTITION_DAYS)

    def _try_ahead(self, s: int) -> None:
        """Make the partition ahead without waiting (a store living for weeks needs each
        next one before its first append); tried at most every AHEAD_RETRY_S seconds."""
        if s in self._parts:
            return
        now = time.monotonic()
        if self._ahead_try[0] == s and now - self._ahead_try[1] < AHEAD_RETRY_S:
            return
        self._ahead_try = (s, now)
        try:
            made = self._in_transaction("add a partition to", partial(_add_partition, s, False))
        except StoreError:
            return
        if made:
            self._parts.add(s)

    # -- reads -----------------------------------------------------------------------------
    def read(self, namespace: str, job: str, cursor: int = 0) -> ReadResult:
        rows = self._in_transaction("read", partial(self._rows, namespace, job, cursor, None))
        return ReadResult([cols() for _, cols in rows], rows[-1][0] if rows else cursor)

    def _rows(
        self, ns: str, job: str, cursor: int, limit: int | None, conn: Any, again: bool = False
    ) -> list[tuple[int, Callable[[], Columns]]]:
        """Rows after `cursor` in order (at most `limit`), each with its decoder: older rows
        first (their cursors are all below the newer ones'), then rows of finished transactions.
        The newer rows come in the statement that looks the job up and reads the store id (no
        cached stream id: ids start at 1 again in a store made again); a changed store id
        starts the read over as a read of the new store."""
        first = (cursor, limit)
        out: list[tuple[int, Callable[[], Columns]]] = []
        if self._legacy:
            sql = f"SELECT {_LEGACY_COLS} FROM mlgoodput_chunks_v2 WHERE ns = %s AND job = %s AND seq > %s ORDER BY seq"
            for r in conn.execute(sql + ("" if limit is None else f" LIMIT {int(limit)}"), (ns, job, cursor)):
                out.append((int(r[0]), partial(_decode_legacy, r)))
            if out:
                cursor = out[-1][0]
            if limit is not None:
                limit -= len(out)
                if limit <= 0:
                    return out
        sid = self._stream(conn, ns, job, create=False)
        if sid is None:  # looked up just now, by name: not in this store (yet)
            return out
        rows = conn.execute(
            _READ_NEW.format(visible=_VISIBLE, limit="" if limit is None else f" LIMIT {int(limit)}"),
            (sid, cursor),
        ).fetchall()
        if not again and self._replaced(conn, [r[3] for r in rows if r[0] is None]):
            return self._rows(ns, job, *first, conn, again=True)
        for seq, n, data, _ in sorted((r for r in rows if r[0] is not None), key=lambda r: int(r[0])):
            out.append((int(seq), partial(_unblob, int(n), bytes(data))))
        return out

    def _replaced(self, conn: Any, ids: list[str]) -> bool:
        """Whether the store id a read found beside its rows is another one than the one its
        cached stream id was resolved under: what was resolved under the old one is dropped
        (`identity()` now tells the new one) and the caller reads again, as of a new store."""
        if not ids or str(ids[0]) == self._id:
            return False
        self._saw_id(str(ids[0]))
        self._legacy = bool(conn.execute("SELECT to_regclass('mlgoodput_chunks_v2') IS NOT NULL").fetchone()[0])
        return True

    def jobs(self) -> list[JobInfo]:
        def work(conn: Any) -> list[Any]:
            rows: list[Any] = conn.execute(
                "SELECT j.ns, j.job, sum(w.events), min(w.first_time), max(w.last_time)"
                " FROM mlgoodput_writers w JOIN mlgoodput_jobs j ON j.id = w.stream"
                " GROUP BY j.ns, j.job HAVING sum(w.events) > 0"
            ).fetchall()
            if self._legacy or conn.execute("SELECT to_regclass('mlgoodput_streams')").fetchone()[0] is not None:
                rows += conn.execute(
                    "SELECT ns, job, events, first_time, last_time FROM mlgoodput_streams WHERE events > 0"
                ).fetchall()
            return rows

        merged: dict[tuple[str, str], list[float]] = {}
        for ns, job, n, lo, hi in self._in_transaction("read", work):
            m = merged.setdefault((ns, job), [0, float("inf"), float("-inf")])
            m[0] += int(n)
            m[1] = min(m[1], float(lo))
            m[2] = max(m[2], float(hi))
        return [JobInfo(ns, job, int(m[0]), m[1], m[2]) for (ns, job), m in sorted(merged.items())]

    # -- retention -------------------------------------------------------------------------
    def partitions(self) -> list[tuple[str, datetime.date, datetime.date]]:
        """The partitions of mlgoodput_chunks: (table, first day, day after the last), oldest first."""
        return [(name, _date(s), _date(e)) for s, e, name in sorted(self._in_transaction("read", _partitions))]

    def drop_before(self, when: float | datetime.date, *, detach: bool = False) -> list[str]:
        """Drop (or, with `detach`, detach to archive them) the partitions whose rows were all
        stored before `when` (a UNIX time or a date; whole partitions only), and return their
        names. Reads of newer rows are untouched; the writers' exactly-once marks and the
        per-writer figures that `jobs()` sums stay (a late replay is still stored once)."""
        if isinstance(when, datetime.datetime):
            when = when.timestamp()
        cut = _day(when) if isinstance(when, (int, float)) else (when - datetime.date(1970, 1, 1)).days
        gone: list[str] = []
        for s, e, name in sorted(self._in_transaction("read", _partitions)):
            if e > cut:
                continue
            how = f"ALTER TABLE mlgoodput_chunks DETACH PARTITION {name}" if detach else f"DROP TABLE {name}"
            self._in_transaction("drop a partition of", partial(_run, how))
            self._parts.discard(s)
            gone.append(name)
        return gone

    # -- optional abilities (store/_state.py): saved accounting state, paged reads ----------
    def scan(self, namespace: str, job: str, cursor: int = 0) -> Iterator[tuple[int, Columns]]:
        limit = PAGE_ROWS
        while True:
            rows = self._in_transaction("read", partial(self._rows, namespace, job, cursor, limit))
            events = 0
            for seq, decoder in rows:
                cursor = seq
                cols = decoder()
                events += len(cols)
                yield cursor, cols
            if len(rows) < limit:
                return
            # small chunks (a shipper's every second): more of them a page, about as many events
            limit = max(PAGE_ROWS, min(_MAX_PAGE_ROWS, _PAGE_EVENTS * len(rows) // max(1, events)))

    def stream_position(self, namespace: str, job: str, cursor: int) -> tuple[int, int]:
        def work(conn: Any) -> tuple[int, int]:
            head, upto = 0, 0
            for again in (False, True):
                sid = self._stream(conn, namespace, job, create=False)
                if sid is None:
                    break
                h, u, store_id = conn.execute(_POSITION.format(visible=_VISIBLE), (cursor, sid)).fetchone()
                if again or not self._replaced(conn, [] if store_id is None else [store_id]):
                    head, upto = int(h), int(u)
                    break
            if self._legacy:
                h, u = conn.execute(
                    "SELECT coalesce(max(seq), 0), coalesce(sum(n) FILTER (WHERE seq <= %s), 0)"
                    " FROM mlgoodput_chunks_v2 WHERE ns = %s AND job = %s",
                    (cursor, namespace, job),
                ).fetchone()
                head, upto = max(head, int(h)), upto + int(u)
            return head, upto

        return self._in_transaction("read", work)

    def save_state(self, namespace: str, job: str, pieces: Iterable[bytes]) -> None:
        """Pieces under a new generation, a group a transaction (about `_STATE_GROUP_BYTES` or
        `_STATE_GROUP_PIECES` each: a state of 36,000 pieces is not 36,000 transactions), then
        one short transaction makes it current and drops the others but the one it replaces
        (kept for one more save, so a reader still fetching its pieces finishes)."""
        gen = time.time_ns() ^ (os.getpid() << 20)
        if not self._state_ready:
            self._in_transaction("save state in", _state_schema)
            self._state_ready = True
        n = 0
        group: list[bytes] = []
        size = 0
        for piece in pieces:
            group.append(piece)
            size += len(piece)
            if size >= _STATE_GROUP_BYTES or len(group) >= _STATE_GROUP_PIECES:
                self._in_transaction("save state in", partial(_put_pieces, namespace, job, gen, n, group))
                n += len(group)
                group, size = [], 0
        if group:
            self._in_transaction("save state in", partial(_put_pieces, namespace, job, gen, n, group))
            n += len(group)

        def flip(conn: Any) -> None:
            have = conn.execute(
                "SELECT count(*) FROM mlgoodput_state_pieces WHERE ns = %s AND job = %s AND gen = %s",
                (namespace, job, gen),
            ).fetchone()[0]
            if have != n:  # a concurrent save dropped ours: keep theirs
                return
            row = conn.execute(
                "SELECT gen FROM mlgoodput_states WHERE ns = %s AND job = %s FOR UPDATE", (namespace, job)
            ).fetchone()
            prev = gen if row is None else int(row[0])
            conn.execute(
                "INSERT INTO mlgoodput_states (ns, job, gen, pieces, saved_at) VALUES (%s, %s, %s, %s, %s)"
                " ON CONFLICT (ns, job) DO UPDATE SET gen = excluded.gen, pieces = excluded.pieces,"
                " saved_at = excluded.saved_at",
                (namespace, job, gen, n, time.time()),
            )
            # the generation it replaces stays for one more save: a reader of it can finish
            conn.execute(
                "DELETE FROM mlgoodput_state_pieces WHERE ns = %s AND job = %s AND gen <> %s AND gen <> %s",
                (namespace, job, gen, prev),
            )

        self._in_transaction("save state in", flip)

    def load_single_states(self, namespace: str) -> dict[str, bytes]:
        def work(conn: Any) -> dict[str, bytes]:
            if conn.execute("SELECT to_regclass('mlgoodput_states')").fetchone()[0] is None:
                return {}
            rows = conn.execute(
                "SELECT s.job, p.data FROM mlgoodput_states s JOIN mlgoodput_state_pieces p ON p.ns = s.ns"
                " AND p.job = s.job AND p.gen = s.gen AND p.i = 0 WHERE s.ns = %s AND s.pieces = 1",
                (namespace,),
            ).fetchall()
            return {str(j): bytes(d) for j, d in rows}

        return self._in_transaction("read", work)

    def load_state(self, namespace: str, job: str) -> Iterator[bytes] | None:
        def head(conn: Any) -> tuple[int, int] | None:
            exists = conn.execute("SELECT to_regclass('mlgoodput_states')").fetchone()[0]
            if exists is None:
                return None
            row = conn.execute(
                "SELECT gen, pieces FROM mlgoodput_states WHERE ns = %s AND job = %s", (namespace, job)
            ).fetchone()
            return None if row is None else (int(row[0]), int(row[1]))

        found = self._in_transaction("read", head)
        if found is None:
            return None
        gen, n = found

        ahead = _ReadAhead(
            lambda lo, hi: self._in_transaction("read", partial(_get_pieces, namespace, job, gen, lo, hi))
        )
        return SavedPieces(n, ahead.piece)


def _day(t: float) -> int:
    """The UTC day (days since 1970-01-01) of a UNIX time."""
    return int(t // 86400)


def _date(day: int) -> datetime.date:
    return datetime.date(1970, 1, 1) + datetime.timedelta(days=day)


def _run(sql: str, conn: Any) -> None:
    conn.execute(sql)


def _add_writers(writers: list[int], conn: Any) -> None:
    """Rows for writers new to this store object, in writer order (their own transaction, so
    an append locks rows that exist, in one order)."""
    conn.execute(
        "INSERT INTO mlgoodput_writers (writer, next_seq) SELECT w, 0 FROM unnest(%s::bigint[]) AS w"
        " ORDER BY w ON CONFLICT DO NOTHING",
        (sorted(writers),),
    )


_BOUND = re.compile(r"FROM \((-?\d+)\) TO \((-?\d+)\)")


def _partitions(conn: Any) -> list[tuple[int, int, str]]:
    """(first day, day after the last, table) of each partition of mlgoodput_chunks."""
    out = []
    for name, bound in conn.execute(
        "SELECT c.relname, pg_get_expr(c.relpartbound, c.oid) FROM pg_inherits i"
        " JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'mlgoodput_chunks'::regclass"
    ):
        m = _BOUND.search(str(bound))
        if m is not None:
            out.append((int(m.group(1)), int(m.group(2)), str(name)))
    return out


def _add_partition(start: int, wait: bool, conn: Any) -> bool:
    """The partition for days [start, start + PARTITION_DAYS), whether it exists now. A
    store that finds it there reads the catalog only. One maker at a time (`_MAKER_LOCK`),
    tried, never queued for on the server: when another store is making it, the one an
    append needs raises `_Busy` (the caller looks again a moment later) and the one ahead is
    left to that store. The partition is made as a table of its own, then attached: ATTACH
    takes SHARE UPDATE EXCLUSIVE on mlgoodput_chunks, which appends and reads do not conflict
    with, so neither waits for the other. What it can queue behind (a VACUUM or ANALYZE of
    the parent, other DDL) makes it give up after DDL_LOCK_TIMEOUT_MS (the one an append
    needs: `_Busy`, tried again) or a second (the one ahead)."""
    if _has_partition(conn, start):
        return True
    conn.execute(f"SET LOCAL lock_timeout = {int(DDL_LOCK_TIMEOUT_MS) if wait else 1000}")
    if not conn.execute("SELECT pg_try_advisory_xact_lock(%s)", (_MAKER_LOCK,)).fetchone()[0]:
        if wait:
            raise _Busy
        return False
    try:
        with conn.transaction():  # a savepoint: a lock timeout leaves the connection usable
            _make_partition(conn, start)
            return True
    except _psycopg().errors.LockNotAvailable:
        if wait:
            raise _Busy from None
        return False


def _has_partition(conn: Any, start: int) -> bool:
    """Whether mlgoodput_chunks has the partition for days from `start` (a catalog read, no lock)."""
    return any(s == start for s, _, _ in _partitions(conn))


def _make_partition(conn: Any, start: int) -> None:
    """Make and attach the partition for days from `start`, under the maker's lock (made by
    another store meanwhile: nothing to do). Named after its first day; a table of that name
    that is no partition (one detached to archive it) is left alone and the new one named apart."""
    if _has_partition(conn, start):
        return
    name = "mlgoodput_chunks_" + _date(start).strftime("%Y%m%d")
    if conn.execute("SELECT to_regclass(%s)", (name,)).fetchone()[0] is not None:
        name += "_" + secrets.token_hex(3)
    conn.execute(f"CREATE TABLE {name} (LIKE mlgoodput_chunks)")
    _use_lz4(conn, name)
    conn.execute(
        f"ALTER TABLE mlgoodput_chunks ATTACH PARTITION {name}"
        f" FOR VALUES FROM ({int(start)}) TO ({int(start + PARTITION_DAYS)})"
    )


def _schema_found(conn: Any) -> tuple[str, int, bool] | None:
    """(store id, format, older rows kept aside) when the schema of this FORMAT is there
    (two reads, no lock: what 10,000 hosts' connections cost), else None."""
    kinds = conn.execute(
        "SELECT to_regclass('mlgoodput_meta') IS NOT NULL AND to_regclass('mlgoodput_jobs') IS NOT NULL,"
        " (SELECT relkind::text FROM pg_class WHERE oid = to_regclass('mlgoodput_chunks')),"
        " to_regclass('mlgoodput_chunks_v2') IS NOT NULL"
    ).fetchone()
    if not kinds[0] or kinds[1] != "p":
        return None
    meta = dict(conn.execute("SELECT key, value FROM mlgoodput_meta WHERE key IN ('store_id', 'format')").fetchall())
    have = int(meta["format"]) if str(meta.get("format", "")).isdigit() else 0
    if "store_id" not in meta or have < FORMAT:
        return None
    return str(meta["store_id"]), have, bool(kinds[2])


def _make_schema(conn: Any) -> tuple[str, int, bool]:
    """Make (or bring up to FORMAT) the schema, under the maker's lock (`_MAKER_LOCK`, which
    the caller holds): an older store's rows and per-job figures are moved aside, kept and
    still read. The partitions for this week and the next are made with it, so a fleet that
    starts against a fresh store does no partition DDL on its first appends. A store newer
    than this code is left as it is (its format is returned for the caller to refuse)."""
    conn.execute("CREATE TABLE IF NOT EXISTS mlgoodput_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    row = conn.execute("SELECT value FROM mlgoodput_meta WHERE key = 'format'").fetchone()
    have = int(row[0]) if row is not None and str(row[0]).isdigit() else 0
    if have > FORMAT:
        return "", have, False
    kind = conn.execute("SELECT relkind::text FROM pg_class WHERE oid = to_regclass('mlgoodput_chunks')").fetchone()
    if kind is not None and kind[0] != "p":  # an older store: its rows and cursors stay readable
        conn.execute("ALTER TABLE mlgoodput_chunks RENAME TO mlgoodput_chunks_v2")
    conn.execute(_SCHEMA)
    conn.execute(
        "INSERT INTO mlgoodput_meta (key, value) VALUES ('store_id', %s) ON CONFLICT DO NOTHING",
        (secrets.token_hex(8),),
    )
    conn.execute(
        "INSERT INTO mlgoodput_meta (key, value) VALUES ('format', %s) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
        (str(FORMAT),),
    )
    day = _day(clock())
    start = day - day % PARTITION_DAYS
    for s in (start, start + PARTITION_DAYS):
        _make_partition(conn, s)
    store_id = conn.execute("SELECT value FROM mlgoodput_meta WHERE key = 'store_id'").fetchone()[0]
    legacy = conn.execute("SELECT to_regclass('mlgoodput_chunks_v2') IS NOT NULL").fetchone()[0]
    return str(store_id), FORMAT, bool(legacy)


def _use_lz4(conn: Any, table: str) -> None:
    """Compress a partition's large values with lz4 (PostgreSQL 14 and later, when built
    with it): several times cheaper for the server than its default (pglz) on packed arrays.
    A server without lz4 keeps its default (a savepoint: nothing changes)."""
    if conn.info.server_version < 140000:
        return
    try:
        with conn.transaction():
            conn.execute(f"ALTER TABLE {table} ALTER COLUMN data SET COMPRESSION lz4")
    except _psycopg().Error:
        pass


# -- one row's value: its columns packed together -------------------------------------------
_COLUMNS = 1  # each column in a `_packed` form (large rows)
_COMPACT = 2  # times and values XORed with the one before, hosts and steps as differences
_NAMES, _ATTRS = 1, 2


def _uvarint(x: int, out: bytearray) -> None:
    while x >= 0x80:
        out.append(x & 0x7F | 0x80)
        x >>= 7
    out.append(x)


def _read_uvarint(data: bytes, i: int) -> tuple[int, int]:
    x = shift = 0
    while True:
        b = data[i]
        i += 1
        x |= (b & 0x7F) << shift
        if b < 0x80:
            return x, i
        shift += 7


def _zigzag_deltas(data: bytes, code: str) -> bytes:
    """Integers as the varints of their zigzagged differences from the one before."""
    out = bytearray()
    prev = 0
    for x in array(code, data):
        d = x - prev
        prev = x
        _uvarint(d << 1 if d >= 0 else (-d << 1) - 1, out)
    return bytes(out)


def _undo_zigzag(data: bytes, code: str, n: int) -> bytes:
    vals = array(code)
    prev = i = 0
    for _ in range(n):
        z, i = _read_uvarint(data, i)
        prev += (z >> 1) if not z & 1 else -((z + 1) >> 1)
        vals.append(prev)
    return vals.tobytes()


def _xor(data: bytes) -> bytes:
    """8-byte items XORed with the one before: a count of leading zero bytes, then the rest
    (times a moment apart share their sign, exponent and high mantissa bytes)."""
    out = bytearray()
    prev = 0
    for x in array("Q", data):
        d = x ^ prev
        prev = x
        size = (d.bit_length() + 7) // 8
        out.append(size)
        out += d.to_bytes(8, "little")[:size]
    return bytes(out)


def _unxor(data: bytes, n: int) -> bytes:
    vals = array("Q")
    prev = i = 0
    for _ in range(n):
        size = data[i]
        prev ^= int.from_bytes(data[i + 1 : i + 1 + size], "little")
        i += 1 + size
        vals.append(prev)
    return vals.tobytes()


def _blob(ch: Chunk) -> bytes:
    """A chunk as one stored value: a form byte, a flags byte, then each column as a varint
    length and its bytes (kinds, times, hosts, steps, values, then names and attrs JSON when
    there). Small rows (a round of one event per host) take compact forms, large ones the
    `_packed` forms the server compresses well."""
    n = ch.n
    if n <= SMALL_ROW:
        form = _COMPACT
        cols = [
            pack(ch.kinds, 1, n),
            _xor(ch.times),
            _zigzag_deltas(ch.hosts, "i"),
            _zigzag_deltas(ch.steps, "q"),
            # values: tagged, one item (NaN for steps) or XORed
            b"\0" + ch.values[:8] if ch.values == ch.values[:8] * n else b"\1" + _xor(ch.values),
        ]
    else:
        form = _COLUMNS
        cols = [
            pack(ch.kinds, 1, n),
            pack(ch.times, 8, n),
            pack(ch.hosts, 4, n),
            pack(ch.steps, 8, n, integers=True),
            pack(ch.values, 8, n),
        ]
    flags = (_NAMES if ch.names is not None else 0) | (_ATTRS if ch.attrs is not None else 0)
    if ch.names is not None:
        cols.append(ch.names.encode())
    if ch.attrs is not None:
        cols.append(ch.attrs.encode())
    out = bytearray((form, flags))
    for c in cols:
        _uvarint(len(c), out)
        out += c
    return bytes(out)


def column_bytes(data: bytes) -> list[bytes]:
    """A stored value's columns as stored (kinds, times, hosts, steps, values, then names
    and attrs JSON when there), still in their stored forms: what each costs on disk."""
    form, flags = data[0], data[1]
    i = 2
    cols: list[bytes] = []
    while i < len(data):
        size, i = _read_uvarint(data, i)
        cols.append(data[i : i + size])
        i += size
    want = 5 + bool(flags & _NAMES) + bool(flags & _ATTRS)
    if len(cols) != want or form not in (_COLUMNS, _COMPACT) or i != len(data):
        raise StoreError(f"a stored row of form {form} holds {len(cols)} columns, not {want}")
    return cols


def _unblob(n: int, data: bytes) -> Columns:
    """The columns of a value `_blob` made (exactly the plain bytes it was made of)."""
    form, flags = data[0], data[1]
    cols = column_bytes(data)
    if form == _COMPACT:
        kinds, times = unpack(cols[0], 1, n), _unxor(cols[1], n)
        hosts, steps = _undo_zigzag(cols[2], "i", n), _undo_zigzag(cols[3], "q", n)
        values = cols[4][1:9] * n if cols[4][:1] == b"\0" else _unxor(cols[4][1:], n)
    else:
        kinds, times, hosts = unpack(cols[0], 1, n), unpack(cols[1], 8, n), unpack(cols[2], 4, n)
        steps, values = unpack(cols[3], 8, n), unpack(cols[4], 8, n)
    rest = iter(cols[5:])
    names = next(rest).decode() if flags & _NAMES else None
    attrs = next(rest).decode() if flags & _ATTRS else None
    return decode(kinds, times, hosts, steps, values, names, attrs)


def _merge(chunks: list[Chunk]) -> list[Chunk]:
    """Consecutive chunks joined into as few as hold at most MAX_CHUNK_EVENTS each (one row
    per job for a round of many writers' small batches)."""
    out: list[Chunk] = []
    run: list[Chunk] = []
    for ch in chunks:
        if run and sum(c.n for c in run) + ch.n > MAX_CHUNK_EVENTS:
            out.append(_join(run))
            run = []
        run.append(ch)
    if run:
        out.append(_join(run))
    return out


def _join(run: list[Chunk]) -> Chunk:
    if len(run) == 1:
        return run[0]

    def text(col: list[tuple[str | None, int]]) -> str | None:
        if all(t is None for t, _ in col):
            return None
        inner = [(t if t is not None else "[" + ",".join(["null"] * n) + "]")[1:-1] for t, n in col]
        return "[" + ",".join(x for x in inner if x) + "]"

    return Chunk(
        n=sum(c.n for c in run),
        kinds=b"".join(c.kinds for c in run),
        times=b"".join(c.times for c in run),
        hosts=b"".join(c.hosts for c in run),
        steps=b"".join(c.steps for c in run),
        values=b"".join(c.values for c in run),
        names=text([(c.names, c.n) for c in run]),
        attrs=text([(c.attrs, c.n) for c in run]),
        t_min=min(c.t_min for c in run),
        t_max=max(c.t_max for c in run),
    )


def _state_schema(conn: Any) -> None:
    if conn.execute("SELECT to_regclass('mlgoodput_state_pieces')").fetchone()[0] is not None:
        return  # made already: no lock (many savers at once do not queue on it)
    conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MAKER_LOCK,))  # one schema creator at a time
    conn.execute(_STATE_SCHEMA)


_PAGE_EVENTS = PAGE_ROWS * 65_536  # events a page aims at
_MAX_PAGE_ROWS = 4096


def _decode_legacy(r: Any) -> Columns:
    """An older row (seq, n, kinds, times, hosts, steps, vals, names, attrs) as columns: each
    packed column back in its plain bytes, whichever form `pack` stored it in (or plain)."""
    n = int(r[1])
    return decode(
        unpack(bytes(r[2]), 1, n),
        unpack(bytes(r[3]), 8, n),
        unpack(bytes(r[4]), 4, n),
        unpack(bytes(r[5]), 8, n),
        unpack(bytes(r[6]), 8, n),
        r[7],
        r[8],
    )


#: a saved state's pieces go in groups of about this many bytes, or this many pieces, a transaction
_STATE_GROUP_BYTES = 4 << 20
_STATE_GROUP_PIECES = 512


def _put_pieces(ns: str, job: str, gen: int, first: int, data: list[bytes], conn: Any) -> None:
    with conn.cursor().copy("COPY mlgoodput_state_pieces (ns, job, gen, i, data) FROM STDIN (FORMAT BINARY)") as cp:
        cp.set_types(["text", "text", "int8", "int4", "bytea"])
        for k, d in enumerate(data):
            cp.write_row((ns, job, gen, first + k, d))


def _get_pieces(ns: str, job: str, gen: int, lo: int, hi: int, conn: Any) -> list[Any]:
    rows: list[Any] = conn.execute(
        "SELECT i, data FROM mlgoodput_state_pieces WHERE ns = %s AND job = %s AND gen = %s AND i >= %s AND i < %s",
        (ns, job, gen, lo, hi),
    ).fetchall()
    return rows


class _ReadAhead:
    """Saved pieces fetched one query at a time, more of them each time the reader goes on in
    order (1, 2, 4, ... up to 64 pieces): a reader that wants the header alone reads one piece,
    one that reads them all makes a query per 64, not one per piece."""

    def __init__(self, fetch: Callable[[int, int], list[Any]]) -> None:
        self._fetch = fetch
        self._have: dict[int, bytes] = {}
        self._next = -1  # the piece an in-order reader asks for next
        self._width = 1

    def piece(self, i: int) -> bytes | None:
        got = self._have.pop(i, None)
        if got is None:
            self._width = min(64, self._width * 2) if i == self._next else 1
            self._have = {int(r[0]): bytes(r[1]) for r in self._fetch(i, i + self._width)}
            got = self._have.pop(i, None)  # missing: a newer save dropped this generation
        self._next = i + 1
        return got


_STATE_SCHEMA = """
CREATE TABLE IF NOT EXISTS mlgoodput_states (
    ns TEXT NOT NULL, job TEXT NOT NULL, gen BIGINT NOT NULL, pieces INTEGER NOT NULL,
    saved_at DOUBLE PRECISION NOT NULL, PRIMARY KEY (ns, job)
);
CREATE TABLE IF NOT EXISTS mlgoodput_state_pieces (
    ns TEXT NOT NULL, job TEXT NOT NULL, gen BIGINT NOT NULL, i INTEGER NOT NULL,
    data BYTEA NOT NULL, PRIMARY KEY (ns, job, gen, i)
);
"""


register(StoreBackend("postgres", ("postgresql", "postgres"), PostgresStore, "postgresql://..."))
