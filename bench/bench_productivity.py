"""What the productivity figures add to a report query, on a long job with restarts.

Measures the productivity part alone (gathering the facts from the timeline and computing
the figures, `accounting._facts` + `accounting._productivity`), on top of an already
computed report: cold (first query), with nothing new among the non-step events (only
steps arrived: the common case), and the whole `GoodputCalculator.report()` for scale.

    python bench/bench_productivity.py [--steps N] [--restarts R]
"""

from __future__ import annotations

import argparse
import statistics
import time


def job(n_steps: int, restarts: int) -> list[object]:
    from mlgoodput.events import Event, Kind

    t0 = 1_700_000_000.0
    ev: list[object] = [
        Event(Kind.JOB_SUBMIT, t0, value=t0 - 60),
        Event(Kind.STEP_FLOPS, t0, value=2e11),
        Event(Kind.PEAK_FLOPS, t0, value=4e12, name="configured"),
    ]
    per = n_steps // (restarts + 1)
    t, step = t0, 0
    for a in range(restarts + 1):
        ev.append(Event(Kind.JOB_START, t))
        t += 5.0
        if a:
            ev.append(Event(Kind.CKPT_RESTORE, t, step=step - per // 10, value=2.0))
            step -= per // 10  # redo a tenth of the previous attempt
            t += 2.0
        for _ in range(per):
            ev.append(Event(Kind.STEP_START, t, step=step))
            if step % 1000 == 999:
                ev.append(Event(Kind.CKPT_SAVE, t + 0.05, step=step, value=0.5))
                t += 0.5
            t += 0.1
            step += 1
        t += 30.0  # crash, then the scheduler restarts it
    ev.append(Event(Kind.JOB_END, t - 30.0 + 0.1))  # the last attempt finishes
    return ev


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=1_000_000)
    ap.add_argument("--restarts", type=int, default=100)
    a = ap.parse_args()
    from mlgoodput.accounting import GoodputCalculator
    from mlgoodput.accounting._facts import FactsCache, facts_from_timeline
    from mlgoodput.accounting._productivity import productivity
    from mlgoodput.events import EventBatch
    from mlgoodput.store import MemoryStore

    events = job(a.steps, a.restarts)
    st = MemoryStore()
    st.append("g", "j", EventBatch(1, 0, events))  # type: ignore[arg-type]
    calc = GoodputCalculator("j", "g", store=st)
    t = time.perf_counter()
    r = calc.report()
    whole = time.perf_counter() - t
    tl = calc._engine.timeline
    q = tl.max_time
    cache = FactsCache()
    t = time.perf_counter()
    p = productivity(facts_from_timeline(tl, q, cache), r)
    cold = time.perf_counter() - t
    warm = []
    for _ in range(20):
        t = time.perf_counter()
        productivity(facts_from_timeline(tl, q, cache), r)
        warm.append(time.perf_counter() - t)
    again = []
    for _ in range(5):
        t = time.perf_counter()
        calc.report()
        again.append(time.perf_counter() - t)
    print(f"\nProductivity figures on a job of {a.steps:,} steps, {a.restarts} restarts, {len(events):,} events\n")
    print(f"{'':48}{'time':>12}")
    print(f"{'report() cold, productivity included':48}{whole:>10.3f} s")
    print(f"{'productivity part, cold':48}{1000 * cold:>9.2f} ms")
    print(f"{'productivity part, no new non-step events':48}{1000 * statistics.median(warm):>9.3f} ms")
    print(f"{'report() with nothing new (median of 5)':48}{1000 * statistics.median(again):>9.2f} ms")
    print(
        f"\nMPG {p.ml_productivity_goodput:.4f}  MFU {p.mfu:.4f}  ETTR {p.ettr:.4f}  "
        f"interruptions {p.interruptions}  MTBI {p.mtbi_s:.1f} s  MTTR {p.mttr_s:.1f} s"
    )


if __name__ == "__main__":
    main()
