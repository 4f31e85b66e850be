"""The embedded default store: one SQLite file that many processes write at once.

Each appended batch becomes one row of packed columns (see `_columns`), so a job of a
million steps is about a thousand rows. WAL mode lets readers run beside writers; writers
take turns through SQLite's lock and retry while it is busy. Idempotence comes from a
per-writer high-water mark kept in the same transaction as the rows.
"""

from __future__ import annotations

import logging
import os
import secrets
import sqlite3
import stat
import threading
import time
from pathlib import Path

from mlgoodput.events import EventBatch
from mlgoodput.store._columns import Columns, decode, encode
from mlgoodput.store._protocol import JobInfo, ReadResult, StoreError, StoreReplacedError

SCHEMA_VERSION = 1
MAX_CHUNK_EVENTS = 65536
LOCK_WAIT_LOG_S = 1.0  # an append slower than this is logged (SQLite's own wait is silent)
log = logging.getLogger("mlgoodput")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS chunks (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    ns TEXT NOT NULL,
    job TEXT NOT NULL,
    writer INTEGER NOT NULL,
    first_seq INTEGER NOT NULL,
    n INTEGER NOT NULL,
    t_min REAL NOT NULL,
    t_max REAL NOT NULL,
    stored_at REAL NOT NULL,
    kinds BLOB NOT NULL,
    times BLOB NOT NULL,
    hosts BLOB NOT NULL,
    steps BLOB NOT NULL,
    vals BLOB NOT NULL,
    names TEXT,
    attrs TEXT
);
CREATE INDEX IF NOT EXISTS chunks_stream ON chunks (ns, job, seq);
CREATE TABLE IF NOT EXISTS writers (writer INTEGER PRIMARY KEY, next_seq INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS streams (
    ns TEXT NOT NULL,
    job TEXT NOT NULL,
    events INTEGER NOT NULL,
    first_time REAL NOT NULL,
    last_time REAL NOT NULL,
    PRIMARY KEY (ns, job)
);
"""


def _refuse_non_file(path: str) -> None:
    """A store path must be a regular file or not exist yet: SQLite on /dev/null or a
    directory would create `<path>-journal` files beside it, or fail later in odd ways."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISREG(st.st_mode):
        raise StoreError(f"SQLite store {path!r} is not a regular file")


def _identify(conn: sqlite3.Connection, path: str) -> tuple[str, tuple[int, int] | None]:
    """The store id (made once, at creation, kept in the meta table) and the file's identity."""
    conn.execute("INSERT OR IGNORE INTO meta(key, value) VALUES ('store_id', ?)", (secrets.token_hex(8),))
    sid = str(conn.execute("SELECT value FROM meta WHERE key = 'store_id'").fetchone()[0])
    if path == ":memory:":
        return sid, None
    st = os.stat(path)
    return sid, (st.st_dev, st.st_ino)


class SQLiteStore:
    """A store in one SQLite file; safe across threads, processes and `fork`."""

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout_s: float = 30.0) -> None:
        self.path = str(path) if str(path) == ":memory:" else os.path.abspath(path)
        self.url = "sqlite://" + self.path  # sqlite:///abs/path.db
        self._busy_timeout_s = busy_timeout_s
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._pid = -1
        self._store_id = ""
        self._file_id: tuple[int, int] | None = None
        self._wait_logged = 0.0

    def _connect(self) -> sqlite3.Connection:
        if self._conn is not None and self._pid == os.getpid():
            return self._conn
        try:
            if self.path != ":memory:":
                _refuse_non_file(self.path)
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(
                self.path,
                timeout=self._busy_timeout_s,
                isolation_level=None,
                check_same_thread=False,
            )
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.executescript(_SCHEMA)
            conn.execute(
                "INSERT OR IGNORE INTO meta(key, value) VALUES ('schema_version', ?)",
                (str(SCHEMA_VERSION),),
            )
            self._store_id, self._file_id = _identify(conn, self.path)
        except (sqlite3.Error, OSError) as e:
            raise StoreError(f"cannot open SQLite store {self.path!r}: {e}") from e
        self._conn = conn
        self._pid = os.getpid()
        return conn

    def _check_file(self) -> None:
        """StoreReplacedError (and a fresh connection next time) when the file at the path is
        gone or is another file than the one this connection writes: a connection to a
        deleted file would take writes that nobody can ever read."""
        if self.path == ":memory:":
            return
        try:
            st = os.stat(self.path)
            now: tuple[int, int] | None = (st.st_dev, st.st_ino)
        except FileNotFoundError:
            now = None
        if now != self._file_id:
            self.close()
            what = "was deleted" if now is None else "was replaced by another file"
            raise StoreReplacedError(f"the SQLite store {self.path!r} {what} while in use")

    def _connect_current(self) -> sqlite3.Connection:
        """A connection to the file now at the path (readers follow a replaced store quietly)."""
        conn = self._connect()
        try:
            self._check_file()
        except StoreReplacedError:
            conn = self._connect()
        return conn

    def identity(self) -> str:
        """This store's id and its file's device:inode, checked against the open connection."""
        with self._lock:
            self._connect()
            self._check_file()
            return f"{self._store_id}@{self._file_id[0]}:{self._file_id[1]}" if self._file_id else self._store_id

    def append(self, namespace: str, job: str, batch: EventBatch) -> None:
        with self._lock:
            try:
                conn = self._connect()
                self._check_file()
                t0 = time.monotonic()
                self._append(conn, namespace, job, batch)
                self._note_wait(time.monotonic() - t0)
                self._check_file()
            except sqlite3.Error as e:
                if self._conn is not None and self._conn.in_transaction:
                    try:
                        self._conn.execute("ROLLBACK")
                    except sqlite3.Error:
                        pass
                raise StoreError(f"cannot append to SQLite store {self.path!r}: {e}") from e

    def _note_wait(self, waited: float) -> None:
        """Log (at most once a minute) an append that waited long, mostly for another writer's lock."""
        if waited >= LOCK_WAIT_LOG_S and time.monotonic() - self._wait_logged > 60.0:
            self._wait_logged = time.monotonic()
            log.warning("mlgoodput: an append to the SQLite store %s took %.1f s, waiting for its lock"
                        " (another process is writing or holds a transaction open)", self.path, waited)

    def _append(self, conn: sqlite3.Connection, ns: str, job: str, batch: EventBatch) -> None:
        conn.execute("BEGIN IMMEDIATE")
        row = conn.execute(
            "SELECT next_seq FROM writers WHERE writer = ?", (batch.writer,)
        ).fetchone()
        expected = row[0] if row else 0
        skip = max(0, expected - batch.first_seq)
        events = batch.events[skip:]
        if not events:
            conn.execute("COMMIT")
            return
        first = batch.first_seq + skip
        now = time.time()
        t_lo, t_hi, total = float("inf"), float("-inf"), 0
        for start in range(0, len(events), MAX_CHUNK_EVENTS):
            part = events[start : start + MAX_CHUNK_EVENTS]
            ch = encode(Columns.from_events(part))
            conn.execute(
                "INSERT INTO chunks (ns, job, writer, first_seq, n, t_min, t_max, stored_at,"
                " kinds, times, hosts, steps, vals, names, attrs)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (ns, job, batch.writer, first + start, ch.n, ch.t_min, ch.t_max, now,
                 ch.kinds, ch.times, ch.hosts, ch.steps, ch.values, ch.names, ch.attrs),
            )
            t_lo, t_hi, total = min(t_lo, ch.t_min), max(t_hi, ch.t_max), total + ch.n
        conn.execute(
            "INSERT INTO writers(writer, next_seq) VALUES (?, ?)"
            " ON CONFLICT(writer) DO UPDATE SET next_seq = excluded.next_seq",
            (batch.writer, batch.first_seq + len(batch.events)),
        )
        conn.execute(
            "INSERT INTO streams(ns, job, events, first_time, last_time) VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT(ns, job) DO UPDATE SET events = events + excluded.events,"
            " first_time = min(first_time, excluded.first_time),"
            " last_time = max(last_time, excluded.last_time)",
            (ns, job, total, t_lo, t_hi),
        )
        conn.execute("COMMIT")

    def read(self, namespace: str, job: str, cursor: int = 0) -> ReadResult:
        with self._lock:
            try:
                conn = self._connect_current()
                rows = conn.execute(
                    "SELECT seq, kinds, times, hosts, steps, vals, names, attrs FROM chunks"
                    " WHERE ns = ? AND job = ? AND seq > ? ORDER BY seq",
                    (namespace, job, cursor),
                ).fetchall()
            except sqlite3.Error as e:
                raise StoreError(f"cannot read SQLite store {self.path!r}: {e}") from e
        parts = [decode(*r[1:]) for r in rows]
        return ReadResult(parts, rows[-1][0] if rows else cursor)

    def jobs(self) -> list[JobInfo]:
        with self._lock:
            try:
                rows = self._connect_current().execute(
                    "SELECT ns, job, events, first_time, last_time FROM streams ORDER BY ns, job"
                ).fetchall()
            except sqlite3.Error as e:
                raise StoreError(f"cannot read SQLite store {self.path!r}: {e}") from e
        return [JobInfo(*r) for r in rows]

    def close(self) -> None:
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                try:
                    self._conn.close()
                except sqlite3.Error:
                    pass
            self._conn = None
