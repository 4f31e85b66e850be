"""JAX metrics leaving the process: an exporter outage and a dead exporter process never touch
training, Cloud Monitoring gets the seed's names, and the aggregates reach the store."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from waiting import wait_for

jax = pytest.importorskip("jax", reason="JAX is an optional extra: pip install 'mlgoodput[jax]'")
import jax.monitoring as jmon  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import mlgoodput.jax as jm  # noqa: E402
from mlgoodput.events import Kind  # noqa: E402
from mlgoodput.jax._gcm import JaxCloudMonitoringExporter  # noqa: E402
from mlgoodput.store import open_store  # noqa: E402
from mlgoodput.testing import FakeMetadataServer, FakeMetricService, FileExporter  # noqa: E402


@pytest.fixture(autouse=True)
def _no_session() -> Iterator[None]:
    jm.shutdown()
    yield
    jm.shutdown()


def _count(path: Path, name: str) -> float:
    """The last value exported for `name` (any labels)."""
    v = -1.0
    for row in FileExporter.read(path):
        for x in row.get("samples", []):  # type: ignore[attr-defined]
            if x["name"] == name:
                v = float(x["value"])
    return v


@pytest.mark.slow
def test_backend_outage_and_exporter_death_never_reach_training(tmp_path: Path) -> None:
    out, down = tmp_path / "out.jsonl", tmp_path / "down"
    s = jm.init(
        job_name="outage",
        exporters=[FileExporter(out, fail_flag=str(down))],
        store=f"sqlite://{tmp_path}/s.db",
        interval_s=0.1,
    )
    assert s.sink is not None
    proc = s.sink.proc
    jmon.record_event("/test/outage")
    assert wait_for(lambda: _count(out, "test/outage") == 1.0)

    # 1. the backend is down: events keep being aggregated, nothing raises
    down.write_text("")
    for _ in range(1000):
        jmon.record_event("/test/outage")
    jax.jit(lambda x: x - 1)(jnp.ones(4)).block_until_ready()
    assert not s.flush(2)  # shipped now and sent to the exporter, whose backend refuses it
    assert _count(out, "test/outage") == 1.0  # nothing got through
    down.unlink()
    assert wait_for(lambda: _count(out, "test/outage") == 1001.0)

    # 2. the exporter process dies: training goes on, the process is restarted, and the
    #    cumulative totals (including what happened meanwhile) arrive
    pid = proc.pid
    os.kill(pid, signal.SIGKILL)
    for _ in range(500):
        jmon.record_event("/test/outage")
    jax.jit(lambda x: x * 7)(jnp.ones(4)).block_until_ready()
    assert wait_for(lambda: proc.restarts >= 1 and proc.alive)
    assert proc.pid != pid
    assert wait_for(lambda: _count(out, "test/outage") == 1501.0)
    assert s.aggregator.errors == 0
    assert jm.shutdown(20)


@pytest.mark.slow
def test_cloud_monitoring_gets_the_seed_prefix_job_label_and_resource(tmp_path: Path) -> None:
    with (
        FakeMetricService(min_point_interval_s=0.0) as svc,
        FakeMetadataServer(
            {"project/project-id": "proj-1", "instance/id": "4242", "instance/zone": "projects/1/zones/europe-west4-a"}
        ) as md,
    ):
        exp = JaxCloudMonitoringExporter(
            metric_prefix="custom.googleapis.com/jax/monitoring",
            api_endpoint=svc.endpoint,
            insecure=True,
            metadata_host=md.host,
            min_point_interval_s=0.0,
        )
        s = jm.init(job_name="gcm-job", exporters=[exp], store=f"sqlite://{tmp_path}/s.db", interval_s=60)
        jax.jit(lambda x: x / 2)(jnp.ones(4)).block_until_ready()
        assert s.flush(30)
        assert jm.shutdown(20)
        names = {p.name for p in svc.points}
        assert "custom.googleapis.com/jax/monitoring/jax/core/compile/backend_compile_duration/sum" in names
        assert not any(n.endswith("/bucket") for n in names)
        p = next(
            p
            for p in svc.points
            if p.name.endswith("backend_compile_duration/count") and p.labels.get("fun_name") == "jit(<lambda>)"
        )
        assert p.labels["job_name"] == "gcm-job"
        assert p.value == 1.0
        assert p.resource == {"instance_id": "4242", "zone": "europe-west4-a", "project_id": "proj-1"}
        assert svc.requests and svc.requests[0] == "projects/proj-1"


def test_default_exporter_is_cloud_monitoring_only_when_a_project_is_known(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mlgoodput.jax.pipeline import default_exporters

    kw: dict[str, Any] = {
        "metric_prefix": "custom.googleapis.com/jax/monitoring",
        "resource_type": None,
        "resource_labels": None,
    }
    assert default_exporters(project_id=None, **kw) == []
    (e,) = default_exporters(project_id="p", **kw)
    assert isinstance(e, JaxCloudMonitoringExporter) and e.metric_prefix == kw["metric_prefix"]
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "from-env")
    assert len(default_exporters(project_id=None, **kw)) == 1


def test_aggregates_reach_the_store_as_jax_metric_events(tmp_path: Path) -> None:
    store = f"sqlite://{tmp_path}/s.db"
    jm.init(job_name="stored", exporters=[], store=store, interval_s=60)
    for v in (0.5, 1.5):
        jmon.record_event_duration_secs("/test/stored", v, fun_name="f")
    assert jm.shutdown(20)
    evs = [
        e
        for e in open_store(store).read("mlgoodput.jax", "stored").columns.events()
        if e.kind == Kind.JAX_METRIC and e.name == "test/stored"
    ]
    assert evs and evs[-1].value == 2.0
    attrs = dict(evs[-1].attrs or {})
    assert attrs["sum"] == 2.0 and attrs["min"] == 0.5 and attrs["max"] == 1.5
    assert attrs["labels"] == {"fun_name": "f"}


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
def test_prometheus_serves_the_compile_metrics(tmp_path: Path) -> None:
    import urllib.request

    from mlgoodput.export import PrometheusExporter

    port = _free_port()
    s = jm.init(
        job_name="prom-job", exporters=[PrometheusExporter(port=port)], store=f"sqlite://{tmp_path}/s.db", interval_s=60
    )
    jax.jit(lambda x: x + 5)(jnp.ones(4)).block_until_ready()
    assert s.flush(30)
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    lines = [
        ln
        for ln in text.splitlines()
        if ln.startswith("mlgoodput_jax_core_compile_backend_compile_duration_seconds_count")
        and 'fun_name="jit(<lambda>)"' in ln
    ]
    assert lines and 'job_name="prom-job"' in lines[0]
    assert float(lines[0].rsplit(" ", 1)[1]) == 1.0
    assert jm.shutdown(20)
