"""Every exporter with its real counterpart, behind one interface for the contract suite."""

from __future__ import annotations

import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mlgoodput.export import (
    CloudMonitoringExporter,
    Exporter,
    GCPOptions,
    OTLPExporter,
    PrometheusExporter,
    TensorBoardExporter,
)
from mlgoodput.export._otlp import otlp_name
from mlgoodput.export._prometheus import prometheus_name
from mlgoodput.testing import FakeMetricService, OTLPReceiver


@dataclass
class Backend:
    """An exporter plus `read(sample_name, labels) -> latest value the real counterpart holds`."""

    name: str
    exporter: Exporter
    read: Callable[[str, dict[str, str]], float | None]
    make_down: Callable[[], None] | None  # make the counterpart fail; None: cannot fail
    make_up: Callable[[], None] | None
    factor: Callable[[str], float]  # backend value = sample value * factor(name)


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


#: the contract cases (test_export_contract.py) of each registered exporter name; a new
#: exporter adds its own (test_exporter_registry.py checks that every name has some)
CONTRACT_CASES = {
    "tensorboard": ["tensorboard"],
    "prometheus": ["prometheus"],
    "otlp": ["otlp-grpc", "otlp-http"],
    "gcp": ["cloud-monitoring"],
}


@pytest.fixture(params=[case for cases in CONTRACT_CASES.values() for case in cases])
def backend(request: Any, tmp_path: Path) -> Iterator[Backend]:
    kind = request.param
    if kind == "tensorboard":
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
    elif kind == "prometheus":
        exp = PrometheusExporter(port=0)
        exp.start()

        def read(name: str, labels: dict[str, str]) -> float | None:
            pname, _ = prometheus_name(name)
            return scrape(exp.port).get((pname, tuple(sorted(labels.items()))))

        yield Backend(kind, exp, read, None, None, lambda n: prometheus_name(n)[1])
        exp.shutdown()
    elif kind.startswith("otlp"):
        proto = kind.split("-")[1]
        rx = OTLPReceiver(proto).start()
        exp = OTLPExporter(endpoint=rx.endpoint, protocol=proto, timeout_s=2)

        def read(name: str, labels: dict[str, str]) -> float | None:
            return rx.latest(otlp_name(name)[0], **labels)

        def down() -> None:
            rx.fail = True

        def up() -> None:
            rx.fail = False

        yield Backend(kind, exp, read, down, up, lambda n: otlp_name(n)[2])
        exp.shutdown(2)
        rx.stop()
    else:
        svc = FakeMetricService(min_point_interval_s=0.0).start()
        exp = CloudMonitoringExporter(GCP, api_endpoint=svc.endpoint, insecure=True, min_point_interval_s=0.0, timeout_s=2)

        def read(name: str, labels: dict[str, str]) -> float | None:
            from mlgoodput.export._gcp import CUSTOM_PREFIX, WORKLOAD_METRICS
            from mlgoodput.export._names import family

            if name in WORKLOAD_METRICS:
                return svc.latest("compute.googleapis.com/workload/" + WORKLOAD_METRICS[name][0], workload_id=labels["job_name"])
            return svc.latest(CUSTOM_PREFIX + family(name), **labels)

        def down() -> None:
            svc.fail = True

        def up() -> None:
            svc.fail = False

        yield Backend(kind, exp, read, down, up, lambda n: 1.0)
        exp.shutdown(1)
        svc.stop()
