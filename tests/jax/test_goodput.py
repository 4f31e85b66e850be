"""Measured program startup (recompilation) and Orbax checkpoints as goodput events, real JAX on CPU."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

jax = pytest.importorskip("jax", reason="JAX is an optional extra: pip install 'mlgoodput[jax]'")
ocp = pytest.importorskip("orbax.checkpoint", reason="Orbax is part of the jax extra")
import jax.numpy as jnp  # noqa: E402

import mlgoodput.jax as jm  # noqa: E402
from mlgoodput.accounting import BadputType, GoodputCalculator  # noqa: E402
from mlgoodput.events import EventBatch, Kind  # noqa: E402
from mlgoodput.goodput import Recorder  # noqa: E402
from mlgoodput.store import open_store  # noqa: E402


@pytest.fixture(autouse=True)
def _no_session() -> Iterator[None]:
    jm.shutdown()
    yield
    jm.shutdown()


def _run_job(recorder: Recorder, steps: int, recompile_at: int) -> None:
    @jax.jit  # type: ignore[untyped-decorator]
    def train_step(w: Any, x: Any) -> Any:
        return w - 0.01 * jnp.tanh(x @ w).mean() * w

    w = jnp.ones((16, 16))
    recorder.record_job_start_time()
    for step in range(steps):
        recorder.record_step_start_time(step)
        rows = 32 if step == recompile_at else 8  # a new batch shape: JAX compiles again
        w = train_step(w, jnp.ones((rows, 16)))
        w.block_until_ready()
        time.sleep(0.01)  # the device work of a step
    recorder.record_job_end_time()


@pytest.mark.slow
def test_recompile_at_step_50_is_program_startup_not_stall(tmp_path: Path) -> None:
    store = f"sqlite://{tmp_path}/goodput.db"
    rec = Recorder("recompile-job", "logs", logging_enabled=True, store=store)
    jm.init(job_name="recompile-job", recorder=rec, exporters=[], store=store)
    _run_job(rec, steps=60, recompile_at=50)
    assert jm.shutdown()
    assert rec.close(10)

    st = open_store(store)
    events = list(st.read("logs", "recompile-job").columns.events())
    starts = {e.step: e.time for e in events if e.kind == Kind.STEP_START}
    compiles = [e for e in events if e.kind == Kind.COMPILE]
    in_50 = [e for e in compiles if starts[50] <= e.time < starts[51]]
    assert {e.name for e in in_50} >= {"train_step", "jit(train_step)"}
    compile_50 = sum(e.value or 0.0 for e in in_50)
    assert compile_50 > 0.005

    report = GoodputCalculator("recompile-job", "logs", store=st).report()
    startup = report.badput_total_s(BadputType.PROGRAM_STARTUP)
    stall = report.badput_total_s(BadputType.STALL)
    # the first step's excess plus step 50's measured compile
    first_step = starts[1] - starts[0]
    assert startup >= compile_50 * 0.999
    assert startup <= first_step + compile_50 + 1e-6
    # A loaded machine can suspend the process inside any step: a step whose time (less a
    # measured compile) passes three ideal steps really stalled by the excess over one. That
    # much stall is the truth; step 50's compile on top of it must not be counted as stall.
    ideal = report.ideal_step_time_s
    suspended = 0.0
    for n in range(1, 59):  # the interior steps: not the first, nor the last before job_end
        eff = starts[n + 1] - starts[n] - (compile_50 if n == 50 else 0.0)
        suspended += eff - ideal if eff > 3 * ideal else 0.0
    assert stall < suspended + 0.2 * compile_50, (stall, suspended, compile_50)

    # Control: the same timeline without the measured compiles. Step 50's compile is then
    # inferred as a stall (or productive time), not program startup.
    st.append(
        "logs", "control-job", EventBatch(writer=991, first_seq=0, events=[e for e in events if e.kind != Kind.COMPILE])
    )
    control = GoodputCalculator("control-job", "logs", store=st).report()
    assert control.badput_total_s(BadputType.PROGRAM_STARTUP) < startup - 0.9 * compile_50
    assert control.total_s == pytest.approx(report.total_s)


def test_compiles_go_to_an_existing_recorder_of_the_job(tmp_path: Path) -> None:
    store = f"sqlite://{tmp_path}/goodput.db"
    rec = Recorder("found-job", "logs", logging_enabled=True, store=store)
    s = jm.init(job_name="found-job", exporters=[], store=store)  # no recorder= given
    assert s.compile_sink is not None
    jax.jit(lambda x: x * 3)(jnp.ones(5)).block_until_ready()
    assert jm.shutdown()
    assert rec.close(10)
    evs = list(open_store(store).read("logs", "found-job").columns.events())
    assert any(e.kind == Kind.COMPILE and e.name == "jit(<lambda>)" for e in evs)


def _manager(path: Path, logger: object, async_: bool) -> Any:
    opts = ocp.CheckpointManagerOptions(max_to_keep=3, enable_async_checkpointing=async_)
    return ocp.CheckpointManager(path, options=opts, logger=logger)


@pytest.mark.parametrize("async_", [True, False], ids=["async", "sync"])
def test_orbax_saves_and_restores_become_checkpoint_events(tmp_path: Path, async_: bool) -> None:
    store = f"sqlite://{tmp_path}/goodput.db"
    rec = Recorder("orbax-job", "logs", logging_enabled=True, store=store)
    logger = jm.OrbaxLogger(rec)
    state = {"w": jnp.ones((128, 128)), "b": jnp.zeros(128)}
    rec.record_job_start_time()
    mgr = _manager(tmp_path / "ckpt", logger, async_)
    windows: dict[int, tuple[float, float]] = {}
    for step in (10, 20, 30):
        rec.record_step_start_time(step)
        t0 = time.time()
        mgr.save(step, args=ocp.args.StandardSave(state))
        windows[step] = (t0, time.time())
    mgr.wait_until_finished()
    t0 = time.time()
    restored = mgr.restore(30, args=ocp.args.StandardRestore(state))
    windows[-30] = (t0, time.time())  # the restore's window
    mgr.close()
    assert float(restored["w"].sum()) == 128 * 128
    rec.record_job_end_time()
    assert rec.close(10)
    assert (logger.recorded, logger.skipped, logger.errors) == (4, 0, 0)

    evs = list(open_store(store).read("logs", "orbax-job").columns.events())
    saves = {e.step: e for e in evs if e.kind == Kind.CKPT_SAVE}
    restores = [e for e in evs if e.kind == Kind.CKPT_RESTORE]
    assert sorted(k for k in saves if k is not None) == [10, 20, 30]
    for saved, e in saves.items():
        assert saved is not None
        lo, hi = windows[saved]
        # the blocking part lies inside the call to save()
        assert lo - 1e-3 <= e.time and e.time + (e.value or 0) <= hi + 1e-3
        assert e.attrs == {"source": "orbax"}
    assert len(restores) == 1 and restores[0].step == 30
    lo, hi = windows[-30]
    assert lo - 1e-3 <= restores[0].time <= hi and (restores[0].value or 0) > 0

    report = GoodputCalculator("orbax-job", "logs", store=open_store(store)).report()
    blocking = sum(e.value or 0.0 for e in saves.values())
    assert report.badput_total_s(BadputType.UNPRODUCTIVE_CHECKPOINT_SAVE_TIME) == pytest.approx(
        blocking, rel=1e-6, abs=1e-6
    )
    assert report.badput_total_s(BadputType.UNPRODUCTIVE_CHECKPOINT_RESTORE_TIME) == pytest.approx(
        restores[0].value, rel=1e-6, abs=1e-6
    )


def test_orbax_logger_does_not_repeat_what_the_recorder_recorded(tmp_path: Path) -> None:
    store = f"sqlite://{tmp_path}/goodput.db"
    rec = Recorder("dedup-job", "logs", logging_enabled=True, store=store)
    logger = jm.OrbaxLogger(rec)
    state = {"w": jnp.ones((64, 64))}
    rec.record_job_start_time()
    mgr = _manager(tmp_path / "ckpt", logger, async_=True)
    rec.record_step_start_time(1)
    rec.record_checkpoint_save_start_time(1)
    mgr.save(1, args=ocp.args.StandardSave(state))
    rec.record_checkpoint_save_end_time(1)
    rec.record_step_start_time(2)
    mgr.save(2, args=ocp.args.StandardSave(state))  # not wrapped: Orbax's event is the record
    mgr.wait_until_finished()
    mgr.close()
    rec.record_job_end_time()
    assert rec.close(10)
    assert (logger.recorded, logger.skipped) == (1, 1)
    evs = list(open_store(store).read("logs", "dedup-job").columns.events())
    assert [e.step for e in evs if e.kind == Kind.CKPT_SAVE] == [2]
    assert [e.step for e in evs if e.kind == Kind.CKPT_SAVE_START] == [1]


def test_orbax_logger_refuses_what_is_not_a_recorder() -> None:
    with pytest.raises(TypeError, match="recorder"):
        jm.OrbaxLogger(object())
    with pytest.raises(TypeError, match="recorder"):
        jm.OrbaxLogger()
