"""`mlgoodput aggregate`: this node's shipper as a side process, stopped by Ctrl-C with one line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

from mlgoodput._recovery import store_url
from tests.journal.test_aggregator import ROOT, _leader_pid, _once, _result, _spawn
from tests.waiting import wait_for


def start_aggregate(db: str, *extra: str) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.Popen(
        [sys.executable, "-m", "mlgoodput", "aggregate", "--store", db, "--interval-s", "0.1", *extra],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )


def test_the_side_process_ships_for_the_node_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    db = str(tmp_path / "side.db")
    url = store_url(db)
    job = f"side-{uuid.uuid4().hex[:8]}"
    agg = start_aggregate(db)
    try:
        assert agg.stderr is not None
        assert "shipping the journals of" in agg.stderr.readline()
        wait_for(lambda: _leader_pid(url) == agg.pid, 60, "the side process leading")
        writers = [_spawn(url, job, h, 1500, "flush") for h in range(2)]
        results = [_result(w) for w in writers]
        assert all(r["flushed"] for r in results), results
        assert all(r["node"]["rounds"] == 0 for r in results), results  # the side process shipped it all
        assert _once(url, job, {0: 1500, 1: 1500})
        agg.send_signal(signal.SIGINT)
        _, err = agg.communicate(timeout=60)
        assert agg.returncode == 0, err
        stopped = [ln for ln in err.strip().splitlines() if "aggregator stopped" in ln]
        assert len(stopped) == 1 and "aggregator stopped: 3000 events stored in" in stopped[0], err
        assert err.strip().splitlines()[-1] == stopped[0]
    finally:
        if agg.poll() is None:
            agg.kill()
            agg.wait(30)


def test_a_memory_store_has_nothing_to_aggregate() -> None:
    env = dict(os.environ, PYTHONPATH=ROOT)
    r = subprocess.run(
        [sys.executable, "-m", "mlgoodput", "aggregate", "--store", "memory://x"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )
    assert r.returncode == 2 and "nothing to aggregate" in r.stderr
