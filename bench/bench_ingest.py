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

Then issue 30's trickles (`--trickle 8,64`): N writers (threads, spread over a few processes,
each its own store object) append one-event batches to one PostgreSQL job, directly and, with
`--pooler`, through pgbouncer in transaction mode: appends/s, the longest lock wait, server
transactions per append and stored bytes per event; and a fleet round (`--fleet-hosts 512`):
hosts in nodes of 8, each node one `append_batches` call a round carrying about one event per
host every other round (4,096 hosts stepping once a second, shipped every 0.5 s), for the
bytes per event. Every case has a database of its own, so sizes are its own.

    PYTHONPATH=src python bench/bench_ingest.py [--writers 8] [--batches 20] [--batch 65536]
    PYTHONPATH=src python bench/bench_ingest.py --skip-batches --trickle 8,64 --pooler --fleet-hosts 512
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
            f"-h 127.0.0.1 -p {port} -k {base} -c max_connections=700",
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


def _warm(st: Any, w: int) -> None:
    """One append to another job, so the tables (and partitions) exist before the sizes are
    first read: the bytes per event are what the measured events added."""
    from mlgoodput.events import Event, EventBatch, Kind

    st.append(LOGGER, JOB + "-warm", EventBatch(5_000_000_000 + w, 0, [Event(Kind.STEP_START, 1.7e9, 0, step=0)]))


def _trickler(url: str, writers: list[int], appends: int, out: Any, ready: Any, go: Any) -> None:
    """One process of trickle writers: a thread per writer, each with its own store object,
    appending one-event batches to one job."""
    import threading

    from mlgoodput.events import Event, EventBatch, Kind
    from mlgoodput.store import open_store, store_identity

    stores = [open_store(url) for _ in writers]
    for st in stores:  # connected (and the schema checked) before the clock starts
        st.read(LOGGER, JOB + "-warm")
    _warm(stores[0], writers[0])
    results: list[tuple[float, float]] = []

    def write(st: Any, w: int) -> None:
        error = ""
        try:
            for i in range(appends):  # as a journal ships: the store's identity before and after
                before = store_identity(st)
                st.append(LOGGER, JOB, EventBatch(w, i, [Event(Kind.STEP_START, 1.7e9 + i, host=w % 100_000, step=i)]))
                if store_identity(st) != before:
                    raise RuntimeError("the store changed")
        except Exception as e:
            error = f"{type(e).__name__}: {e}"
        results.append((getattr(st, "lock_wait_max_s", 0.0), getattr(st, "lock_wait_total_s", 0.0), error))

    ts = [threading.Thread(target=write, args=(st, w)) for st, w in zip(stores, writers, strict=True)]
    ready.release()
    go.wait()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for st in stores:
        st.close()
    out.put(results)


def _node(url: str, nodes: list[list[int]], rounds: int, out: Any, ready: Any, go: Any) -> None:
    """One process of simulated nodes: a thread per node, each round one `append_batches` of
    its hosts' new events (each host has an event every other round, as a host stepping once
    a second does with a shipper every 0.5 s)."""
    import random
    import threading

    from mlgoodput.events import Event, EventBatch, Kind
    from mlgoodput.store import append_batches, open_store

    stores = [open_store(url) for _ in nodes]
    for st in stores:
        st.read(LOGGER, JOB + "-warm")
    _warm(stores[0], nodes[0][0])

    errors: list[str] = []

    def ship(st: Any, hosts: list[int]) -> None:
        try:
            rounds_of(st, hosts)
        except Exception as e:
            errors.append(f"{type(e).__name__}: {e}")

    def rounds_of(st: Any, hosts: list[int]) -> None:
        rnd = random.Random(hosts[0])
        nxt = dict.fromkeys(hosts, 0)
        for r in range(rounds):
            items = []
            for h in hosts:
                if rnd.random() < 0.5:
                    ev = Event(
                        Kind.STEP_START if nxt[h] % 2 == 0 else Kind.STEP_END,
                        1.7e9 + r * 0.5 + h * 1e-4,
                        h,
                        step=nxt[h] // 2,
                    )
                    items.append((LOGGER, JOB, EventBatch(10_000_000 + h, nxt[h], [ev])))
                    nxt[h] += 1
            append_batches(st, items)

    ts = [threading.Thread(target=ship, args=(st, hosts)) for st, hosts in zip(stores, nodes, strict=True)]
    ready.release()
    go.wait()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for st in stores:
        st.close()
    out.put(
        [
            (getattr(st, "lock_wait_max_s", 0.0), getattr(st, "lock_wait_total_s", 0.0), errors[0] if errors else "")
            for st in stores
        ]
    )


