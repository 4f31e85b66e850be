"""A simulated fleet (issue 30): N simulated hosts recording one step a second each into ONE
PostgreSQL job through pgbouncer, shipped per node (`--mode node`, the node aggregator) or per
host (`--mode host`, each host's journal ships itself, as before the aggregator).

    PYTHONPATH=src python bench/bench_fleet.py                       # 1,000 hosts, node mode
    PYTHONPATH=src python bench/bench_fleet.py --hosts 4096 --duration 60
    PYTHONPATH=src python bench/bench_fleet.py --mode host --hosts 1000
    PYTHONPATH=src python bench/bench_fleet.py --hosts 64 --duration 10   # a quick look
    PYTHONPATH=src python bench/bench_fleet.py --hosts 4096 --prewarm --procs 8
    PYTHONPATH=src python bench/bench_fleet.py --mode host --src /tmp/old/src  # another tree's package

What is real and what stands in:
- real: a PostgreSQL server of our own (tests/pgserver.py's `PgServer`, 127.0.0.1, fsync off),
  Debian's pgbouncer 1.18 in front of it in transaction pool mode (`--pool-size` server
  connections; tests/pgserver.py's `PgBouncer` when it has one, else started here the same way),
  the store (`PostgresStore`, opened by URL through the pooler), the journal segment files
  (memory-mapped, locked, in the journal's format) and whatever ships them: in node mode one
  `mlgoodput._aggregator.NodeShipper(url, dirs=[node_dir])` per simulated node, in host mode one
  real `Journal` per host (its own shipper thread and store connection, as a host had before the
  aggregator), the calculator and the straggler analysis that read the job back.
- stand-in: the hosts and their machines. A host is not a process with a recorder; the nodes are
  shared among `--procs` processes (default one per core), and in each a few writer threads
  (`--writer-threads`) write each host's steps when they fall due. In node mode
  they write records straight into one segment file per host with `_segment.create_segment` and
  `_segment.write_record` (the bytes `Journal.append` writes; the file stays locked as a live
  journal's does, the committed count is noted after each write and full segments are sealed and
  replaced, and a sealed segment is removed once the node shipper's watermark says all of it is
  shipped, as its journal would). In host mode they call `Journal.append`. The nodes share the
  machine's cores and each process's interpreter, so the client CPU is that of all nodes
  together, and a starved process holds its transactions (and pooled connections) long; each
  node's folder is its own. `--prewarm` makes the store's schema and partitions first.

Each host writes a job start, then `--rate` steps a second for `--duration` seconds, spread
evenly over the second (host h starts h/N of a step period late). At the end the shippers are
flushed and the job is read back: every (host, step) must be stored exactly once.

Measured: appends/s (store append calls, all writers); store transactions per event and per node
per shipping round (the server's `xact_commit` + `xact_rollback` of the job's database, flushed by
dropping the pooler's server connections at the end; target: at most one per node per round);
server connections (the most seen in `SHOW POOLS` and in `pg_stat_activity`; target: at most the
pool size) and clients waiting in the pooler; lock waits (the stores' own `lock_wait_max_s`, max
and p99 over stores; and the longest wait on a lock seen in `pg_stat_activity`, in the warm-up
and after it; target: none over 50 ms, the fleet's first seconds included; that figure is the
waiting statement's age, so a CPU-starved statement that then waits briefly counts whole: the
wait on the lock itself, from `pg_locks.waitstart`, is shown beside it); server CPU (the postmaster and its backends, via psutil) and the pooler's; bytes per event
(`pg_total_relation_size` of the chunk table(s) / events; target at most 40); after the run,
`get_job_goodput()` of a new calculator (cold) and again (warm, nothing new), and
`stragglers(read=False)` after it (what a monitor upload computes); `--save-state` also times a
first report that saves its state. Then an extrapolation to
10,000 hosts, linear in hosts from the measured per-host costs, and which resource runs out first.
"""

from __future__ import annotations

import argparse
import inspect
import math
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# --src DIR: measure another tree's package (an older commit's src/, for a before/after)
SRC = sys.argv[sys.argv.index("--src") + 1] if "--src" in sys.argv[:-1] else str(ROOT / "src")
sys.path.insert(0, SRC)
sys.path.insert(1, str(ROOT))  # tests/pgserver.py

NS, JOB, DB = "fleet_bench", "fleet", "fleet"
TARGET_BYTES, TARGET_WAIT_S = 40.0, 0.050
FLEET = 10_000  # hosts the extrapolation is for
_SHIPPED = struct.Struct("<q")  # a segment's shipped watermark: records shipped


