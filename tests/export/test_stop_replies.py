"""A stop's reply is never lost to the child's exit (issue 26).

The child sends its stop's reply and exits at once; the supervisor thread reads the reply
off the socket a moment later. Whoever waits for the stop (the finisher of
`stop_in_background`, or `stop()` itself) must not take the child's exit for "no reply":
that flaked tests/monitoring/test_fast_stop.py, where a final upload that went out in full
was reported as failed. The supervisor is slowed down here to make that moment long.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from mlgoodput.export import ExporterProcess, Sample
from mlgoodput.export import _process as process_module
from mlgoodput.testing import FileExporter

JOB = {"job_name": "j"}


def _slow_replies(proc: ExporterProcess) -> None:
    """Deliver each reply only after the child has exited and the finisher has looked a few
    times (what a busy machine does to the supervisor thread now and then)."""
    deliver = proc._deliver

    def late(msg: tuple[Any, ...]) -> None:
        p = proc._popen
        assert p is not None
        p.wait(10)
        time.sleep(6 * process_module.FINISH_POLL_S)
        deliver(msg)

    proc._deliver = late  # type: ignore[method-assign]


def _started(tmp_path: Path) -> tuple[ExporterProcess, Path]:
    out = tmp_path / "out.jsonl"
    proc = ExporterProcess([FileExporter(out)], interval_s=60)
    proc.start()
    proc.submit([Sample("goodput", 1.0, JOB)])
    assert proc.flush(10)
    return proc, out


@pytest.mark.slow
def test_a_background_stop_whose_reply_comes_after_the_exit_is_ok(tmp_path: Path) -> None:
    proc, out = _started(tmp_path)
    _slow_replies(proc)
    proc.submit([Sample("goodput", 2.0, JOB)])
    handle = proc.stop_in_background(60)
    assert handle.wait(30)
    assert handle.ok and not proc.alive
    assert FileExporter.latest(out) == {"goodput": 2.0}


@pytest.mark.slow
def test_a_stop_whose_reply_comes_after_the_exit_is_ok(tmp_path: Path) -> None:
    proc, _ = _started(tmp_path)
    _slow_replies(proc)
    assert proc.stop(30)


class CrashingExporter:
    """Its shutdown forks a process that keeps every fd of the exporter process (its socket
    to the parent included) and then kills the exporter process without a reply."""

    def __init__(self, pid_file: str) -> None:
        self.pid_file = pid_file

    def export(self, samples: Sequence[Sample]) -> None:
        pass

    def shutdown(self, timeout_s: float | None = None) -> None:
        pid = os.fork()
        if pid == 0:
            time.sleep(60)
            os._exit(0)
        with open(self.pid_file, "w") as f:
            f.write(str(pid))
        os._exit(7)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # (the fork in the exporter process)
def test_a_child_dead_without_a_reply_ends_its_stop_though_another_process_holds_its_socket(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No end of the socket comes (the fork holds it open): the supervisor reads what the
    dead child sent and drops its socket, so the stop fails soon instead of at its deadline."""
    monkeypatch.setattr(process_module, "SUPERVISE_S", 0.2)
    pid_file = tmp_path / "fork.pid"
    proc = ExporterProcess([CrashingExporter(str(pid_file))], interval_s=60)
    proc.start()
    try:
        t = time.monotonic()
        handle = proc.stop_in_background(60)
        assert not handle.wait(20)
        assert handle.done and time.monotonic() - t < 20
        assert proc._popen is not None and proc._popen.returncode == 7
    finally:
        if pid_file.exists():
            os.kill(int(pid_file.read_text()), signal.SIGKILL)
