"""The JAX demo end to end: a real JAX worker is killed with SIGKILL, restarted from its Orbax
checkpoint, and the report shows the disruption, wasted progress, program startup and
checkpoint time; TensorBoard files are written."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

pytest.importorskip("jax", reason="JAX is an optional extra: pip install 'mlgoodput[jax]'")
pytest.importorskip("orbax.checkpoint", reason="Orbax is part of the jax extra")
pytest.importorskip("optax", reason="Optax is part of the jax extra")

from mlgoodput import cli
from mlgoodput._demo.supervisor import JAX_WORKLOAD, default_workload
from mlgoodput.accounting import BadputType, GoodputCalculator
from mlgoodput.events import Kind
from mlgoodput.store import open_store


@pytest.mark.slow
def test_jax_demo_is_killed_restarted_and_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert default_workload() == JAX_WORKLOAD
    outdir = tmp_path / "demo-output"
    argv = ["demo", "--output-dir", str(outdir), "--steps", "40", "--kill-at-step", "25", "--time-scale", "0.1"]
    assert cli.main(argv) == 0
    text = capsys.readouterr().out  # the progress, the report and the next commands
    assert "killed with SIGKILL after step 25" in text
    assert "restore (step " in text
    assert f"tensorboard --logdir {outdir.resolve() / 'demo' / 'tensorboard'}" in text

    st = open_store(str(outdir / "demo.db"))
    events = list(st.read("goodput_demo", "demo").columns.events())
    c = Counter(e.kind for e in events)
    assert c[Kind.JOB_START] == 2 and c[Kind.JOB_END] == 1
    restores = [e for e in events if e.kind is Kind.CKPT_RESTORE]
    assert len(restores) == 1 and restores[0].step in (9, 19)
    assert {e.step for e in events if e.kind is Kind.CKPT_SAVE} >= {9, 19, 29, 39}
    steps = Counter(e.step for e in events if e.kind is Kind.STEP_START)
    assert set(steps) == set(range(40))
    assert all(steps[s] == 2 for s in range(restores[0].step + 1, 26))  # redone after the kill
    starts = sorted(e.time for e in events if e.kind is Kind.JOB_START)
    compiles = [e for e in events if e.kind is Kind.COMPILE]
    assert any(e.time < starts[1] for e in compiles) and any(e.time > starts[1] for e in compiles)
    assert any(e.name == "jit(train_step)" for e in compiles)
    # the batch grows at step 30: train_step really compiles again inside that step
    s30 = next(e.time for e in events if e.kind is Kind.STEP_START and e.step == 30)
    s31 = next(e.time for e in events if e.kind is Kind.STEP_START and e.step == 31)
    recompile = [e.value or 0.0 for e in compiles if e.name == "jit(train_step)" and s30 <= e.time < s31]
    assert recompile, "no compile of train_step inside the step where the batch grows"

    r = GoodputCalculator("demo", "goodput_demo", store=st).report()
    assert r.badput_total_s(BadputType.PROGRAM_STARTUP) >= max(recompile)
    assert r.disruptions == 1
    assert r.last_step == 39
    for bucket in (
        BadputType.WASTED_PROGRESS_FROM_DISRUPTION,
        BadputType.PROGRAM_STARTUP,
        BadputType.UNPRODUCTIVE_CHECKPOINT_SAVE_TIME,
        BadputType.UNPRODUCTIVE_CHECKPOINT_RESTORE_TIME,
        BadputType.INFRASTRUCTURE_RECOVERY_FROM_DISRUPTION,
    ):
        assert r.badput_total_s(bucket) > 0, bucket
    assert r.productive_s > 0
    # the report's lines are in the terminal output
    low = text.lower().replace("_", " ")
    for word in ("wasted progress", "program startup", "checkpoint save", "disruption"):
        assert word in low, word
    # productivity: FLOPs from the compiler, the configured CPU peak, MPG and the advice
    p = r.productivity
    assert p is not None and p.flops_per_step is not None and p.peak_source == "configured"
    assert p.mfu is not None and 0 < p.mfu < 1 and p.ml_productivity_goodput is not None
    assert p.interruptions == 1 and p.mtbi_s is not None
    for word in ("ml productivity goodput", "mfu", "(configured)", "optimal interval"):
        assert word in low, word

    tb = outdir / "demo" / "tensorboard"
    assert list((tb / "goodput").glob("events.out.tfevents.*"))
    assert list((tb / "jax").glob("events.out.tfevents.*"))
    # the JAX aggregates reached the store too
    assert any(j.namespace == "mlgoodput.jax" and j.job == "demo" for j in st.jobs())
    # and its loss is the job's ML run, its logs the job's console
    assert any(j.namespace == "mlgoodput.run" and j.job.startswith("demo-") for j in st.jobs())
    assert any(j.namespace == "mlgoodput.console" and j.job == "demo" for j in st.jobs())