def _server_stats(url: str) -> tuple[int, int]:
    """(transactions the server counted in this database, bytes of the store's rows: the chunk
    tables' heap, indexes and TOAST; not the free-space and visibility maps, which do not grow
    per row, nor the writers' rows, one per writer whatever it writes)."""
    import psycopg

    time.sleep(1.2)  # the server's statistics reach the views within a second
    with psycopg.connect(url, autocommit=True, prepare_threshold=None) as c:
        c.execute("SELECT pg_stat_clear_snapshot()")
        tx = c.execute(
            "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()[0]
        size = c.execute(
            "SELECT coalesce(sum(pg_relation_size(oid) + coalesce(pg_relation_size(nullif(reltoastrelid, 0)), 0)), 0)"
            " FROM pg_class WHERE relkind IN ('r', 'i') AND relname LIKE 'mlgoodput_chunks%'"
        ).fetchone()[0]
    return int(tx), int(size)


def _fresh_db(url: str, name: str) -> str:
    import psycopg

    with psycopg.connect(url, autocommit=True) as c:
        c.execute(f"DROP DATABASE IF EXISTS {name}")
        c.execute(f"CREATE DATABASE {name}")
    return url.rsplit("/", 1)[0] + "/" + name


def run_many(
    direct: str, url: str, target: Any, groups: list[Any], per: int, appends: int, events: int
) -> dict[str, float]:
    """Run `target(url, group, per, ...)` in one process per group; figures from the server."""
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    ready, go = ctx.Semaphore(0), ctx.Event()
    procs = [ctx.Process(target=target, args=(url, g, per, q, ready, go)) for g in groups]
    for p in procs:
        p.start()
    for _ in procs:
        ready.acquire(timeout=900)
    tx0, size0 = _server_stats(direct)
    t = time.perf_counter()
    go.set()
    got = [x for _ in procs for x in q.get(timeout=1800)]
    wall = time.perf_counter() - t
    for p in procs:
        p.join()
    tx1, size1 = _server_stats(direct)
    from mlgoodput.store import open_store

    st = open_store(url)
    stored = sum(j.events for j in st.jobs() if j.job == JOB)
    st.close()
    return {
        "appends": appends,
        "rate": appends / wall,
        "events_s": stored / wall,
        "wait_max": max(g[0] for g in got),
        "tx_per_append": (tx1 - tx0 - 2) / appends,  # less the two statistics reads
        "bytes_per_event": (size1 - size0) / max(1, stored),
        "ok": float(stored == events),
        "error": next((g[2] for g in got if g[2]), ""),  # type: ignore[dict-item]
    }


def trickles(url: str, args: argparse.Namespace) -> list[tuple[str, str, dict[str, float]]]:
    rows = []
    bouncer: Any = None
    if args.pooler:
        import sys
        import types

        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
        from pgserver import PgBouncer

        port = int(url.rsplit(":", 1)[1].split("/")[0])
        as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        bouncer = PgBouncer(types.SimpleNamespace(port=port, as_user=as_user, url=url), pool_size=args.pool_size)  # type: ignore[arg-type]
        bouncer.start()
    try:
        ways = [("direct", None)] if args.via != "pgbouncer" else []
        ways += [("pgbouncer", bouncer)] if bouncer is not None else []
        for n in args.trickle:
            for how, b in ways:
                direct = _fresh_db(url, f"trickle_{n}_{how}")
                target = (
                    direct if b is None else direct.replace(f":{url.rsplit(':', 1)[1].split('/')[0]}/", f":{b.port}/")
                )
                procs = min(n, 8)
                groups = [list(range(1000 + i, 1000 + n, procs)) for i in range(procs)]
                r = run_many(direct, target, _trickler, groups, args.appends, n * args.appends, n * args.appends)
                rows.append((f"{n} writers, 1 event/append", how, r))
        if args.fleet_hosts:
            hosts = list(range(args.fleet_hosts))
            nodes = [hosts[i : i + 8] for i in range(0, len(hosts), 8)]
            procs = min(len(nodes), 8)
            for how, b in ways:
                direct = _fresh_db(url, f"fleet_{how}")
                target = (
                    direct if b is None else direct.replace(f":{url.rsplit(':', 1)[1].split('/')[0]}/", f":{b.port}/")
                )
                groups = [nodes[i::procs] for i in range(procs)]
                r = run_many(direct, target, _node, groups, args.rounds, len(nodes) * args.rounds, -1)
                r["ok"] = float("nan")
                rows.append((f"{args.fleet_hosts} hosts, nodes of 8 (rounds)", how, r))
    finally:
        if bouncer is not None:
            bouncer.close()
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--writers", type=int, default=8)
    ap.add_argument("--batches", type=int, default=20)
    ap.add_argument("--batch", type=int, default=65536)
    ap.add_argument(
        "--columns", action="store_true", help="append column batches, as a journal ships them (else lists of Event)"
    )
    ap.add_argument("--skip-batches", action="store_true", help="only the trickle and fleet cases")
    ap.add_argument("--trickle", type=lambda s: [int(x) for x in s.split(",") if x], default=[])
    ap.add_argument("--appends", type=int, default=200, help="one-event appends per trickle writer")
    ap.add_argument("--pooler", action="store_true", help="run the trickle and fleet cases through pgbouncer too")
    ap.add_argument("--pool-size", type=int, default=8)
    ap.add_argument("--via", choices=["both", "pgbouncer"], default="both", help="with --pooler: skip the direct runs")
    ap.add_argument("--fleet-hosts", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=40, help="shipping rounds per simulated node")
    args = ap.parse_args()
    if args.skip_batches:
        with postgres() as url:
            if url is None:
                print("PostgreSQL skipped (server programs or psycopg missing)")
                return 0
            small = trickles(url, args)
        print(f"\nTrickles into one PostgreSQL job, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}\n")
        print(
            "| case                             | via       | appends/s | events/s | longest lock wait |"
            " transactions / append | bytes / event | stored == sent |"
        )
        print(
            "|----------------------------------|-----------|-----------|----------|-------------------|"
            "-----------------------|---------------|----------------|"
        )
        for name, how, r in small:
            if r.get("error"):
                print(f"| {name:<32} | {how:<9} | fails: {str(r['error'])[:110]} |")
                continue
            print(
                f"| {name:<32} | {how:<9} | {r['rate']:>9,.0f} | {r['events_s']:>8,.0f} | {r['wait_max']:>15.3f} s |"
                f" {r['tx_per_append']:>21.2f} | {r['bytes_per_event']:>13.1f} |"
                f" {'-' if r['ok'] != r['ok'] else str(bool(r['ok'])):>14} |"
            )
        return 0
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
