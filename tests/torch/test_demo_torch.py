"""`mlgoodput demo --framework torch`: two CPU ranks under torchrun, one killed, the report."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mlgoodput.store import SQLiteStore


def _demo(tmp_path: Path, steps: int, kill_at: int, timeout: float) -> subprocess.CompletedProcess[str]:
    """`mlgoodput demo --framework torch` in a child process, its output captured."""
    argv = ["demo", "--framework", "torch", "--output-dir", str(tmp_path)]
    argv += ["--steps", str(steps), "--kill-at-step", str(kill_at)]
    return subprocess.run(
        [sys.executable, "-m", "mlgoodput", *argv], capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.mark.slow
def test_torch_demo_kills_a_rank_and_reports(tmp_path: Path) -> None:
    p = _demo(tmp_path, 8, 5, timeout=180)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    out = p.stdout
    assert "rank 1 is killed at step 5" in out
    assert "attempt 2: restore (step" in out and "attempt 2: done" in out
    assert any(line.split() == ["disruptions", "1"] for line in out.splitlines())
    assert "rank 0:" in out and "rank 1:" in out  # per-rank step times
    # its own job in the demos' one store, with its run and console, and its next commands
    tail = out[out.index("Next, try these") :]
    assert f"export MLGOODPUT_STORE={tmp_path.resolve() / 'demo.db'}" in tail, tail
    assert "mlgoodput report --job demo-torch" in tail, tail
    st = SQLiteStore(tmp_path / "demo.db")
    streams = {(j.namespace, j.job.rsplit("-", 1)[0] if j.namespace == "mlgoodput.run" else j.job) for j in st.jobs()}
    st.close()
    assert {("mlgoodput.run", "demo-torch"), ("mlgoodput.console", "demo-torch")} <= streams, streams


def test_torch_demo_rejects_bad_arguments(tmp_path: Path) -> None:
    p = _demo(tmp_path, 8, 9, timeout=60)
    assert p.returncode == 2 and "--kill-at-step must be between 1 and 7" in p.stderr
    assert "Traceback" not in p.stderr
