"""Cost of the completion watcher on the training thread (docs/jax.md, "Asynchronous dispatch").

Times, per step, `record_step_start_time` alone, and `record_step_start_time` + `watch` with a
CompletionWatcher, around a jitted JAX step that is already done (so the figures are the
watcher's own cost, not the device's), and the goodput a loop that reads its loss every tenth
step reports with and without the watcher. Prints a table.
Usage: python bench/bench_completion.py [--steps N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


def _per_step(n: int, watch: bool) -> list[float]:
    import jax.numpy as jnp

    from mlgoodput.goodput import GoodputRecorder
    from mlgoodput.jax import CompletionWatcher

    job = f"bench-{watch}-{time.monotonic_ns()}"
    rec = GoodputRecorder(job, f"goodput_{job}", True, store=f"memory://{job}", process_index=0)
    w = CompletionWatcher(rec) if watch else None
    out = jnp.ones(())
    out.block_until_ready()
    rec.record_job_start_time()
    laps = []
    clock = time.perf_counter
    for i in range(n):
        t = clock()
        rec.record_step_start_time(i)
        if w is not None:
            w.watch(i, out)
        laps.append(clock() - t)
    rec.record_job_end_time()
    rec.close()
    return laps


def _goodput(watch: bool, steps: int) -> float:
    import jax
    import jax.numpy as jnp

    from mlgoodput.goodput import GoodputCalculator, GoodputRecorder
    from mlgoodput.jax import CompletionWatcher

    @jax.jit
    def step(x: jax.Array) -> tuple[jax.Array, jax.Array]:
        for _ in range(6):
            x = jnp.tanh(x @ x)
        return x, jnp.mean(x)

    job = f"gp-{watch}-{time.monotonic_ns()}"
    rec = GoodputRecorder(job, f"goodput_{job}", True, store=f"memory://{job}", process_index=0)
    w = CompletionWatcher(rec) if watch else None
    x = jnp.full((512, 512), 0.01)
    jax.block_until_ready(step(x))
    rec.record_job_start_time()
    for i in range(steps):
        rec.record_step_start_time(i)
        x, loss = step(x)
        if w is not None:
            w.watch(i, loss)
        if i % 10 == 9:
            float(loss)
    float(loss)
    rec.record_job_end_time()
    rec.close()
    return GoodputCalculator(job, f"goodput_{job}", store=f"memory://{job}").report().goodput_pct


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=20_000)
    a = ap.parse_args()
    print(f"per-step cost on the training thread, {a.steps} steps (µs)")
    print(f"{'':42} {'median':>8} {'p99':>8} {'p99.9':>8}")
    for label, watch in (("record_step_start_time", False), ("record_step_start_time + watch", True)):
        laps = sorted(_per_step(a.steps, watch))
        q = statistics.quantiles(laps, n=1000)
        print(f"{label:42} {statistics.median(laps) * 1e6:8.2f} {q[989] * 1e6:8.2f} {q[998] * 1e6:8.2f}")
    print("\nreported goodput of a loop reading its loss every 10th step (60 steps of ~15-40 ms)")
    for label, watch in (("without a watcher", False), ("with a CompletionWatcher", True)):
        print(f"{label:42} {_goodput(watch, 60):7.2f} %")


if __name__ == "__main__":
    main()
