"""The Cloud Logging store against the fake service on loopback: write, cold read, and the
read after 1% more steps (what an incremental query costs), with requests and entries.

The fake service runs in this process, so times include its work: it filters every
stored entry with a Python predicate for each new query, which is most of the time of the
read after +1% (the store itself handles only the new entries). Against the real service the read quota (60 list calls a minute by default, 1,000
entries a page) dominates a cold read of a big job.

    python bench/bench_cloud_logging.py [--steps N]
"""

from __future__ import annotations

import argparse
import time
import uuid


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=100_000)
    args = ap.parse_args()
    from mlgoodput.events import Event, EventBatch, Kind
    from mlgoodput.store import open_store
    from mlgoodput.testing import FakeLoggingService

    n = args.steps
    t0 = time.time() - n
    events = [Event(Kind.STEP_START, t0 + k, step=k) for k in range(n)]
    more = [Event(Kind.STEP_START, t0 + k, step=k) for k in range(n, n + n // 100)]
    rows: list[tuple[str, float, int, int]] = []
    with FakeLoggingService() as svc:
        url = svc.url("bench-" + uuid.uuid4().hex[:6], settle="0")
        writer = open_store(url)
        w = uuid.uuid4().int >> 65
        t = time.perf_counter()
        writer.append("goodput", "job", EventBatch(w, 0, events))
        rows.append(("write", time.perf_counter() - t, len(svc.write_requests), n))
        reader = open_store(url)
        calls0 = len(svc.list_requests)
        t = time.perf_counter()
        r = reader.read("goodput", "job")
        rows.append(
            ("cold read", time.perf_counter() - t, len(svc.list_requests) - calls0, sum(svc.list_returned[calls0:]))
        )
        assert len(r) == n
        writer.append("goodput", "job", EventBatch(w, n, more))
        calls0 = len(svc.list_requests)
        t = time.perf_counter()
        r2 = reader.read("goodput", "job", r.cursor)
        rows.append(
            (
                "read after +1%",
                time.perf_counter() - t,
                len(svc.list_requests) - calls0,
                sum(svc.list_returned[calls0:]),
            )
        )
        assert len(r2) == len(more)
        view = sum(
            len(c.kinds) + 8 * len(c.times) + 4 * len(c.hosts) + 8 * len(c.steps) + 8 * len(c.values)
            for c in r.parts + r2.parts
        )
    print(f"Cloud Logging store, fake service on 127.0.0.1, {n:,} steps")
    print(f"{'operation':<16} {'seconds':>9} {'requests':>9} {'entries':>9} {'entries/s':>11}")
    for name, secs, reqs, entries in rows:
        print(f"{name:<16} {secs:>9.3f} {reqs:>9} {entries:>9,} {entries / secs if secs else 0:>11,.0f}")
    print(f"the reader's view of the stream: {view / 1e6:.1f} MB ({view / (n + len(more)):.0f} bytes an event)")


if __name__ == "__main__":
    main()
