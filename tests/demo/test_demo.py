"""`mlgoodput demo`, fast: a real worker is killed with SIGKILL, restarted from its
checkpoint, and every event of both attempts ends up in the demo's store."""

from __future__ import annotations

import io
import re
from collections import Counter
from pathlib import Path

import pytest

from mlgoodput import cli
from mlgoodput._demo.supervisor import DEFAULT_WORKLOAD, DemoConfig, run_demo
from mlgoodput.events import Kind
from mlgoodput.store import open_store


def test_demo_kills_restarts_and_keeps_every_event(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = io.StringIO()
    cfg = DemoConfig(
        output_dir=tmp_path / "demo-output", steps=40, kill_at_step=25, time_scale=0.05, workload=DEFAULT_WORKLOAD
    )  # the simulated workload (the JAX one: tests/jax)
    assert run_demo(cfg, out) == 0
    report = capsys.readouterr().out  # `mlgoodput report` prints to stdout
    assert re.search(r"disruptions\s+1\b", report), report
    assert re.search(r"last step\s+39\b", report), report
    # productivity: MPG, MFU against the CPU's configured peak, and the checkpoint advice
    assert re.search(r"ML productivity goodput\s+\d+\.\d+ %", report), report
    assert re.search(r"MFU\s+\d+\.\d+ %", report) and "(configured)" in report, report
    assert re.search(r"scheduling goodput\s+\d+\.\d+ %", report), report
    assert "optimal interval" in report
    assert re.search(r"^(Checkpoint every|Keep checkpointing)", report, re.M), report
    text = out.getvalue()
    assert "killed with SIGKILL after step 25" in text
    assert "restore (step 19)" in text
    st = open_store(str(tmp_path / "demo-output" / "demo.db"))
    events = list(st.read("goodput_demo", "demo").columns.events())
    c = Counter(e.kind for e in events)
    assert c[Kind.JOB_START] == 2 and c[Kind.JOB_END] == 1
    assert [e.step for e in events if e.kind is Kind.CKPT_RESTORE_START] == [19]
    steps = Counter(e.step for e in events if e.kind is Kind.STEP_START)
    # attempt 1 ran steps 0..25 (and maybe began 26) before the kill; attempt 2 redid 20..39
    assert set(steps) == set(range(40))
    assert all(steps[s] == 2 for s in range(20, 26))
    assert all(steps[s] == 1 for s in range(27, 40))
    # the second run of the demo starts from a fresh store
    assert run_demo(cfg, io.StringIO()) == 0
    again = Counter(e.kind for e in st.read("goodput_demo", "demo").columns.events())
    assert again[Kind.JOB_START] == 2


def test_demo_command_is_registered() -> None:
    with pytest.raises(SystemExit) as e:
        cli.main(["demo", "--help"])
    assert e.value.code == 0


def test_demo_config_rejects_bad_values(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="kill_at_step"):
        DemoConfig(steps=10, kill_at_step=10)
    with pytest.raises(ValueError, match="time_scale"):
        DemoConfig(time_scale=0)
