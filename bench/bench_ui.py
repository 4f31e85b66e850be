"""`mlgoodput ui` on long jobs: time to first byte and to rendered charts in headless Chromium.

For jobs of 1e4, 1e6 and 1e7 steps (the largest also with 256 hosts: the lead host records
every step, each of the other 255 records its job start and its own steps for the first
STEPS_OTHER_HOSTS steps), events go straight into a SQLite store in bulk (no recorder). For each
job: the cold load (the server's first read of the job: the calculator's cold query plus the
page's series), then the page opened in the browser with the server warm: the page's time to
first byte, the time until the timeline and step chart are drawn, and the bytes of JSON the
page fetched. Each job is opened twice, by two server starts on the same store: first with no
saved accounting state (the job's first ever open), then again (what a user who reopens the UI
sees: the accounting's state and the UI's block summaries (ui/_saved.py) that the first server
saved are there). The first open is measured in the browser, from navigation to the charts
drawn, on the cold server. Target (issue 14): the 10-million-step,
256-host job opens in under 2 s.

    python bench/bench_ui.py [--sizes 10000,1000000,10000000] [--hosts 256]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

STEP_S = 0.1
STEPS_OTHER_HOSTS = 2_000
CHUNK = 200_000


def build(path: str, n_steps: int, hosts: int) -> tuple[int, float]:
    """Write the job; returns (events, seconds)."""
    from mlgoodput.events import Event, EventBatch, Kind
    from mlgoodput.store import SQLiteStore

    t = time.perf_counter()
    st = SQLiteStore(path)
    t0 = time.time() - n_steps * STEP_S - 3600
    head = [
        Event(Kind.JOB_START, t0),
        Event(Kind.ACCEL_INIT_START, t0 + 1),
        Event(Kind.ACCEL_INIT_END, t0 + 11),
        Event(Kind.TRAINING_PREP_START, t0 + 11),
        Event(Kind.TRAINING_PREP_END, t0 + 20),
    ]
    st.append("goodput_big", "big", EventBatch(1, 0, head))
    seq = len(head)
    base = t0 + 30
    events = len(head)
    for lo in range(0, n_steps, CHUNK):
        hi = min(n_steps, lo + CHUNK)
        batch = [Event(Kind.STEP_START, base + k * STEP_S + (5.0 if k else 0.0), 0, k) for k in range(lo, hi)]
        for k in range(lo, hi):  # a checkpoint every 10,000 steps
            if k % 10_000 == 9_999:
                batch.append(Event(Kind.CKPT_SAVE, base + k * STEP_S + 5.05, 0, k, 2.0))
        batch.sort(key=lambda e: e.time)
        st.append("goodput_big", "big", EventBatch(1, seq, batch))
        seq += len(batch)
        events += len(batch)
    for h in range(1, hosts):
        ev = [Event(Kind.JOB_START, t0 + 0.01 * h, h)]
        slow = 1.0 + (0.3 if h == 7 else 0.0)  # host 7 straggles
        ev += [
            Event(Kind.STEP_START, base + k * STEP_S * slow + 5.0 + 0.001 * h, h, k)
            for k in range(min(n_steps, STEPS_OTHER_HOSTS))
        ]
        st.append("goodput_big", "big", EventBatch(1 + h, 0, ev))
        events += len(ev)
    end = [Event(Kind.JOB_END, base + n_steps * STEP_S + 60)]
    st.append("goodput_big", "big", EventBatch(1, seq, end))
    st.close()
    return events + 1, time.perf_counter() - t


def has_state(path: str) -> bool:
    """Whether the store holds a saved accounting state for the job, and the UI's saved series."""
    from mlgoodput.store import SQLiteStore
    from mlgoodput.ui import _saved

    st = SQLiteStore(path)
    try:
        got = st.load_state("goodput_big", "big")
        return (
            got is not None and next(iter(got), None) is not None and _saved.load(st, "goodput_big", "big") is not None
        )
    finally:
        st.close()


