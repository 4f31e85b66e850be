"""Calculator speed and memory on a long job: cold query, then a query after 1% more steps.

Targets (issue 2): cold on 1,000,000 steps with 1,000 custom events at most 1 s and 300 MB
peak memory; the next query after 1% more steps at most 50 ms. When ml-goodput-measurement
0.2.3 is installed (the `bench` extra), its calculator runs on the same job, fed through
its `cloud_logger=` argument with an in-memory logger, and the table shows both.

    python bench/bench_calculator.py [--steps N]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from typing import Any

STEP_S = 0.1
CUSTOM_EVERY = 1000  # one 0.05 s evaluation inside every 1000th step


def job_events(n_steps: int, first: int = 0, t0: float | None = None) -> list[Any]:
    from mlgoodput.events import Event, Kind

    if t0 is None:
        t0 = time.time() - (n_steps + 200) * STEP_S - 60
    ev: list[Any] = []
    if first == 0:
        ev += [
            Event(Kind.JOB_START, t0),
            Event(Kind.ACCEL_INIT_START, t0 + 1),
            Event(Kind.ACCEL_INIT_END, t0 + 11),
            Event(Kind.TRAINING_PREP_START, t0 + 11),
            Event(Kind.TRAINING_PREP_END, t0 + 20),
        ]
    base = t0 + 30 + 5.0  # step 0 includes 5 s of compilation
    for k in range(first, first + n_steps):
        t = base + k * STEP_S if k else t0 + 30
        ev.append(Event(Kind.STEP_START, t, step=k))
        if k % CUSTOM_EVERY == 500:
            ev.append(Event(Kind.CUSTOM_START, t + 0.02, name="eval"))
            ev.append(Event(Kind.CUSTOM_END, t + 0.07, name="eval"))
    return ev


def write(store_path: str, events: list[Any], writer: int, first_seq: int = 0) -> None:
    from mlgoodput.events import EventBatch
    from mlgoodput.store import open_store

    st = open_store(store_path)
    for i in range(0, len(events), 10_000):  # shipper-sized batches
        st.append("goodput_bench", "bench", EventBatch(writer, first_seq + i, events[i : i + 10_000]))
    st.close()


def child_cold(store_path: str) -> None:
    """Runs in a fresh process so its peak RSS is the query's own."""
    from mlgoodput.accounting import GoodputCalculator

    base_rss = _hwm_mb()
    calc = GoodputCalculator("bench", "goodput_bench", store=store_path)
    t = time.perf_counter()
    r = calc.report()
    cold = time.perf_counter() - t
    peak = _hwm_mb()
    extra = job_events(10_000, first=_steps(r), t0=float(os.environ["BENCH_T0"]))
    write(store_path, extra, writer=2)
    t = time.perf_counter()
    r2 = calc.report()
    warm = time.perf_counter() - t
    t = time.perf_counter()
    calc.report()
    idle = time.perf_counter() - t
    print(
        json.dumps(
            {
                "cold_s": cold,
                "peak_mb": peak,
                "base_mb": base_rss,
                "incremental_s": warm,
                "idle_s": idle,
                "goodput": r.goodput_pct,
                "goodput2": r2.goodput_pct,
                "last": r2.last_step,
            }
        )
    )


def _hwm_mb() -> float:
    """Peak resident memory of this process (VmHWM; unlike ru_maxrss it starts afresh at exec)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _steps(r: Any) -> int:
    return int(r.last_step) + 1


class _MemoryCloudLogger:
    """Stands in for ml-goodput-measurement's Cloud Logging reader/writer, in memory."""

    def __init__(self) -> None:
        self.entries: list[tuple[dt.datetime, int, dict[str, Any]]] = []
        self.job_start_time: dt.datetime | None = None

    def write_cloud_logging_entry(self, entry: dict[str, Any]) -> None:
        ts = dt.datetime.now(dt.UTC)
        for k in (
            "job_start_time",
            "step_start_time",
            "custom_badput_event_start_time",
            "custom_badput_event_end_time",
            "tpu_init_start_time",
            "tpu_init_end_time",
            "training_prep_start_time",
            "training_prep_end_time",
            "job_end_time",
        ):
            if k in entry:
                ts = dt.datetime.fromtimestamp(entry[k], dt.UTC)
                break
        self.entries.append((ts, len(self.entries), entry))

    def flush(self) -> None:
        pass

    def read_cloud_logging_entries(
        self, start_time: Any = None, end_time: Any = None, last_entry_info: Any = None
    ) -> tuple[list[Any], Any]:
        first = 0 if not last_entry_info or last_entry_info[1] is None else last_entry_info[1] + 1
        rows = self.entries[first:]
        if end_time is not None:
            rows = [r for r in rows if r[0] <= end_time]
        for _, _, p in rows:
            if "job_start_time" in p and self.job_start_time is None:
                self.job_start_time = dt.datetime.fromtimestamp(p["job_start_time"], dt.UTC)
        last = (rows[-1][0], rows[-1][1]) if rows else (None, None)
        return [p for _, _, p in rows], last


