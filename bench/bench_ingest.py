"""Many writers into one store (issue 12): how long a writer waits for the store's write lock,
and how many events per second the store takes in.

8 processes append shipper-sized batches to one SQLite file; then 8 processes ("hosts")
append to one PostgreSQL job (a server of our own on 127.0.0.1, started and stopped here;
skipped when the PostgreSQL server programs or psycopg are missing). The lock wait is the time
a writer spends to get the lock: SQLite's `BEGIN IMMEDIATE` (all its tries), PostgreSQL's
row lock on the job's stream; a store that keeps `lock_wait_max_s` / `lock_wait_total_s`
reports them itself, else the locking statements are timed from outside. Targets: longest
wait under 0.5 s; PostgreSQL at least SQLite's rate. The CPU column is the CPU time the
writers spent appending plus the PostgreSQL server's, per million events (Linux; a steadier
measure than the rate on a busy machine).

    PYTHONPATH=src python bench/bench_ingest.py [--writers 8] [--batches 20] [--batch 65536]
"""

from __future__ import annotations

import argparse
import glob
import multiprocessing as mp
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

LOGGER, JOB = "goodput_bench", "bench"


class _TimedConn:
    """Forwards to a connection, timing the statements that take the write lock."""

    def __init__(self, conn: Any, waits: list[float]) -> None:
        self._conn, self._waits = conn, waits

    def execute(self, sql: str, *a: Any, **k: Any) -> Any:
        locking = sql.startswith("BEGIN IMMEDIATE") or ("FOR UPDATE" in sql and "streams" in sql)
        t = time.perf_counter()
        try:
            return self._conn.execute(sql, *a, **k)
        finally:
            if locking:
                self._waits.append(time.perf_counter() - t)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


def _writer(url: str, w: int, batches: int, size: int, columns: bool, out: Any, ready: Any, go: Any) -> None:
    from mlgoodput.events import Event, EventBatch, Kind
    from mlgoodput.store import open_store

    st: Any = open_store(url)
    waits: list[float] = []
    real = st._connect
    st._connect = lambda: _TimedConn(real(), waits)  # type: ignore[method-assign]
    t0 = 1_700_000_000.0 + w
    appends = []
    todo: list[Any] = [
        [Event(Kind.STEP_START, t0 + (b * size + i) * 0.01, host=w, step=b * size + i) for i in range(size)]
        for b in range(batches)
    ]  # made before the clock starts: only storing is measured
    if columns:  # as a journal ships them: columns decoded from its records, no Event objects
        from mlgoodput.store._columns import ColumnEvents, Columns

        todo = [ColumnEvents(Columns.from_events(ev)) for ev in todo]
    ready.release()
    go.wait()
    cpu = time.process_time()
    for b, ev in enumerate(todo):
        t = time.perf_counter()
        st.append(LOGGER, JOB, EventBatch(1000 + w, b * size, ev))
        appends.append(time.perf_counter() - t)
    st.close()
    cpu = time.process_time() - cpu
    if hasattr(st, "lock_wait_max_s"):  # the store times its own lock waits (all its tries)
        out.put((st.lock_wait_max_s, st.lock_wait_total_s, appends, cpu))
    else:
        out.put((max(waits, default=0.0), sum(waits), appends, cpu))


_SERVERS: dict[str, int] = {}  # a bench server's URL -> its postmaster's pid


def _server_cpu(url: str) -> float:
    """CPU seconds of a bench server so far: its postmaster, the backends it has reaped and its
    live processes (Linux /proc; 0.0 elsewhere, or for a store without a server)."""
    pid = _SERVERS.get(url)
    if pid is None or not os.path.isdir("/proc"):
        return 0.0
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # after the name: state, ppid, ...; utime, stime, cutime, cstime are fields 14-17 (1-based)
        if int(entry) == pid:
            total += sum(int(x) for x in fields[11:15]) / tick
        elif int(fields[1]) == pid:
            total += sum(int(x) for x in fields[11:13]) / tick
    return total


