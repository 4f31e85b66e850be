"""`mlgoodput demo`, fast: a real worker is killed with SIGKILL, restarted from its
checkpoint, and every event of both attempts ends up in the demos' one store, beside the
job's ML run (its loss) and console job (its logs); the demo ends with its next commands,
and running it again replaces its own job only."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from mlgoodput import cli
from mlgoodput._demo._store import forget_job
from mlgoodput._demo.supervisor import DEFAULT_WORKLOAD, JAX_WORKLOAD, DemoConfig, default_job
from mlgoodput.diagnostics import list_runs, load_run
from mlgoodput.events import Event, EventBatch, Kind
from mlgoodput.store import SQLiteStore, open_store


def demo(out: Path, *extra: str) -> int:
    argv = ["demo", "--workload", DEFAULT_WORKLOAD, "--output-dir", str(out), "--steps", "40"]
    return cli.main([*argv, "--kill-at-step", "25", "--time-scale", "0.05", *extra])


@pytest.mark.slow
def test_demo_kills_restarts_and_keeps_every_event(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "demo-output"
    assert demo(out) == 0  # the simulated workload (the JAX one: tests/jax)
    text = capsys.readouterr().out
    assert re.search(r"disruptions\s+1\b", text), text
    assert re.search(r"last step\s+39\b", text), text
    # productivity: MPG, MFU against the CPU's configured peak, and the checkpoint advice
    assert re.search(r"ML productivity goodput\s+\d+\.\d+ %", text), text
    assert re.search(r"MFU\s+\d+\.\d+ %", text) and "(configured)" in text, text
    assert re.search(r"scheduling goodput\s+\d+\.\d+ %", text), text
    assert "optimal interval" in text
    assert re.search(r"^(Checkpoint every|Keep checkpointing)", text, re.M), text
    assert "killed with SIGKILL after step 25" in text
    assert "restore (step 19)" in text
    # it ends with its next commands, for its own job and store
    tail = text[text.index("Next, try these") :]
    db = out.resolve() / "demo.db"
    assert f"export MLGOODPUT_STORE={db}" in tail and "mlgoodput report --job demo-sim" in tail, tail
    assert "mlgoodput console logs --job demo-sim" in tail and "/jobs/demo-sim" in tail, tail

    st = open_store(str(db))
    events = list(st.read("goodput_demo-sim", "demo-sim").columns.events())
    c = Counter(e.kind for e in events)
    assert c[Kind.JOB_START] == 2 and c[Kind.JOB_END] == 1
    assert [e.step for e in events if e.kind is Kind.CKPT_RESTORE_START] == [19]
    steps = Counter(e.step for e in events if e.kind is Kind.STEP_START)
    # attempt 1 ran steps 0..25 (and maybe began 26) before the kill; attempt 2 redid 20..39
    assert set(steps) == set(range(40))
    assert all(steps[s] == 2 for s in range(20, 26))
    assert all(steps[s] == 1 for s in range(27, 40))
    # one training, one name: its loss is an ML run, its logs a console job
    [run] = [r["name"] for r in list_runs(st)]
    assert run.startswith("demo-sim-")
    loss = load_run(run, store=st).metrics["loss"]
    assert {s for s, _, _ in loss} >= set(range(26, 40))  # both attempts recorded (the kill may lose a few)
    logs = _console_lines(st, "demo-sim")
    assert any("step 39 loss" in m for m in logs), logs[-5:]
    assert any("killed with SIGKILL" in m for m in logs)  # the supervisor's notes too

    # another demo's job in the same store survives; running this one again replaces its own
    assert demo(out, "--job", "other") == 0
    assert demo(out) == 0
    assert "replacing the earlier demo job 'demo-sim'" in capsys.readouterr().out
    again = Counter(e.kind for e in st.read("goodput_demo-sim", "demo-sim").columns.events())
    assert again[Kind.JOB_START] == 2
    other = Counter(e.kind for e in st.read("goodput_other", "other").columns.events())
    assert other[Kind.JOB_START] == 2
    assert sorted(r["name"].rsplit("-", 1)[0] for r in list_runs(st)) == ["demo-sim", "other"]


def _console_lines(st: Any, job: str) -> list[str]:
    from mlgoodput.console import log_entries_after

    return [str(e["message"]) for e in log_entries_after(st, job, 0, {})[0]]


def test_forget_job_removes_that_job_only(tmp_path: Path) -> None:
    db = tmp_path / "demo.db"
    st = SQLiteStore(db)
    ev = [Event(Kind.LOG, 1.0, name="x")]
    streams = [("goodput_a", "a"), ("mlgoodput.run", "a-1a2b3c4d"), ("mlgoodput.console", "a")]
    streams += [("goodput_ab", "ab"), ("mlgoodput.run", "ab-1a2b3c4d"), ("mlgoodput.console", "a-b")]
    for w, (ns, job) in enumerate(streams, 1):
        st.append(ns, job, EventBatch(w, 0, ev))
    st.save_state("goodput_a", "a", [b"s"])
    st.save_state("mlgoodput.ui", json.dumps(["goodput_a", "a"]), [b"s"])
    st.save_state("goodput_ab", "ab", [b"s"])
    assert forget_job(f"sqlite://{db}", "a") == 3
    assert sorted((j.namespace, j.job) for j in st.jobs()) == sorted(streams[3:])
    assert st.load_state("goodput_a", "a") is None and st.load_state("mlgoodput.ui", '["goodput_a", "a"]') is None
    assert st.load_state("goodput_ab", "ab") is not None
    assert forget_job(f"sqlite://{tmp_path / 'none.db'}", "a") == 0
    st.close()


def test_each_demo_has_its_own_job_name() -> None:
    assert default_job(JAX_WORKLOAD) == "demo"
    assert default_job(DEFAULT_WORKLOAD) == "demo-sim"
    assert DemoConfig(workload=DEFAULT_WORKLOAD).job == "demo-sim"
    assert DemoConfig(workload=DEFAULT_WORKLOAD, job="mine").job == "mine"


def test_demo_command_is_registered() -> None:
    with pytest.raises(SystemExit) as e:
        cli.main(["demo", "--help"])
    assert e.value.code == 0


def test_demo_config_rejects_bad_values(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="kill_at_step"):
        DemoConfig(steps=10, kill_at_step=10)
    with pytest.raises(ValueError, match="time_scale"):
        DemoConfig(time_scale=0)
