"""Every exporter with its real counterpart, behind one interface for the contract suite."""

from __future__ import annotations

import subprocess
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import tests.export.listexporter  # noqa: F401  (the list exporter, written for the tests)
from tests.export.cases import CASES, Backend, contract_case

from mlgoodput.export import (
    CloudMonitoringExporter,
    GCPOptions,
    OTLPExporter,
    PrometheusExporter,
    TensorBoardExporter,
)
from mlgoodput.export._otlp import otlp_name
from mlgoodput.export._prometheus import prometheus_name
from mlgoodput.testing import FakeMetricService, OTLPReceiver


@pytest.fixture
def server_proc() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Processes a test starts (a Prometheus or TensorBoard server), ended on the way out."""
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for p in procs:
        p.terminate()
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(5)


def _tb_reader(logdir: Path) -> Callable[[str, dict[str, str]], float | None]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from mlgoodput.export._names import tensorboard_tag

    def read(name: str, labels: dict[str, str]) -> float | None:
        acc = EventAccumulator(str(logdir), size_guidance={"scalars": 0})
        acc.Reload()
        tag = tensorboard_tag(name, labels)
        if tag not in acc.Tags()["scalars"]:
            return None
        return float(acc.Scalars(tag)[-1].value)

    return read


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    from prometheus_client.parser import text_string_to_metric_families

    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


GCP = GCPOptions(project_id="test-project", location="us-central1-a", acc_type="v5p-8", replica_id="0")


@contract_case("tensorboard", "tensorboard")
def _tensorboard(tmp_path: Path) -> Iterator[Backend]:
    kind = "tensorboard"
    logdir = tmp_path / "tb"
    exp = TensorBoardExporter(logdir)
    blocker = tmp_path / "blocked"

    def down() -> None:
        exp.logdir = str(blocker / "x")  # a path under a regular file: every write fails
        blocker.write_text("not a directory")
        exp._close_quietly()

    def up() -> None:
        exp.logdir = str(logdir)

    yield Backend(kind, exp, _tb_reader(logdir), down, up, lambda n: 1.0)
    exp.shutdown()


@contract_case("prometheus", "prometheus")
def _prometheus(tmp_path: Path) -> Iterator[Backend]:
    exp = PrometheusExporter(port=0)
    exp.start()

    def read(name: str, labels: dict[str, str]) -> float | None:
        pname, _ = prometheus_name(name)
        return scrape(exp.port).get((pname, tuple(sorted(labels.items()))))

    yield Backend("prometheus", exp, read, None, None, lambda n: prometheus_name(n)[1])
    exp.shutdown()


def _otlp(proto: str) -> Iterator[Backend]:
    rx = OTLPReceiver(proto).start()
    exp = OTLPExporter(endpoint=rx.endpoint, protocol=proto, timeout_s=2)

    def read(name: str, labels: dict[str, str]) -> float | None:
        return rx.latest(otlp_name(name)[0], **labels)

    def down() -> None:
        rx.fail = True

    def up() -> None:
        rx.fail = False

    yield Backend(f"otlp-{proto}", exp, read, down, up, lambda n: otlp_name(n)[2])
    exp.shutdown(2)
    rx.stop()


contract_case("otlp-grpc", "otlp")(lambda tmp_path: _otlp("grpc"))
contract_case("otlp-http", "otlp")(lambda tmp_path: _otlp("http"))


@contract_case("cloud-monitoring", "gcp")
def _cloud_monitoring(tmp_path: Path) -> Iterator[Backend]:
    svc = FakeMetricService(min_point_interval_s=0.0).start()
    exp = CloudMonitoringExporter(GCP, api_endpoint=svc.endpoint, insecure=True, min_point_interval_s=0.0, timeout_s=2)

    def read(name: str, labels: dict[str, str]) -> float | None:
        from mlgoodput.export._gcp import CUSTOM_PREFIX, WORKLOAD_METRICS
        from mlgoodput.export._names import family

        if name in WORKLOAD_METRICS:
            return svc.latest(
                "compute.googleapis.com/workload/" + WORKLOAD_METRICS[name][0], workload_id=labels["job_name"]
            )
        return svc.latest(CUSTOM_PREFIX + family(name), **labels)

    def down() -> None:
        svc.fail = True

    def up() -> None:
        svc.fail = False

    yield Backend("cloud-monitoring", exp, read, down, up, lambda n: 1.0)
    exp.shutdown(1)
    svc.stop()


@pytest.fixture(params=list(CASES))
def backend(request: Any, tmp_path: Path) -> Iterator[Backend]:
    """Every contract case of every registered exporter (tests/export/cases.py)."""
    yield from CASES[request.param][1](tmp_path)
