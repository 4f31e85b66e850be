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
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import partial
from operator import itemgetter
from pathlib import Path
from typing import Any, TypeVar

from mlgoodput.events import Event, EventBatch
from mlgoodput.store import _exactly_once
from mlgoodput.store._columns import Chunk, Columns, RawChunk, StoredRow, decode, encode_batch
from mlgoodput.store._exactly_once import new_part
from mlgoodput.store._protocol import JobInfo, ReadResult, StoreError, StoreReplacedError
from mlgoodput.store._registry import StoreBackend, register
from mlgoodput.store._state import PAGE_ROWS, SavedPieces

T = TypeVar("T")

SCHEMA_VERSION = 1
MAX_CHUNK_EVENTS = 65536
TX_EVENTS = 16384  # events per write transaction of `append`: the longest another writer waits for
LOCK_WAIT_LOG_S = 1.0  # an append slower than this is logged (SQLite's own wait is silent)
OPEN_WAIT_LOG_S = 5.0  # an open waiting this long for another process's lock says so, while it waits
LOCK_POLL_S = 0.002  # how often a writer asks for the write lock while another holds it
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


def _is_locked(e: sqlite3.OperationalError) -> bool:
    """True for SQLite's transient "database is locked" / "busy" answers."""
    text = str(e).lower()
    return "locked" in text or "busy" in text


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
        self.lock_waits = 0  # appends that took the write lock, and how long they waited for it
        self.lock_wait_total_s = 0.0
        self.lock_wait_max_s = 0.0

    def _connect(self) -> sqlite3.Connection:
        if self._conn is not None and self._pid == os.getpid():
            return self._conn
        # Opening is retried on "locked" within the busy timeout: switching a fresh file to
        # WAL needs an exclusive lock, and SQLite answers BUSY at once (no busy handler)
        # when several processes open one new file together.
        t0 = time.monotonic()
        deadline = t0 + self._busy_timeout_s
        pause = 0.005
        # a wait for another process's lock says so while it lasts, not only when it fails
        timer = threading.Timer(OPEN_WAIT_LOG_S, self._note_open_wait)
        timer.daemon = True
        timer.start()
        try:
            while True:
                try:
                    conn = self._open()
                    break
                except sqlite3.OperationalError as e:
                    if not _is_locked(e) or time.monotonic() + pause > deadline:
                        raise StoreError(f"cannot open SQLite store {self.path!r}: {e}") from e
                    time.sleep(pause)
                    pause = min(pause * 2, 0.2)
                except (sqlite3.Error, OSError) as e:
                    raise StoreError(f"cannot open SQLite store {self.path!r}: {e}") from e
        finally:
            timer.cancel()
        waited = time.monotonic() - t0
        if waited >= OPEN_WAIT_LOG_S:
            log.warning("mlgoodput: the SQLite store %s opened after %.1f s waiting for its lock", self.path, waited)
        self._conn = conn
        self._pid = os.getpid()
        return conn

    def _note_open_wait(self) -> None:
        log.warning(
            "mlgoodput: opening the SQLite store %s has waited %.0f s for its lock (another process is writing"
            " or holds a transaction open); waiting up to %.0f s",
            self.path,
            OPEN_WAIT_LOG_S,
            self._busy_timeout_s,
        )

    def _open(self) -> sqlite3.Connection:
        """One attempt at a connection with WAL, the schema and the store's identity."""
        if self.path != ":memory:":
            _refuse_non_file(self.path)
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(
            self.path,
            timeout=self._busy_timeout_s,
            isolation_level=None,
            check_same_thread=False,
        )
        try:
            # WAL persists in the file: only the first opener needs the exclusive lock.
            mode = conn.execute("PRAGMA journal_mode").fetchone()
            if mode is None or str(mode[0]).lower() != "wal":
                conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.executescript(_SCHEMA)
            conn.execute(
                "INSERT OR IGNORE INTO meta(key, value) VALUES ('schema_version', ?)",
                (str(SCHEMA_VERSION),),
            )
            self._store_id, self._file_id = _identify(conn, self.path)
        except BaseException:
            conn.close()
            raise
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
        """Store a batch in short transactions of at most TX_EVENTS events each: every one
        moves the writer's high-water mark with its rows, so a batch cut short by a crash is
        completed by its replay, and another writer never waits for more than one piece."""
        events = batch.events
        chunks = encode_batch(events, TX_EVENTS)  # before the lock: writers only wait for inserts
        at = 0
        for ch in chunks:
            self._append_chunks(
                namespace,
                job,
                batch.writer,
                batch.first_seq + at,
                ch.n,
                [ch],
                partial(_encode_range, events, at, at + ch.n),
            )
            at += ch.n

    def append_many(self, namespace: str, job: str, batches: list[EventBatch]) -> None:
        """`append` for several writers' batches in one transaction: one lock, one commit, so
        a server taking in many clients' records writes once per round, not once per client."""
        work: list[_Work] = [
            (
                b.writer,
                b.first_seq,
                len(b.events),
                encode_batch(b.events, MAX_CHUNK_EVENTS),
                partial(_encode_from, b.events),
            )
            for b in batches
            if b.events
        ]
        self._append_all(namespace, job, work)

    def append_batches(self, items: Sequence[tuple[str, str, EventBatch]]) -> None:
        """Every (namespace, job, batch) in one transaction (one BEGIN IMMEDIATE, one commit),
        all or nothing, each batch kept once per writer as `append` keeps it: a node's shipper
        writes all of its processes' events of a round with one lock and one commit."""
        work: list[tuple[str, str, _Work]] = [
            (
                ns,
                job,
                (
                    b.writer,
                    b.first_seq,
                    len(b.events),
                    encode_batch(b.events, MAX_CHUNK_EVENTS),
                    partial(_encode_from, b.events),
                ),
            )
            for ns, job, b in items
            if b.events
        ]
        if work:
            self._append_work(work)

    def _append_chunks(
        self,
        ns: str,
        job: str,
        writer: int,
        first_seq: int,
        n: int,
        chunks: list[Chunk],
        rest: Callable[[int], list[Chunk]],
    ) -> None:
        self._append_all(ns, job, [(writer, first_seq, n, chunks, rest)])

    def _append_all(self, ns: str, job: str, work: list[_Work]) -> None:
        self._append_work([(ns, job, w) for w in work])

    def _append_work(self, work: list[tuple[str, str, _Work]]) -> None:
        """The runs of `work` (each of a stream) in one write transaction."""
        with self._lock:
            try:
                conn = self._connect()
                self._check_file()
                self._begin_write(conn)
                for ns, job, item in work:
                    self._append(conn, ns, job, *item)
                conn.execute("COMMIT")
                self._check_file()
            except sqlite3.Error as e:
                self._rollback()
                raise StoreError(f"cannot append to SQLite store {self.path!r}: {e}") from e
            except BaseException:  # an interrupt mid-write: store none of it, as a crash would
                self._rollback()
                raise

    def _begin_write(self, conn: sqlite3.Connection) -> None:
        """Take the write lock (BEGIN IMMEDIATE), asking every 2 ms until the busy timeout.

        SQLite's own busy handler sleeps ever longer between tries (up to 100 ms), so
        with several writers a waiter often sleeps through the moment the lock is free and
        waits seconds; short tries without its handler take the lock within about 2 ms of
        its release. The time waited is kept in `lock_wait_max_s` / `lock_wait_total_s`."""
        t0 = time.monotonic()
        deadline = t0 + self._busy_timeout_s
        conn.execute("PRAGMA busy_timeout = 0")
        try:
            while True:
                try:
                    conn.execute("BEGIN IMMEDIATE")
                    break
                except sqlite3.OperationalError as e:
                    if not _is_locked(e) or time.monotonic() >= deadline:
                        raise
                time.sleep(LOCK_POLL_S)
        finally:
            conn.execute(f"PRAGMA busy_timeout = {int(self._busy_timeout_s * 1000)}")
        waited = time.monotonic() - t0
        self.lock_waits += 1
        self.lock_wait_total_s += waited
        self.lock_wait_max_s = max(self.lock_wait_max_s, waited)
        self._note_wait(waited)

    def _rollback(self) -> None:
        """End a failed transaction, if one is open (a failure to do so changes nothing)."""
        if self._conn is not None and self._conn.in_transaction:
            try:
                self._conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass

    def _note_wait(self, waited: float) -> None:
        """Log (at most once a minute) an append that waited long, mostly for another writer's lock."""
        if waited >= LOCK_WAIT_LOG_S and time.monotonic() - self._wait_logged > 60.0:
            self._wait_logged = time.monotonic()
            log.warning(
                "mlgoodput: an append to the SQLite store %s took %.1f s, waiting for its lock"
                " (another process is writing or holds a transaction open)",
                self.path,
                waited,
            )

    def _append(
        self,
        conn: sqlite3.Connection,
        ns: str,
        job: str,
        writer: int,
        first_seq: int,
        n: int,
        chunks: list[Chunk],
        rest: Callable[[int], list[Chunk]],
    ) -> None:
        """One writer's run, inside the caller's transaction; what the store has is skipped."""
        row = conn.execute("SELECT next_seq FROM writers WHERE writer = ?", (writer,)).fetchone()
        part = new_part(writer, first_seq, n, row[0] if row else 0)
        if part is None:
            return
        if part.skip:  # a replay that overlaps what is stored: encode the rest (rare, after a crash)
            chunks = rest(part.skip)
        first = part.first
        now = time.time()
        t_lo, t_hi, total = float("inf"), float("-inf"), 0
        for ch in chunks:
            conn.execute(
                "INSERT INTO chunks (ns, job, writer, first_seq, n, t_min, t_max, stored_at,"
                " kinds, times, hosts, steps, vals, names, attrs)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    ns,
                    job,
                    writer,
                    first + total,
                    ch.n,
                    ch.t_min,
                    ch.t_max,
                    now,
                    ch.kinds,
                    ch.times,
                    ch.hosts,
                    ch.steps,
                    ch.values,
                    ch.names,
                    ch.attrs,
                ),
            )
            t_lo, t_hi, total = min(t_lo, ch.t_min), max(t_hi, ch.t_max), total + ch.n
        _exactly_once.before_mark(part)
        conn.execute(
            "INSERT INTO writers(writer, next_seq) VALUES (?, ?)"
            " ON CONFLICT(writer) DO UPDATE SET next_seq = excluded.next_seq",
            (writer, part.mark),
        )
        conn.execute(
            "INSERT INTO streams(ns, job, events, first_time, last_time) VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT(ns, job) DO UPDATE SET events = events + excluded.events,"
            " first_time = min(first_time, excluded.first_time),"
            " last_time = max(last_time, excluded.last_time)",
            (ns, job, total, t_lo, t_hi),
        )

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
                rows = (
                    self._connect_current()
                    .execute("SELECT ns, job, events, first_time, last_time FROM streams ORDER BY ns, job")
                    .fetchall()
                )
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

    # -- optional abilities (store/_state.py): saved accounting state, paged reads ----------
    def _run(self, what: str, work: Callable[[sqlite3.Connection], T]) -> T:
        with self._lock:
            try:
                return work(self._connect_current())
            except sqlite3.Error as e:
                self._rollback()
                raise StoreError(f"cannot {what} SQLite store {self.path!r}: {e}") from e

    def scan(self, namespace: str, job: str, cursor: int = 0) -> Iterator[tuple[int, Columns]]:
        for c, raw in self.scan_chunks(namespace, job, cursor):
            yield c, decode(*raw)

    def scan_chunks(self, namespace: str, job: str, cursor: int = 0) -> Iterator[tuple[int, RawChunk]]:
        """`scan`, each chunk as stored (the arguments of `decode`)."""
        for rows in self.scan_pages(namespace, job, cursor):
            for r in rows:
                yield r[0], r[1:]

    def scan_pages(self, namespace: str, job: str, cursor: int = 0) -> Iterator[list[StoredRow]]:
        """`scan_chunks` a page at a time, as the database returns it: rows of (cursor, kinds,
        times, hosts, steps, values, names, attrs), never empty. A reader that checks and
        gathers many small chunks does so a column at a time (the calculator's runs of one
        host's step starts), not with a Python step per chunk."""
        limit = PAGE_ROWS
        while True:
            rows = self._run("read", partial(_page, namespace, job, cursor, limit))
            if not rows:
                return
            yield rows
            if len(rows) < limit:
                return
            cursor = rows[-1][0]
            events = sum(map(len, map(_KINDS, rows)))  # one kind byte an event
            # small chunks (a shipper's every second): more of them a page, about as many events
            limit = max(PAGE_ROWS, min(_MAX_PAGE_ROWS, _PAGE_EVENTS * len(rows) // max(1, events)))

    def stream_position(self, namespace: str, job: str, cursor: int) -> tuple[int, int]:
        def work(conn: sqlite3.Connection) -> tuple[int, int]:
            head = conn.execute(
                "SELECT coalesce(max(seq), 0) FROM chunks WHERE ns = ? AND job = ?", (namespace, job)
            ).fetchone()[0]
            upto = conn.execute(
                "SELECT coalesce(sum(n), 0) FROM chunks WHERE ns = ? AND job = ? AND seq <= ?",
                (namespace, job, cursor),
            ).fetchone()[0]
            return int(head), int(upto)

        return self._run("read", work)

    def save_state(self, namespace: str, job: str, pieces: Iterable[bytes]) -> None:
        """Pieces go in under a new generation in short transactions; one last short
        transaction makes it current and drops the others but the one it replaces (kept for
        one more save, so a reader still fetching its pieces finishes), so writers never wait
        long."""
        gen = time.time_ns() ^ (os.getpid() << 20)

        def put(conn: sqlite3.Connection, batch: list[bytes], first: int) -> None:
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(
                "INSERT INTO state_pieces (ns, job, gen, i, data) VALUES (?, ?, ?, ?, ?)",
                [(namespace, job, gen, first + k, b) for k, b in enumerate(batch)],
            )
            conn.execute("COMMIT")

        def flip(conn: sqlite3.Connection, n: int) -> None:
            conn.execute("BEGIN IMMEDIATE")
            have = conn.execute(
                "SELECT count(*) FROM state_pieces WHERE ns = ? AND job = ? AND gen = ?",
                (namespace, job, gen),
            ).fetchone()[0]
            if have == n:  # else a concurrent save dropped ours: keep theirs
                row = conn.execute("SELECT gen FROM states WHERE ns = ? AND job = ?", (namespace, job)).fetchone()
                prev = gen if row is None else int(row[0])
                conn.execute(
                    "INSERT INTO states (ns, job, gen, pieces, saved_at) VALUES (?, ?, ?, ?, ?)"
                    " ON CONFLICT(ns, job) DO UPDATE SET gen = excluded.gen, pieces = excluded.pieces,"
                    " saved_at = excluded.saved_at",
                    (namespace, job, gen, n, time.time()),
                )
                # the generation it replaces stays for one more save: a reader of it can finish
                conn.execute(
                    "DELETE FROM state_pieces WHERE ns = ? AND job = ? AND gen NOT IN (?, ?)",
                    (namespace, job, gen, prev),
                )
            conn.execute("COMMIT")

        self._run("save state in", lambda conn: conn.executescript(_STATE_SCHEMA))
        n, size = 0, 0
        batch: list[bytes] = []
        for piece in pieces:
            batch.append(piece)
            size += len(piece)
            if size >= 16 << 20:
                self._run("save state in", partial(put, batch=batch, first=n))
                n, batch, size = n + len(batch), [], 0
        if batch:
            self._run("save state in", partial(put, batch=batch, first=n))
            n += len(batch)
        self._run("save state in", lambda conn: flip(conn, n))

    def load_single_states(self, namespace: str) -> dict[str, bytes]:
        def work(conn: sqlite3.Connection) -> dict[str, bytes]:
            try:
                rows = conn.execute(
                    "SELECT s.job, p.data FROM states s JOIN state_pieces p ON p.ns = s.ns AND p.job = s.job"
                    " AND p.gen = s.gen AND p.i = 0 WHERE s.ns = ? AND s.pieces = 1",
                    (namespace,),
                ).fetchall()
            except sqlite3.OperationalError as e:
                if "no such table" in str(e):  # nothing was ever saved
                    return {}
                raise
            return {str(j): bytes(d) for j, d in rows}

        return self._run("read", work)

    def load_state(self, namespace: str, job: str) -> Iterator[bytes] | None:
        def head(conn: sqlite3.Connection) -> tuple[int, int] | None:
            try:
                row = conn.execute(
                    "SELECT gen, pieces FROM states WHERE ns = ? AND job = ?", (namespace, job)
                ).fetchone()
            except sqlite3.OperationalError:  # no state table: nothing was ever saved
                return None
            return None if row is None else (int(row[0]), int(row[1]))

        found = self._run("read", head)
        if found is None:
            return None
        gen, n = found

        def piece(i: int) -> bytes | None:  # one piece a query: a deleted generation shows as a missing piece
            row = self._run("read", partial(_piece, namespace, job, gen, i))
            return None if row is None else bytes(row[0])

        return SavedPieces(n, piece)


_Work = tuple[int, int, int, list[Chunk], Callable[[int], list[Chunk]]]


def _encode_range(events: Sequence[Event], start: int, stop: int, skip: int) -> list[Chunk]:
    return encode_batch(events[start + skip : stop], TX_EVENTS)


def _encode_from(events: Sequence[Event], skip: int) -> list[Chunk]:
    return encode_batch(events[skip:], MAX_CHUNK_EVENTS)


_PAGE_EVENTS = PAGE_ROWS * 65_536  # events a page aims at
_KINDS = itemgetter(1)  # a stored row's kinds: one byte an event
_MAX_PAGE_ROWS = 4096


def _page(ns: str, job: str, cursor: int, limit: int, conn: sqlite3.Connection) -> list[Any]:
    # When the whole store holds few rows after the cursor (at most twice a page: the usual
    # incremental read of a job that has the store to itself), they are walked in rowid order
    # and the others skipped, which spares a lookup of each row from the stream's index (a
    # quarter of the read at thousands of small rows); otherwise the index finds the stream's.
    top = conn.execute("SELECT max(seq) FROM chunks").fetchone()[0]
    if top is not None and top - cursor <= 2 * limit:
        return conn.execute(
            "SELECT seq, kinds, times, hosts, steps, vals, names, attrs FROM chunks NOT INDEXED"
            " WHERE seq > ? AND ns = ? AND job = ? ORDER BY seq LIMIT ?",
            (cursor, ns, job, limit),
        ).fetchall()
    return conn.execute(
        "SELECT seq, kinds, times, hosts, steps, vals, names, attrs FROM chunks"
        " WHERE ns = ? AND job = ? AND seq > ? ORDER BY seq LIMIT ?",
        (ns, job, cursor, limit),
    ).fetchall()


def _piece(ns: str, job: str, gen: int, i: int, conn: sqlite3.Connection) -> Any:
    return conn.execute(
        "SELECT data FROM state_pieces WHERE ns = ? AND job = ? AND gen = ? AND i = ?", (ns, job, gen, i)
    ).fetchone()


_STATE_SCHEMA = """
CREATE TABLE IF NOT EXISTS states (
    ns TEXT NOT NULL, job TEXT NOT NULL, gen INTEGER NOT NULL, pieces INTEGER NOT NULL,
    saved_at REAL NOT NULL, PRIMARY KEY (ns, job)
);
CREATE TABLE IF NOT EXISTS state_pieces (
    ns TEXT NOT NULL, job TEXT NOT NULL, gen INTEGER NOT NULL, i INTEGER NOT NULL,
    data BLOB NOT NULL, PRIMARY KEY (ns, job, gen, i)
);
"""


def _canonical(url: str, arg: str) -> str:
    path = url[len("sqlite://") :]
    if not path or path == "/:memory:":
        raise ValueError(f"{arg}: an in-memory SQLite store cannot be shared; use memory://NAME, got {url!r}")
    return "sqlite://" + os.path.abspath(path)


def _file_of(url: str) -> str:
    return url[len("sqlite://") :] if url.startswith("sqlite://") else url


def _open(url: str) -> SQLiteStore:
    return SQLiteStore(_file_of(url))


register(
    StoreBackend(
        "sqlite", ("sqlite",), _open, "sqlite:///path.db", canonical=_canonical, file_of=_file_of, takes_paths=True
    )
)
