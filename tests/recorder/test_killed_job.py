"""A training process killed with SIGKILL: once its signs of life stop, every screen calls the
job `crashed` with the same word, and its total stops growing (docs/accounting.md, "A job that
dies"). The dead limit is set to one second through the environment so the test waits on the
status, not on two minutes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mlgoodput._monitoring._samples import cumulative_samples
from mlgoodput.accounting import BadputType, GoodputCalculator
from mlgoodput.store import open_store
from mlgoodput.ui import Api
from waiting import wait_for

SRC = str(Path(__file__).resolve().parents[2] / "src")
PROC = str(Path(__file__).with_name("_proc.py"))


@pytest.mark.slow
def test_a_killed_job_is_crashed_everywhere_and_its_total_stays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = str(tmp_path / "k.db")
    env = {**os.environ, "PYTHONPATH": SRC, "MLGOODPUT_DEAD_AFTER_S": "1"}
    p = subprocess.Popen(
        [sys.executable, PROC, "kill", db, "dead", "0", "300"], stdout=subprocess.PIPE, env=env, text=True
    )
    try:
        assert p.stdout is not None
        assert p.stdout.readline().strip() == "ready"
        killed_at = time.time()
        p.send_signal(signal.SIGKILL)
        assert p.wait(30) == -signal.SIGKILL
    finally:
        if p.poll() is None:
            p.kill()
    monkeypatch.setenv("MLGOODPUT_DEAD_AFTER_S", "1")
    calc = GoodputCalculator("dead", "goodput_dead", store=db)
    assert wait_for(lambda: calc.report().status == "crashed", 60)
    r1 = calc.report()
    r2 = GoodputCalculator("dead", "goodput_dead", store=db).report(at=time.time() + 60)  # a minute later
    assert (r1.total_s, r1.goodput_pct, r1.end) == (r2.total_s, r2.goodput_pct, r2.end)
    assert r2.status == "crashed"
    assert r1.end <= killed_at  # it ends at the last sign of life, before the kill
    # the evaluation left open ends with the attempt, at the last sign of life (its own start,
    # the last event the process wrote), not at now
    assert r1.badput_total_s(BadputType.CUSTOM_BADPUT_EVENTS) == 0.0
    out = subprocess.run(
        [sys.executable, "-m", "mlgoodput", "jobs", "--store", db, "--json"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    (row,) = [r for r in json.loads(out) if r["job"] == "dead"]
    assert row["status"] == "crashed"
    assert row["duration_s"] == pytest.approx(r1.total_s)
    text = subprocess.run(
        [sys.executable, "-m", "mlgoodput", "report", "--job", "dead", "--store", db],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "crashed" in text
    status = {s.labels["status"]: s.value for s in cumulative_samples(r1) if s.name == "goodput/status/{status}"}
    assert status == {"running": 0.0, "finished": 0.0, "crashed": 1.0, "stale": 0.0, "empty": 0.0}
    store = open_store(db)
    api = Api(store)
    try:
        assert api.view("dead", "goodput_dead").summary()["status"] == "crashed"
        page = api.job("dead", {})
        assert page["status"] == "crashed"
        assert page["attempts"][-1]["ended"] == "crashed"
    finally:
        api.close()
        store.close()
