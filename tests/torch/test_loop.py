"""The plain-loop helper in one process: torchrun identity, steps and data waits, a real
torch.compile (first compile, a recompile inside a later step, the lazy backward) measured
as program startup and exported, FLOPs of one step, torch.distributed.checkpoint save
(sync and async) and load timed, and misuse that never raises into training."""

from __future__ import annotations

import time
import warnings
from pathlib import Path

import pytest
import torch
from torch import nn

import mlgoodput
import mlgoodput.torch as mt
from mlgoodput import flops
from mlgoodput.accounting import BadputType, GoodputCalculator
from mlgoodput.events import Kind
from mlgoodput.store import open_store
from mlgoodput.testing import FileExporter
from mlgoodput.torch import checkpoint as ckpt
from waiting import wait_for

B = BadputType
STEP_S = 0.05


@pytest.fixture(autouse=True)
def _no_session() -> None:
    mt.shutdown()


def test_the_pinned_torch_still_has_the_compile_hook() -> None:
    # no public compile hook in torch 2.13 (torch.compiler has none): mlgoodput.torch uses
    # Dynamo's callback handler through its own register/remove methods; a new torch that
    # moves it fails here first
    assert torch.__version__.startswith("2.13.0")
    assert not any("callback" in n for n in dir(torch.compiler))
    from torch._dynamo.callback import CallbackTrigger, callback_handler

    for m in ("register_start_callback", "register_end_callback", "remove_start_callback", "remove_end_callback"):
        assert callable(getattr(callback_handler, m))
    assert {"DYNAMO", "LAZY_BACKWARD"} <= {t.name for t in CallbackTrigger}


def test_identity_from_torchrun_variables() -> None:
    env = {
        "RANK": "3",
        "LOCAL_RANK": "1",
        "WORLD_SIZE": "4",
        "TORCHELASTIC_RESTART_COUNT": "2",
        "TORCHELASTIC_RUN_ID": "abc",
    }
    i = mt.torchrun_identity(env)
    assert (i.rank, i.local_rank, i.world_size, i.attempt, i.run_id) == (3, 1, 4, 2, "abc")
    assert not i.is_lead and i.launched and i.default_job_name() == "torchrun-abc"
    alone = mt.torchrun_identity({})
    assert (alone.rank, alone.world_size, alone.attempt, alone.is_lead, alone.launched) == (0, 1, 0, True, False)
    with pytest.raises(ValueError, match="RANK"):
        mt.torchrun_identity({"RANK": "x"})
    with pytest.raises(ValueError, match="WORLD_SIZE"):
        mt.torchrun_identity({"RANK": "4", "WORLD_SIZE": "4"})
    with pytest.raises(TypeError, match="identity"):
        mt.TorchRecorder(job_name="j", store="memory://id", identity="rank0")  # type: ignore[arg-type]
    gp = mt.TorchRecorder(store="memory://id", identity=i)
    assert gp.recorder.process_index == 3 and gp.job_name == "torchrun-abc"
    gp.close()


