"""Steps dispatched asynchronously (JAX returns before the device is done): a loop that waits
only every tenth step reports what the same loop waiting every step reports once a
CompletionWatcher times the steps; without one, the report says why its figures are off and
program goodput and MFU are unknown rather than above 100 %."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

from mlgoodput import goodput  # noqa: E402
from mlgoodput.jax import CompletionWatcher  # noqa: E402

STEPS = 60


def _step_fn() -> Callable[[Any], tuple[Any, Any]]:
    def step(x: Any) -> tuple[Any, Any]:
        for _ in range(6):
            x = jnp.tanh(x @ x)
        return x, jnp.mean(x)

    return jax.jit(step)  # type: ignore[no-any-return]


def _run(job: str, *, wait_every: int, watch: bool) -> goodput.GoodputReport:
    store = f"memory://async-{job}"
    rec = goodput.GoodputRecorder(job, f"goodput_{job}", True, store=store, process_index=0)
    watcher = CompletionWatcher(rec) if watch else None
    step = _step_fn()
    # compiled before the job: its time varies by a tenth of a second from run to run on a busy
    # machine, which would swamp the step accounting the two loops are compared on
    x = jnp.full((512, 512), 0.01)
    flops = float(step.lower(x).compile().cost_analysis()["flops"])
    jax.block_until_ready(step(x))
    rec.record_job_start_time()
    rec.record_training_preparation_start_time()
    x = jnp.full((512, 512), 0.01)
    rec.record_training_preparation_end_time()
    rec.record_step_flops(flops)
    rec.record_peak_flops(flops / 1e-3)  # a step at peak would take 1 ms: the device takes longer
    for i in range(STEPS):
        rec.record_step_start_time(i)
        x, loss = step(x)
        if watcher is not None:
            watcher.watch(i, loss)
        if i % wait_every == wait_every - 1:
            float(loss)  # the loop reads the loss now and then (optax's getting-started loop)
    float(loss)
    rec.record_job_end_time()
    rec.close()
    return goodput.GoodputCalculator(job, f"goodput_{job}", store=store).report()


def _check_program_goodput(r: goodput.GoodputReport) -> None:
    p = r.productivity
    assert p is not None
    for v in (p.program_goodput, p.mfu, p.step_mfu):
        assert v is None or 0 <= v <= 1, (p.program_goodput, p.mfu, p.step_mfu)


@pytest.mark.slow
def test_a_watched_loop_that_waits_every_tenth_step_reports_like_one_that_waits_always() -> None:
    t = time.monotonic_ns()
    every = _run(f"every-{t}", wait_every=1, watch=False)
    tenth = _run(f"tenth-{t}", wait_every=10, watch=True)
    assert every.goodput_pct > 30, every.goodput_pct
    assert abs(tenth.goodput_pct - every.goodput_pct) <= 5, (tenth.goodput_pct, every.goodput_pct)
    # the ideal step is a device step, not a dispatch
    assert tenth.ideal_step_time_s > 0.3 * every.ideal_step_time_s
    _check_program_goodput(every)
    _check_program_goodput(tenth)
    assert tenth.productivity is not None and tenth.productivity.program_goodput is not None
    assert not tenth.productivity.notes


@pytest.mark.slow
def test_an_unwatched_async_loop_says_so_and_never_reports_above_the_peak(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "mlgoodput")
    r = _run(f"unwatched-{time.monotonic_ns()}", wait_every=10, watch=False)
    _check_program_goodput(r)
    p = r.productivity
    assert p is not None
    assert any("runs ahead of the device" in n for n in p.notes), p.notes
    assert p.program_goodput is None  # dispatch times would put it far above 100 %
    assert sum("runs ahead of the device" in m for m in caplog.messages) == 1
