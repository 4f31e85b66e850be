"""Queries that cost what is new (issue 30): a cold query, a query after 1,000 more steps and a
query with nothing new, on one host's running job of 1e5, 1e6, 1e7 (and with `--big` 1e8)
steps in a SQLite store, beside a bare SELECT of the store's newest row (the floor a query
with nothing new cannot go under).

Targets (the issue's "done when"): +1,000 steps at 1e7 at most 2x +1,000 steps at 1e5; a query
with nothing new at 1e8 at most 20x the bare SELECT; a cold 1e8 read at most 12x the 1e7 read.

    PYTHONPATH=src python bench/bench_incremental.py [--sizes 100000,1000000,10000000] [--big]
    PYTHONPATH=src python bench/bench_incremental.py --keep /tmp/incr   # stores kept: later runs skip writing
    PYTHONPATH=src python bench/bench_incremental.py --restarted [--sizes 100000,1000000]

`--restarted`: the job was restarted from a checkpoint at half its steps and has redone a tenth
of them since (its step numbers go back; the redone steps are wasted progress), as after a
crash: a query of it must not walk the steps it redid.

The job is written as bench/bench_scale.py writes it (shipper-sized batches, an eval every
1,000 steps), still running (no job end), so every query follows the clock. Each size is
measured in a fresh process (its peak RSS is its own), with the saved state off
(MLGOODPUT_SNAPSHOT=0): the cold query reads and derives everything. The 1,000 new steps come
from a new writer each round, timed apart from the query; a kept store grows by them (a few
thousand steps a run, which does not show at these sizes). Each time is shown as wall time
and as the querying process's CPU time; the ratios are of CPU times, which other work on a
shared machine inflates far less than wall times.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import subprocess
import sys
import tempfile
import time
from statistics import median
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_scale import CUSTOM_EVERY, JOB, LOGGER, STEP_S, _hwm_mb, write_job

NEW = 1000  # steps added before each "+1,000 steps" query
ROUNDS = 7  # "+1,000 steps" queries (the median is shown)
IDLE = 50  # queries with nothing new (the median is shown)
SELECTS = 2000  # bare SELECTs (the median is shown)
ROOM = 200_000  # steps' worth of time left after the job's last step for the steps added later


def _steps(first: int, count: int, t0: float) -> list[Any]:
    """Host 0's steps first..first+count-1, step k at t0 + 30 + k * STEP_S, an eval every CUSTOM_EVERY."""
    from mlgoodput.events import Event, Kind

    ev = []
    for k in range(first, first + count):
        t = t0 + 30 + k * STEP_S
        ev.append(Event(Kind.STEP_START, t, host=0, step=k))
        if k % CUSTOM_EVERY == 500:
            ev.append(Event(Kind.CUSTOM_START, t + 0.02, host=0, name="eval"))
            ev.append(Event(Kind.CUSTOM_END, t + 0.07, host=0, name="eval"))
    return ev


def _more_steps(path: str, first: int, t0: float) -> None:
    """NEW more steps from `first` on host 0 (an eval every CUSTOM_EVERY), from a new writer."""
    from mlgoodput.events import EventBatch
    from mlgoodput.store import open_store

    ev = _steps(first, NEW, t0)
    st = open_store(path)
    try:
        st.append(LOGGER, JOB, EventBatch(random.getrandbits(48) + 1000, 0, ev))
    finally:
        st.close()


def _clock() -> tuple[float, float]:
    """(wall, this process's CPU) seconds: on a shared machine the CPU time is what a query
    costs, the wall time also what it waited for a core."""
    return time.perf_counter(), time.process_time()


def _since(t: tuple[float, float]) -> tuple[float, float]:
    w, c = _clock()
    return w - t[0], c - t[1]


def _medians(runs: list[tuple[float, float]]) -> tuple[float, float]:
    """(median wall, median CPU) in ms."""
    return 1000 * median(r[0] for r in runs), 1000 * median(r[1] for r in runs)