# -- the pooler ----------------------------------------------------------------------------
class Pooler:
    """pgbouncer in transaction mode in front of `server`: tests/pgserver.py's `PgBouncer` when
    it has one, else started here the same way (ini and user list in a temp folder, 127.0.0.1,
    a free port, the postgres account when we are root); `admin(sql)` runs a console command."""

    def __init__(self, server: Any, pool_size: int, max_clients: int) -> None:
        from tests import pgserver

        self.pool_size = pool_size
        self.own: Any = None
        made = getattr(pgserver, "PgBouncer", None)
        if made is not None:
            self.own = made(server, pool_size=pool_size, max_client_conn=max_clients)
            self.own.start()
            self.base = self.own.base
            self.port = self.own.port
            self.proc: Any = None
        else:
            self._start_own(server, pool_size, max_clients)
        user = "mlgoodput"
        self.url = f"postgresql://{user}@127.0.0.1:{self.port}/{DB}"
        self._admin_url = f"postgresql://{user}@127.0.0.1:{self.port}/pgbouncer"

    def _start_own(self, server: Any, pool_size: int, max_clients: int) -> None:
        self.base = tempfile.mkdtemp(prefix="mlgoodput-pgb-bench-")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = int(s.getsockname()[1])
        user = "mlgoodput"
        ini = f"""[databases]
{DB} = host=127.0.0.1 port={server.port} dbname={DB}
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {self.port}
unix_socket_dir =
auth_type = trust
auth_file = {self.base}/userlist.txt
admin_users = {user}
pool_mode = transaction
default_pool_size = {pool_size}
min_pool_size = 0
reserve_pool_size = 0
max_client_conn = {max_clients}
ignore_startup_parameters = extra_float_digits,options
logfile = {self.base}/pgbouncer.log
pidfile = {self.base}/pgbouncer.pid
"""
        (Path(self.base) / "pgbouncer.ini").write_text(ini)
        (Path(self.base) / "userlist.txt").write_text(f'"{user}" ""\n')
        as_user: list[str] = []
        if os.geteuid() == 0:
            import pwd

            pw = pwd.getpwnam("postgres")
            for p in Path(self.base).iterdir():
                os.chown(p, pw.pw_uid, pw.pw_gid)
            os.chown(self.base, pw.pw_uid, pw.pw_gid)
            as_user = ["runuser", "-u", "postgres", "--"]
        exe = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
        self.proc = subprocess.Popen(
            [*as_user, exe, f"{self.base}/pgbouncer.ini"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        self._admin_url = f"postgresql://{user}@127.0.0.1:{self.port}/pgbouncer"
        deadline = time.monotonic() + 30
        while True:
            try:
                self.admin("SHOW VERSION")
                break
            except Exception:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    self.close()
                    raise RuntimeError(f"pgbouncer did not start (log: {self.base}/pgbouncer.log)") from None
                time.sleep(0.1)

    def pid(self) -> int | None:
        try:
            return int((Path(self.base) / "pgbouncer.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def admin(self, sql: str) -> list[dict[str, Any]]:
        """Rows of a console command (simple query protocol: the console knows no other)."""
        import psycopg

        with psycopg.connect(self._admin_url, autocommit=True, connect_timeout=5) as conn:
            res = conn.pgconn.exec_(sql.encode())
            names = [res.fname(i).decode() for i in range(res.nfields)]
            rows = []
            for r in range(res.ntuples):
                vals = [res.get_value(r, i) for i in range(res.nfields)]
                rows.append({n: (v.decode() if v is not None else None) for n, v in zip(names, vals, strict=True)})
            return rows

    def close(self) -> None:
        if self.own is not None:
            self.own.close()
            return
        if self.proc.poll() is None:
            pid = self.pid()
            if pid is not None:
                with suppress(OSError):
                    os.kill(pid, 15)
            with suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=10)
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(timeout=10)
        shutil.rmtree(self.base, ignore_errors=True)


# -- measuring from outside ----------------------------------------------------------------
def proc_cpu_s(pid: int | None, children: bool) -> float:
    """CPU seconds of a process (with its reaped children's, and its live children's, when
    `children`): the postmaster and every backend it ran, or the pooler alone."""
    import psutil

    if pid is None:
        return 0.0
    try:
        p = psutil.Process(pid)
        t = p.cpu_times()
        total = t.user + t.system
        if children:
            total += t.children_user + t.children_system
            for c in p.children():
                with suppress(psutil.Error):
                    ct = c.cpu_times()
                    total += ct.user + ct.system
        return float(total)
    except psutil.Error:
        return 0.0


@dataclass
class Sample:
    """The most seen by the sampler over the run."""

    sv_conns: int = 0  # the pooler's server connections (SHOW POOLS)
    cl_waiting: int = 0  # clients the pooler kept waiting for a server connection
    maxwait_s: float = 0.0  # the longest such wait
    backends: int = 0  # client backends of the job's database (pg_stat_activity)
    lock_waiters: int = 0  # backends waiting on a lock
    lock_wait_s: float = 0.0  # the longest of those waits seen
    lock_wait_steady_s: float = 0.0  # the same, after the warm-up
    lock_wait_first_s: float = 0.0  # the same, in the warm-up (the fleet's first seconds)
    lock_held_s: float = 0.0  # the longest wait on one lock itself (pg_locks.waitstart), warm-up
    lock_held_steady_s: float = 0.0  # the same, after the warm-up
    lock_what: str = ""  # the lock and statement of the longest wait seen
    slow_locks: dict[str, int] = field(default_factory=dict)  # lock and statement -> samples waiting > 50 ms
    samples: int = 0
    errors: int = 0


class Sampler(threading.Thread):
    """Polls the pooler's console and the server's views every `every_s` over a direct
    connection to another database (its own queries stay out of the job's counters)."""

    def __init__(self, admin_url: str, pooler: Pooler | None, every_s: float = 0.25) -> None:
        super().__init__(name="fleet-sampler", daemon=True)
        self.admin_url, self.pooler, self.every_s = admin_url, pooler, every_s
        self.s = Sample()
        self.steady = False  # set at the end of the warm-up
        self._halt = threading.Event()

    def run(self) -> None:
        import psycopg

        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            while not self._halt.wait(self.every_s):
                try:
                    self._once(conn)
                except Exception:
                    self.s.errors += 1

    def _once(self, conn: Any) -> None:
        s = self.s
        row = conn.execute(
            "SELECT count(*), count(*) FILTER (WHERE wait_event_type = 'Lock'),"
            " coalesce(max(extract(epoch FROM clock_timestamp() - query_start))"
            " FILTER (WHERE wait_event_type = 'Lock'), 0)"
            " FROM pg_stat_activity WHERE datname = %s AND backend_type = 'client backend'",
            (DB,),
        ).fetchone()
        s.backends = max(s.backends, int(row[0]))
        s.lock_waiters = max(s.lock_waiters, int(row[1]))
        waited = float(row[2])  # the waiting statement's age: its lock wait and what ran before it
        if row[1]:  # how long each waiter has waited on its lock (PostgreSQL 14 and later)
            held = conn.execute(
                "SELECT coalesce(max(extract(epoch FROM clock_timestamp() - l.waitstart)), 0) FROM pg_locks l"
                " JOIN pg_stat_activity a ON a.pid = l.pid WHERE NOT l.granted AND a.datname = %s",
                (DB,),
            ).fetchone()
            if self.steady:
                s.lock_held_steady_s = max(s.lock_held_steady_s, float(held[0]))
            else:
                s.lock_held_s = max(s.lock_held_s, float(held[0]))
        if waited > TARGET_WAIT_S:
            for (what,) in conn.execute(
                "SELECT l.locktype || ' ' || l.mode || coalesce(' on ' || l.relation::regclass::text, '')"
                " || ': ' || left(a.query, 60) FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid"
                " AND NOT l.granted WHERE a.datname = %s AND a.wait_event_type = 'Lock'"
                " AND clock_timestamp() - a.query_start > %s * interval '1 second'",
                (DB, TARGET_WAIT_S),
            ).fetchall():
                s.slow_locks[str(what)] = s.slow_locks.get(str(what), 0) + 1
        if self.steady:
            s.lock_wait_steady_s = max(s.lock_wait_steady_s, waited)
        else:
            s.lock_wait_first_s = max(s.lock_wait_first_s, waited)
        if waited > s.lock_wait_s:
            s.lock_wait_s = waited
            what = conn.execute(
                "SELECT l.locktype || ' ' || l.mode || coalesce(' on ' || l.relation::regclass::text, '')"
                " || ': ' || left(a.query, 60) FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid"
                " AND NOT l.granted WHERE a.datname = %s AND a.wait_event_type = 'Lock'"
                " ORDER BY a.query_start LIMIT 1",
                (DB,),
            ).fetchone()
            if what is not None:
                s.lock_what = str(what[0])
        if self.pooler is not None:
            for p in self.pooler.admin("SHOW POOLS"):
                if p.get("database") != DB:
                    continue
                sv = sum(int(p.get(k) or 0) for k in ("sv_active", "sv_idle", "sv_used", "sv_tested", "sv_login"))
                s.sv_conns = max(s.sv_conns, sv)
                s.cl_waiting = max(s.cl_waiting, int(p.get("cl_waiting") or 0))
                wait = int(p.get("maxwait") or 0) + int(p.get("maxwait_us") or 0) / 1e6
                s.maxwait_s = max(s.maxwait_s, wait)
        s.samples += 1

    def stop(self) -> Sample:
        self._halt.set()
        self.join(timeout=10)
        return self.s


class Counted:
    """Counts the store's append calls and keeps every PostgresStore made (their lock waits),
    by wrapping the class's methods for the run."""

    def __init__(self) -> None:
        from mlgoodput.store._postgres import PostgresStore

        self.cls = PostgresStore
        self.appends = 0
        self.batches = 0
        self.stores: list[Any] = []
        self._lock = threading.Lock()
        self._saved: dict[str, Any] = {}

    def __enter__(self) -> Counted:
        cls = self.cls
        me = self
        for name in ("__init__", "append", "append_batches"):
            if hasattr(cls, name):
                self._saved[name] = cls.__dict__.get(name)
        real_init = cls.__init__

        def init(st: Any, *a: Any, **k: Any) -> None:
            real_init(st, *a, **k)
            with me._lock:
                me.stores.append(st)

        real_append = cls.append
        depth = threading.local()  # an append that calls append_batches is one call

        def append(st: Any, *a: Any, **k: Any) -> Any:
            if not getattr(depth, "n", 0):
                with me._lock:
                    me.appends += 1
                    me.batches += 1
            depth.n = getattr(depth, "n", 0) + 1
            try:
                return real_append(st, *a, **k)
            finally:
                depth.n -= 1

        cls.__init__ = init  # type: ignore[method-assign]
        cls.append = append  # type: ignore[method-assign]
        real_batches = getattr(cls, "append_batches", None)
        if real_batches is not None:

            def append_batches(st: Any, items: Any, *a: Any, **k: Any) -> Any:
                items = list(items)
                if not getattr(depth, "n", 0):
                    with me._lock:
                        me.appends += 1
                        me.batches += len(items)
                depth.n = getattr(depth, "n", 0) + 1
                try:
                    return real_batches(st, items, *a, **k)
                finally:
                    depth.n -= 1

            cls.append_batches = append_batches
        return self

    def __exit__(self, *exc: object) -> None:
        for name, v in self._saved.items():
            if v is None:
                with suppress(AttributeError):
                    delattr(self.cls, name)
            else:
                setattr(self.cls, name, v)


# -- the simulated hosts -------------------------------------------------------------------
@dataclass
class Host:
    """One simulated host: its number, its phase within a step period, the next step due."""

    host: int
    phase: float
    next_step: int = 0
    seg: Any = None  # node mode: its live segment
    sealed: list[Any] = field(default_factory=list)
    journal: Any = None  # host mode: its Journal


class Node:
    """The hosts of one simulated node and what ships them."""

    def __init__(self, index: int, hosts: list[Host], folder: Path) -> None:
        self.index, self.hosts, self.folder = index, hosts, folder
        self.shipper: Any = None
        self.recorded = 0
        self.segments_made = 0


class Fleet:
    """Builds the nodes, writes the hosts' events when due, ships them (node or host mode)."""

    def __init__(self, args: argparse.Namespace, url: str, root: Path, part: int = 0, parts: int = 1) -> None:
        self.args, self.url, self.root = args, url, root
        self.steps = round(args.duration * args.rate)
        n = args.hosts
        per = args.per_node
        self.nodes: list[Node] = []  # this process's share: every `parts`-th node from `part`
        for k, i in enumerate(range(0, n, per)):
            if k % parts == part:
                hosts = [Host(h, h / n) for h in range(i, min(n, i + per))]
                self.nodes.append(Node(k, hosts, root / f"node-{k:05d}"))
        self.seg_size = max(64 << 10, 4096 + 48 * (self.steps + 8) + 4095 & ~4095)
        self.t0 = 0.0
        self.writer_cpu: list[float] = []  # CPU seconds of each writer thread so far
        self.errors: list[BaseException] = []

    @property
    def expected(self) -> int:
        return sum(len(nd.hosts) for nd in self.nodes) * (1 + self.steps)

    @property
    def writer_cpu_s(self) -> float:
        return sum(self.writer_cpu)

    @property
    def recorded(self) -> int:
        return sum(nd.recorded for nd in self.nodes)

    # node mode: segments written in the journal's format, one NodeShipper per node
    def _open_node_mode(self) -> None:
        from mlgoodput._recovery import store_url

        try:
            from mlgoodput._aggregator import NodeShipper
        except ImportError:
            raise SystemExit(
                "--mode node needs mlgoodput._aggregator.NodeShipper (not in this tree yet); try --mode host"
            ) from None
        self._meta_url = store_url(self.url)
        for nd in self.nodes:
            for h in nd.hosts:
                h.seg = self._new_segment(nd, h)
            nd.shipper = NodeShipper(self._meta_url, dirs=[nd.folder], interval_s=self.args.interval)

    def _new_segment(self, nd: Node, h: Host) -> Any:
        from mlgoodput._segment import create_segment

        nd.segments_made += 1
        meta = {"store": self._meta_url, "namespace": NS, "job": JOB, "host": h.host, "node": True}
        return create_segment(nd.folder, self.seg_size, h.host, meta)

    def _write_node_mode(self, nd: Node, h: Host, kind: int, t: float, step: int) -> None:
        from mlgoodput._segment import NO_STEP, REC, write_record

        seg = h.seg
        if seg.off + REC > seg.size:  # full: seal it (its shipper finishes it) and go on in a new one
            seg.seal()
            h.sealed.append(seg)
            seg = h.seg = self._new_segment(nd, h)
        seg.off += write_record(
            seg.buf, seg.off, seg.count, kind, 0, 0, t, NO_STEP if step < 0 else step, math.nan, b""
        )
        seg.count += 1
        if h.sealed:
            self._drop_shipped(h)

    @staticmethod
    def _shipped(seg: Any) -> int:
        """Records of a segment its shipper has marked shipped: the watermark in its header
        (at byte 4064, the format's place for it; read in place, no copy of the header)."""
        return int(_SHIPPED.unpack_from(seg.buf, 4064)[0])

    def _drop_shipped(self, h: Host) -> None:
        while h.sealed and self._shipped(h.sealed[0]) >= h.sealed[0].count:
            h.sealed.pop(0).release(delete=True)

    # host mode: a real Journal per host, each shipping itself
    def _open_host_mode(self) -> None:
        from mlgoodput import _env
        from mlgoodput._journal import Journal

        keep = os.environ.get(_env.JOURNAL_DIR)
        own: dict[str, Any] = {}
        if "node_shipper" in inspect.signature(Journal.__init__).parameters:
            own["node_shipper"] = False  # each host ships itself, whatever the environment says
        try:
            for nd in self.nodes:
                os.environ[_env.JOURNAL_DIR] = str(nd.folder)  # read when the journal is made
                for h in nd.hosts:
                    h.journal = Journal(
                        self.url, NS, JOB, h.host, segment_size=self.seg_size, interval_s=self.args.interval, **own
                    )
        finally:
            if keep is None:
                os.environ.pop(_env.JOURNAL_DIR, None)
            else:
                os.environ[_env.JOURNAL_DIR] = keep

    def open(self) -> None:
        if self.args.mode == "node":
            self._open_node_mode()
        else:
            self._open_host_mode()

    def _write(self, nd: Node, h: Host, kind: int, t: float, step: int) -> None:
        if h.journal is not None:
            from mlgoodput.events import Kind

            h.journal.append(Kind(kind), t, None if step < 0 else step)
        else:
            self._write_node_mode(nd, h, kind, t, step)
        nd.recorded += 1

    def run(self, t0: float) -> float:
        """Write every host's events as they fall due over `--duration` s from `t0`; the wall
        time taken."""
        from mlgoodput.events import Kind

        args = self.args
        self.t0 = t0
        for nd in self.nodes:  # each host's job start (its training starts a second later)
            for h in nd.hosts:
                self._write(nd, h, Kind.JOB_START, self.t0 - 1.0, -1)
            if nd.shipper is not None:
                nd.shipper.start()
        k = max(1, min(args.writer_threads, len(self.nodes)))
        self.writer_cpu = [0.0] * k
        threads = [
            threading.Thread(target=self._writer, args=(self.nodes[i::k], i), name=f"fleet-writer-{i}", daemon=True)
            for i in range(k)
        ]
        start = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if self.errors:
            raise self.errors[0]
        return time.monotonic() - start

    def _writer(self, nodes: list[Node], slot: int) -> None:
        from mlgoodput.events import Kind

        cpu = time.thread_time()
        period = 1.0 / self.args.rate
        step_kind = int(Kind.STEP_START)
        try:
            while True:
                self.writer_cpu[slot] = time.thread_time() - cpu
                now = time.time() - self.t0
                left = False
                for nd in nodes:
                    for h in nd.hosts:
                        while h.next_step < self.steps and (h.next_step + h.phase) * period <= now:
                            t = self.t0 + (h.next_step + h.phase) * period
                            self._write(nd, h, step_kind, t, h.next_step)
                            h.next_step += 1
                        left = left or h.next_step < self.steps
                    if nd.shipper is not None:
                        for h in nd.hosts:
                            h.seg.note_committed(h.seg.count)
                if not left:
                    break
                time.sleep(min(0.05, period / 4))
        except BaseException as e:  # reported by run()
            self.errors.append(e)
        finally:
            self.writer_cpu[slot] = time.thread_time() - cpu

    def drain(self, timeout_s: float) -> float:
        """Wait until everything written is shipped; the seconds it took after the last write."""
        t = time.monotonic()
        deadline = t + timeout_s
        if self.args.mode == "host":  # every journal's flush at once (each waits for its own round)
            with ThreadPoolExecutor(32) as pool:
                hosts = [h for nd in self.nodes for h in nd.hosts]
                list(pool.map(lambda h: h.journal.flush(max(0.1, deadline - time.monotonic())), hosts))
        else:  # the watermarks the node shippers write say what is stored
            while time.monotonic() < deadline:
                if all(self._shipped(s) >= s.count for nd in self.nodes for h in nd.hosts for s in [*h.sealed, h.seg]):
                    break
                time.sleep(0.05)
        return time.monotonic() - t

    def shipper_stats(self) -> dict[str, int]:
        """Sums of the node shippers' stats, and the most transactions per round of any of them."""
        out: dict[str, int] = {}
        worst = 0.0
        for nd in self.nodes:
            if nd.shipper is None:
                continue
            st = nd.shipper.stats()
            for key, v in st.items():
                out[key] = out.get(key, 0) + int(v)
            if st.get("rounds"):
                worst = max(worst, st.get("transactions", 0) / max(1, st.get("rounds_shipped", st["rounds"])))
        out["worst_tx_per_round_x1000"] = int(1000 * worst)
        return out

    def close(self) -> None:
        """Stop the shippers (all at once: each close does a last round) and let the files go."""

        def close_node(nd: Node) -> None:
            if nd.shipper is not None:
                with suppress(Exception):
                    nd.shipper.close(10)
            for h in nd.hosts:
                if h.journal is not None:
                    with suppress(Exception):
                        h.journal.close(10)
                for s in [*h.sealed, *([h.seg] if h.seg is not None else [])]:
                    s.release(delete=self._shipped(s) >= s.count)
                h.sealed.clear()
                h.seg = None

        with ThreadPoolExecutor(32) as pool:
            list(pool.map(close_node, self.nodes))


# -- reading back -------------------------------------------------------------------------
def count_stored(url: str, hosts: int, steps: int) -> tuple[int, int, int]:
    """(stored, lost, doubled) over every (host, job start | step) the fleet wrote, read back
    through the store."""
    import numpy as np

    from mlgoodput.events import Kind
    from mlgoodput.store import open_store

    st = open_store(url)
    try:
        res = st.read(NS, JOB)
        counts = np.zeros(hosts * (steps + 1), dtype=np.int64)
        stored = 0
        for cols in res.parts:
            n = len(cols)
            stored += n
            if not n:
                continue
            kinds = np.frombuffer(bytes(cols.kinds), dtype=np.uint8)
            hs = np.frombuffer(cols.hosts, dtype=np.int32).astype(np.int64)
            ss = np.frombuffer(cols.steps, dtype=np.int64)
            slot = np.where(kinds == int(Kind.STEP_START), ss + 1, 0)
            ok = (hs >= 0) & (hs < hosts) & (slot >= 0) & (slot <= steps)
            np.add.at(counts, hs[ok] * (steps + 1) + slot[ok], 1)
        lost = int((counts == 0).sum())
        doubled = int(np.clip(counts - 1, 0, None).sum()) + (stored - int(counts.sum()))
        return stored, lost, doubled
    finally:
        st.close()


def db_figures(direct: str) -> dict[str, float]:
    """The job database's transactions so far, and the bytes of the chunk table(s) (every
    partition's heap, TOAST and indexes) and of all mlgoodput tables."""
    import psycopg

    with psycopg.connect(direct, autocommit=True) as conn:
        xact = conn.execute(
            "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = %s", (DB,)
        ).fetchone()[0]
    out = {"xacts": float(xact)}
    with psycopg.connect(direct.rsplit("/", 1)[0] + f"/{DB}", autocommit=True) as conn:
        rows = conn.execute(
            "SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c JOIN pg_namespace n"
            " ON n.oid = c.relnamespace WHERE c.relkind = 'r' AND c.relname LIKE 'mlgoodput%%'"
            " AND n.nspname NOT IN ('pg_catalog', 'information_schema')"
        ).fetchall()
    out["chunk_bytes"] = float(sum(b for name, b in rows if "chunk" in name))
    out["all_bytes"] = float(sum(b for _, b in rows))
    return out


def settle_stats(pooler: Pooler | None, direct: str) -> None:
    """Make the server's transaction counters whole: its backends flush them when they end,
    so drop the pooler's server connections (KILL, then RESUME) and wait for them to go."""
    import psycopg

    if pooler is not None:
        with suppress(Exception):
            pooler.admin(f"KILL {DB}")
        with suppress(Exception):
            pooler.admin(f"RESUME {DB}")
    deadline = time.monotonic() + 20
    with psycopg.connect(direct, autocommit=True) as conn:
        while time.monotonic() < deadline:
            n = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND backend_type = 'client backend'", (DB,)
            ).fetchone()[0]
            if n == 0:
                return
            time.sleep(0.1)


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t = time.perf_counter()
    got = fn()
    return time.perf_counter() - t, got


def read_back(url: str, save_state: bool) -> dict[str, float]:
    """`mlgoodput report`'s computation (cold, then warm with nothing new) and a monitor upload's
    (the straggler analysis after that query), in this process, with no saved state (its
    saving is measured apart, with `save_state`: a first report that saves it)."""
    from mlgoodput import _env
    from mlgoodput.accounting import GoodputCalculator

    keep = os.environ.get(_env.SNAPSHOT)
    os.environ[_env.SNAPSHOT] = "0"
    try:
        calc = GoodputCalculator(JOB, NS, store=url)
        cold, goodput = timed(calc.get_job_goodput)
        warm, _ = timed(calc.get_job_goodput)
        strag, _ = timed(lambda: calc.stragglers(read=False))
    finally:
        if keep is None:
            os.environ.pop(_env.SNAPSHOT, None)
        else:
            os.environ[_env.SNAPSHOT] = keep
    out = {"cold_s": cold, "warm_s": warm, "stragglers_s": strag}
    out["goodput"] = float(goodput[0] if isinstance(goodput, tuple) else goodput)
    if save_state:
        saving = GoodputCalculator(JOB, NS, store=url)
        out["saving_s"], _ = timed(saving.get_job_goodput)
    return out


# -- the run -----------------------------------------------------------------------------
@contextmanager
def servers(args: argparse.Namespace, max_clients: int) -> Iterator[tuple[str, str, Any, Pooler | None]]:
    """(store URL, direct URL of the admin database, server, pooler); both stopped after."""
    from tests.pgserver import PgServer

    server = PgServer()
    pooler: Pooler | None = None
    try:
        server.start()
        import psycopg

        with psycopg.connect(server.url, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {DB}")
        direct = server.url.rsplit("/", 1)[0] + f"/{DB}"
        if args.no_pooler:
            yield direct, server.url, server, None
        else:
            pooler = Pooler(server, args.pool_size, max_clients)
            yield pooler.url, server.url, server, pooler
    finally:
        if pooler is not None:
            pooler.close()
        server.close()


def postmaster_pid(server: Any) -> int | None:
    try:
        return int((Path(server.data) / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def simulate(args: argparse.Namespace, url: str, root: str, part: int, parts: int, go: Any, t0v: Any, q: Any) -> None:
    """One process's share of the nodes (every `parts`-th from `part`): build them, say ready,
    write and ship from the common start, drain, and send back what it counted."""
    fleet = Fleet(args, url, Path(root), part, parts)
    with Counted() as counted:
        fleet.open()
        q.put(("ready", part, None))
        go.wait()
        t0 = float(t0v.value)

        def mark() -> dict[str, float]:
            return {
                "client": time.process_time(),
                "writers": fleet.writer_cpu_s,
                "appends": counted.appends,
                "recorded": fleet.recorded,
            }

        marks = {"start": mark()}
        early: list[float] = []  # the stores' longest lock waits during the warm-up

        def warmed() -> None:
            marks.setdefault("a", mark())
            for st in list(counted.stores):
                early.append(float(getattr(st, "lock_wait_max_s", 0.0)))
                if hasattr(st, "lock_wait_max_s"):
                    st.lock_wait_max_s = 0.0

        timer = threading.Timer(max(0.0, t0 + args.warmup - time.time()), warmed)
        timer.start()
        cpu0 = time.process_time()
        wall = fleet.run(t0)
        marks["b"] = mark()
        timer.cancel()
        q.put(("written", part, None))
        drain = fleet.drain(args.drain_timeout)
        stats = fleet.shipper_stats()
        fleet.close()
        out = {
            "nodes": len(fleet.nodes),
            "recorded": fleet.recorded,
            "expected": fleet.expected,
            "steps": fleet.steps,
            "wall_s": wall,
            "drain_s": drain,
            "appends": counted.appends,
            "batches": counted.batches,
            "client_cpu_s": time.process_time() - cpu0,
            "writer_cpu_s": fleet.writer_cpu_s,
            "waits": [float(getattr(st, "lock_wait_max_s", 0.0)) for st in counted.stores],
            "early": max(early, default=0.0),
            "stats": stats,
            "steady": {k: marks["b"][k] - marks.get("a", marks["start"])[k] for k in marks["b"]},
        }
    q.put(("done", part, out))


def pooler_totals(pooler: Pooler | None) -> dict[str, float]:
    """The pooler's totals for the job's database: how long a transaction held a server
    connection on average and how much of that its statements took (the rest is the client
    between statements), and the average wait for a server connection."""
    if pooler is None:
        return {}
    try:
        rows = [r for r in pooler.admin("SHOW STATS") if r.get("database") == DB]
    except Exception:
        return {}
    if not rows:
        return {}
    r = rows[0]
    xacts, queries = max(1, int(r.get("total_xact_count") or 0)), max(1, int(r.get("total_query_count") or 0))
    return {
        "xact_ms": int(r.get("total_xact_time") or 0) / xacts / 1000,
        "query_ms": int(r.get("total_query_time") or 0) / xacts / 1000,
        "queries_per_xact": queries / xacts,
        "wait_ms": int(r.get("total_wait_time") or 0) / xacts / 1000,
    }


def prewarm(url: str) -> None:
    """One event of another job, appended before the fleet starts: the store makes its schema
    and partitions then, not on every shipper's first append."""
    from mlgoodput.events import Event, EventBatch, Kind
    from mlgoodput.store import open_store

    st = open_store(url)
    try:
        st.append(NS, "prewarm", EventBatch(1, 0, [Event(Kind.JOB_START, time.time(), host=0)]))
    finally:
        st.close()


def _wait_all(q: Any, procs: list[Any], what: str, timeout_s: float) -> dict[int, Any]:
    """Each process's `what` message (a process that died first is an error)."""
    got: dict[int, Any] = {}
    deadline = time.monotonic() + timeout_s
    while len(got) < len(procs):
        try:
            kind, part, data = q.get(timeout=1.0)
        except Exception:
            dead = [p for p in procs if not p.is_alive() and p.exitcode]
            if dead or time.monotonic() > deadline:
                codes = [p.exitcode for p in dead]
                raise RuntimeError(f"a simulating process failed before '{what}' (exit {codes})") from None
            continue
        if kind != what:
            raise RuntimeError(f"expected '{what}' from process {part}, got '{kind}'")
        got[part] = data
    return got


def run(args: argparse.Namespace) -> dict[str, Any]:
    import multiprocessing as mp

    scratch = Path(tempfile.mkdtemp(prefix="mlgoodput-fleet-"))
    os.environ["MLGOODPUT_JOURNAL_DIR"] = str(scratch / "readers")  # a reader's recovery looks here only
    nodes = len(range(0, args.hosts, args.per_node))
    parts = max(1, min(args.procs, nodes))
    max_clients = (args.hosts if args.mode == "host" else nodes) + 64
    r: dict[str, Any] = {"mode": args.mode, "hosts": args.hosts, "procs": parts}
    ctx = mp.get_context("spawn")
    procs: list[Any] = []
    try:
        with servers(args, max_clients) as (url, admin_url, server, pooler):
            direct = admin_url.rsplit("/", 1)[0] + f"/{DB}"
            pm = postmaster_pid(server)
            pgb_pid = pooler.pid() if pooler else None
            q, go, t0v = ctx.Queue(), ctx.Event(), ctx.Value("d", 0.0)
            procs = [
                ctx.Process(
                    target=simulate, args=(args, url, str(scratch / "nodes"), i, parts, go, t0v, q), daemon=True
                )
                for i in range(parts)
            ]
            if args.prewarm:  # the schema and this week's partitions made before the fleet starts
                prewarm(url)
            for p in procs:
                p.start()
            _wait_all(q, procs, "ready", 600)
            sampler = Sampler(admin_url, pooler)
            before = db_figures(admin_url)
            srv0, pgb0 = proc_cpu_s(pm, True), proc_cpu_s(pgb_pid, False)

            def mark() -> dict[str, float]:
                return {"t": time.monotonic(), "server": proc_cpu_s(pm, True), "pooler": proc_cpu_s(pgb_pid, False)}

            marks = {"start": mark()}

            def warmed() -> None:
                marks.setdefault("a", mark())
                sampler.steady = True

            sampler.start()
            t0 = time.time() + 0.2
            t0v.value = t0
            go.set()
            timer = threading.Timer(args.warmup + 0.2, warmed)
            timer.start()
            _wait_all(q, procs, "written", args.duration + 600)
            marks["b"] = mark()
            timer.cancel()
            done = _wait_all(q, procs, "done", args.drain_timeout + 600)
            sample = sampler.stop()
            for p in procs:
                p.join(timeout=60)
            pooled = pooler_totals(pooler)
            settle_stats(pooler, admin_url)
            srv = proc_cpu_s(pm, True) - srv0
            pgb = proc_cpu_s(pgb_pid, False) - pgb0
            after = db_figures(admin_url)
            parts_out = list(done.values())
            steps = parts_out[0]["steps"]
            stored, lost, doubled = count_stored(direct, args.hosts, steps)
            waits = sorted(w for d in parts_out for w in d["waits"])  # after the warm-up
            stats: dict[str, int] = {}
            for d in parts_out:
                for k, v in d["stats"].items():
                    stats[k] = max(stats.get(k, 0), v) if k == "worst_tx_per_round_x1000" else stats.get(k, 0) + v
            base = marks.get("a", marks["start"])
            steady = {k: marks["b"][k] - base[k] for k in marks["b"]}
            for k in ("client", "writers", "appends", "recorded"):
                steady[k] = sum(d["steady"][k] for d in parts_out)
            rb = read_back(url, args.save_state)
            r.update(
                nodes=sum(d["nodes"] for d in parts_out),
                recorded=sum(d["recorded"] for d in parts_out),
                expected=sum(d["expected"] for d in parts_out),
                stored=stored,
                lost=lost,
                doubled=doubled,
                wall_s=max(d["wall_s"] for d in parts_out),
                drain_s=max(d["drain_s"] for d in parts_out),
                appends=sum(d["appends"] for d in parts_out),
                batches=sum(d["batches"] for d in parts_out),
                xacts=after["xacts"] - before["xacts"],
                chunk_bytes=after["chunk_bytes"],
                all_bytes=after["all_bytes"],
                server_cpu_s=srv,
                pooler_cpu_s=pgb,
                client_cpu_s=sum(d["client_cpu_s"] for d in parts_out),
                writer_cpu_s=sum(d["writer_cpu_s"] for d in parts_out),
                sample=sample,
                stores=len(waits),
                wait_max_s=waits[-1] if waits else 0.0,
                wait_early_max_s=max(d["early"] for d in parts_out),
                wait_p99_s=waits[min(len(waits) - 1, int(0.99 * len(waits)))] if waits else 0.0,
                stats=stats,
                pooled=pooled,
                steady=steady,
                pool_size=None if pooler is None else args.pool_size,
                **rb,
            )
            with suppress(Exception):
                import psycopg

                with psycopg.connect(admin_url, autocommit=True) as conn:
                    r["max_connections"] = int(conn.execute("SHOW max_connections").fetchone()[0])
    finally:
        for p in procs:
            if p.is_alive():
                p.terminate()
                p.join(timeout=10)
        shutil.rmtree(scratch, ignore_errors=True)
    return r


def table(rows: list[tuple[str, str, str, str]]) -> None:
    w = max(len(r[0]) for r in rows)
    print(f"| {'':{w}} | {'measured':>12} | {'target':>10} | {'':4} |")
    print(f"|{'-' * (w + 2)}|{'-' * 14}|{'-' * 12}|{'-' * 6}|")
    for name, v, tgt, ok in rows:
        print(f"| {name:{w}} | {v:>12} | {tgt:>10} | {ok:4} |")


def report(args: argparse.Namespace, r: dict[str, Any]) -> None:
    s: Sample = r["sample"]
    dur = args.duration
    ev = max(1, r["stored"])
    st = r["stats"]
    w = r["steady"]  # the steady window: after --warmup s, to the last write
    w_s = max(1e-9, w["t"])
    w_ev = max(1, w["recorded"])
    rounds_per_node = dur / args.interval
    if args.mode == "node" and st.get("rounds"):
        rounds_per_node = st["rounds"] / r["nodes"]
    appends_per_node_round = r["appends"] / max(1.0, r["nodes"] * rounds_per_node)
    xact_per_node_round = r["xacts"] / max(1.0, r["nodes"] * rounds_per_node)
    bpe = r["chunk_bytes"] / ev
    pool = r["pool_size"]

    def ok(good: bool) -> str:
        return "ok" if good else "MISS"

    print(
        f"\nFleet: {r['hosts']:,} hosts on {r['nodes']:,} nodes ({args.per_node} a node), {args.rate:g} step/s each"
        f" for {dur:g} s, mode {r['mode']} ({'node aggregator' if r['mode'] == 'node' else 'each host ships itself'}),"
        f" {'pgbouncer pool ' + str(pool) if pool else 'no pooler'}, {r['procs']} simulating process(es); writing took {r['wall_s']:.1f} s, draining"
        f" {r['drain_s']:.1f} s after it; rates and CPU over the steady {w_s:.0f} s after the first"
        f" {args.warmup:g} s; package {Path(sys.modules['mlgoodput'].__file__ or '?').parent}\n"
    )
    rows = [
        ("events recorded", f"{r['recorded']:,}", f"{r['expected']:,}", ok(r["recorded"] == r["expected"])),
        ("events stored (read back)", f"{r['stored']:,}", "= recorded", ok(r["stored"] == r["recorded"])),
        ("  (host, step) lost / doubled", f"{r['lost']} / {r['doubled']}", "0 / 0", ok(not r["lost"] + r["doubled"])),
        ("store appends/s (append calls)", f"{w['appends'] / w_s:,.0f}", "", ""),
        ("  writer batches per append", f"{r['batches'] / max(1, r['appends']):.1f}", "", ""),
        (
            "shipping rounds per node per second",
            f"{rounds_per_node / max(1e-9, r['wall_s'] + r['drain_s']):.2f}" if st.get("rounds") else "-",
            f"{1 / args.interval:g}" if st.get("rounds") else "",
            "",
        ),
        (
            "appends per node per shipping round",
            f"{appends_per_node_round:.2f}",
            "<= 1",
            ok(appends_per_node_round <= 1),
        ),
        ("server transactions per node per round", f"{xact_per_node_round:.2f}", "", ""),
        ("server transactions per event", f"{r['xacts'] / ev:.4f}", "", ""),
    ]
    if st.get("rounds"):
        worst = st["worst_tx_per_round_x1000"] / 1000
        rows.append(("  most store transactions a round, any shipper", f"{worst:.2f}", "<= 1", ok(worst <= 1)))
    rows += [
        (
            "server connections (most in SHOW POOLS)",
            f"{s.sv_conns}" if pool else "-",
            f"<= {pool}" if pool else "",
            ok(s.sv_conns <= pool) if pool else "",
        ),
        (
            "  client backends (most in pg_stat_activity)",
            f"{s.backends}",
            f"<= {pool}" if pool else "",
            ok(s.backends <= pool) if pool else "",
        ),
        (
            "  a transaction's hold on a server connection; its statements",
            f"{r['pooled']['xact_ms']:.1f}; {r['pooled']['query_ms']:.1f} ms" if r.get("pooled") else "-",
            "",
            "",
        ),
        ("  clients the pooler kept waiting (most; longest)", f"{s.cl_waiting}; {s.maxwait_s * 1000:.0f} ms", "", ""),
        ("store lock wait in the warm-up: max over stores", f"{r['wait_early_max_s'] * 1000:.1f} ms", "", ""),
        (
            "store lock wait after it: max over stores",
            f"{r['wait_max_s'] * 1000:.1f} ms",
            "<= 50 ms",
            ok(r["wait_max_s"] <= TARGET_WAIT_S),
        ),
        (
            "  p99 of the stores' longest",
            f"{r['wait_p99_s'] * 1000:.1f} ms",
            "<= 50 ms",
            ok(r["wait_p99_s"] <= TARGET_WAIT_S),
        ),
        ("  longest lock wait in pg_stat_activity, whole run", f"{s.lock_wait_s * 1000:.1f} ms", "", ""),
        (
            "  the same in the warm-up (the first seconds)",
            f"{s.lock_wait_first_s * 1000:.1f} ms",
            "<= 50 ms",
            ok(s.lock_wait_first_s <= TARGET_WAIT_S),
        ),
        (
            "  on the lock itself (pg_locks.waitstart): warm-up; after",
            f"{s.lock_held_s * 1000:.1f}; {s.lock_held_steady_s * 1000:.1f} ms",
            "",
            "",
        ),
        (
            "  the same after the warm-up",
            f"{s.lock_wait_steady_s * 1000:.1f} ms",
            "<= 50 ms",
            ok(s.lock_wait_steady_s <= TARGET_WAIT_S),
        ),
        ("server CPU per 1,000 events", f"{w['server'] / w_ev * 1e6:.1f} ms", "", ""),
        ("  server CPU, cores busy", f"{w['server'] / w_s:.2f}", "", ""),
        ("  whole run incl. start and drain, per 1,000 events", f"{r['server_cpu_s'] / ev * 1e6:.1f} ms", "", ""),
        ("pooler CPU, share of its one core", f"{w['pooler'] / w_s * 100:.1f} %", "", ""),
        (
            "drain: last write to all stored",
            f"{r['drain_s']:.1f} s",
            f"<= {2 * args.interval:g} s",
            ok(r["drain_s"] <= 2 * args.interval),
        ),
        (
            "client process CPU, cores busy (all nodes)",
            f"{w['client'] / w_s:.2f}",
            f"< {os.cpu_count()}",
            ok(w["client"] / w_s < (os.cpu_count() or 1) * 0.8),
        ),
        ("client CPU (shippers) per 1,000 events", f"{(w['client'] - w['writers']) / w_ev * 1e6:.1f} ms", "", ""),
        ("  simulated hosts' writes per 1,000 events", f"{w['writers'] / w_ev * 1e6:.1f} ms", "", ""),
        ("stored bytes per event (chunk tables)", f"{bpe:.1f} B", "<= 40 B", ok(bpe <= TARGET_BYTES)),
        ("  all mlgoodput tables", f"{r['all_bytes'] / ev:.1f} B", "", ""),
        ("report: get_job_goodput() cold, no saved state", f"{r['cold_s'] * 1000:.0f} ms", "", ""),
        ("  again, nothing new (warm)", f"{r['warm_s'] * 1000:.1f} ms", "", ""),
        ("  cold, saving its state (--save-state)", f"{r['saving_s']:.2f} s" if "saving_s" in r else "-", "", ""),
        (
            "monitor upload: stragglers(read=False)",
            f"{r['stragglers_s'] * 1000:.0f} ms",
            "< 100 ms",
            ok(r["stragglers_s"] < 0.1),
        ),
    ]
    table(rows)
    if s.lock_what:
        print(f"\nlongest lock wait seen: {s.lock_what}")
    for what, n in sorted(s.slow_locks.items(), key=lambda x: -x[1])[:4]:
        print(f"  waiting over 50 ms in {n} sample(s): {what}")
    if st:
        shown = ", ".join(f"{k} {v:,}" for k, v in st.items() if k != "worst_tx_per_round_x1000")
        print(f"\nnode shippers, summed: {shown}")
    extrapolate(args, r, bpe)


def extrapolate(args: argparse.Namespace, r: dict[str, Any], bpe: float) -> None:
    """Linear in hosts from the per-host costs of the steady window; which limit comes first."""
    k = FLEET / r["hosts"]
    w = r["steady"]
    w_s = max(1e-9, w["t"])
    nodes = math.ceil(FLEET / args.per_node)
    cores = os.cpu_count() or 1
    ev_s = FLEET * args.rate
    server_cores = w["server"] / w_s * k
    pooler_core = w["pooler"] / w_s * k
    per_node_core = (w["client"] - w["writers"]) / w_s / r["nodes"]  # one node's shipping (flat in hosts)
    clients = nodes if args.mode == "node" else FLEET
    max_conn = r.get("max_connections", 100)
    server_conns = r["pool_size"] or clients
    rows: list[tuple[str, str, str, float]] = [
        ("server CPU", f"{server_cores:.2f} cores", f"{cores} cores (this machine)", server_cores / cores),
        ("pooler CPU (one thread)", f"{pooler_core * 100:.0f} % of a core", "100 % of a core", pooler_core),
        ("shipping CPU of one node", f"{per_node_core * 100:.2f} % of a core", "(flat in hosts)", 0.0),
        ("server connections", f"{server_conns:,}", f"max_connections {max_conn}", server_conns / max_conn),
        ("pooler client connections", f"{clients:,}", "(max_client_conn, set)", 0.0),
        ("store appends/s", f"{w['appends'] / w_s * k:,.0f}", "", 0.0),
        ("stored a day", f"{bpe * ev_s * 86400 / 1e9:,.1f} GB", "", 0.0),
        ("report cold", f"{r['cold_s'] * k:.2f} s", "", 0.0),
        ("report, nothing new", f"{r['warm_s'] * k * 1000:.0f} ms", "< 300 ms", r["warm_s"] * k / 0.3),
        (
            "monitor upload (stragglers)",
            f"{r['stragglers_s'] * k * 1000:.0f} ms",
            "< 100 ms",
            r["stragglers_s"] * k / 0.1,
        ),
    ]
    print(f"\nExtrapolated to {FLEET:,} hosts ({nodes:,} nodes, {ev_s:,.0f} events/s), linear in hosts:\n")
    wn = max(len(x[0]) for x in rows)
    print(f"| {'':{wn}} | {'at 10,000 hosts':>18} | {'limit':>28} | {'of limit':>8} |")
    print(f"|{'-' * (wn + 2)}|{'-' * 20}|{'-' * 30}|{'-' * 10}|")
    for name, v, lim, frac in rows:
        print(f"| {name:{wn}} | {v:>18} | {lim:>28} | {f'{frac * 100:.0f} %' if frac else '':>8} |")
    first = max(rows, key=lambda x: x[3])
    print(f"\nFirst to run out: {first[0]} ({first[3] * 100:.0f} % of its limit at {FLEET:,} hosts).")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=1000)
    ap.add_argument("--per-node", type=int, default=8, help="hosts per simulated node")
    ap.add_argument("--rate", type=float, default=1.0, help="steps per second per host")
    ap.add_argument("--duration", type=float, default=30.0, help="seconds of recording")
    ap.add_argument("--mode", choices=("node", "host"), default="node")
    ap.add_argument("--pool-size", type=int, default=16, help="pgbouncer's server connections")
    ap.add_argument("--interval", type=float, default=0.5, help="shipping round, seconds")
    ap.add_argument("--writer-threads", type=int, default=8, help="threads per process that write the hosts' events")
    ap.add_argument(
        "--procs",
        type=int,
        default=os.cpu_count() or 1,
        help="processes the nodes are shared among (default: one per core; each has its own interpreter)",
    )
    ap.add_argument("--drain-timeout", type=float, default=300.0)
    ap.add_argument(
        "--warmup", type=float, default=5.0, help="seconds left out of the steady-state rates (connections, schema)"
    )
    ap.add_argument("--no-pooler", action="store_true", help="straight to the server (no pgbouncer)")
    ap.add_argument(
        "--prewarm",
        action="store_true",
        help="make the store's schema and partitions before the fleet starts (one append of another job)",
    )
    ap.add_argument(
        "--save-state", action="store_true", help="also time a cold report that saves the accounting's state"
    )
    ap.add_argument("--src", metavar="DIR", help="import mlgoodput from DIR (e.g. an older commit's src/)")
    args = ap.parse_args()
    from tests.pgserver import why_not

    why = why_not()
    if why:
        print(f"skipped: {why}")
        return 0
    r = run(args)
    report(args, r)
    return 0 if r["lost"] == 0 and r["doubled"] == 0 and r["stored"] == r["recorded"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
