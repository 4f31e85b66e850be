"""A training step's FLOPs of a module (forward and backward, the module left as it was), and
the advice for a compiled step: rank 0 only, once per job, and not once FLOPs are recorded."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from torch import nn

import mlgoodput.torch as mt
from mlgoodput import flops
from mlgoodput.events import Kind
from mlgoodput.goodput import GoodputRecorder
from mlgoodput.store import open_store
from mlgoodput.torch import _flops as tf

SIZES = (64, 256, 32)
BATCH = 16


def _mlp() -> nn.Module:
    return nn.Sequential(
        nn.Linear(SIZES[0], SIZES[1]),
        nn.BatchNorm1d(SIZES[1]),
        nn.Dropout(0.5),
        nn.GELU(),
        nn.Linear(SIZES[1], SIZES[2]),
    )


def _products(batch: int) -> float:
    """A training step's matrix products: 6 x weights x batch, less the first layer's input
    gradient, which autograd never computes (the input needs none)."""
    weights = SIZES[0] * SIZES[1] + SIZES[1] * SIZES[2]
    return 6.0 * weights * batch - 2.0 * SIZES[0] * SIZES[1] * batch


def test_a_module_counts_forward_and_backward_and_is_left_as_it_was() -> None:
    torch.manual_seed(0)
    model = _mlp()
    x = torch.randn(BATCH, SIZES[0])
    model(x).sum().backward()  # a step in progress: gradients and statistics that must survive
    grads = [p.grad.clone() for p in model.parameters()]  # type: ignore[union-attr]
    stats = [b.clone() for b in model.buffers()]
    rng = torch.get_rng_state()

    counted = flops.torch_step_flops(model, x)

    assert counted == _products(BATCH)
    assert all(torch.equal(p.grad, g) for p, g in zip(model.parameters(), grads, strict=True))
    assert all(torch.equal(b, s) for b, s in zip(model.buffers(), stats, strict=True))
    assert torch.equal(torch.get_rng_state(), rng)
    with torch.no_grad():  # no backward to count: the forward, 2 x weights x batch
        forward = flops.torch_step_flops(model, x)
    assert forward == 2.0 * (SIZES[0] * SIZES[1] + SIZES[1] * SIZES[2]) * BATCH
    # the old advice's count (the forward alone) was 2.33x too low for this model
    assert counted / forward == pytest.approx(2.333, abs=1e-3)


@pytest.mark.slow
def test_outputs_in_a_mapping_and_a_compiled_module_are_counted_eagerly() -> None:
    from torch._dynamo.utils import counters

    class Dicty(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body = _mlp()

        def forward(self, x: torch.Tensor) -> dict[str, object]:  # like a Hugging Face ModelOutput
            out = self.body(x)
            return {"logits": out, "hidden": [out * 2], "n": 3}

    model = Dicty()
    x = torch.randn(BATCH, SIZES[0])
    assert flops.torch_step_flops(model, x) == _products(BATCH)
    before = counters["frames"]["total"]
    compiled = torch.compile(model.body, backend="eager")  # compiles at its first call: never here
    assert flops.torch_step_flops(compiled, x) == _products(BATCH)
    assert counters["frames"]["total"] == before  # the eager module ran, nothing compiled


def test_a_ddp_module_is_counted_without_its_collectives(tmp_path: Path) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/pg", rank=0, world_size=1)
    try:
        model = _mlp()
        ddp = nn.parallel.DistributedDataParallel(model)
        x = torch.randn(BATCH, SIZES[0])
        # DDP's backward hooks would all-reduce (a hang when one rank counts alone): unwrapped
        calls: list[object] = []
        ddp.register_comm_hook(None, lambda _state, bucket: calls.append(bucket) or _done(bucket))
        assert flops.torch_step_flops(ddp, x) == _products(BATCH)
        assert calls == [] and all(p.grad is None for p in model.parameters())
    finally:
        dist.destroy_process_group()


def _done(bucket: object) -> object:
    fut: torch.futures.Future[torch.Tensor] = torch.futures.Future()
    fut.set_result(bucket.buffer())  # type: ignore[attr-defined]
    return fut


@pytest.fixture
def compiled(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """As if Dynamo had compiled a frame in this process (no compile: seconds on a CPU)."""
    monkeypatch.setattr(tf, "dynamo_compiled", lambda: True)
    yield


def _said(caplog: pytest.LogCaptureFixture) -> int:
    return sum(r.getMessage() == tf.COMPILED_ADVICE for r in caplog.records)


def _second_step(sf: tf.StepFlops) -> None:
    """Run StepFlops through two steps, as the recorder does, and wait for its advice."""
    for _ in range(2):
        sf.begin()
        sf.end()
    if sf.advice is not None:
        sf.advice.join(30)
        assert not sf.advice.is_alive()


@pytest.mark.usefixtures("compiled")
def test_advice_once_per_job_on_rank_0(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="mlgoodput.torch")
    store = f"sqlite://{tmp_path}/g.db"

    def attempt(rank: int) -> GoodputRecorder:
        rec = GoodputRecorder("job", "goodput", True, store=store, process_index=rank)
        sf = tf.StepFlops(4, rank=rank, recorder=rec)
        _second_step(sf)
        assert sf.compiled and not sf.counting and not sf.skipped_compiled
        return rec

    for rank in (1, 2, 3):
        attempt(rank).close()
    assert _said(caplog) == 0  # other ranks never say it
    attempt(0).close()
    assert _said(caplog) == 1
    assert tf.advice_marker(GoodputRecorder("job", "goodput", False, store=store)).exists()
    for _restart in range(2):  # torchrun restarts the job: every rank again
        for rank in range(4):
            attempt(rank).close()
    assert _said(caplog) == 1
    # another job of the same store is advised on its own
    rec = GoodputRecorder("other", "goodput", True, store=store, process_index=0)
    _second_step(tf.StepFlops(1, rank=0, recorder=rec))
    rec.close()
    assert _said(caplog) == 2


@pytest.mark.usefixtures("compiled")
def test_no_advice_once_step_flops_are_recorded(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="mlgoodput.torch")
    store = f"sqlite://{tmp_path}/g.db"
    rec = GoodputRecorder("job", "goodput", True, store=store, process_index=0)
    # as docs/torch.md says, before the loop (not shipped yet: the advice ships it first)
    rec.record_step_flops(4 * flops.torch_step_flops(_mlp(), torch.randn(BATCH, SIZES[0])))
    _second_step(tf.StepFlops(4, rank=0, recorder=rec))
    rec.close()
    assert _said(caplog) == 0
    # a restart that does not record them again: the store holds the earlier attempt's
    rec = GoodputRecorder("job", "goodput", True, store=store, process_index=0)
    _second_step(tf.StepFlops(4, rank=0, recorder=rec))
    rec.close()
    assert _said(caplog) == 0
    assert not tf.advice_marker(rec).exists()
    kinds = [e.kind for e in open_store(store).read("goodput", "job").columns.events()]
    assert kinds.count(Kind.STEP_FLOPS) == 1


@pytest.mark.usefixtures("compiled")
def test_the_recorder_advises_on_rank_0_only_and_never_raises(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="mlgoodput.torch")

    def run(rank: int) -> None:
        monkeypatch.setenv("RANK", str(rank))
        monkeypatch.setenv("WORLD_SIZE", "2")
        # the identity from these variables alone: a process group another test left
        # initialized in this process would win over the environment
        ident = mt.torchrun_identity(env={"RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_RANK": str(rank)})
        gp = mt.TorchRecorder(job_name=f"rec{rank}", store=f"memory://rec{rank}", identity=ident)
        with gp.job():
            for _step, _x in gp.steps([1, 2, 3]):
                pass
        fl = gp._flops
        if fl is not None and fl.advice is not None:
            fl.advice.join(30)
        gp.close()

    for t in threading.enumerate():  # an earlier test's recorder may still be checking its own job
        if t.name == "mlgoodput-flops-advice":
            t.join(30)
    caplog.clear()
    run(1)
    assert _said(caplog) == 0, [(r.name, r.threadName, r.getMessage()[:60]) for r in caplog.records]
    run(0)
    assert _said(caplog) == 1
    # the old advice (forward only, on every rank) is gone
    assert not any("eager_model" in r.getMessage() for r in caplog.records)
    monkeypatch.setattr(tf, "_lead", lambda rank: 1 / 0)  # a failure inside: logged, never raised
    assert tf.advise_compiled() is None


@pytest.mark.usefixtures("compiled")
def test_with_torch_init_the_recorder_advises_once_per_job(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # mt.init(recorder=gp), which times torch.compile, tells the advice the job to check
    caplog.set_level(logging.WARNING, logger="mlgoodput.torch")
    store = f"sqlite://{tmp_path}/g.db"

    def attempt(job: str, record: bool = False) -> None:
        gp = mt.TorchRecorder(job_name=job, store=store)
        mt.init(job_name=job, recorder=gp, exporters=[])
        try:
            if record:
                gp.recorder.record_step_flops(flops.torch_step_flops(_mlp(), torch.randn(BATCH, SIZES[0])))
            with gp.job():
                for _step, _x in gp.steps([1, 2, 3]):
                    pass
            fl = gp._flops
            assert fl is not None and fl.compiled
            if fl.advice is not None:
                fl.advice.join(30)
        finally:
            assert mt.shutdown(10)
            gp.close()

    attempt("j")
    assert _said(caplog) == 1
    attempt("j")  # a restart
    assert _said(caplog) == 1
    attempt("k", record=True)  # recorded as docs/torch.md says: nothing to advise
    assert _said(caplog) == 1
