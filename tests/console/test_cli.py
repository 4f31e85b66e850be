"""`console logs` and `console usage-report` on what a session stored."""

from __future__ import annotations

import json
import logging
import multiprocessing as mp
import subprocess
import sys
import time

import pytest

import mlgoodput.console as C
from mlgoodput.console import Usage

from .conftest import child_env


def _busy(seconds: float) -> None:
    logging.getLogger("child").info("child busy for %.1f s", seconds)
    end = time.time() + seconds
    i = 0
    while time.time() < end:
        i += 1
    Usage.checkpoint("child-done", 1)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mlgoodput.console", *args], capture_output=True, text=True, env=child_env(), timeout=120
    )


@pytest.mark.slow
def test_logs_replay_and_usage_report(sockdir: str) -> None:
    store = f"{sockdir}/store.db"
    with C.session(f"unix:{sockdir}/s.sock", job="cli", store=store, display=False, usage=0.05):
        logging.getLogger("main").info("epoch %d done", 1)
        Usage.checkpoint("step", 0)
        p = mp.get_context("spawn").Process(target=_busy, args=(0.6,))
        p.start()
        time.sleep(0.3)
        Usage.checkpoint("step", 1)
        p.join(60)
        logging.getLogger("main").error("the end")
    assert not Usage.enabled()

    r = _cli("logs", "--job", "cli", "--store", store, "--json")
    assert r.returncode == 0, r.stderr
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    mine = [x for x in rows if x["logger"] in ("main", "child")]
    assert [x["message"] for x in mine] == ["epoch 1 done", "child busy for 0.6 s", "the end"]
    for x in mine:
        assert {"time", "process", "level", "logger", "message", "pid"} <= set(x)
    assert mine[0]["process"] == 0 and mine[1]["process"] == 1 and mine[2]["level"] == "ERROR"

    r = _cli("logs", "--store", store)  # the most recent job, as text
    assert r.returncode == 0 and "[#1]" in r.stdout and "child busy" in r.stdout

    for out in (f"{sockdir}/usage.png", f"{sockdir}/usage.html"):
        r = _cli("usage-report", "--job", "cli", "--store", store, "--out", out)
        assert r.returncode == 0, r.stderr
        with open(out, "rb") as f:
            data = f.read()
        assert len(data) > 5000
        if out.endswith(".png"):
            assert data.startswith(b"\x89PNG")
        else:
            text = data.decode()
            assert "<svg" in text and "child-done" in text and text.count("<tr>") == 4  # header + 3 checkpoints
    r = _cli("usage-report", "--job", "nosuch", "--store", store, "--out", f"{sockdir}/x.png")
    assert r.returncode == 2 and "no console job named 'nosuch'" in r.stderr
    r = _cli("usage-report", "--job", "cli", "--store", store, "--out", f"{sockdir}/missing/u.html")
    assert r.returncode == 2 and "Traceback" not in r.stderr and "missing" in r.stderr, r.stderr
