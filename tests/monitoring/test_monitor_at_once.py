"""The monitor answers at once: its first upload happens when it starts, not one interval
later; `mlgoodput monitor --prometheus-port` says where it serves in one line, and its
`/metrics` is never empty while the job has data.

Every monitor here uploads every 600 s, so only the upload at start can satisfy the
conditions the tests wait on.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from monitor_helpers import finished_job, write_events

from mlgoodput import monitoring
from mlgoodput.accounting import GoodputCalculator
from mlgoodput.export import PrometheusExporter, Sample
from mlgoodput.testing import FileExporter
from waiting import tensorboard_has, wait_for

JOB, LOGGER = "at-once", "goodput_at-once"
PROMTOOL = shutil.which("promtool")


class _Lines:
    """A subprocess's stdout, read line by line on a thread (a test never blocks on it)."""

    def __init__(self, p: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        assert p.stdout is not None
        out = p.stdout
        self._t = threading.Thread(target=lambda: self.lines.extend(iter(out.readline, "")), daemon=True)
        self._t.start()


@contextlib.contextmanager
def _monitor_cli(db: Path, *extra: str) -> Iterator[subprocess.Popen[str]]:
    """`mlgoodput monitor` in its own process, killed on the way out if still running."""
    cmd = [sys.executable, "-m", "mlgoodput", "monitor", "--job", JOB, "--store", str(db), "--interval", "600"]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    p = subprocess.Popen([*cmd, *extra], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        yield p
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def _stop(p: subprocess.Popen[str]) -> tuple[int, str]:
    """SIGINT, as Ctrl-C: (exit code, stderr)."""
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    return p.returncode, err


@pytest.mark.slow
def test_metrics_hold_the_job_as_soon_as_the_monitor_says_where(db: Path, t0: float, tmp_path: Path) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    write_events(db, LOGGER, JOB, finished_job(t0))
    want = GoodputCalculator(JOB, LOGGER, store=str(db)).report()
    with _monitor_cli(db, "--prometheus-port", "0", "--prometheus-addr", "127.0.0.1") as p:
        out = _Lines(p)
        first = wait_for(lambda: out.lines[:1], 120, "the monitor's first line")[0]
        assert first.startswith("mlgoodput monitor: serving http://127.0.0.1:"), first
        url = first.split()[3]
        assert url.endswith("/metrics") and not url.endswith(":0/metrics"), first  # the port it picked
        text = urllib.request.urlopen(url, timeout=30).read().decode()  # one GET, no retry
        assert text, "an empty /metrics"
        samples = {
            s.name: s for f in text_string_to_metric_families(text) for s in f.samples if s.labels["job_name"] == JOB
        }
        assert samples["mlgoodput_goodput_ratio"].value == pytest.approx(want.goodput_pct / 100)
        assert samples["mlgoodput_goodput_productive_seconds"].value == pytest.approx(want.productive_s)
        if PROMTOOL is not None:
            check = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True)
            assert check.returncode == 0, check.stdout + check.stderr
        code, err = _stop(p)
    assert code == 0, err
    assert "stopped" in err and "Traceback" not in err, err
    assert out.lines == [first], out.lines  # one line on stdout, said once


@pytest.mark.slow
def test_the_cli_uploads_to_tensorboard_at_start(db: Path, t0: float, tmp_path: Path) -> None:
    write_events(db, LOGGER, JOB, finished_job(t0))
    tb = tmp_path / "tb"
    with _monitor_cli(db, "--tensorboard-dir", str(tb), "--quiet") as p:
        out = _Lines(p)
        line = wait_for(lambda: out.lines[:1], 120, "the monitor's first line")[0]
        assert line.startswith(f"mlgoodput monitor: uploading job {JOB} to TensorBoard {tb / 'goodput'}"), line
        wait_for(lambda: tensorboard_has(tb / "goodput", "goodput/goodput_pct"), 120, "the upload at start")
        code, err = _stop(p)
    assert code == 0, err


@pytest.mark.slow
def test_every_exporter_gets_the_upload_at_start(db: Path, t0: float, tmp_path: Path) -> None:
    """The library API too: no flush and no stop, one upload of each uploader at its start."""
    from mlgoodput.export import CloudMonitoringExporter, GCPOptions, OTLPExporter
    from mlgoodput.testing import FakeMetricService, OTLPReceiver

    write_events(db, LOGGER, JOB, finished_job(t0))
    want = GoodputCalculator(JOB, LOGGER, store=str(db)).report()
    out = tmp_path / "out.jsonl"
    with OTLPReceiver("grpc") as rx, FakeMetricService(min_point_interval_s=0.0) as svc:
        gcm = CloudMonitoringExporter(
            GCPOptions(project_id="p", location="us-central2-b", acc_type="v4-8"),
            api_endpoint=svc.endpoint,
            insecure=True,
            min_point_interval_s=0.0,
        )
        m = monitoring.GoodputMonitor(
            JOB,
            LOGGER,
            tensorboard_dir=str(tmp_path / "tb"),
            upload_interval=600,
            monitoring_enabled=True,
            include_badput_breakdown=True,
            store=str(db),
            exporters=[PrometheusExporter(port=0), OTLPExporter(endpoint=rx.endpoint), gcm, FileExporter(out)],
        )
        try:
            m.start_goodput_uploader()
            m.start_rolling_window_goodput_uploader([60])
            [url] = m.endpoints
            wait_for(lambda: "goodput/goodput_pct" in FileExporter.latest(out), 120, "the file upload at start")
            assert FileExporter.latest(out)["goodput/goodput_pct"] == pytest.approx(want.goodput_pct)
            wait_for(
                lambda: "rolling/{window}/goodput_pct|window=60s" in FileExporter.latest(out),
                120,
                "the rolling upload at start",
            )
            assert "mlgoodput_goodput_ratio{" in urllib.request.urlopen(url, timeout=30).read().decode()
            wait_for(lambda: tensorboard_has(tmp_path / "tb" / "goodput", "goodput/goodput_pct"), 120, "TensorBoard")
            wait_for(lambda: rx.latest("mlgoodput.goodput.productive.seconds", job_name=JOB) is not None, 120, "OTLP")
            assert rx.latest("mlgoodput.goodput.productive.seconds", job_name=JOB) == pytest.approx(want.productive_s)
            wait_for(
                lambda: svc.latest("compute.googleapis.com/workload/goodput_time", workload_id=JOB) is not None,
                120,
                "Cloud Monitoring",
            )
        finally:
            m.stop_rolling_window_goodput_uploader(skip_final_flush=True)
            m.stop_goodput_uploader(skip_final_flush=True)
            assert m.wait_for_final_uploads()


def _raw_get(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    return s


def _read_all(s: socket.socket) -> str:
    chunks = []
    while chunk := s.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks).decode()


def test_a_scrape_before_the_first_export_waits_for_it() -> None:
    exp = PrometheusExporter(port=0, first_scrape_wait_s=60)
    exp.start()
    try:
        assert exp.url is not None
        port = int(exp.url.rsplit(":", 1)[1].split("/")[0])
        with _raw_get(port) as s:
            held, _, _ = select.select([s], [], [], 0.3)
            assert not held  # no empty page: the scrape waits for the first export
            exp.export([Sample("goodput/goodput_pct", 42.0, {"job_name": "j"})])
            reply = _read_all(s)
        assert reply.startswith("HTTP/1.1 200") and 'mlgoodput_goodput_ratio{job_name="j"} 0.42' in reply, reply
    finally:
        exp.shutdown()


def test_the_wait_for_the_first_export_is_bounded() -> None:
    exp = PrometheusExporter(port=0, first_scrape_wait_s=0.2)
    exp.start()
    try:
        assert exp.url is not None
        port = int(exp.url.rsplit(":", 1)[1].split("/")[0])
        t0 = time.monotonic()
        with _raw_get(port) as s:
            reply = _read_all(s)  # nothing ever exported: answered after the wait, empty
        assert time.monotonic() - t0 >= 0.2 * 0.9  # it did wait (a lower bound holds on any load)
        assert reply.startswith("HTTP/1.1 200") and reply.endswith("\r\n\r\n"), reply
    finally:
        exp.shutdown()


def test_first_scrape_wait_s_is_checked() -> None:
    with pytest.raises(ValueError, match="first_scrape_wait_s"):
        PrometheusExporter(port=0, first_scrape_wait_s=-1)