@pytest.mark.slow
def test_plain_loop_compile_flops_and_checkpoints(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = f"sqlite://{tmp_path}/g.db"
    out = tmp_path / "metrics.jsonl"
    gp = mt.TorchRecorder(job_name="loop", store=store, peak_flops_per_s=1e10)
    session = mt.init(job_name="loop", recorder=gp, store=store, exporters=[FileExporter(out)], interval_s=0.1)
    assert mt.init(job_name="loop") is session  # a second call returns the running session
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    state = {"model": model.state_dict()}
    with gp.job():
        with gp.training_preparation():
            step_fn = torch.compile(model, backend="aot_eager")

        def batches() -> object:
            for n in range(8):
                time.sleep(0.02)
                yield torch.randn(4 if n < 5 else 6, 8)  # a new batch size at step 5: a recompile

        for step, x in gp.steps(batches()):
            opt.zero_grad()
            step_fn(x).sum().backward()
            opt.step()
            time.sleep(STEP_S)
            if step == 2:
                ckpt.save(state, checkpoint_id=str(tmp_path / "c2"), recorder=gp, step=step, no_dist=True)
            if step == 4:
                fut = ckpt.async_save(state, checkpoint_id=str(tmp_path / "c4"), recorder=gp, step=step, no_dist=True)
                ckpt.wait(fut, recorder=gp, step=step)
            if step == 6:
                with gp.custom("eval"):
                    time.sleep(0.1)
        ckpt.load(state, checkpoint_id=str(tmp_path / "c4"), recorder=gp, step=4, no_dist=True)

    stats = mt.compile_stats()
    assert stats is not None
    assert stats.compiles >= 2 and stats.recompiles >= 1 and stats.backward_compiles >= 1
    # FlopCounterMode would turn the compiled step eager: not counted, said once; the eager
    # module's count (harmless to the compiled one) is recorded by hand
    assert gp.step_flops is None
    advice = gp._flops.advice if gp._flops is not None else None
    if advice is not None:
        advice.join(30)  # the advice's checks (is the job's FLOPs in the store?) run on a thread
    assert any("torch_step_flops" in m for m in caplog.messages)
    gp.recorder.record_step_flops(flops.torch_step_flops(model, torch.randn(4, 8)))
    assert session.flush(10.0)
    assert mt.shutdown(10.0)
    assert mt.current() is None and mt.shutdown()  # twice is fine

    st = open_store(store)
    compiles = [e for e in st.read("goodput", "loop").columns.events() if e.kind is Kind.COMPILE]
    assert len(compiles) == stats.compiles + stats.backward_compiles
    assert sum(e.value or 0 for e in compiles) == pytest.approx(stats.total_s)
    r = GoodputCalculator("loop", "goodput", store=store).report()
    # the recompile at step 5 happened inside a later step: measured program startup
    recompile = sum(
        e.value or 0
        for e in compiles
        if e.time > min(c.time for c in compiles) + 1e-9 and "dynamo" in (e.name or "") and not e.name.endswith("/0")
    )
    assert recompile > 0
    assert r.badput_total_s(B.PROGRAM_STARTUP) >= recompile - 1e-6
    assert r.last_step == 7 and r.disruptions == 0
    assert r.badput_total_s(B.UNPRODUCTIVE_CHECKPOINT_SAVE_TIME) > 0
    assert r.badput_total_s(B.UNPRODUCTIVE_CHECKPOINT_RESTORE_TIME) > 0
    assert set(r.badput_s[B.CUSTOM_BADPUT_EVENTS]) == {"EVAL"}
    assert r.badput_s[B.CUSTOM_BADPUT_EVENTS]["EVAL"] >= 0.1
    assert r.badput_total_s(B.DATA_LOADING_SYNC) >= 8 * 0.02 * 0.9
    assert r.to_dict()["mfu"] is not None

    # exported like the JAX compile metrics: the exporter process and the store's stream
    def last(name: str) -> float:
        v = -1.0
        for row in FileExporter.read(out):
            for s in row.get("samples", []):  # type: ignore[attr-defined]
                if s["name"] == name:
                    v = float(s["value"])
        return v

    assert wait_for(lambda: last("torch/compile/recompiles") >= 1, 10)
    assert last("torch/compile/duration/count") >= 1
    metrics = [e for e in st.read(mt.NAMESPACE, "loop").columns.events() if e.kind is Kind.JAX_METRIC]
    assert {"torch/compile/duration", "torch/compile/recompiles"} <= {e.name for e in metrics}
    gp.close()


def test_step_flops_counted_once_on_the_second_step() -> None:
    from torch._dynamo.utils import counters

    torch.compiler.reset()
    counters.clear()  # no compiled frame in this process (an earlier test compiled one)
    gp = mt.TorchRecorder(job_name="fl", store="memory://fl", peak_flops_per_s=1e10)
    model = nn.Linear(8, 4)
    with gp.job():
        for _step, x in gp.steps([torch.randn(2, 8)] * 3):
            model(x).sum().backward()
    assert gp.step_flops == flops.torch_step_flops(lambda: model(torch.randn(2, 8)).sum().backward())
    gp.close()


def test_cpu_attention_is_counted() -> None:
    # torch 2.13's FlopCounterMode counts the CPU attention kernel as zero; ours counts it as
    # the GPU kernels are counted: 4*b*h*s*s*d forward, 2.5 times that backward
    b, h, s, d = 2, 4, 16, 8
    q, k, v = (torch.randn(b, h, s, d, requires_grad=True) for _ in range(3))
    fwd = 4 * b * h * s * s * d
    counted = flops.torch_step_flops(lambda: nn.functional.scaled_dot_product_attention(q, k, v).sum().backward())
    assert counted == 3.5 * fwd


def test_misuse_never_raises_into_training(recwarn: pytest.WarningsRecorder) -> None:
    gp = mt.TorchRecorder(job_name="misuse", store="memory://misuse", measure_flops=False)

    def about_job_end() -> int:
        return sum("job_end" in str(w.message) for w in recwarn if issubclass(w.category, mlgoodput.MlGoodputWarning))

    warnings.simplefilter("always")
    gp.end_job()  # end without start: recorded what it could, said once (one MlGoodputWarning)
    said = about_job_end()
    gp.end_job()
    assert said == 1 and about_job_end() == said
    gp.record("record_data_loading_end_time")
    with gp.checkpoint_save(1), gp.checkpoint_save(1):  # the same save twice
        pass
    gp.close()
    for _ in gp.steps([1, 2]):  # after close
        pass
    with gp.custom("eval"):
        pass
    with pytest.raises(AttributeError, match="no_such"):
        gp.record("no_such_method")
    with pytest.raises(ValueError, match="peak_flops_per_s"):
        mt.TorchRecorder(job_name="j", store="memory://m", peak_flops_per_s=-1.0)
    with pytest.raises(ValueError, match="step is required"):
        ckpt.save({}, recorder=gp, checkpoint_id="/nonexistent")


def test_strict_mode_misuse_reaches_the_caller_through_the_integration_guard() -> None:
    # strict mode is for users' own tests: the torch guard must not swallow it
    from mlgoodput._misuse import MlGoodputMisuseError
    from mlgoodput.torch._safe import Safe

    def misuse() -> None:
        raise MlGoodputMisuseError("strict")

    def broken() -> None:
        raise OSError("disk")

    safe = Safe("test")
    with pytest.raises(MlGoodputMisuseError):
        safe("record", misuse)
    assert safe("record", broken) is None and safe.errors == 1
