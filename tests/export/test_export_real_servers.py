"""The exporters seen by the real programs: a running `tensorboard` and a Debian `prometheus`."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from mlgoodput.export import ExporterProcess, PrometheusExporter, Sample, TensorBoardExporter

JOB = {"job_name": "job-a", "logger_name": "goodput_job-a"}
pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get_json(url: str, timeout_s: float = 5.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout_s) as r:
        return json.loads(r.read().decode())


def poll(fn: Any, timeout_s: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout_s
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            v = fn()
            if v:
                return v
        except Exception as e:  # the server is still starting
            last = e
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting; last error: {last}")


def start_prometheus(folder: Path, target: int, port: int) -> subprocess.Popen[bytes]:
    """A real Prometheus server on 127.0.0.1:`port` scraping 127.0.0.1:`target` every second,
    its config and data in `folder` (the caller stops it)."""
    cfg = folder / "prometheus.yml"
    cfg.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        f"scrape_configs:\n  - job_name: mlgoodput\n    static_configs:\n      - targets: ['127.0.0.1:{target}']\n"
    )
    assert PROMETHEUS is not None
    return subprocess.Popen(
        [
            PROMETHEUS,
            f"--config.file={cfg}",
            f"--storage.tsdb.path={folder / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=folder,
    )


def test_tensorboard_server_shows_the_scalars(tmp_path: Path, server_proc: list[subprocess.Popen[bytes]]) -> None:
    logdir = tmp_path / "tb"
    proc = ExporterProcess([TensorBoardExporter(logdir)], interval_s=60)
    proc.start()
    proc.submit([Sample("goodput/goodput_pct", 61.5, JOB, step=100)])
    assert proc.flush(10)
    proc.submit(
        [
            Sample("goodput/goodput_pct", 72.25, JOB, step=200),
            Sample("badput/{bucket}_pct", 3.5, {**JOB, "bucket": "stall"}, step=200),
        ]
    )
    assert proc.stop(10)

    port = free_port()
    tb = [
        sys.executable,
        "-m",
        "tensorboard.main",
        "--logdir",
        str(logdir),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--load_fast",
        "false",
        "--reload_interval",
        "1",
    ]
    server_proc.append(subprocess.Popen(tb, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    base = f"http://127.0.0.1:{port}/data/plugin/scalars"

    def tags() -> Any:
        runs = get_json(f"{base}/tags")
        return runs if any("goodput/goodput_pct" in t for t in runs.values()) else None

    runs = poll(tags)
    run = next(r for r, t in runs.items() if "goodput/goodput_pct" in t)
    assert "badput/stall_pct" in runs[run]
    q = urllib.parse.urlencode({"run": run, "tag": "goodput/goodput_pct"})
    points = get_json(f"{base}/scalars?{q}")
    assert [(p[1], p[2]) for p in points] == [(100, 61.5), (200, 72.25)]  # [wall_time, step, value]


PROMETHEUS = shutil.which("prometheus")


@pytest.mark.skipif(
    PROMETHEUS is None, reason="the Debian 'prometheus' package is not installed (scripts/install-system-deps.sh)"
)
def test_prometheus_server_scrapes_our_endpoint(tmp_path: Path, server_proc: list[subprocess.Popen[bytes]]) -> None:
    ours, theirs = free_port(), free_port()
    proc = ExporterProcess([PrometheusExporter(port=ours)], interval_s=60)
    proc.start()
    try:
        proc.submit(
            [
                Sample("goodput/goodput_pct", 87.5, JOB),
                Sample("badput/{bucket}_seconds", 12.0, {**JOB, "bucket": "program_startup"}),
            ]
        )
        assert proc.flush(10)
        server_proc.append(start_prometheus(tmp_path, ours, theirs))

        def query(expr: str) -> Any:
            url = f"http://127.0.0.1:{theirs}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
            res = get_json(url)["data"]["result"]
            return res or None

        res = poll(lambda: query('mlgoodput_goodput_ratio{job_name="job-a"}'))
        assert float(res[0]["value"][1]) == pytest.approx(0.875)
        assert res[0]["metric"]["logger_name"] == "goodput_job-a"
        assert res[0]["metric"]["job"] == "mlgoodput"  # Prometheus's own label; ours is job_name
        res = poll(lambda: query('mlgoodput_badput_seconds{bucket="program_startup"}'))
        assert float(res[0]["value"][1]) == pytest.approx(12.0)
    finally:
        proc.stop(10)


def test_prometheus_default_binds_loopback() -> None:
    exp = PrometheusExporter(port=0)
    assert exp.addr == "127.0.0.1"
    exp.start()
    try:
        assert exp.serving and exp.status.startswith("serving http://127.0.0.1:")
    finally:
        exp.shutdown()


def test_tensorboard_full_disk_is_an_error_then_recovers(tmp_path: Path) -> None:
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    logdir = tmp_path / "tb"
    exp = TensorBoardExporter(logdir)
    exp.export([Sample("goodput/goodput_pct", 1.0, JOB, step=1)])
    # make the open file a handle on /dev/full: every write now fails with ENOSPC
    w = exp._writer
    w._writer.close()
    w._writer = open("/dev/full", "wb")  # noqa: SIM115
    with pytest.raises(OSError):
        exp.export([Sample("goodput/goodput_pct", 2.0, JOB, step=2)])
    exp.export([Sample("goodput/goodput_pct", 3.0, JOB, step=3)])  # a fresh file
    exp.shutdown()
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(logdir))
    acc.Reload()
    # two event files made within one second may load in either order: compare by step
    assert sorted((e.step, e.value) for e in acc.Scalars("goodput/goodput_pct")) == [(1, 1.0), (3, 3.0)]
