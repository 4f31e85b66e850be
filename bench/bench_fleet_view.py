"""The fleet view over many long jobs (issue 31, item 5): `mlgoodput fleet` over 1,000 jobs of
1e6 steps each, warm, reading each job's saved summary and never its events.

Target: 1,000 jobs of 1e6 steps each answer in under 2 s warm.

    PYTHONPATH=src python bench/bench_fleet_view.py [--real 4] [--jobs 1000] [--steps 1000000]
    PYTHONPATH=src python bench/bench_fleet_view.py --store /tmp/fleet_view.db   # kept afterwards
    PYTHONPATH=src python bench/bench_fleet_view.py --postgres    # a PostgreSQL server of its own
    PYTHONPATH=src python bench/bench_fleet_view.py --store postgresql://user@host/db   # an empty database

What is real and what is copied, plainly: a real job of 1e6 steps takes 30-50 MB in a SQLite
store and 7-10 s to write (this bench's: 32 MB, 7 s), so 1,000 of them (30-50 GB, hours) do not
fit the machine this bench runs on. It therefore writes `--real` (K, default 4) real jobs of `--steps` steps each
(each with its JOB_LABELS: teams, models, accelerators and their kinds differ; every job saves
a checkpoint every 50,000 steps; the even ones run an eval every 1,000 steps and queued before
they started, the odd ones crash at 60 % and restart from a checkpoint 50,000 steps back), and
runs the fleet over them once, cold (every job's summary made from its events and saved in the
store). Then it makes the store hold `--jobs` jobs with SQL: job i >= K is a copy of real job
i mod K under a new name, made of
  - its `streams` row (what `store.jobs()` lists: 1e6 events, first and last time);
  - a row in `chunks` for each of the real job's chunks, with the same seq order, writer,
    first_seq, n and times, whose packed columns are zeros of the size the real row keeps on
    its b-tree leaf page (a real row of ~300 kB keeps a few hundred bytes to 4 kB there and
    the rest on overflow pages), so that `stream_position` -- `max(seq)` and `sum(n)` over the
    job's rows up to the summary's cursor -- walks as many index entries and leaf pages as it
    does on the real job; only the last chunk is copied whole. Copying the last chunk alone
    would give `max(seq)` but make `sum(n)` one row instead of a hundred: not the real cost;
  - its saved fleet summary (state namespace `mlgoodput.fleet`, key `json.dumps([logger,
    job])`) with the copy's name and, as its cursor, the seq of the copy's last chunk.
In a PostgreSQL store the same (`copy_jobs_pg`): a stream and a writer row per copy, the real
job's chunk rows under the copy's stream with the same day, seq and n (so a copy's summary
keeps its real job's cursor), `data` whole in the last row and 18 bytes in the others (a real
row's packed columns, a few kB compressed, go to TOAST: its heap row keeps an 18-byte pointer),
then VACUUM ANALYZE, as autovacuum leaves a store written for a while.
The copies' events cannot be read back (the stub rows hold zeros), so a query that needs a
copy's events (a range whose edge cuts one of its hours, or its `mlgoodput report`) would be
wrong: the bench checks that nothing reads them (every summary read, none made again) and
times the edge-cutting range on a real job only.

Then, each in a new process (the page cache warm, nothing in memory): `mlgoodput fleet --json
--by team` over a range that holds every job whole (median of 5: whole process wall and CPU,
in-process, peak RSS), `FleetSource(store).report(...)` twice in one process (the first reads
every summary at once, the second keeps them in memory and compares the store's listing), and the range
whose edges cut hours of one real job (the exact path: the job's accounting asked for those
hours, from its saved calculator state). Processes run from bytecode compiled once, as an
installed package does.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_scale import _hwm_mb

STEP_S = 0.1
LOGGER = "fleet_bench"
BATCH = 10_000  # events a batch, as a shipper sends them (bench_scale.write_job's size)
CKPT_EVERY, CKPT_BLOCK_S = 50_000, 3.0
EVAL_EVERY = 1_000
TEAMS = ("nlp", "vision", "speech", "ranking")
MODELS = ("llama-8b", "vit-l", "whisper-l", "dlrm")
SIZES = ((8, "H100"), (16, "A100"), (4, "H100"), (32, "v5e"))
CLUSTERS = ("east", "west")


def job_name(i: int) -> str:
    return f"train-{i:04d}"


def _job_events(i: int, steps: int, t0: float) -> Any:
    """Real job i's events in order, a batch at a time (lists of at most BATCH events)."""
    from mlgoodput.events import Event, Kind

    n, kind = SIZES[i % len(SIZES)]
    labels = {"team": TEAMS[i % len(TEAMS)], "model": MODELS[i % len(MODELS)], "cluster": CLUSTERS[i % 2]}
    evals, restart = i % 2 == 0, i % 2 == 1

    def start(t: float) -> list[Any]:
        return [
            Event(Kind.JOB_START, t),
            Event(Kind.JOB_LABELS, t, value=float(n), name=kind, attrs={"labels": labels}),
            Event(Kind.ACCEL_INIT_START, t + 1),
            Event(Kind.ACCEL_INIT_END, t + 11),
        ]

    head = start(t0)
    if evals:  # queued for 20 minutes before it started
        head.insert(0, Event(Kind.JOB_SUBMIT, t0, value=t0 - 1200.0, name="recorded"))
    out: list[Any] = head
    crash = int(steps * 0.6) if restart else -1
    t, k, done = t0 + 30, 0, 0
    while done < steps:
        if k == crash:  # no event for 300 s, then a new attempt from the checkpoint 50,000 steps back
            t += 300
            out += start(t)
            k = max(0, k - CKPT_EVERY)
            out.append(Event(Kind.CKPT_RESTORE, t + 12, step=k, value=20.0))
            t += 40
            crash = -1
        out.append(Event(Kind.STEP_START, t, step=k))
        if evals and k % EVAL_EVERY == 500:
            out.append(Event(Kind.CUSTOM_START, t + 0.02, name="eval"))
            out.append(Event(Kind.CUSTOM_END, t + 0.07, name="eval"))
        t += STEP_S
        if k % CKPT_EVERY == CKPT_EVERY - 1:
            out.append(Event(Kind.CKPT_SAVE, t, step=k, value=CKPT_BLOCK_S))
            t += CKPT_BLOCK_S
        k += 1
        done += 1
        if len(out) >= BATCH:
            yield out[:BATCH]
            out = out[BATCH:]
    out.append(Event(Kind.JOB_END, t + 1))
    while out:
        yield out[:BATCH]
        out = out[BATCH:]