def measure(path: str) -> dict[str, float]:
    from mlgoodput.store import SQLiteStore
    from mlgoodput.ui import UIServer
    from mlgoodput.ui._browser import Browser

    st = SQLiteStore(path)
    srv = UIServer(st, "127.0.0.1", 0)
    srv.start()
    base = srv.url.rstrip("/")
    out: dict[str, float] = {}
    try:
        b = Browser(1440, 1000)
        try:
            b.driver.get("about:blank")  # the browser itself warm (first launch is not the page's cost)
            # the first open: the job page on the cold server, from navigation to charts drawn
            b.driver.get(base + "/jobs/big")
            deadline = time.monotonic() + 600
            while time.monotonic() < deadline and not b.driver.execute_script("return window.__jobReadyAt"):
                time.sleep(0.02)
            first, cold = b.driver.execute_script(
                "const api = performance.getEntriesByType('resource').find((e) => e.name.endsWith('/api/jobs/big'));"
                "return [window.__jobReadyAt, api ? api.responseEnd - api.startTime : null]"
            )
            out["first_ms"] = first
            out["cold_s"] = (cold or 0.0) / 1000
            b.driver.get(base + "/")
            runs = []
            for _ in range(3):
                b.driver.get(base + "/jobs/big")
                deadline = time.monotonic() + 120
                while time.monotonic() < deadline and not b.driver.execute_script("return window.__jobReadyAt"):
                    time.sleep(0.02)
                nav = b.driver.execute_script(
                    "const n = performance.getEntriesByType('navigation')[0];"
                    "const api = performance.getEntriesByType('resource').filter((e) => e.name.includes('/api/'));"
                    "return [n.responseStart - n.startTime, window.__jobReadyAt,"
                    " api.reduce((s, e) => s + (e.transferSize || e.encodedBodySize || 0), 0)]"
                )
                runs.append(nav)
            runs.sort(key=lambda r: r[1])
            ttfb, ready, size = runs[len(runs) // 2]
            out.update(ttfb_ms=ttfb, ready_ms=ready, json_kb=size / 1024)
        finally:
            b.close()
        srv.api.keep_all()  # the UI's series saved now (the server saves them in the background)
    finally:
        srv.stop()
        st.close()
    return out


def measure_apart(path: str) -> dict[str, float]:
    """`measure` in a process of its own: a server started afresh, with no thread of an earlier
    one still working beside it."""
    out = subprocess.run([sys.executable, __file__, "--measure", path], check=True, capture_output=True, text=True)
    got: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return got


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] == "--measure":
        print(json.dumps(measure(sys.argv[2])))
        return 0
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10000,1000000,10000000")
    ap.add_argument("--hosts", type=int, default=256, help="hosts of the largest job")
    a = ap.parse_args()
    from mlgoodput.accounting._calculator import SNAPSHOT_EVERY
    from mlgoodput.ui._browser import browser_missing
    from mlgoodput.ui._saved import MIN_STEPS

    why = browser_missing()
    if why:
        print(f"bench_ui: {why}", file=sys.stderr)
        return 2
    sizes = [int(x) for x in a.sizes.split(",")]
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for i, n in enumerate(sizes):
            hosts = a.hosts if i == len(sizes) - 1 else 1
            path = os.path.join(d, f"job{n}.db")
            events, gen_s = build(path, n, hosts)
            for state in ("absent", "present"):
                before = has_state(path)
                m = measure_apart(path)
                expect = state == "present" and events >= SNAPSHOT_EVERY and n >= MIN_STEPS  # a smaller job keeps none
                rows.append(
                    (
                        n,
                        hosts,
                        events,
                        gen_s,
                        f"{'none' if state == 'present' and not before else state}{'' if before == expect else '?'}",
                        m,
                    )
                )
                print(
                    f"  {n:,} steps, {hosts} hosts, state {state} (found: {before}): {m}", file=sys.stderr, flush=True
                )
            os.remove(path)  # the next job's store is built in its place: one big file at a time
    print(
        f"{'steps':>12} {'hosts':>6} {'events':>12} {'build s':>8} {'saved state':>12} {'cold load s':>12}"
        f" {'first open ms':>14} {'page TTFB ms':>13} {'charts drawn ms':>16} {'JSON KB':>8}"
    )
    for n, hosts, events, gen_s, state, m in rows:
        print(
            f"{n:>12,} {hosts:>6} {events:>12,} {gen_s:>8.1f} {state:>12} {m['cold_s']:>12.2f}"
            f" {m['first_ms']:>14.0f} {m['ttfb_ms']:>13.1f} {m['ready_ms']:>16.0f} {m['json_kb']:>8.0f}"
        )
    print(
        "\ncold load: the server's answer to the job page's first request for the job (a fresh server"
        "\nprocess reads the job: from the start when no saved state is there, else the saved state and"
        "\nwhat is newer); first open: that page in headless Chromium, from navigation to charts drawn"
        "\n(target: under 2000 ms); then the page opened again with the server warm (median of 3)."
        "\nsaved state: absent = the job's first ever open, present = a second server start on the same store,"
        "\nnone = a second start that found no state (a job under SNAPSHOT_EVERY events, or under"
        "\nui._saved.MIN_STEPS steps, keeps none: reading it is cheap); a '?' marks a state found where none was expected or the reverse."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
