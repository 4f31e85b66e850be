"""Accounting at scale (issue 12): a query with nothing new, `mlgoodput report` cold and after
the first (from the saved state), memory per step, on a long job and on many hosts.

Targets: a query with nothing new under 1 ms at 1e7 steps and at 256 hosts x 1e5 steps;
`mlgoodput report` after the first under 0.3 s and 300 MB at 1e7 steps; cold (no saved
state) under 2 s at 1e7 steps; at most 16 bytes of engine state per step event.

    PYTHONPATH=src python bench/bench_scale.py [--steps 10000000] [--hosts 1]
    PYTHONPATH=src python bench/bench_scale.py --steps 100000 --hosts 256
    PYTHONPATH=src python bench/bench_scale.py --store /tmp/scale.db   # kept: later runs skip writing
    PYTHONPATH=src python bench/bench_scale.py --running --store /tmp/running.db

The job has ended (a finished job's saved state carries its report: a report after the
first reads the header only) unless `--running`: then a report after the first builds the
engine from the saved state, its sorted step times read a bucket at a time.

Each measurement runs in a fresh process (its peak RSS is its own); `mlgoodput report` is run
through the command line's own entry point, so interpreter start and imports are included.
The processes run as an installed package does: from compiled bytecode (kept in a folder of
the run's, compiled by a first warm-up process, even where PYTHONDONTWRITEBYTECODE is set).

Multi-host reports within the calculator's budget (issue 30): the cold `mlgoodput report`
(the straggler analysis of every rank beside the report) against the calculator alone (its
imports, store and first report), in time (wall and CPU: a loaded machine stretches the wall
clock of both) and in peak memory, at most 1.5x; and what a report with nothing new touches in
the store: its calls by kind, the saved state's pieces it loads (of how many), and whether it
built the engine.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from typing import Any

STEP_S = 0.1
CUSTOM_EVERY = 1000
LOGGER, JOB = "goodput_bench", "bench"


def _hwm_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def write_job(path: str, steps: int, hosts: int, t0: float, running: bool = False) -> int:
    """A job of `steps` steps on each of `hosts` hosts (an eval every 1000 steps on host 0),
    appended in shipper-sized batches, one writer per host; ended unless `running`."""
    from mlgoodput.events import Event, EventBatch, Kind
    from mlgoodput.store import open_store

    st = open_store(path)
    total = 0
    for h in range(hosts):
        seq = 0
        head = [
            Event(Kind.JOB_START, t0 + 0.01 * h, host=h),
            Event(Kind.ACCEL_INIT_START, t0 + 1, host=h),
            Event(Kind.ACCEL_INIT_END, t0 + 11, host=h),
        ]
        st.append(LOGGER, JOB, EventBatch(h + 1, seq, head))
        seq += len(head)
        for first in range(0, steps, 50_000):
            ev = []
            for k in range(first, min(steps, first + 50_000)):
                t = t0 + 30 + k * STEP_S + h * 0.001
                ev.append(Event(Kind.STEP_START, t, host=h, step=k))
                if h == 0 and k % CUSTOM_EVERY == 500:
                    ev.append(Event(Kind.CUSTOM_START, t + 0.02, host=h, name="eval"))
                    ev.append(Event(Kind.CUSTOM_END, t + 0.07, host=h, name="eval"))
            for i in range(0, len(ev), 10_000):
                st.append(LOGGER, JOB, EventBatch(h + 1, seq + i, ev[i : i + 10_000]))
            seq += len(ev)
        if not running:
            end = [Event(Kind.JOB_END, t0 + 30 + steps * STEP_S + 1, host=h)]  # a finished job: one answer
            st.append(LOGGER, JOB, EventBatch(h + 1, seq, end))
            seq += 1
        total += seq
    st.close()
    return total


def _reuse(path: str) -> int:
    """The events of a store kept from an earlier run, with its saved states dropped."""
    import sqlite3

    conn = sqlite3.connect(path)
    try:
        for table in ("state_pieces", "states"):
            try:
                conn.execute(f"DELETE FROM {table}")
            except sqlite3.OperationalError:
                pass  # never saved: no such table
        conn.commit()
        n = conn.execute("SELECT coalesce(sum(n), 0) FROM chunks WHERE ns = ? AND job = ?", (LOGGER, JOB)).fetchone()
    finally:
        conn.close()
    return int(n[0])


def engine_bytes(calc: Any) -> int:
    """Bytes of the engine's per-step state: step times, step numbers, sorted step times, gaps."""
    e = calc._engine
    n = 0
    for log in e.timeline.hosts.values():
        n += log.times.itemsize * len(log.times) + log.nums.nbytes()
    if e.derived is not None:
        n += e.derived.ordered.nbytes() + 16 * (len(e.derived.exc) + len(e.derived.compile))
    for hs in e.host_steps.values():
        n += hs.diffs.nbytes()
    return n


READS = ("read", "scan_pages")  # a pass over a job's events (`scan` goes through `scan_pages`)
CALLS = (*READS, "jobs", "stream_position", "load_state")  # the store calls counted