def span_s(steps: int) -> float:
    """About how long a real job lasts (its steps, checkpoints, a restart), for laying jobs out."""
    return steps * STEP_S + (steps // CKPT_EVERY + 1) * CKPT_BLOCK_S + CKPT_EVERY * STEP_S + 400


def write_jobs(path: str, real: int, steps: int, now: float) -> list[float]:
    """The K real jobs, each in its own writer's batches; job i ends about (i + 2) hours before
    `now`. Returns the seconds each took to write."""
    from mlgoodput.events import EventBatch
    from mlgoodput.store import open_store

    st = open_store(path)
    took = []
    for i in range(real):
        t = time.perf_counter()
        t0 = now - (i + 2) * 3600.0 - span_s(steps) + 0.25 * i
        seq = 0
        for batch in _job_events(i, steps, t0):
            st.append(LOGGER, job_name(i), EventBatch(i + 1, seq, batch))
            seq += len(batch)
        took.append(time.perf_counter() - t)
    st.close()
    return took


def _local_bytes(payload: int, page: int) -> int:
    """Bytes of a table row's record kept on its b-tree leaf page (SQLite's file format: the
    rest of a record too large for the page goes to overflow pages)."""
    usable = page
    most, least = usable - 35, (usable - 12) * 32 // 255 - 23
    if payload <= most:
        return payload
    k = least + (payload - least) % (usable - 4)
    return k if k <= most else least


_COLS = "ns, job, writer, first_seq, n, t_min, t_max, stored_at, kinds, times, hosts, steps, vals, names, attrs"


def copy_jobs(path: str, real: int, jobs: int) -> dict[str, Any]:
    """Jobs real..jobs-1 as copies of the real ones (module docstring), in one transaction."""
    import sqlite3

    from mlgoodput.accounting._fleet import NAMESPACE, key

    t = time.perf_counter()
    conn = sqlite3.connect(path, isolation_level=None)
    page = int(conn.execute("PRAGMA page_size").fetchone()[0])
    src: list[dict[str, Any]] = []
    for i in range(real):
        name = job_name(i)
        rows = conn.execute(
            "SELECT seq, writer, first_seq, n, t_min, t_max, stored_at, length(CAST(ns AS BLOB)),"
            " length(CAST(job AS BLOB)), length(kinds) + length(times) + length(hosts) + length(steps)"
            " + length(vals) + coalesce(length(CAST(names AS BLOB)), 0) + coalesce(length(CAST(attrs AS BLOB)), 0)"
            " FROM chunks WHERE ns = ? AND job = ? ORDER BY seq",
            (LOGGER, name),
        ).fetchall()
        gen, pieces = conn.execute(
            "SELECT gen, pieces FROM states WHERE ns = ? AND job = ?", (NAMESPACE, key(LOGGER, name))
        ).fetchone()
        assert pieces == 1, pieces
        data = conn.execute(
            "SELECT data FROM state_pieces WHERE ns = ? AND job = ? AND gen = ? AND i = 0",
            (NAMESPACE, key(LOGGER, name), gen),
        ).fetchone()[0]
        src.append({"name": name, "rows": rows, "gen": gen, "summary": json.loads(bytes(data))})
    fixed = 40 + 24  # record header and small integers (about), and the three REAL columns
    conn.execute("BEGIN IMMEDIATE")
    stub_bytes = 0
    for i in range(real, jobs):
        s = src[i % real]
        name = job_name(i)
        conn.execute(
            "INSERT INTO streams (ns, job, events, first_time, last_time)"
            " SELECT ns, ?, events, first_time, last_time FROM streams WHERE ns = ? AND job = ?",
            (name, LOGGER, s["name"]),
        )
        stubs = []
        for _seq, writer, first_seq, n, t_min, t_max, stored_at, ns_b, job_b, blobs in s["rows"][:-1]:
            local = _local_bytes(fixed + ns_b + job_b + blobs, page)
            pad = max(0, local - fixed - ns_b - len(name))
            stub_bytes += pad
            stubs.append((LOGGER, name, writer, first_seq, n, t_min, t_max, stored_at, pad))
        conn.executemany(
            f"INSERT INTO chunks ({_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, zeroblob(?), x'', x'', x'', x'', NULL, NULL)",
            stubs,
        )
        last = conn.execute(
            f"INSERT INTO chunks ({_COLS}) SELECT ns, ?, writer, first_seq, n, t_min, t_max, stored_at, kinds,"
            " times, hosts, steps, vals, names, attrs FROM chunks WHERE seq = ?",
            (name, s["rows"][-1][0]),
        ).lastrowid
        summary = dict(s["summary"], job=name, cursor=last)
        k = key(LOGGER, name)
        conn.execute(
            "INSERT INTO states (ns, job, gen, pieces, saved_at) VALUES (?, ?, ?, 1, ?)",
            (NAMESPACE, k, s["gen"], time.time()),
        )
        conn.execute(
            "INSERT INTO state_pieces (ns, job, gen, i, data) VALUES (?, ?, ?, 0, ?)",
            (NAMESPACE, k, s["gen"], json.dumps(summary, separators=(",", ":")).encode()),
        )
    conn.execute("COMMIT")
    conn.close()
    return {
        "copy_s": time.perf_counter() - t,
        "chunks_per_job": [len(s["rows"]) for s in src],
        "stub_mb": stub_bytes / 1e6,
    }


def copy_jobs_pg(url: str, real: int, jobs: int) -> dict[str, Any]:
    """`copy_jobs` in a PostgreSQL store: a job (stream id), a writer row per copy (what
    `jobs()` sums), the real job's chunk rows under the copy's stream with the same day, seq
    and n (so the copy's summary keeps its cursor), the last one whole and the others with an
    18-byte `data` (a real row's ~500 kB goes to TOAST, and its heap row keeps an 18-byte
    pointer to it), and the saved summary; then VACUUM ANALYZE, as autovacuum leaves a store
    that has been written for a while (the planner's statistics, the visibility map)."""
    import psycopg

    from mlgoodput.accounting._fleet import NAMESPACE, key

    t = time.perf_counter()
    n_rows = []
    with psycopg.connect(url, autocommit=True) as opened:
        conn: Any = opened  # rows as the queries give them (each one found: the bench wrote them)
        with conn.transaction():
            src: list[dict[str, Any]] = []
            for i in range(real):
                name = job_name(i)
                sid = conn.execute(
                    "SELECT id FROM mlgoodput_jobs WHERE ns = %s AND job = %s", (LOGGER, name)
                ).fetchone()[0]
                writers = conn.execute(
                    "SELECT next_seq, events, first_time, last_time FROM mlgoodput_writers WHERE stream = %s", (sid,)
                ).fetchall()
                assert len(writers) == 1, writers
                rows = conn.execute(
                    "SELECT day, seq FROM mlgoodput_chunks WHERE stream = %s ORDER BY seq", (sid,)
                ).fetchall()
                n_rows.append(len(rows))
                gen, pieces = conn.execute(
                    "SELECT gen, pieces FROM mlgoodput_states WHERE ns = %s AND job = %s",
                    (NAMESPACE, key(LOGGER, name)),
                ).fetchone()
                assert pieces == 1, pieces
                data = conn.execute(
                    "SELECT data FROM mlgoodput_state_pieces WHERE ns = %s AND job = %s AND gen = %s AND i = 0",
                    (NAMESPACE, key(LOGGER, name), gen),
                ).fetchone()[0]
                src.append(
                    {
                        "sid": sid,
                        "writer": writers[0],
                        "last": rows[-1][1],
                        "gen": gen,
                        "summary": json.loads(bytes(data)),
                    }
                )
            for i in range(real, jobs):
                s = src[i % real]
                name = job_name(i)
                sid = conn.execute(
                    "INSERT INTO mlgoodput_jobs (ns, job) VALUES (%s, %s) RETURNING id", (LOGGER, name)
                ).fetchone()[0]
                conn.execute(
                    "INSERT INTO mlgoodput_writers (writer, next_seq, stream, events, first_time, last_time)"
                    " VALUES (%s, %s, %s, %s, %s, %s)",
                    (1_000_000_000 + i, *s["writer"][:1], sid, *s["writer"][1:]),
                )
                conn.execute(
                    "INSERT INTO mlgoodput_chunks (stream, day, seq, n, data) SELECT %s, day, seq, n,"
                    " CASE WHEN seq = %s THEN data ELSE decode(repeat('00', 18), 'hex') END"
                    " FROM mlgoodput_chunks WHERE stream = %s",
                    (sid, s["last"], s["sid"]),
                )
                summary = dict(s["summary"], job=name)
                k = key(LOGGER, name)
                conn.execute(
                    "INSERT INTO mlgoodput_states (ns, job, gen, pieces, saved_at) VALUES (%s, %s, %s, 1, %s)",
                    (NAMESPACE, k, s["gen"], time.time()),
                )
                conn.execute(
                    "INSERT INTO mlgoodput_state_pieces (ns, job, gen, i, data) VALUES (%s, %s, %s, 0, %s)",
                    (NAMESPACE, k, s["gen"], json.dumps(summary, separators=(",", ":")).encode()),
                )
        conn.execute("VACUUM ANALYZE")
    return {"copy_s": time.perf_counter() - t, "chunks_per_job": n_rows}


def _is_pg(where: str) -> bool:
    return where.startswith(("postgresql://", "postgres://"))


def _jobs(where: str) -> list[Any]:
    from mlgoodput.store import open_store

    st = open_store(where)
    try:
        return list(st.jobs())
    finally:
        st.close()


def _size_mb(where: str) -> float:
    """The store's size: the SQLite file, or the PostgreSQL database."""
    if not _is_pg(where):
        return os.path.getsize(where) / 1e6
    import psycopg

    with psycopg.connect(where) as opened:
        conn: Any = opened
        return float(conn.execute("SELECT pg_database_size(current_database())").fetchone()[0]) / 1e6


# -- measurements, each in a fresh process ---------------------------------------------------------
def _report_args(cfg: dict[str, Any]) -> list[str]:
    """`mlgoodput fleet --json --by team` over the configured range."""
    since, until = str(cfg["since"]), str(cfg["until"])
    return ["fleet", "--store", cfg["path"], "--json", "--by", "team", "--since", since, "--until", until]


def child(mode: str, cfg: dict[str, Any]) -> dict[str, Any]:
    """One measurement in this fresh process."""
    out: dict[str, Any] = {"mode": mode}
    if mode == "warm":  # compiles the bytecode every later process loads
        import mlgoodput.accounting
        import mlgoodput.cli  # noqa: F401

        return out
    if mode == "cli":
        import io

        from mlgoodput.cli import main as cli_main

        t, c = time.perf_counter(), time.process_time()
        buf, real_out = io.StringIO(), sys.stdout
        sys.stdout = buf
        try:
            rc = cli_main(_report_args(cfg))
        finally:
            sys.stdout = real_out
        out.update(wall_s=time.perf_counter() - t, cpu_s=time.process_time() - c, rc=rc, peak_mb=_hwm_mb())
        got = json.loads(buf.getvalue())
        out.update(jobs=got["total"]["jobs"], groups=len(got["groups"]), acc_h=got["total"]["accelerator_hours"])
        return out
    from mlgoodput.accounting import FleetSource, JobSummary
    from mlgoodput.store import SQLiteStore, open_store

    st: Any  # a store with the optional abilities (stream_position, saved state): SQLite or PostgreSQL

    if mode == "cold":  # every summary made from the job's events, and saved
        st = open_store(cfg["path"])
        t, c = time.perf_counter(), time.process_time()
        src = FleetSource(st)
        got = src.summaries()
        out.update(wall_s=time.perf_counter() - t, cpu_s=time.process_time() - c, counts=src.last_counts)
        out.update(peak_mb=_hwm_mb(), events=[s.events for s in got], status=[s.status for s in got])
        out["span_0"] = next((s.start, s.end) for s in got if s.job == job_name(0))
        out["buckets"] = [{b: round(v / 3600, 2) for b, v in s.seconds.items() if v} for s in got]
        return out
    if mode == "check":  # what a new process reads of the 1,000-job store, and that copies are equal
        import dataclasses

        st = open_store(cfg["path"])
        infos = st.jobs()
        out["listed"] = len(infos)
        out["min_events"] = min(j.events for j in infos)
        src = FleetSource(st)
        t = time.perf_counter()
        got = {s.job: s for s in src.summaries()}
        out.update(wall_s=time.perf_counter() - t, counts=src.last_counts)
        real = cfg["real"]
        bad = 0
        for i in range(real, cfg["jobs"]):
            s, orig = got[job_name(i)], got[job_name(i % real)]
            if s != dataclasses.replace(orig, job=job_name(i), cursor=s.cursor):
                bad += 1
            if st.stream_position(LOGGER, s.job, s.cursor)[0] != s.cursor:
                bad += 1
        out["unequal"] = bad
        out["copies"] = cfg["jobs"] - real
        # one position check on a real job and on a copy (the warm path's per-job store work)
        for name, job in (("real", job_name(0)), ("copy", job_name(cfg["jobs"] - 1))):
            cur = got[job].cursor
            times = []
            for _ in range(201):
                t = time.perf_counter()
                st.stream_position(LOGGER, job, cur)
                times.append(time.perf_counter() - t)
            out[f"position_us_{name}"] = 1e6 * statistics.median(times)
        assert isinstance(next(iter(got.values())), JobSummary)
        return out
    if mode == "source":  # FleetSource.report twice in one process
        from mlgoodput.accounting import job_link

        st = open_store(cfg["path"])
        src = FleetSource(st)
        for n in (1, 2):
            t, c = time.perf_counter(), time.process_time()
            r = src.report(cfg["since"], cfg["until"], "team", link=job_link)
            out[f"wall_{n}_s"], out[f"cpu_{n}_s"] = time.perf_counter() - t, time.process_time() - c
            out[f"counts_{n}"] = dict(src.last_counts)
        out.update(peak_mb=_hwm_mb(), jobs=r.total["jobs"], acc_h=r.total["accelerator_hours"])
        return out
    if mode == "cut":  # one real job, a range whose edges cut two of its hours: the exact path
        from mlgoodput.accounting import _fleet_source

        job = job_name(0)
        base: Any = SQLiteStore
        if _is_pg(cfg["path"]):
            from mlgoodput.store._postgres import PostgresStore

            base = PostgresStore

        class OneJob(base):  # type: ignore[misc]
            """The store as it is, listing one job (the copies' events cannot be read)."""

            def jobs(self) -> Any:
                return [j for j in super().jobs() if j.namespace == LOGGER and j.job == job]

        asked: list[float] = []
        real_exact = _fleet_source.FleetSource._exact

        def exact(self: Any, s: Any, lo: float, hi: float) -> Any:
            t = time.perf_counter()
            try:
                return real_exact(self, s, lo, hi)
            finally:
                asked.append(time.perf_counter() - t)

        _fleet_source.FleetSource._exact = exact  # type: ignore[method-assign]
        st = OneJob(cfg["path"])
        src = FleetSource(st)
        for n in (1, 2):
            asked.clear()
            t, c = time.perf_counter(), time.process_time()
            r = src.report(cfg["cut_since"], cfg["cut_until"], "team")
            out[f"wall_{n}_s"], out[f"cpu_{n}_s"] = time.perf_counter() - t, time.process_time() - c
            out[f"exact_{n}"] = len(asked)
            out[f"exact_{n}_s"] = sum(asked)
        out.update(peak_mb=_hwm_mb(), jobs=r.total["jobs"], acc_h=r.total["accelerator_hours"])
        return out
    raise ValueError(mode)


def run_child(mode: str, cfg: dict[str, Any], pycache: str) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPYCACHEPREFIX=pycache)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed: from bytecode compiled once
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
    t, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    res = subprocess.run(
        [sys.executable, __file__, "--child", mode, json.dumps(cfg)], env=env, capture_output=True, text=True
    )
    if res.returncode != 0:
        raise RuntimeError(f"child {mode} failed ({res.returncode}):\n{res.stderr[-4000:]}")
    got: dict[str, Any] = json.loads(res.stdout.strip().splitlines()[-1])
    got["process_s"] = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    got["process_cpu_s"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return got


def _med(runs: list[dict[str, Any]], k: str) -> float:
    return float(statistics.median(r[k] for r in runs))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--real", type=int, default=4, help="real jobs written (K; default 4)")
    ap.add_argument("--jobs", type=int, default=1000, help="jobs in the store, the real ones and copies (default 1000)")
    ap.add_argument("--steps", type=int, default=1_000_000, help="steps of each real job (default 1e6)")
    ap.add_argument("--repeat", type=int, default=5, help="runs of `mlgoodput fleet` (the median is shown)")
    ap.add_argument(
        "--store",
        metavar="PATH|URL",
        help="write the SQLite store at PATH (must not exist) and keep it; or a postgresql:// URL of a database"
        " without this bench's jobs (default: a temporary SQLite file)",
    )
    ap.add_argument(
        "--postgres",
        action="store_true",
        help="start a PostgreSQL server of the bench's own (tests/pgserver.py) and use it as the store",
    )
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], json.loads(args.child[1]))))
        return 0
    if not 1 <= args.real <= args.jobs:
        ap.error("need 1 <= --real <= --jobs")
    server: Any = None
    if args.postgres:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
        from pgserver import PgServer, why_not  # type: ignore[import-not-found]

        why = why_not()
        if why:
            print(f"skipped: {why}")
            return 0
        server = PgServer()
        server.start()
        args.store = server.url
    pg = bool(args.store) and _is_pg(args.store)
    if args.store and not pg and os.path.exists(args.store):
        ap.error(f"--store {args.store!r} exists: give a new path")
    try:
        with tempfile.TemporaryDirectory() as d:
            path = args.store if pg else os.path.abspath(args.store or os.path.join(d, "fleet_view.db"))
            if pg and any(j.namespace == LOGGER for j in _jobs(path)):
                ap.error(f"--store {path!r} holds jobs of logger {LOGGER!r} already: give an empty database")
            now = time.time()
            wrote = write_jobs(path, args.real, args.steps, now)
            first = now - (args.real + 1) * 3600.0 - span_s(args.steps)
            cfg = {
                "path": path,
                "real": args.real,
                "jobs": args.jobs,
                "since": float(int(first // 3600) * 3600 - 3600),  # every job whole inside
                "until": float(int(now // 3600) * 3600),
            }
            pyc = os.path.join(d, "pycache")
            run_child("warm", cfg, pyc)
            real_mb = _size_mb(path)
            cold = run_child("cold", cfg, pyc)
            lo, hi = cold["span_0"]  # real job 0: edges a quarter in from each end, inside two of its hours
            cfg.update(cut_since=lo + (hi - lo) / 4, cut_until=hi - (hi - lo) / 4)
            cut = run_child("cut", cfg, pyc)
            copied = (copy_jobs_pg if pg else copy_jobs)(path, args.real, args.jobs)
            check = run_child("check", cfg, pyc)
            cli = [run_child("cli", cfg, pyc) for _ in range(args.repeat)]
            source = run_child("source", cfg, pyc)
            size = _size_mb(path)
    finally:
        if server is not None:
            server.close()
    k, n = args.real, args.jobs
    print(
        f"\nThe fleet view ({'PostgreSQL' if pg else 'SQLite'}): {n:,} jobs of {args.steps:,} steps each; {k} real"
        f" (written in {statistics.mean(wrote):.1f} s each, {real_mb / k:.0f} MB each), {n - k:,} copies of them"
        f" made with SQL in {copied['copy_s']:.1f} s (stub rows for the real jobs' {copied['chunks_per_job']}"
        f" chunks; store {size:,.0f} MB). Copies are not real jobs: their events are zeros; their listing,"
        " positions and saved summaries are a real job's (docstring).\n"
    )
    same = (
        check["counts"] == {"kept": 0, "read": n, "made": 0}
        and check["unequal"] == 0
        and check["listed"] == n
        and all(r["jobs"] == n for r in cli)
    )
    rows = [
        (f"cold: {k} real jobs' summaries made from their events and saved", f"{cold['wall_s']:.2f} s", ""),
        ("  per job (wall; CPU)", f"{cold['wall_s'] / k:.2f}; {cold['cpu_s'] / k:.2f} s", ""),
        ("  peak RSS", f"{cold['peak_mb']:.0f} MB", ""),
        (f"store of {n:,} jobs: listed; fewest events of a job", f"{check['listed']:,}; {check['min_events']:,}", ""),
        (
            "new process, summaries(): kept / read / made",
            "{kept} / {read} / {made}".format(**check["counts"]),
            f"0 / {n} / 0",
        ),
        ("  copies whose summary differs from their real job's", f"{check['unequal']} of {check['copies']}", "0"),
        (
            "  stream_position on a real job; on a copy (median)",
            f"{check['position_us_real']:.0f}; {check['position_us_copy']:.0f} us",
            "",
        ),
        (
            f"`mlgoodput fleet --json --by team`, {n:,} jobs: whole process (median of {len(cli)})",
            f"{_med(cli, 'process_s'):.2f} s",
            "< 2 s",
        ),
        ("  its CPU (whole process)", f"{_med(cli, 'process_cpu_s'):.2f} s", ""),
        (
            "  in-process (after interpreter start): wall; CPU",
            f"{_med(cli, 'wall_s'):.2f}; {_med(cli, 'cpu_s'):.2f} s",
            "",
        ),
        ("  peak RSS", f"{max(r['peak_mb'] for r in cli):.0f} MB", ""),
        (
            f"FleetSource.report, {n:,} jobs, new process: first (reads summaries)",
            f"{source['wall_1_s']:.2f} s",
            "< 2 s",
        ),
        ("  CPU", f"{source['cpu_1_s']:.2f} s", ""),
        ("  second (summaries kept, the listing compared)", f"{source['wall_2_s'] * 1000:.0f} ms", ""),
        ("  CPU", f"{source['cpu_2_s'] * 1000:.0f} ms", ""),
        ("  kept / read / made, second", "{kept} / {read} / {made}".format(**source["counts_2"]), ""),
        ("  peak RSS", f"{source['peak_mb']:.0f} MB", ""),
        ("range whose edges cut hours of one real job, new process: first", f"{cut['wall_1_s']:.2f} s", ""),
        (
            "  CPU; in the exact path (hours it asked)",
            f"{cut['cpu_1_s']:.2f}; {cut['exact_1_s']:.2f} s ({cut['exact_1']})",
            "",
        ),
        ("  second (its calculator kept)", f"{cut['wall_2_s'] * 1000:.0f} ms", ""),
        ("  in the exact path (hours it asked)", f"{cut['exact_2_s'] * 1000:.0f} ms ({cut['exact_2']})", ""),
        ("  peak RSS", f"{cut['peak_mb']:.0f} MB", ""),
    ]
    w = max(len(r[0]) for r in rows)
    v = max(10, *(len(r[1]) for r in rows))
    print(f"| {'':{w}} | {'measured':>{v}} | {'target':>11} |")
    print(f"|{'-' * (w + 2)}|{'-' * (v + 2)}|{'-' * 13}|")
    for name, val, tgt in rows:
        print(f"| {name:{w}} | {val:>{v}} | {tgt:>11} |")
    print(
        f"\nreal jobs (cold): status {cold['status']}, events {cold['events']}; hours by bucket {cold['buckets']}"
        f"\nfleet total: {cli[0]['jobs']:,} jobs, {cli[0]['groups']} teams, {cli[0]['acc_h']:,.0f} accelerator-hours"
        f" (FleetSource: {source['jobs']:,} jobs, {source['acc_h']:,.0f} h); every job read, none made again,"
        f" copies equal: {same}"
    )
    return 0 if same and all(r["rc"] == 0 for r in cli) else 1


if __name__ == "__main__":
    raise SystemExit(main())
