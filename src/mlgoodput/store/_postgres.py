"""A PostgreSQL store, for many hosts writing one job at once (needs `mlgoodput[postgres]`).

Same layout as the SQLite store: one row of packed columns per shipped batch. Cursors are
per stream and assigned under the stream's row lock, so a reader never skips a batch that
a slower transaction commits later (a plain sequence would allow that).
"""

from __future__ import annotations

import os
import random
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from typing import Any, TypeVar

from mlgoodput.events import EventBatch
from mlgoodput.store import _exactly_once
from mlgoodput.store._columns import Chunk, Columns, decode, encode_batch
from mlgoodput.store._exactly_once import new_part
from mlgoodput.store._packed import pack, unpack
from mlgoodput.store._protocol import JobInfo, ReadResult, StoreError
from mlgoodput.store._registry import StoreBackend, register
from mlgoodput.store._state import PAGE_ROWS, SavedPieces

# events per stored row (SQLite's chunk size too); a batch's rows go in one transaction. Rows of
# 65,536 cost the server twice the CPU per event (fresh memory for each large value it receives,
# copies and compresses); older rows of any size still read.
MAX_CHUNK_EVENTS = 16384
#: The newest form of a stored row this code writes and reads (2: the short forms of
#: `_packed`). A store records the newest form it holds (`format` in mlgoodput_meta), so a
#: reader older than a future form refuses the store with a clear message instead of
#: misreading it. (Releases before the marker do not look at it.)
FORMAT = 2
T = TypeVar("T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS mlgoodput_streams (
    ns TEXT NOT NULL,
    job TEXT NOT NULL,
    next_seq BIGINT NOT NULL DEFAULT 1,
    events BIGINT NOT NULL DEFAULT 0,
    first_time DOUBLE PRECISION,
    last_time DOUBLE PRECISION,
    PRIMARY KEY (ns, job)
);
CREATE TABLE IF NOT EXISTS mlgoodput_chunks (
    ns TEXT NOT NULL,
    job TEXT NOT NULL,
    seq BIGINT NOT NULL,
    writer BIGINT NOT NULL,
    first_seq BIGINT NOT NULL,
    n INTEGER NOT NULL,
    stored_at DOUBLE PRECISION NOT NULL,
    kinds BYTEA NOT NULL,
    times BYTEA NOT NULL,
    hosts BYTEA NOT NULL,
    steps BYTEA NOT NULL,
    vals BYTEA NOT NULL,
    names TEXT,
    attrs TEXT,
    PRIMARY KEY (ns, job, seq)
);
CREATE TABLE IF NOT EXISTS mlgoodput_writers (writer BIGINT PRIMARY KEY, next_seq BIGINT NOT NULL);
CREATE TABLE IF NOT EXISTS mlgoodput_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError:
        raise ImportError("the PostgreSQL store needs psycopg: pip install 'mlgoodput[postgres]'") from None
    return psycopg