def count_reads() -> list[str]:
    """Count what this process asks of the SQLite store: every call of `read`, `scan_pages`
    (each one a pass over a job's events), `jobs`, `stream_position` and `load_state`, and
    every saved-state piece fetched ("piece": by index or in order)."""
    from mlgoodput.store import SQLiteStore
    from mlgoodput.store._state import SavedPieces

    calls: list[str] = []
    for name in CALLS:
        real = getattr(SQLiteStore, name, None)
        if real is None:
            continue

        def counted(self: Any, *a: Any, _real: Any = real, _name: str = name, **kw: Any) -> Any:
            calls.append(_name)
            return _real(self, *a, **kw)

        setattr(SQLiteStore, name, counted)
    real_get = SavedPieces.__init__

    def init(self: Any, count: int, get: Any) -> None:
        def fetch(i: int) -> Any:
            calls.append("piece")
            return get(i)

        calls.append(f"pieces {count}")
        real_get(self, count, fetch)

    SavedPieces.__init__ = init  # type: ignore[method-assign]
    return calls


def _calls(calls: list[str]) -> dict[str, Any]:
    """Store calls by kind, passes over the events, pieces fetched (and of how many)."""
    by: dict[str, int] = {}
    of = 0
    for c in calls:
        if c.startswith("pieces "):
            of += int(c.split()[1])
        else:
            by[c] = by.get(c, 0) + 1
    return {"calls": by, "reads": sum(by.get(r, 0) for r in READS), "pieces": by.pop("piece", 0), "pieces_of": of}


def _engine_built() -> list[bool]:
    """Notes, in this process, each engine built from a saved state (`Saved.engine`)."""
    from mlgoodput.accounting import _snapshot

    built: list[bool] = []
    real = _snapshot.Saved.engine

    def engine(self: Any) -> Any:
        built.append(True)
        return real(self)

    _snapshot.Saved.engine = engine  # type: ignore[method-assign]
    return built


