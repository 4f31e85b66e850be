"""The first report after a crash, when a dead process's pages reach the store out of order.

Two measurements (issue 28):

1. The C, A, B case: a 900,001-event job (a job start and 900,000 steps) stored as three
   writers' chunks, the last third first, then the first, then the middle; the time of the
   first `get_job_goodput()` of a new calculator.
2. Crash trials: a child process records the job with the store's write lock held (so nothing
   ships), is killed with SIGKILL with its journal in several segments, and the lock is let
   go; the time of the first report (which recovers the journal and reads the job), per trial.

Target: under 2 s every time.

    PYTHONPATH=src python bench/bench_recovery.py [--trials 40] [--steps 900000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

if not os.environ.get("PYTHONPATH"):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the fault trials of tests/faults

from tests.faults import trials as T

from mlgoodput import goodput
from mlgoodput.events import Event, EventBatch, Kind
from mlgoodput.store import open_store

T0 = 1_700_000_000.0


def first_report_s(db: str) -> tuple[float, int]:
    t = time.perf_counter()
    calc = goodput.GoodputCalculator(job_name="job", logger_name="goodput", store=db)
    _, _, last = calc.get_job_goodput()
    return time.perf_counter() - t, last


def cab(tmp: Path, steps: int) -> float:
    db = str(tmp / "cab.db")
    st = open_store(db)
    evs = [Event(Kind.JOB_START, T0)] + [Event(Kind.STEP_START, T0 + 1 + i, 0, i) for i in range(steps)]
    k = len(evs) // 3
    for w, part in ((3, evs[2 * k :]), (1, evs[:k]), (2, evs[k : 2 * k])):
        st.append("goodput", "job", EventBatch(w, 0, part))
    st.close()
    s, last = first_report_s(db)
    assert last == steps - 1, last
    return s


def crash_trial(tmp: Path, i: int, steps: int) -> tuple[float, int]:
    """One crash trial of tests/faults (a recording process killed before anything shipped):
    (seconds of the first report, segments it left)."""
    d = tmp / f"crash{i}"
    d.mkdir()
    t = T.first_report_after_crash(d, steps)
    assert t.stored == t.recorded, t
    return t.seconds, int(t.note.split()[0])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=40)
    ap.add_argument("--steps", type=int, default=900_000)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="mlgoodput-recovery-"))
    os.environ["XDG_DATA_HOME"] = str(tmp / "xdg")
    print(f"C, A, B order, {args.steps + 1:,} events: first report {cab(tmp, args.steps):.2f} s")
    times, segs = [], []
    for i in range(args.trials):
        s, n = crash_trial(tmp, i, args.steps)
        times.append(s)
        segs.append(n)
    print(f"\n{'crash trials':<14} {'segments':>9} {'first report s':>15}")
    print(f"{'min':<14} {min(segs):>9} {min(times):>15.2f}")
    print(f"{'median':<14} {statistics.median(segs):>9.0f} {statistics.median(times):>15.2f}")
    print(f"{'max':<14} {max(segs):>9} {max(times):>15.2f}")
    over = sum(t >= 2.0 for t in times)
    print(f"\n{len(times)} trials, {over} at 2 s or more (target: none)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