def _bare_select_ms(path: str) -> tuple[float, float]:
    """The newest row of the job's events, on a connection kept open: median of SELECTS."""
    conn = sqlite3.connect(path)
    try:
        sql = "SELECT seq FROM chunks WHERE ns = ? AND job = ? ORDER BY seq DESC LIMIT 1"
        conn.execute(sql, (LOGGER, JOB)).fetchone()
        times = []
        for _ in range(SELECTS):
            t = _clock()
            conn.execute(sql, (LOGGER, JOB)).fetchone()
            times.append(_since(t))
    finally:
        conn.close()
    return _medians(times)


def child(path: str, t0: float) -> None:
    """The measurements of one size in this fresh process; prints one JSON line."""
    from mlgoodput.accounting import GoodputCalculator

    calc = GoodputCalculator(JOB, LOGGER, store=path)
    t = _clock()
    r = calc.report()
    cold = _since(t)
    peak = _hwm_mb()
    idle = []
    for _ in range(IDLE):
        t = _clock()
        calc.report()
        idle.append(_since(t))
    last = r.last_step
    grow = []
    for _ in range(ROUNDS):
        _more_steps(path, last + 1, t0)
        t = _clock()
        r2 = calc.report()
        grow.append(_since(t))
        if r2.last_step < last + NEW:
            raise SystemExit(f"the new steps were not counted: last step {r2.last_step}, expected {last + NEW}")
        last = r2.last_step
    out: dict[str, Any] = {
        "cold_s": cold,
        "peak_mb": peak,
        "idle_ms": _medians(idle),
        "grow_ms": _medians(grow),
        "select_ms": _bare_select_ms(path),
        "goodput": r.goodput_pct,
        "steps": last + 1,
    }
    print(json.dumps(out))


def run_child(path: str, t0: float) -> dict[str, Any]:
    env = dict(os.environ, MLGOODPUT_SNAPSHOT="0")
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
    res = subprocess.run([sys.executable, __file__, "--child", path, repr(t0)], env=env, capture_output=True, text=True)
    if res.returncode:
        raise SystemExit(f"measuring {path} failed:\n{res.stderr[-4000:]}")
    got: dict[str, Any] = json.loads(res.stdout.strip().splitlines()[-1])
    return got


def store_for(folder: str, steps: int, restarted: bool = False) -> tuple[str, float, float]:
    """(path, t0, seconds spent writing) of a running job of `steps` steps, written unless kept;
    `restarted`: then restarted from step steps // 2 with steps // 10 steps redone, and t0 is
    where step k's time is t0 + 30 + k * STEP_S for the steps after them (`_more_steps`)."""
    path = os.path.join(folder, f"incremental_{'restarted_' if restarted else ''}{steps}.db")
    meta = path + ".json"
    if os.path.exists(path) and os.path.exists(meta):
        with open(meta) as f:
            kept = json.load(f)
        if kept.get("steps") == steps:
            return path, float(kept["t0"]), 0.0
    for p in (path, meta):
        if os.path.exists(p):
            os.remove(p)
    redo = steps // 10 if restarted else 0
    t0 = time.time() - (steps + redo + ROOM) * STEP_S - 240
    t = time.perf_counter()
    write_job(path, steps, 1, t0, running=True)
    if restarted:
        t0 = _restart(path, steps, redo, t0)
    took = time.perf_counter() - t
    with open(meta, "w") as f:
        json.dump({"steps": steps, "t0": t0}, f)
    return path, t0, took