def seed_run(n_steps: int, t0: float) -> dict[str, float] | None:
    try:
        from ml_goodput_measurement import goodput as seed  # type: ignore[import-untyped]
    except ImportError:
        return None
    from mlgoodput.events import Kind

    log = _MemoryCloudLogger()
    rec = seed.GoodputRecorder("bench", "goodput_bench", True, cloud_logger=log)
    utc = lambda x: dt.datetime.fromtimestamp(x, dt.UTC)  # noqa: E731
    for e in job_events(n_steps, t0=t0):
        k = e.kind
        if k == Kind.JOB_START:
            rec.record_job_start_time(utc(e.time))
        elif k == Kind.ACCEL_INIT_START:
            rec.record_tpu_init_start_time(utc(e.time))
        elif k == Kind.ACCEL_INIT_END:
            rec.record_tpu_init_end_time(utc(e.time))
        elif k == Kind.TRAINING_PREP_START:
            rec.record_training_preparation_start_time(utc(e.time))
        elif k == Kind.TRAINING_PREP_END:
            rec.record_training_preparation_end_time(utc(e.time))
        elif k == Kind.STEP_START:
            rec.record_step_start_time(e.step, utc(e.time))
        elif k == Kind.CUSTOM_START:
            rec.record_custom_badput_event_start_time(utc(e.time), "eval")
        elif k == Kind.CUSTOM_END:
            rec.record_custom_badput_event_end_time(utc(e.time), "eval")
    calc = seed.GoodputCalculator("bench", "goodput_bench", cloud_logger=log)
    t = time.perf_counter()
    g = calc.get_job_goodput(include_badput_breakdown=True)
    cold = time.perf_counter() - t
    for e in job_events(n_steps // 100, first=n_steps, t0=t0):
        if e.kind == Kind.STEP_START:
            rec.record_step_start_time(e.step, utc(e.time))
    t = time.perf_counter()
    calc.get_job_goodput(include_badput_breakdown=True)
    warm = time.perf_counter() - t
    return {"cold_s": cold, "incremental_s": warm, "goodput": g[0]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=1_000_000)
    ap.add_argument("--child", nargs=1, help=argparse.SUPPRESS)
    ap.add_argument("--no-seed", action="store_true", help="skip ml-goodput-measurement")
    args = ap.parse_args()
    if args.child:
        child_cold(args.child[0])
        return 0
    t0 = time.time() - (args.steps + 200 + args.steps // 100) * STEP_S - 60
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "bench.db")
        events = job_events(args.steps, t0=t0)
        t = time.perf_counter()
        write(path, events, writer=1)
        write_s = time.perf_counter() - t
        env = dict(os.environ, BENCH_T0=repr(t0))
        out = subprocess.run(
            [sys.executable, __file__, "--child", path], env=env, capture_output=True, text=True, check=True
        )
        ours = json.loads(out.stdout.strip().splitlines()[-1])
    seed_res = None if args.no_seed else seed_run(args.steps, t0)
    n_custom = args.steps // CUSTOM_EVERY
    print(
        f"\nCalculator on a job of {args.steps:,} steps with {n_custom:,} custom events"
        f" (store written in {write_s:.1f} s)\n"
    )
    rows = [
        ("cold query", f"{ours['cold_s']:.3f} s", "<= 1 s", f"{seed_res['cold_s']:.3f} s" if seed_res else "n/a"),
        ("peak RSS of the querying process", f"{ours['peak_mb']:.0f} MB", "<= 300 MB", ""),
        ("  (interpreter and imports before the query)", f"{ours['base_mb']:.0f} MB", "", ""),
        (
            "query after 1% more steps",
            f"{ours['incremental_s'] * 1000:.1f} ms",
            "<= 50 ms",
            f"{seed_res['incremental_s'] * 1000:.1f} ms" if seed_res else "n/a",
        ),
        ("query with nothing new", f"{ours['idle_s'] * 1000:.1f} ms", "", ""),
        ("goodput %", f"{ours['goodput']:.2f}", "", f"{seed_res['goodput']:.2f}" if seed_res else ""),
    ]
    w = max(len(r[0]) for r in rows)
    print(f"{'':{w}}  {'mlgoodput':>12}  {'target':>10}  {'ml-goodput-measurement 0.2.3':>30}")
    for name, a, tgt, b in rows:
        print(f"{name:{w}}  {a:>12}  {tgt:>10}  {b:>30}")
    if seed_res:
        print(
            f"\ncold query: mlgoodput is {seed_res['cold_s'] / ours['cold_s']:.1f}x faster;"
            f" query after 1% more steps: {seed_res['incremental_s'] / ours['incremental_s']:.1f}x faster"
        )
    elif args.no_seed:
        print("\nml-goodput-measurement skipped (--no-seed)")
    else:
        print("\nml-goodput-measurement is not installed (pip install 'mlgoodput[bench]') - skipped")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
