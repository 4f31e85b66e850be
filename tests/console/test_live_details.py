"""What a person sees on the live console: interrupted bars, live usage, no internal lines,
a goodput footer with its time, and two runs of one job name told apart in replays."""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import sys

import pytest

import mlgoodput.console as C
from mlgoodput.console import ConsoleServer, Progress
from waiting import wait_for

from .conftest import child_env
from .tmux_console import console_in_tmux

CLIENT = r"""
import logging, os, sys, time
import mlgoodput.console as C
from mlgoodput.console import Progress, Usage
C.connect(sys.argv[1])
Usage.enable(0.1)
logging.getLogger("mlgoodput.internal").info("recovered 12 journaled events")
logging.getLogger("train").info("user line")
try:
    with Progress.new(total=100, msg="epoch 7") as bar:
        bar.advance(42)
        raise KeyboardInterrupt
except KeyboardInterrupt:
    pass
while not os.path.exists(sys.argv[2]):
    time.sleep(0.05)
C.disconnect(timeout_s=10)
"""


@pytest.mark.slow
@pytest.mark.skipif(
    shutil.which("tmux") is None, reason="tmux is not installed (scripts/install-system-deps.sh installs it)"
)
def test_interrupted_bar_usage_and_no_internal_lines_on_screen(sockdir: str) -> None:
    with console_in_tmux(sockdir, name="mlgd", job="live", width=150, module="mlgoodput console") as t:
        client = t.start_client(CLIENT)
        text = wait_for(
            lambda: (s := t.screen()) and "interrupted" in s and "cpu" in s and s,
            what="the interrupted bar and a usage row",
        )
        bar_line = next(line for line in text.splitlines() if "epoch 7" in line and "42/100" in line)
        assert "interrupted" in bar_line and "done" not in bar_line
        assert "interrupted at 42/100" in text
        usage_line = next(line for line in text.splitlines() if line.startswith("usage"))
        assert "rss" in usage_line and "[#0]" in usage_line
        assert "user line" in text and "recovered 12 journaled events" not in text
        open(t.flag, "w").close()
        client.wait(30)
        assert client.returncode == 0
        t.interrupt_server()


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mlgoodput", *args], capture_output=True, text=True, env=child_env(), timeout=120
    )


def _one_run(sockdir: str, store: str, message: str) -> None:
    srv = ConsoleServer(f"unix:{sockdir}/r.sock", job="twice", store=store, display=False)
    address = srv.start()
    try:
        C.connect(address)
        logging.getLogger("train").warning(message)
        assert C.disconnect(10)
    finally:
        srv.stop()


@pytest.mark.slow
def test_two_runs_of_one_job_are_told_apart(sockdir: str) -> None:
    store = f"{sockdir}/runs.db"
    _one_run(sockdir, store, "first run line")
    _one_run(sockdir, store, "second run line")
    r = _cli("console", "logs", "--job", "twice", "--store", store)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert out.index("first run line") < out.index("── run 2 of job twice ──") < out.index("second run line")
    r = _cli("console", "logs", "--job", "twice", "--store", store, "--run", "2", "--json")
    rows = [json.loads(x) for x in r.stdout.splitlines()]
    assert [x["message"] for x in rows if x["logger"] == "train"] == ["second run line"]
    assert all(x["run"] == 2 for x in rows)


@pytest.mark.slow
def test_filters_and_plain_output_when_piped(sockdir: str) -> None:
    store = f"{sockdir}/f.db"
    srv = ConsoleServer(f"unix:{sockdir}/f.sock", job="filters", store=store, display=False)
    address = srv.start()
    try:
        C.connect(address, level=logging.DEBUG)
        logging.getLogger("a").debug("quiet detail")
        logging.getLogger("a").error("disk nearly full " + "x" * 150)
        logging.getLogger("a").info("step 10 done")
        assert C.disconnect(10)
    finally:
        srv.stop()
    r = _cli("console", "logs", "--job", "filters", "--store", store, "--level", "warning")
    lines = [x for x in r.stdout.splitlines() if x]
    assert len(lines) == 1 and "disk nearly full" in lines[0] and "x" * 150 in lines[0]  # one line, not wrapped at 80
    r = _cli("console", "logs", "--job", "filters", "--store", store, "--grep", "STEP 10")
    lines = [x for x in r.stdout.splitlines() if x]
    assert len(lines) == 1 and "step 10 done" in lines[0]
    r = _cli("console", "logs", "--job", "filters", "--store", store, "--process", "5")
    assert r.returncode == 0 and r.stdout == ""


def test_interrupted_bar_is_not_done_in_the_server_state(sockdir: str) -> None:
    srv = ConsoleServer(f"unix:{sockdir}/b.sock", job="bars", store=f"{sockdir}/b.db", display=False)
    address = srv.start()
    try:
        C.connect(address)
        with pytest.raises(RuntimeError), Progress.new(total=10, msg="halted") as bar:
            bar.advance(3)
            raise RuntimeError("stop")
        with Progress.new(total=2, msg="whole") as bar:
            bar.advance(2)
        assert C.disconnect(10)
    finally:
        srv.stop()
    states = {b.desc: b for b in srv.bars.values()}
    assert states["halted"].interrupted and states["halted"].completed == 3
    assert states["whole"].done and not states["whole"].interrupted
