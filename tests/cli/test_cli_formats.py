"""`mlgoodput report` and `mlgoodput jobs` print durations, times and FLOP/s in the project's
formats (mlgoodput._format), the same text the web UI shows."""

from __future__ import annotations

from pathlib import Path

import pytest

from mlgoodput._format import duration, timestamp
from mlgoodput.events import Event, EventBatch, Kind
from mlgoodput.store import open_store
from tests.cli.test_report_cli import run_cli

T0 = 1_795_000_000.0
LONG_S = 100_090.0  # 27 h 48 min


def long_job(path: str) -> None:
    """A 27.8 h job of two hosts, with FLOPs and a peak (for the FLOP/s lines)."""
    st = open_store(path)
    for h in range(2):
        ev = [Event(Kind.JOB_START, T0, h), Event(Kind.STEP_FLOPS, T0, h, value=2.4e16)]
        ev.append(Event(Kind.PEAK_FLOPS, T0, h, value=3.0e14, name="configured"))
        ev += [Event(Kind.STEP_START, T0 + 10 + 100.0 * k, h, step=k) for k in range(999)]
        ev.append(Event(Kind.JOB_END, T0 + LONG_S, h))
        st.append("goodput_long", "long", EventBatch(70 + h, 0, ev))
    st.close()


@pytest.mark.slow
def test_report_and_jobs_use_the_project_formats(tmp_path: Path) -> None:
    path = str(tmp_path / "f.db")
    long_job(path)
    res = run_cli("report", "--job", "long", "--store", path)
    assert res.returncode == 0, res.stderr
    head = res.stdout.splitlines()[0]
    assert head.endswith(f"{timestamp(T0)} .. {timestamp(T0 + LONG_S)} (27 h 48 min)"), head
    assert timestamp(T0) == "2026-11-18 11:06:40 UTC"
    assert "300 TFLOP/s (configured)" in res.stdout
    assert "e+" not in res.stdout
    assert f"ideal step time          {duration(100.0)}" in res.stdout  # "1 min 40 s"
    jobs = run_cli("jobs", "--store", path)
    assert jobs.returncode == 0, jobs.stderr
    row = next(line for line in jobs.stdout.splitlines() if line.startswith("long "))
    assert "27 h 48 min" in row and timestamp(T0 + LONG_S) in row, row
