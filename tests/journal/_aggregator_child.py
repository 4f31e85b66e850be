"""A process that journals with the node shipper on (tests/journal/test_aggregator.py).

argv: store job host n mode [stop_file]. Modes: "flush" appends n steps, flushes, prints one
JSON line (whether the flush held, its node shipper's stats) and exits; "hold" appends n
steps, prints "ready" and waits to be killed; "run" appends n steps, then one step every
few milliseconds until `stop_file` exists, then flushes and prints the JSON line with the
number of steps appended."""

from __future__ import annotations

import faulthandler
import json
import os
import sys
import time

from mlgoodput import _aggregator, _env
from mlgoodput._journal import Journal
from mlgoodput.events import Kind

FLUSH_S = 300.0


def main() -> None:
    store, job, host, n, mode = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    os.environ[_env.NODE_SHIPPER] = "1"
    j = Journal.for_stream(store, "ns", job, host)
    for i in range(n):
        j.append(Kind.STEP_START, 1000.0 + i, i)
    count = n
    if mode == "hold":
        print("ready", flush=True)
        time.sleep(600)
        return
    if mode == "run":
        print("running", flush=True)
        stop = sys.argv[6]
        while not os.path.exists(stop):
            j.append(Kind.STEP_START, 1000.0 + count, count)
            count += 1
            time.sleep(0.002)
    # long enough to ride out a stall of this machine's disk: on the shared VMs the kernel has
    # logged its I/O workqueues stuck for 73 s, the PostgreSQL server with them, and the store
    # call deadline (30 s, then a retry) only ends the wait, it cannot make the server answer
    ok = j.flush(FLUSH_S)
    if not ok:  # where each thread is, for the test's failure report (its stderr is captured)
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
    stats = _aggregator.node_shipper_stats(j.url)
    print(json.dumps({"flushed": ok, "count": count, "pid": os.getpid(), "node": stats}), flush=True)
    j.close(30)


if __name__ == "__main__":
    main()
