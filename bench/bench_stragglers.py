"""CPU of the monitor's straggler analysis per upload (issue 12: 256 hosts, < 20 ms per upload).

Ranks step together into a SQLite store; before each upload every rank adds `--per` steps.
A GoodputCalculator reads them and hands its pages to a StragglerAnalysis (`feed`) that
reads the calculator's per-host step gaps instead of keeping its own (`share_gaps`), as the
monitor's uploader does. We time, in CPU of this process, the analysis's part of each
upload: taking the fed pages, and the report. The calculator's own work is not counted.

    PYTHONPATH=src python bench/bench_stragglers.py [--hosts 256] [--per 100] [--rounds 30]
"""

from __future__ import annotations

import argparse
import gc
import shutil
import statistics
import tempfile
import time

from mlgoodput._monitoring._source import _host_steps_of
from mlgoodput.accounting import GoodputCalculator
from mlgoodput.events import Event, EventBatch, Kind
from mlgoodput.store import Columns, open_store
from mlgoodput.torch import StragglerAnalysis


def run(hosts: int, per: int, rounds: int) -> dict[str, float]:
    d = tempfile.mkdtemp(prefix="bench-stragglers-")
    store = f"sqlite://{d}/s.db"
    try:
        st = open_store(store)
        st.append("goodput", "j", EventBatch(1, 0, [Event(Kind.JOB_START, 990.0, h) for h in range(hosts)]))
        seq = dict.fromkeys(range(hosts), 0)
        at = {"step": 0, "t": 1000.0}

        def steps() -> None:
            step, t = at["step"], at["t"]
            for h in range(hosts):
                jitter = [1e-4 * h + 1e-5 * ((k * 7 + h) % 3) for k in range(per)]
                evs = [Event(Kind.STEP_START, t + (k + 1) * 0.1 + jitter[k], h, step=step + k) for k in range(per)]
                st.append("goodput", "j", EventBatch(100 + h, seq[h], evs))
                seq[h] += per
            at["step"], at["t"] = step + per, t + per * 0.1

        for _ in range(5):
            steps()
        calc = GoodputCalculator("j", "goodput", store=store, snapshot=False)
        calc.report()
        lag = StragglerAnalysis("j", "goodput", store=store)
        lag.share_gaps(_host_steps_of(calc))
        lag.catch_up(calc._cursor)
        lag.report(read=False)
        fed = [0.0]

        def feed(begin: int, end: int, c: Columns) -> None:
            t0 = time.process_time()
            lag.feed(begin, end, c)
            fed[0] += time.process_time() - t0

        calc._part_hooks.append(feed)
        gc.collect()
        gc.freeze()
        feeds, reports = [], []
        for _ in range(rounds):
            steps()
            fed[0] = 0.0
            calc.report()
            t0 = time.process_time()
            lag.report(read=False)
            reports.append(time.process_time() - t0)
            feeds.append(fed[0])
        gc.unfreeze()
        live = lag._live
        st.close()
        return {
            "feed_ms": 1000 * statistics.median(feeds),
            "report_ms": 1000 * statistics.median(reports),
            "total_ms": 1000 * statistics.median([a + b for a, b in zip(feeds, reports, strict=True)]),
            "shared": len(live.shared) if live is not None else 0,
        }
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=256)
    ap.add_argument("--per", type=int, default=100, help="new steps per host per upload")
    ap.add_argument("--rounds", type=int, default=30)
    args, _ = ap.parse_known_args()
    r = run(args.hosts, args.per, args.rounds)
    print(
        f"\nstraggler analysis per upload, {args.hosts} hosts x {args.per} new steps, median of {args.rounds}"
        " (CPU of this process; feed includes the timer's own cost)\n"
    )
    print("| feed (all pages) | report | feed + report | ranks sharing the calculator's gaps |")
    print("|------------------|--------|---------------|-------------------------------------|")
    print(f"| {r['feed_ms']:>13.2f} ms | {r['report_ms']:>3.2f} ms | {r['total_ms']:>10.2f} ms | {r['shared']:>35} |")


if __name__ == "__main__":
    main()
