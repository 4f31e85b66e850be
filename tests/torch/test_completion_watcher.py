"""`mlgoodput.torch.CompletionWatcher` on the CPU: eager work is done when the call returns, so
a watched TorchRecorder loop reports what the same loop reports unwatched (one step end, the
last, recorded by the watcher instead of one per step)."""

from __future__ import annotations

import time

import pytest
import torch
from torch import nn

import mlgoodput.torch as mt
from mlgoodput.accounting import GoodputCalculator
from mlgoodput.events import Kind
from mlgoodput.store import open_store


def _loop(job: str, watch: bool) -> tuple[float, int]:
    url = f"memory://{job}"
    gp = mt.TorchRecorder(job_name=job, store=url, measure_flops=False)
    w = mt.CompletionWatcher(gp) if watch else None
    model = nn.Linear(64, 64)
    model(torch.randn(8, 64)).sum().backward()  # torch's lazy set-up (autograd threads) before the job
    with gp.job():
        for step, x in gp.steps(torch.randn(20, 8, 64)):
            model(x).sum().backward()
            time.sleep(0.05)
            if w is not None:
                w.watch(step)
    gp.close()
    ends = sum(1 for e in open_store(url).read("goodput", job).columns.events() if e.kind is Kind.STEP_END)
    return GoodputCalculator(job, "goodput", store=url).report().goodput_pct, ends


@pytest.mark.slow
def test_a_watched_cpu_loop_reports_like_an_unwatched_one() -> None:
    t = time.monotonic_ns()
    plain, plain_ends = _loop(f"plain-{t}", False)
    watched, watched_ends = _loop(f"watched-{t}", True)
    assert plain_ends == 20 and watched_ends == 1
    assert abs(watched - plain) <= 5, (watched, plain)