class PostgresStore:
    """A store in a PostgreSQL database (`postgresql://user@host:port/dbname`)."""

    def __init__(self, url: str, *, connect_timeout_s: float = 10.0) -> None:
        _psycopg()  # fail at configuration time when the extra is missing
        self.url = url
        self._timeout = connect_timeout_s
        self._lock = threading.RLock()
        self._conn: Any = None
        self._pid = -1
        self.lock_waits = 0  # appends that took the stream's row lock, and how long that took
        self.lock_wait_total_s = 0.0
        self.lock_wait_max_s = 0.0

    def _connect(self) -> Any:
        if self._conn is not None and self._pid == os.getpid() and not self._conn.closed:
            return self._conn
        psycopg = _psycopg()
        try:
            conn = psycopg.connect(self.url, connect_timeout=int(max(1, self._timeout)), autocommit=False)
        except psycopg.Error as e:
            raise StoreError(f"cannot open PostgreSQL store {self._safe_url()}: {e}") from e
        try:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(4242424242)")  # one schema creator at a time
                conn.execute(_SCHEMA)
                conn.execute(
                    "INSERT INTO mlgoodput_meta (key, value) VALUES ('store_id', %s) ON CONFLICT DO NOTHING",
                    (secrets.token_hex(8),),
                )
                newer = _mark_format(conn)
                _use_lz4(conn, psycopg)
        except psycopg.Error as e:
            conn.close()
            raise StoreError(f"cannot open PostgreSQL store {self._safe_url()}: {e}") from e
        if newer is not None:
            conn.close()
            raise StoreError(
                f"the PostgreSQL store {self._safe_url()} holds rows in format {newer}, written by a newer"
                f" mlgoodput; this one reads formats up to {FORMAT}: upgrade mlgoodput to read or write it"
            )
        self._conn, self._pid = conn, os.getpid()
        return conn

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
                with conn.transaction():
                    return work(conn)
            except psycopg.Error as e:
                self._drop_broken()
                raise StoreError(f"cannot {what} PostgreSQL store {self._safe_url()}: {e}") from e

    def append(self, namespace: str, job: str, batch: EventBatch) -> None:
        chunks = encode_batch(batch.events, MAX_CHUNK_EVENTS)  # before any row lock is taken
        rest: Callable[[int], list[Chunk]] = lambda skip: encode_batch(batch.events[skip:], MAX_CHUNK_EVENTS)  # noqa: E731
        self._in_transaction(
            "append to",
            lambda conn: self._append(
                conn, namespace, job, batch.writer, batch.first_seq, len(batch.events), chunks, rest
            ),
        )

    def _append(
        self,
        conn: Any,
        ns: str,
        job: str,
        writer: int,
        first_seq: int,
        n: int,
        chunks: list[Chunk],
        rest: Callable[[int], list[Chunk]],
    ) -> None:
        mine = "SELECT next_seq FROM mlgoodput_writers WHERE writer = %s FOR UPDATE"
        row = conn.execute(mine, (writer,)).fetchone()
        if row is None:  # this writer's first append: its row first (one statement less after that)
            conn.execute(
                "INSERT INTO mlgoodput_writers (writer, next_seq) VALUES (%s, 0) ON CONFLICT DO NOTHING",
                (writer,),
            )
            row = conn.execute(mine, (writer,)).fetchone()
        expected = row[0]
        part = new_part(writer, first_seq, n, expected)
        if part is None:
            return
        if part.skip:  # a replay that overlaps what is stored: encode the rest (rare, after a crash)
            chunks = rest(part.skip)
        # the rows go in first under placeholder (negative) cursors, before the job's stream
        # row is locked, so the lock covers one renumbering and the commit, not the upload
        tmp = -random.getrandbits(62) - 1
        lo, hi, total = float("inf"), float("-inf"), 0
        first = part.first
        now = time.time()
        with conn.cursor().copy(
            "COPY mlgoodput_chunks (ns, job, seq, writer, first_seq, n, stored_at, kinds, times, hosts,"
            " steps, vals, names, attrs) FROM STDIN (FORMAT BINARY)"
        ) as cp:
            cp.set_types(_CHUNK_TYPES)
            for k, ch in enumerate(chunks):
                cp.write_row(
                    (
                        ns,
                        job,
                        tmp - k,
                        writer,
                        first + total,
                        ch.n,
                        now,
                        # shorter forms (store/_packed.py): the server compresses and logs less
                        pack(ch.kinds, 1, ch.n),
                        pack(ch.times, 8, ch.n),
                        pack(ch.hosts, 4, ch.n),
                        pack(ch.steps, 8, ch.n, integers=True),
                        pack(ch.values, 8, ch.n),
                        ch.names,
                        ch.attrs,
                    )
                )
                lo, hi, total = min(lo, ch.t_min), max(hi, ch.t_max), total + ch.n
        _exactly_once.before_mark(part)
        conn.execute(  # this writer's row is locked already (FOR UPDATE above)
            "UPDATE mlgoodput_writers SET next_seq = %s WHERE writer = %s",
            (part.mark, writer),
        )
        k = len(chunks)
        # one statement takes the stream's row lock, moves its cursor on and says where
        # this batch's rows go; only the renumbering and the commit follow under the lock
        t0 = time.monotonic()
        seq = conn.execute(
            "INSERT INTO mlgoodput_streams AS s (ns, job, next_seq, events, first_time, last_time)"
            " VALUES (%s, %s, 1 + %s, %s, %s, %s) ON CONFLICT (ns, job) DO UPDATE SET"
            " next_seq = s.next_seq + %s, events = s.events + excluded.events,"
            " first_time = LEAST(COALESCE(s.first_time, excluded.first_time), excluded.first_time),"
            " last_time = GREATEST(COALESCE(s.last_time, excluded.last_time), excluded.last_time)"
            " RETURNING s.next_seq - %s",
            (ns, job, k, total, lo, hi, k, k),
        ).fetchone()[0]
        waited = time.monotonic() - t0
        self.lock_waits += 1
        self.lock_wait_total_s += waited
        self.lock_wait_max_s = max(self.lock_wait_max_s, waited)
        conn.execute(  # placeholder tmp - j becomes seq + j
            "UPDATE mlgoodput_chunks SET seq = %s + (%s - seq) WHERE ns = %s AND job = %s AND seq <= %s AND seq > %s",
            (seq, tmp, ns, job, tmp, tmp - k),
        )

    def identity(self) -> str:
        """The store id written when the schema was made: a dropped and recreated schema (or
        another database at the URL) has another one."""
        row = self._in_transaction(
            "read", lambda conn: conn.execute("SELECT value FROM mlgoodput_meta WHERE key = 'store_id'").fetchone()
        )
        return "" if row is None else str(row[0])

    def _drop_broken(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:
                pass
        self._conn = None

    def read(self, namespace: str, job: str, cursor: int = 0) -> ReadResult:
        rows = self._in_transaction(
            "read",
            lambda conn: conn.execute(
                "SELECT seq, n, kinds, times, hosts, steps, vals, names, attrs FROM mlgoodput_chunks"
                " WHERE ns = %s AND job = %s AND seq > %s ORDER BY seq",
                (namespace, job, cursor),
            ).fetchall(),
        )
        parts = [_decode_row(r) for r in rows]
        return ReadResult(parts, rows[-1][0] if rows else cursor)

    def jobs(self) -> list[JobInfo]:
        rows = self._in_transaction(
            "read",
            lambda conn: conn.execute(
                "SELECT ns, job, events, first_time, last_time FROM mlgoodput_streams WHERE events > 0 ORDER BY ns, job"
            ).fetchall(),
        )
        return [JobInfo(r[0], r[1], int(r[2]), float(r[3]), float(r[4])) for r in rows]

    def close(self) -> None:
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._drop_broken()
            self._conn = None

    # -- optional abilities (store/_state.py): saved accounting state, paged reads ----------
    def scan(self, namespace: str, job: str, cursor: int = 0) -> Iterator[tuple[int, Columns]]:
        limit = PAGE_ROWS
        while True:
            rows = self._in_transaction("read", partial(_page, namespace, job, cursor, limit))
            events = 0
            for r in rows:
                cursor = int(r[0])
                cols = _decode_row(r)
                events += len(cols)
                yield cursor, cols
            if len(rows) < limit:
                return
            # small chunks (a shipper's every second): more of them a page, about as many events
            limit = max(PAGE_ROWS, min(_MAX_PAGE_ROWS, _PAGE_EVENTS * len(rows) // max(1, events)))

    def stream_position(self, namespace: str, job: str, cursor: int) -> tuple[int, int]:
        def work(conn: Any) -> tuple[int, int]:
            head = conn.execute(
                "SELECT coalesce(max(seq), 0) FROM mlgoodput_chunks WHERE ns = %s AND job = %s", (namespace, job)
            ).fetchone()[0]
            upto = conn.execute(
                "SELECT coalesce(sum(n), 0) FROM mlgoodput_chunks WHERE ns = %s AND job = %s AND seq <= %s",
                (namespace, job, cursor),
            ).fetchone()[0]
            return int(head), int(upto)

        return self._in_transaction("read", work)

    def save_state(self, namespace: str, job: str, pieces: Iterable[bytes]) -> None:
        """Pieces under a new generation in short transactions, then one short transaction
        makes it current and drops the others but the one it replaces (kept for one more
        save, so a reader still fetching its pieces finishes)."""
        gen = time.time_ns() ^ (os.getpid() << 20)
        self._in_transaction("save state in", _state_schema)
        n = 0
        for piece in pieces:
            self._in_transaction("save state in", partial(_put_piece, namespace, job, gen, n, piece))
            n += 1

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

        def piece(i: int) -> bytes | None:  # one piece a query: a dropped generation shows as a missing piece
            row = self._in_transaction("read", partial(_get_piece, namespace, job, gen, i))
            return None if row is None else bytes(row[0])

        return SavedPieces(n, piece)


_PAYLOAD = ("kinds", "times", "hosts", "steps", "vals", "names", "attrs")


def _use_lz4(conn: Any, psycopg: Any) -> None:
    """Compress the payload columns with lz4 (PostgreSQL 14 and later, when built with it):
    several times cheaper for the server than its default (pglz) on packed arrays, which
    is most of what an append costs it. Set once per database; a server without lz4 keeps
    its default."""
    if conn.info.server_version < 140000:
        return
    rows = conn.execute(
        "SELECT attname, attcompression FROM pg_attribute WHERE attrelid = 'mlgoodput_chunks'::regclass"
        " AND attname = ANY(%s)",
        (list(_PAYLOAD),),
    ).fetchall()
    if all(str(c) == "l" for _, c in rows):
        return
    try:
        with conn.transaction():  # a savepoint: a server without lz4 refuses, and nothing changes
            conn.execute(
                "ALTER TABLE mlgoodput_chunks " + ", ".join(f"ALTER COLUMN {c} SET COMPRESSION lz4" for c in _PAYLOAD)
            )
    except psycopg.Error:
        pass


_CHUNK_TYPES = [
    "text",
    "text",
    "int8",
    "int8",
    "int8",
    "int4",
    "float8",
    "bytea",
    "bytea",
    "bytea",
    "bytea",
    "bytea",
    "text",
    "text",
]


def _state_schema(conn: Any) -> None:
    conn.execute("SELECT pg_advisory_xact_lock(4242424242)")  # one schema creator at a time
    conn.execute(_STATE_SCHEMA)


_PAGE_EVENTS = PAGE_ROWS * 65_536  # events a page aims at
_MAX_PAGE_ROWS = 4096


def _page(ns: str, job: str, cursor: int, limit: int, conn: Any) -> list[Any]:
    rows: list[Any] = conn.execute(
        "SELECT seq, n, kinds, times, hosts, steps, vals, names, attrs FROM mlgoodput_chunks"
        " WHERE ns = %s AND job = %s AND seq > %s ORDER BY seq LIMIT %s",
        (ns, job, cursor, limit),
    ).fetchall()
    return rows


def _mark_format(conn: Any) -> int | None:
    """Record that the store may hold rows of FORMAT (under the schema lock); the store's
    format when it is newer than this code reads (nothing is changed then), else None."""
    row = conn.execute("SELECT value FROM mlgoodput_meta WHERE key = 'format'").fetchone()
    have = int(row[0]) if row is not None and str(row[0]).isdigit() else 0
    if have > FORMAT:
        return have
    if have < FORMAT:
        conn.execute(
            "INSERT INTO mlgoodput_meta (key, value) VALUES ('format', %s)"
            " ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
            (str(FORMAT),),
        )
    return None


def _decode_row(r: Any) -> Columns:
    """A row (seq, n, kinds, times, hosts, steps, vals, names, attrs) as columns: each packed
    column back in its plain bytes, whichever form `pack` stored it in (older rows: plain)."""
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


def _put_piece(ns: str, job: str, gen: int, i: int, data: bytes, conn: Any) -> None:
    conn.execute(
        "INSERT INTO mlgoodput_state_pieces (ns, job, gen, i, data) VALUES (%s, %s, %s, %s, %s)",
        (ns, job, gen, i, data),
    )


def _get_piece(ns: str, job: str, gen: int, i: int, conn: Any) -> Any:
    return conn.execute(
        "SELECT data FROM mlgoodput_state_pieces WHERE ns = %s AND job = %s AND gen = %s AND i = %s",
        (ns, job, gen, i),
    ).fetchone()


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
