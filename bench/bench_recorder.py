"""Cost of the recorder's calls on the training thread, with the store written in the background.

Prints a table of per-call latency (median, p99, p99.9 in microseconds) for mlgoodput's
GoodputRecorder journaling into a SQLite store, and, when ml-goodput-measurement 0.2.3 is
installed (`pip install 'mlgoodput[bench]'`), for its GoodputRecorder fed through its
`cloud_logger=` argument with in-memory loggers:
  - "list": entries appended to a list (the floor of its API: no transport at all);
  - "queue": entries sent through a stdlib logger to a queue drained by a background thread;
  - "handler": its real path, a stdlib logger with google-cloud-logging's CloudLoggingHandler,
    whose transport keeps entries in memory instead of sending them (needs google-cloud-logging).
Usage: python bench/bench_recorder.py [--calls N]
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import logging
import queue
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from mlgoodput._journal import Journal
from mlgoodput.goodput import GoodputRecorder
from mlgoodput.store import open_store

Stats = tuple[float, float, float]


def measure(call: Callable[[int], None], n: int) -> Stats:
    """Per-call latency in microseconds: median, p99, p99.9 (the timer's own cost included)."""
    pc = time.perf_counter_ns
    out = [0] * n
    gc.disable()
    try:
        for i in range(n):
            t = pc()
            call(i)
            out[i] = pc() - t
    finally:
        gc.enable()
    out.sort()
    return out[n // 2] / 1e3, out[int(n * 0.99)] / 1e3, out[int(n * 0.999)] / 1e3


def scenarios(rec: Any, n: int) -> dict[str, Stats]:
    """The same calls for any recorder with the seed API."""
    now = dt.datetime.now(dt.UTC)
    res: dict[str, Stats] = {}
    rec.record_job_start_time()
    res["record_step_start_time(step)"] = measure(rec.record_step_start_time, n)
    res["record_step_start_time(step, datetime)"] = measure(lambda i: rec.record_step_start_time(i, now), n // 4)

    def custom(i: int) -> None:
        rec.record_custom_badput_event_start_time(custom_badput_event_type="eval_step")
        rec.record_custom_badput_event_end_time(custom_badput_event_type="eval_step")

    def loading(i: int) -> None:
        rec.record_data_loading_start_time()
        rec.record_data_loading_end_time()

    res["custom badput start+end (2 calls)"] = measure(custom, n // 10)
    res["data loading start+end (2 calls)"] = measure(loading, n // 10)
    res["record_job_start_time()"] = measure(lambda i: rec.record_job_start_time(), n // 10)
    return res


class ListLogger:
    """In-memory stand-in for ml-goodput-measurement's _CloudLogger: keeps entries in a list."""

    def __init__(self, job_name: str) -> None:
        self.job_name = job_name
        self.entries: list[dict[str, Any]] = []

    def write_cloud_logging_entry(self, entry: dict[str, Any] | None) -> None:
        if entry is not None and entry.get("job_name") == self.job_name:
            self.entries.append(entry)

    def flush(self) -> None:
        pass

    def read_cloud_logging_entries(self, *args: Any, **kwargs: Any) -> tuple[list[dict[str, Any]], tuple[None, None]]:
        return list(self.entries), (None, None)


class _QueueHandler(logging.Handler):
    def __init__(self, q: queue.SimpleQueue[Any]) -> None:
        super().__init__()
        self.q = q

    def emit(self, record: logging.LogRecord) -> None:
        self.q.put(record)


class QueueLogger(ListLogger):
    """Like its real _CloudLogger without the network: a stdlib logger whose handler queues
    records for a background thread that batches them."""

    def __init__(self, job_name: str) -> None:
        super().__init__(job_name)
        self.q: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.log = logging.getLogger(f"bench_mgm_{id(self)}")
        self.log.setLevel(logging.INFO)
        self.log.propagate = False
        self.log.addHandler(_QueueHandler(self.q))
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        while True:
            r = self.q.get()
            self.entries.append(r.msg)

    def write_cloud_logging_entry(self, entry: dict[str, Any] | None) -> None:
        if entry is not None and entry.get("job_name") == self.job_name:
            self.log.info(entry)


def handler_logger(job_name: str) -> ListLogger:
    """ml-goodput-measurement's own hand-off (CloudLoggingHandler) with an in-memory transport."""
    import google.cloud.logging
    from google.auth.credentials import AnonymousCredentials
    from google.cloud.logging_v2.handlers import CloudLoggingHandler
    from google.cloud.logging_v2.handlers.transports.base import Transport
    from google.cloud.logging_v2.resource import Resource

    class MemoryTransport(Transport):  # type: ignore[misc]
        def __init__(self, client: Any, name: str, resource: Any = None, **kwargs: Any) -> None:
            self.sent: list[Any] = []

        def send(self, record: Any, message: Any, **kwargs: Any) -> None:
            self.sent.append(message)

    client = google.cloud.logging.Client(project="bench", credentials=AnonymousCredentials(), _use_grpc=False)
    handler = CloudLoggingHandler(
        client=client, name="bench", transport=MemoryTransport, resource=Resource(type="global", labels={})
    )
    out = ListLogger(job_name)
    log = logging.getLogger(f"bench_mgm_handler_{id(out)}")
    log.setLevel(logging.INFO)
    log.propagate = False
    log.addHandler(handler)

    def write(entry: dict[str, Any] | None) -> None:
        if entry is not None and entry.get("job_name") == job_name:
            log.info(entry)

    out.write_cloud_logging_entry = write  # type: ignore[method-assign]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=200_000)
    args = ap.parse_args()
    n = args.calls
    tmp = Path(tempfile.mkdtemp(prefix="mlgoodput-bench-"))
    db = str(tmp / "bench.db")

    rec = GoodputRecorder("bench", "goodput_bench", True, store=db, process_index=0)
    ours = scenarios(rec, n)
    off = GoodputRecorder("bench", "goodput_bench", False, store=db)
    ours["record_step_start_time, logging_enabled=False"] = measure(off.record_step_start_time, n)
    journal = Journal.for_stream(db, "goodput_bench", "bench", 0)
    pending = journal.pending()
    t = time.perf_counter()
    assert rec.flush(300), "the journal could not ship to SQLite"
    drain_s = time.perf_counter() - t
    stats = journal.stats()
    journal.close()
    rec.close()
    stored = len(open_store(db).read("goodput_bench", "bench").columns)

    theirs: dict[str, dict[str, Stats]] = {}
    try:
        from ml_goodput_measurement import goodput as mgm  # type: ignore[import-not-found]
    except ImportError:
        mgm = None
    if mgm is not None:
        logging.getLogger().setLevel(logging.WARNING)
        makers: list[tuple[str, Callable[[str], ListLogger]]] = [
            ("list", ListLogger),
            ("queue", QueueLogger),
            ("handler", handler_logger),
        ]
        for label, make in makers:
            try:
                cloud_logger = make("bench")
            except ImportError:
                continue
            r = mgm.GoodputRecorder("bench", "goodput_bench", True, cloud_logger=cloud_logger)
            theirs[label] = scenarios(r, n // 4 if label == "handler" else n)

    print(f"Recorder call latency, {n} step calls (µs; timer overhead included; Python {sys.version.split()[0]})")
    print("mlgoodput: journal -> background shipper -> SQLite (WAL) in", tmp)
    head = f"{'call':48} {'median':>8} {'p99':>8} {'p99.9':>8}"
    if theirs:
        for label in theirs:
            head += f" | {'mgm-' + label:>13} {'p99':>7} {'ratio':>6}"
    print(head)
    print("-" * len(head))
    for name, (med, p99, p999) in ours.items():
        line = f"{name:48} {med:8.2f} {p99:8.2f} {p999:8.2f}"
        for res in theirs.values():
            if name in res:
                tm, tp, _ = res[name]
                line += f" | {tm:13.2f} {tp:7.2f} {tm / med:5.1f}x"
            elif theirs:
                line += f" | {'-':>13} {'-':>7} {'-':>6}"
        print(line)
    print("-" * len(head))
    print(
        f"events journaled: {stats['appended']}, stored in SQLite: {stored}; "
        f"{pending} were still pending when timing ended and shipped in {drain_s:.2f} s "
        f"({pending / drain_s if drain_s > 0 else float('inf'):,.0f} events/s); shipper failures: {stats['failures']}"
    )
    if not theirs:
        print("ml-goodput-measurement not installed: pip install 'mlgoodput[bench]' to compare")
    else:
        print("ratio = ml-goodput-measurement median / mlgoodput median (higher is better for mlgoodput)")
    med = ours["record_step_start_time(step)"]
    target = med[0] <= 2.0 and med[1] <= 20.0
    print(f"target record_step_start_time median <= 2 µs and p99 <= 20 µs: {'met' if target else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