def child(mode: str, path: str) -> None:
    """One measurement in this fresh process; prints one JSON line."""
    out: dict[str, Any] = {"mode": mode}
    if mode == "warm":  # compiles the bytecode every later process loads
        import mlgoodput.accounting
        import mlgoodput.cli  # noqa: F401

        print(json.dumps(out))
        return
    if mode == "cli":
        from mlgoodput.cli import main as cli_main

        reads = count_reads()
        built = _engine_built()

        t, c = time.perf_counter(), time.process_time()
        with open(os.devnull, "w") as sink:
            real, sys.stdout = sys.stdout, sink
            try:
                rc = cli_main(["report", "--job", JOB, "--logger", LOGGER, "--store", path, "--json"])
            finally:
                sys.stdout = real
        out.update(wall_s=time.perf_counter() - t, cpu_s=time.process_time() - c, rc=rc, peak_mb=_hwm_mb())
        out.update(_calls(reads), built=bool(built))
        print(json.dumps(out))
        return
    t0, c0 = time.perf_counter(), time.process_time()
    from mlgoodput.accounting import GoodputCalculator

    calc = GoodputCalculator(JOB, LOGGER, store=path)
    t = time.perf_counter()
    r = calc.report()
    out["report_s"] = time.perf_counter() - t
    out["whole_s"], out["whole_cpu_s"] = time.perf_counter() - t0, time.process_time() - c0
    out["peak_mb"] = _hwm_mb()
    times = []
    for _ in range(20):
        t = time.perf_counter()
        calc.report()
        times.append(time.perf_counter() - t)
    times.sort()
    out["idle_ms"] = 1000 * times[len(times) // 2]
    events = calc._engine.timeline.events
    out["bytes_per_event"] = engine_bytes(calc) / max(1, events)
    out["events"] = events
    out["goodput"] = r.goodput_pct
    out["hosts"] = len(r.hosts)
    print(json.dumps(out))


def run_child(mode: str, path: str, snapshot: str, pycache: str) -> dict[str, Any]:
    env = dict(os.environ, MLGOODPUT_SNAPSHOT=snapshot, PYTHONPYCACHEPREFIX=pycache)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed: from bytecode compiled once
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
    t, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    res = subprocess.run(
        [sys.executable, __file__, "--child", mode, path], env=env, capture_output=True, text=True, check=True
    )
    got: dict[str, Any] = json.loads(res.stdout.strip().splitlines()[-1])
    got["process_s"] = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    got["process_cpu_s"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return got


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=10_000_000, help="steps per host")
    ap.add_argument("--hosts", type=int, default=1)
    ap.add_argument(
        "--running",
        action="store_true",
        help="a job still running (no job end): no saved answer, a report after the first builds the engine"
        " from the saved state (its sorted step times read lazily)",
    )
    ap.add_argument(
        "--store",
        metavar="PATH",
        help="keep the generated SQLite store at PATH and reuse it as it is when it exists (written with the"
        " --steps/--hosts/--running of its first run; its saved states are dropped first, so every run measures"
        " the same sequence); default: a temporary file",
    )
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(*args.child)
        return 0
    with tempfile.TemporaryDirectory() as d:
        path = args.store or os.path.join(d, "bench.db")
        t = time.perf_counter()
        if args.store and os.path.exists(path):
            n = _reuse(path)
        else:
            n = write_job(path, args.steps, args.hosts, time.time() - args.steps * STEP_S - 120, args.running)
        write_s = time.perf_counter() - t
        pyc = os.path.join(d, "pycache")
        run_child("warm", path, "0", pyc)
        cold = run_child("calc", path, "0", pyc)  # no saved state: reads and derives everything
        first = run_child("calc", path, "1", pyc)  # the same, and saves the state
        after = run_child("calc", path, "1", pyc)  # a new process: starts from the saved state
        cli_cold = run_child("cli", path, "0", pyc)
        cli_first = run_child("cli", path, "1", pyc)  # saves what only the command analyses (stragglers)
        cli_after = run_child("cli", path, "1", pyc)
        size = os.path.getsize(path)
    print(
        f"\nAccounting at scale: {args.hosts} host(s) x {args.steps:,} steps = {n:,} events"
        f"{' (running)' if args.running else ''}"
        f" (store written in {write_s:.0f} s, {size / 1e6:.0f} MB)\n"
    )
    calls = cli_after["calls"]
    asked = ", ".join(f"{k} {calls[k]}" for k in CALLS if calls.get(k))
    rows = [
        ("calculator, cold (no saved state): first report", f"{cold['report_s']:.2f} s", ""),
        ("calculator alone, cold: imports, store, first report", f"{cold['whole_s']:.2f} s", ""),
        ("  CPU", f"{cold['whole_cpu_s']:.2f} s", ""),
        ("  peak RSS", f"{cold['peak_mb']:.0f} MB", ""),
        ("calculator, first report that also saves the state", f"{first['report_s']:.2f} s", ""),
        ("calculator, new process from the saved state", f"{after['report_s'] * 1000:.0f} ms", ""),
        ("  peak RSS", f"{after['peak_mb']:.0f} MB", ""),
        ("query with nothing new (median of 20)", f"{after['idle_ms']:.3f} ms", "< 1 ms"),
        ("engine state per event", f"{after['bytes_per_event']:.1f} B", "<= 16 B"),
        ("`mlgoodput report`, cold: whole process", f"{cli_cold['process_s']:.2f} s", "< 2 s"),
        ("  in-process (after interpreter start)", f"{cli_cold['wall_s']:.2f} s", ""),
        ("  CPU", f"{cli_cold['cpu_s']:.2f} s", ""),
        ("  peak RSS", f"{cli_cold['peak_mb']:.0f} MB", ""),
        ("  passes over the job's events (store reads)", f"{cli_cold['reads']}", "1"),
        ("  / calculator alone: time (in-process)", f"{cli_cold['wall_s'] / cold['whole_s']:.2f}x", "<= 1.5x"),
        ("  / calculator alone: CPU", f"{cli_cold['cpu_s'] / cold['whole_cpu_s']:.2f}x", "<= 1.5x"),
        ("  / calculator alone: peak RSS", f"{cli_cold['peak_mb'] / cold['peak_mb']:.2f}x", "<= 1.5x"),
        ("`mlgoodput report`, first with saved state on: whole process", f"{cli_first['process_s']:.2f} s", ""),
        ("`mlgoodput report` after the first: whole process", f"{cli_after['process_s']:.2f} s", "< 0.3 s"),
        ("  its CPU (whole process)", f"{cli_after['process_cpu_s']:.2f} s", ""),
        ("  in-process (after interpreter start)", f"{cli_after['wall_s']:.2f} s", ""),
        ("  CPU (in-process)", f"{cli_after['cpu_s']:.2f} s", ""),
        ("  peak RSS", f"{cli_after['peak_mb']:.0f} MB", "< 300 MB"),
        ("  passes over the job's events (store reads)", f"{cli_after['reads']}", ""),
        ("  saved-state pieces loaded (of all saved)", f"{cli_after['pieces']} / {cli_after['pieces_of']}", ""),
        ("  engine built from the saved state", "yes" if cli_after["built"] else "no", ""),
    ]
    w = max(len(r[0]) for r in rows)
    print(f"| {'':{w}} | {'measured':>10} | {'target':>9} |")
    print(f"|{'-' * (w + 2)}|{'-' * 12}|{'-' * 11}|")
    for name, v, tgt in rows:
        print(f"| {name:{w}} | {v:>10} | {tgt:>9} |")
    same = {cold["goodput"], first["goodput"], after["goodput"]}
    print(f"\nstore calls of `mlgoodput report` after the first: {asked}")
    print(
        f"goodput {cold['goodput']:.4f} % (cold, first, from saved state agree: {len(same) == 1}"
        f"{'; a running job moves with the clock' if args.running else ''});"
        f" hosts with statistics: {after['hosts']}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