def run(url: str, writers: int, batches: int, size: int, columns: bool) -> dict[str, float]:
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    ready, go = ctx.Semaphore(0), ctx.Event()
    procs = [ctx.Process(target=_writer, args=(url, w, batches, size, columns, q, ready, go)) for w in range(writers)]
    for p in procs:
        p.start()
    for _ in procs:
        ready.acquire(timeout=900)
    server0 = _server_cpu(url)
    t = time.perf_counter()
    go.set()
    got = [q.get(timeout=900) for _ in procs]
    wall = time.perf_counter() - t
    for p in procs:
        p.join()
    server = _server_cpu(url) - server0  # the writers' backends have ended: reaped by now
    appends = [x for g in got for x in g[2]]
    from mlgoodput.store import open_store

    stored = sum(j.events for j in open_store(url).jobs() if j.job == JOB)
    return {
        "events": writers * batches * size,
        "stored": stored,
        "wall_s": wall,
        "rate": writers * batches * size / wall,
        "wait_max": max(g[0] for g in got),
        "wait_total": sum(g[1] for g in got),
        "append_max": max(appends),
        "cpu_per_m": (sum(g[3] for g in got) + server) / (writers * batches * size / 1e6),
    }


@contextmanager
def postgres() -> Iterator[str | None]:
    """A throwaway PostgreSQL server on 127.0.0.1 (None when it cannot be started here)."""

    def find(name: str) -> str | None:
        hits = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
        return shutil.which(name) or (hits[-1] if hits else None)

    initdb, pg_ctl = find("initdb"), find("pg_ctl")
    try:
        import psycopg
    except ImportError:
        psycopg = None  # type: ignore[assignment]
    if not (initdb and pg_ctl and psycopg):
        yield None
        return
    base = tempfile.mkdtemp(prefix="mlgoodput-pg-bench-")
    as_user: list[str] = []
    if os.geteuid() == 0:  # the server refuses root: run it as the postgres account
        import pwd

        pw = pwd.getpwnam("postgres")
        os.chown(base, pw.pw_uid, pw.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    data = os.path.join(base, "data")
    subprocess.run([*as_user, initdb, "-D", data, "-A", "trust", "-U", "mlgoodput"], check=True, capture_output=True)
    subprocess.run(
        [
            *as_user,
            pg_ctl,
            "-D",
            data,
            "-o",
            f"-h 127.0.0.1 -p {port} -k {base}",
            "-l",
            os.path.join(base, "log"),
            "-w",
            "start",
        ],
        check=True,
        capture_output=True,
    )
    url = f"postgresql://mlgoodput@127.0.0.1:{port}/postgres"
    try:
        with open(os.path.join(data, "postmaster.pid")) as f:
            _SERVERS[url] = int(f.readline())
    except (OSError, ValueError):
        pass
    try:
        yield url
    finally:
        subprocess.run([*as_user, pg_ctl, "-D", data, "-m", "fast", "stop"], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--writers", type=int, default=8)
    ap.add_argument("--batches", type=int, default=20)
    ap.add_argument("--batch", type=int, default=65536)
    ap.add_argument(
        "--columns", action="store_true", help="append column batches, as a journal ships them (else lists of Event)"
    )
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as d:
        rows.append(
            (
                "SQLite",
                f"{args.writers} writer processes",
                run(os.path.join(d, "s.db"), args.writers, args.batches, args.batch, args.columns),
            )
        )
    with postgres() as url:
        if url is not None:
            rows.append(
                ("PostgreSQL", f"{args.writers} hosts", run(url, args.writers, args.batches, args.batch, args.columns))
            )
    what = "column batches" if args.columns else "batches"
    print(
        f"\nIngest: {args.batches} {what} of {args.batch:,} step events per writer, {os.cpu_count()} cores,"
        f" load average {os.getloadavg()[0]:.1f}\n"
    )
    print(
        "| store      | writers            | events/s  | CPU s / M events | longest lock wait | total lock wait |"
        " longest append | stored == sent |"
    )
    print(
        "|------------|--------------------|-----------|------------------|-------------------|-----------------|"
        "----------------|----------------|"
    )
    for name, who, r in rows:
        print(
            f"| {name:<10} | {who:<18} | {r['rate']:>9,.0f} | {r['cpu_per_m']:>16.3f} | {r['wait_max']:>15.3f} s |"
            f" {r['wait_total']:>13.2f} s | {r['append_max']:>12.3f} s | {r['stored'] == r['events']!s:>14} |"
        )
    if len(rows) == 2:
        print(
            f"\nPostgreSQL / SQLite rate: {rows[1][2]['rate'] / rows[0][2]['rate']:.2f}x (target >= 1); "
            f"CPU per event, SQLite / PostgreSQL: {rows[0][2]['cpu_per_m'] / rows[1][2]['cpu_per_m']:.2f}x; "
            "longest lock wait target < 0.5 s"
        )
    else:
        print("\nPostgreSQL skipped (server programs or psycopg missing)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
