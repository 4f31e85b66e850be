"""`mlgoodput report` and `mlgoodput jobs`, run as a user runs them (a real subprocess)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mlgoodput.events import EventBatch
from mlgoodput.store import open_store
from timelines import all_timelines, load


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    e = dict(os.environ, **(env or {}))
    e["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parents[2] / "src"), e.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-m", "mlgoodput", *args], capture_output=True, text=True, env=e, timeout=120
    )


@pytest.fixture
def store_with_jobs(tmp_path: Path) -> tuple[str, float]:
    path = str(tmp_path / "jobs.db")
    st = open_store(path)
    q = 0.0
    chosen = ("s1_clean_run", "s2_custom_and_async_data", "s3_checkpoint_save_restore", "s4_disruption_restart")
    for i, p in enumerate(p for p in all_timelines() if p.stem in chosen):
        tl = load(p)
        st.append(f"goodput_{tl.job_name}", tl.job_name, EventBatch(100 + i, 0, tl.events))
        if tl.name == "s4_disruption_restart":
            q = tl.query
    st.close()
    return path, q


def test_report_json_matches_the_truth(store_with_jobs: tuple[str, float]) -> None:
    path, _ = store_with_jobs
    res = run_cli("report", "--job", "s4-disruption-restart", "--store", path, "--json")
    assert res.returncode == 0, res.stderr
    d = json.loads(res.stdout)
    assert d["total_s"] == pytest.approx(245.5)
    assert d["productive_s"] == pytest.approx(100.0)
    assert d["disruptions"] == 1
    assert d["badput_s"]["program_startup"] == pytest.approx(28.0)
    assert d["badput_s"]["infrastructure_recovery_from_disruption"] == pytest.approx(60.0, abs=1.0)
    assert d["goodput_pct"] == pytest.approx(100 * 100 / 245.5)


@pytest.mark.slow
def test_report_table_and_window_and_at(store_with_jobs: tuple[str, float]) -> None:
    path, q = store_with_jobs
    res = run_cli("report", "--job", "s4-disruption-restart", "--store", path)
    assert res.returncode == 0, res.stderr
    assert "goodput" in res.stdout and "40.73 %" in res.stdout
    assert "infrastructure recovery" in res.stdout and "checkpoint restore" in res.stdout
    res = run_cli(
        "report", "--job", "s4-disruption-restart", "--store", path, "--json", "--window", "10", "--at", str(q)
    )
    d = json.loads(res.stdout)
    assert d["total_s"] == pytest.approx(10.0) and d["productive_s"] == pytest.approx(10.0)
    res = run_cli("report", "--job", "s4-disruption-restart", "--store", path, "--json", "--at", str(q - 245.5 + 50))
    assert json.loads(res.stdout)["total_s"] == pytest.approx(50.0)


@pytest.mark.slow
def test_jobs_lists_and_errors_are_clear(store_with_jobs: tuple[str, float], tmp_path: Path) -> None:
    path, _ = store_with_jobs
    res = run_cli("jobs", "--store", path, "--json")
    jobs = {j["job"]: j for j in json.loads(res.stdout)}
    assert "s1-clean-run" in jobs and jobs["s1-clean-run"]["logger"] == "goodput_s1-clean-run"
    assert "s1-clean-run" in run_cli("jobs", "--store", path).stdout
    res = run_cli("report", "--job", "nope", "--store", path)
    assert res.returncode == 2 and "no job named 'nope'" in res.stderr
    res = run_cli("report", "--job", "x", "--store", "ftp://host/x")
    assert res.returncode == 2 and "'ftp'" in res.stderr
    res = run_cli("report", "--job", "s1-clean-run", "--store", path, "--at", "yesterday")
    assert res.returncode == 2 and "--at" in res.stderr
    # the store comes from the environment when --store is not given
    res = run_cli("jobs", "--json", env={"MLGOODPUT_STORE": path})
    assert len(json.loads(res.stdout)) == 4