def _restart(path: str, steps: int, redo: int, t0: float) -> float:
    """Restart the job a minute after its last step from the checkpoint of step steps // 2 and
    redo `redo` steps from there (a new writer: the restarted process); returns the t0 that puts
    the steps after them at t0 + 30 + k * STEP_S."""
    from mlgoodput.events import Event, EventBatch, Kind
    from mlgoodput.store import open_store

    back = steps // 2
    t_r = t0 + 30 + steps * STEP_S + 60
    first = t_r + 20  # the first redone step's time (number back + 1)
    t_after = first - 30 - (back + 1) * STEP_S  # the t0 of the redone steps and those after them
    ev = [Event(Kind.JOB_START, t_r, host=0), Event(Kind.CKPT_RESTORE, t_r + 1, host=0, step=back, value=1.0)]
    ev += _steps(back + 1, redo, t_after)
    st = open_store(path)
    try:
        for i in range(0, len(ev), 10_000):
            st.append(LOGGER, JOB, EventBatch(2, i, ev[i : i + 10_000]))
    finally:
        st.close()
    return t_after


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100000,1000000,10000000", help="steps per job, comma-separated")
    ap.add_argument("--big", action="store_true", help="also 1e8 steps (a store of several GB; minutes to write)")
    ap.add_argument("--keep", metavar="DIR", help="keep the stores in DIR and reuse them on later runs")
    ap.add_argument("--restarted", action="store_true", help="a job restarted from a checkpoint (see above)")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child[0], float(args.child[1]))
        return 0
    sizes = sorted({int(float(s)) for s in args.sizes.split(",") if s.strip()} | ({100_000_000} if args.big else set()))
    res: dict[int, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or tmp
        os.makedirs(folder, exist_ok=True)
        for n in sizes:
            path, t0, wrote = store_for(folder, n, args.restarted)
            got = run_child(path, t0)
            got["write_s"] = wrote
            got["mb"] = os.path.getsize(path) / 1e6
            res[n] = got
            if not args.keep:
                os.remove(path)
            print(f"  {n:>11,} steps measured (store {got['mb']:.0f} MB, written in {wrote:.0f} s)", flush=True)
    kind = "restarted from the checkpoint of half its steps, a tenth redone, " if args.restarted else ""
    print(f"\nQueries that cost what is new: one host's running job, {kind}SQLite, +{NEW:,} steps per round\n")
    head = [
        "steps",
        "cold (CPU)",
        "peak RSS",
        f"+{NEW:,} steps (CPU)",
        "nothing new (CPU)",
        "bare SELECT (CPU)",
        "nothing new / SELECT",
    ]
    rows = [
        [
            f"{n:,}",
            f"{g['cold_s'][0]:.2f} s ({g['cold_s'][1]:.2f})",
            f"{g['peak_mb']:.0f} MB",
            f"{g['grow_ms'][0]:.2f} ms ({g['grow_ms'][1]:.2f})",
            f"{g['idle_ms'][0]:.3f} ms ({g['idle_ms'][1]:.3f})",
            f"{g['select_ms'][0] * 1000:.1f} us ({g['select_ms'][1] * 1000:.1f})",
            f"{g['idle_ms'][1] / g['select_ms'][1]:.0f}x",
        ]
        for n, g in res.items()
    ]
    w = [max(len(head[i]), *(len(r[i]) for r in rows)) for i in range(len(head))]
    print("| " + " | ".join(h.rjust(w[i]) for i, h in enumerate(head)) + " |")
    print("|" + "|".join("-" * (x + 2) for x in w) + "|")
    for r in rows:
        print("| " + " | ".join(c.rjust(w[i]) for i, c in enumerate(r)) + " |")
    print(
        f"\n(wall time, and in parentheses the querying process's CPU time; medians: +{NEW:,} steps of"
        f" {ROUNDS}, nothing new of {IDLE}, bare SELECT of {SELECTS}; the ratios below are of CPU times,"
        " which a shared machine does not inflate)\n"
    )
    ratios = []
    if 100_000 in res and 10_000_000 in res:
        v = res[10_000_000]["grow_ms"][1] / res[100_000]["grow_ms"][1]
        ratios.append((f"+{NEW:,} steps at 1e7 / at 1e5", v, 2.0))
    top = max(res)
    v = res[top]["idle_ms"][1] / res[top]["select_ms"][1]
    ratios.append((f"nothing new at {top:.0e} / bare SELECT", v, 20.0 if top >= 100_000_000 else None))
    if 10_000_000 in res and 100_000_000 in res:
        v = res[100_000_000]["cold_s"][1] / res[10_000_000]["cold_s"][1]
        ratios.append(("cold 1e8 / cold 1e7", v, 12.0))
    wn = max(len(r[0]) for r in ratios)
    print(f"| {'ratio':{wn}} | {'measured':>8} | {'target':>6} |")
    print(f"|{'-' * (wn + 2)}|{'-' * 10}|{'-' * 8}|")
    for name, v, tgt in ratios:
        print(f"| {name:{wn}} | {v:>7.1f}x | {('<= ' + format(tgt, 'g')) if tgt else '':>6} |")
    print("\ngoodput % (cold): " + ", ".join(f"{g['goodput']:.4f}" for g in res.values()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
