"""Back-to-back recorder calls with the shipper running (issue 12): the mean cost of a call
including what shipping takes from the recording process, and the backlog it leaves.

One process calls `record_step_start_time` N times in a row (no timer around each call: the
mean is the loop's wall time / N, so the shipping thread's share of the interpreter counts),
then we watch the journal drain into SQLite. Targets: mean under 1.5 µs per call; no backlog
5 s after 10 million calls.

    PYTHONPATH=src python bench/bench_shipping.py [--calls 10000000]
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

if not os.environ.get("PYTHONPATH"):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from mlgoodput._journal import Journal
from mlgoodput.goodput import GoodputRecorder
from mlgoodput.store import open_store


def cpu_s(who: int = resource.RUSAGE_SELF) -> float:
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


def helper_process() -> tuple[float, float]:
    """The other design (issue 12): a per-host helper process that would tail the journals
    and ship them. Its price: the time until it is ready to ship (Python, mlgoodput's
    journal and SQLite store imported) and its resident memory then, in MiB."""
    import subprocess

    code = (
        "import sys, mlgoodput._journal, mlgoodput.store._sqlite;"
        "sys.stdout.write('ready\\n'); sys.stdout.flush();"
        "print(open('/proc/self/status').read().split('VmRSS:')[1].split()[0], flush=True); sys.stdin.read()"
    )
    t = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stdin is not None
    p.stdout.readline()
    ready = time.perf_counter() - t
    rss_kib = float(p.stdout.readline())
    p.stdin.close()
    p.wait()
    return ready, rss_kib / 1024


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=10_000_000)
    ap.add_argument(
        "--events",
        choices=["steps", "named", "attrs"],
        default="steps",
        help="steps: record_step_start_time; named / attrs: journal appends of a metric with"
        " a name / with a name and attrs (what metrics.record journals)",
    )
    args = ap.parse_args()
    n = args.calls
    tmp = Path(tempfile.mkdtemp(prefix="mlgoodput-bench-"))
    db = str(tmp / "bench.db")
    rec = GoodputRecorder("bench", "goodput_bench", True, store=db, process_index=0)
    rec.record_job_start_time()
    journal = Journal.for_stream(db, "goodput_bench", "bench", 0)
    step: Callable[[int], None] = rec.record_step_start_time
    if args.events != "steps":
        from mlgoodput.events import Kind

        app, metric, now = journal.append, Kind.METRIC, time.time
        attrs = {"unit": "nats"} if args.events == "attrs" else None

        def record_metric(i: int, /) -> None:
            app(metric, now(), i, 0.5, "loss", attrs)

        step = record_metric
    for i in range(1000):  # warm: the shipper thread is running
        step(i)
    rec.flush(60)
    shipped0 = journal.shipped
    c0, t0, w0 = cpu_s(), cpu_s(resource.RUSAGE_THREAD), time.perf_counter()
    for i in range(1000, 1000 + n):
        step(i)
    loop_s = time.perf_counter() - w0
    loop_thread = cpu_s(resource.RUSAGE_THREAD) - t0
    loop_cpu = cpu_s() - c0
    pending = journal.pending()
    shipped_in_loop = journal.shipped - shipped0
    t = time.perf_counter()
    c1 = cpu_s()
    while journal.pending() and time.perf_counter() - t < 5.0:
        time.sleep(0.01)
    after5 = journal.pending()
    ok = rec.flush(600)
    drain_s = time.perf_counter() - t
    drain_cpu = cpu_s() - c1
    rec.close()
    stored = sum(j.events for j in open_store(db).jobs() if j.job == "bench")
    starts = [helper_process() for _ in range(3)]
    what = "record_step_start_time" if args.events == "steps" else f"journal appends ({args.events} metric)"
    print(
        f"\nBack-to-back recorder calls: {n:,} {what} calls, journal -> SQLite, "
        f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}\n"
    )
    rows = [
        ("mean per call, shipping included (loop wall / N)", f"{loop_s / n * 1e6:.2f} µs", "< 1.5 µs"),
        ("process CPU per call during the loop", f"{loop_cpu / n * 1e6:.2f} µs", ""),
        ("  of which the recording thread's", f"{loop_thread / n * 1e6:.2f} µs", ""),
        (
            "  of which shipping (other threads), per event shipped",
            f"{(loop_cpu - loop_thread) / max(1, shipped_in_loop) * 1e6:.2f} µs",
            "",
        ),
        ("events shipped while the loop ran", f"{shipped_in_loop:,}", ""),
        ("backlog when the loop ended", f"{pending:,}", ""),
        ("backlog 5 s later", f"{after5:,}", "0"),
        ("time to ship the whole backlog", f"{drain_s:.2f} s", ""),
        ("process CPU per event shipped after the loop", f"{drain_cpu / max(1, pending) * 1e6:.2f} µs", ""),
        ("stored == recorded", f"{stored == n + 1001 and ok}", "True"),
        ("a helper process instead: ready after (min of 3)", f"{min(r for r, _ in starts) * 1e3:.0f} ms", ""),
        ("a helper process instead: resident memory", f"{max(m for _, m in starts):.0f} MiB", ""),
    ]
    w = max(len(r[0]) for r in rows)
    print(f"| {'':{w}} | {'measured':>12} | {'target':>9} |")
    print(f"|{'-' * (w + 2)}|{'-' * 14}|{'-' * 11}|")
    for name, v, tgt in rows:
        print(f"| {name:{w}} | {v:>12} | {tgt:>9} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
