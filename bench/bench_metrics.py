"""Cost of `metrics.record` on the training thread (target: at most 2 µs median per call).

Prints a table: per-call latency median and p99, measured one call at a time with
perf_counter_ns (timer overhead subtracted), and the mean per call over batches of 1000.
Run: PYTHONPATH=src python bench/bench_metrics.py [--calls N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

from mlgoodput.diagnostics import machinelearning_run, metric_types, metrics
from mlgoodput.testing import FileExporter


def measure(fn: Callable[[int], None], calls: int) -> tuple[float, float, float]:
    """(median µs, p99 µs, batch mean µs) of fn(i), timer overhead removed."""
    pc = time.perf_counter_ns
    empty = []
    for _ in range(10_000):
        a = pc()
        empty.append(pc() - a)
    overhead = statistics.median(empty)
    lat = []
    for i in range(calls):
        a = pc()
        fn(i)
        lat.append(pc() - a - overhead)
    lat.sort()
    batch = []
    for b in range(max(1, calls // 1000)):
        a = pc()
        for i in range(b * 1000, b * 1000 + 1000):
            fn(i)
        batch.append((pc() - a) / 1000)
    return lat[len(lat) // 2] / 1000, lat[int(len(lat) * 0.99)] / 1000, statistics.median(batch) / 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=200_000)
    n = ap.parse_known_args()[0].calls  # run_all.py may pass flags meant for other benches
    tmp = tempfile.mkdtemp(prefix="mlgoodput-bench-")
    os.environ["XDG_DATA_HOME"] = tmp
    store = os.path.join(tmp, "bench.db")
    loss = metric_types.MetricType.LOSS
    rows = []

    run = machinelearning_run(name="bench", store=store, gcs_path=tmp)
    rec = metrics.record
    rows.append(("MetricType.LOSS, float, step", *measure(lambda i: rec(loss, 0.5, step=i), n)))
    rows.append(("user name, int, time axis", *measure(lambda i: rec("tokens", i), n)))
    rows.append(("list of 4 floats (averaged)", *measure(lambda i: rec(loss, [0.1, 0.2, 0.3, 0.4], step=i), n // 4)))
    try:
        import numpy as np

        v = np.float32(0.5)
        rows.append(("numpy float32, step", *measure(lambda i: rec(loss, v, step=i), n // 4)))
    except ImportError:
        pass
    t0 = time.perf_counter()
    run.end(timeout_s=120)
    drain = time.perf_counter() - t0
    run = machinelearning_run(
        name="bench-exp", store=store, gcs_path=tmp, exporters=[FileExporter(os.path.join(tmp, "exp.jsonl"))]
    )
    rows.append(("with an exporter process", *measure(lambda i: rec(loss, 0.5, step=i), n)))
    run.end(timeout_s=120)

    print(f"metrics.record, {n} calls per case (Python {sys.version.split()[0]}, {os.cpu_count()} CPUs)")
    print(f"{'case':<34} {'median µs':>10} {'p99 µs':>9} {'batch mean µs':>14}")
    for name, med, p99, mean in rows:
        print(f"{name:<34} {med:>10.2f} {p99:>9.2f} {mean:>14.2f}")
    print(f"target: median <= 2.00 µs; end() drained the journal into SQLite in {drain:.2f} s")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
