"""jax-monitoring's own test cases on its public API, run against mlgoodput.jax.

Each test names the jax-monitoring test it ports. Its unit tests drive private internals
(`listeners._METRIC_QUEUE`, `_on_duration`, `_metric_worker`) with a mocked Cloud
Monitoring client; its integration test needs a live Google Cloud project. (The
`tests/test_config_metadata.py` cases test `_detect_gce_config` of the earlier
`jax_cloud_monitoring` package, a private function; mlgoodput's GCE detection is tested in
tests/jax/test_export.py against a fake metadata server.) Here the same
public calls run against a local fake Cloud Monitoring gRPC server (the real client talks
to it) instead. Only the import lines differ, plus the exporter pointed at the fake
server where the original relies on Application Default Credentials.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

jax = pytest.importorskip("jax", reason="JAX is an optional extra: pip install 'mlgoodput[jax]'")
pytest.importorskip("google.cloud.monitoring_v3", reason="the gcp extra")
import jax.monitoring  # noqa: E402, F811
import jax.numpy as jnp  # noqa: E402

import mlgoodput.jax as jm  # noqa: E402
from mlgoodput.jax import config, listeners  # noqa: E402
from mlgoodput.jax._gcm import JaxCloudMonitoringExporter  # noqa: E402
from mlgoodput.testing import FakeMetricService  # noqa: E402


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("MLGOODPUT_STORE", "memory://jax-port")
    jm.shutdown()
    config.replace_config(config.Config())
    yield
    listeners.stop_listeners()  # the original tests' tearDown
    config.replace_config(config.Config())


@pytest.fixture
def service() -> Iterator[FakeMetricService]:
    with FakeMetricService(min_point_interval_s=0.0) as svc:
        yield svc


def _exporter(svc: FakeMetricService, prefix: str) -> JaxCloudMonitoringExporter:
    return JaxCloudMonitoringExporter(
        project_id="test-project",
        metric_prefix=prefix,
        api_endpoint=svc.endpoint,
        insecure=True,
        min_point_interval_s=0.0,
    )


@pytest.mark.slow
def test_on_duration_plumbing(service: FakeMetricService) -> None:
    # jax-monitoring: tests/test_listeners.py TestListeners.test_on_duration_plumbing checks that
    # its private listener queues {'event', 'value', 'timestamp', 'kwargs'}; the public effect is
    # that a duration event reaches Cloud Monitoring with its value and its keyword labels.
    config.set_config(project_id="test-project")
    s = jm.init(
        project_id="test-project", metric_prefix="custom", exporters=[_exporter(service, "custom")], interval_s=60
    )
    jax.monitoring.record_event_duration_secs("test_event", 1.23, label="val")
    assert s.flush(30) and jm.shutdown(30)
    point = next(p for p in service.points if p.name == "custom/test_event")
    assert point.value == pytest.approx(1.23)
    assert point.labels["label"] == "val" and point.labels["job_name"] == "jax_job"


def test_worker_logic(service: FakeMetricService) -> None:
    # jax-monitoring: tests/test_listeners.py TestListeners.test_worker_logic runs its private
    # worker on a queue with a mocked client and checks the time series type "custom/test_event"
    # and value; here the event goes through the public path to the fake service.
    s = jm.init(
        project_id="test-project",
        metric_prefix="custom",
        monitored_resource_type="global",
        monitored_resource_labels={},
        job_name="test_job",
        exporters=[_exporter(service, "custom")],
        interval_s=60,
    )
    jax.monitoring.record_event_duration_secs("test_event", 5.0, l="v")
    assert s.flush(30) and jm.shutdown(30)
    point = next(p for p in service.points if p.name == "custom/test_event")
    assert point.value == 5.0
    assert point.labels["job_name"] == "test_job" and point.labels["l"] == "v"
    assert point.resource == {"project_id": "test-project"}
    assert service.requests[0] == "projects/test-project"


class _Live:
    """The setUp of tests/test_integration.py TestLiveIntegration, against the fake service."""

    def __init__(self, svc: FakeMetricService) -> None:
        self.unique_id = str(uuid.uuid4())
        self.event_name = "integration_test_event_v3"
        self.job_name = f"integration_test_{self.unique_id}"
        self.metric_prefix = f"custom.googleapis.com/jax/monitoring/test_{self.unique_id}"
        # the original: jm.init(job_name=self.job_name, metric_prefix=self.metric_prefix) with ADC
        self.session = jm.init(
            job_name=self.job_name,
            metric_prefix=self.metric_prefix,
            exporters=[_exporter(svc, self.metric_prefix)],
            interval_s=60,
        )
        self.svc = svc

    def wait_and_verify_metric(self, metric_type: str) -> None:
        assert self.session.flush(30) and jm.shutdown(30)
        found = [p for p in self.svc.points if p.name == metric_type and p.labels.get("job_name") == self.job_name]
        assert found, sorted({p.name for p in self.svc.points})


@pytest.mark.slow
def test_end_to_end_metric_export(service: FakeMetricService) -> None:
    # jax-monitoring: tests/test_integration.py TestLiveIntegration.test_end_to_end_metric_export
    live = _Live(service)
    jax.monitoring.record_event_duration_secs(live.event_name, 1.23, test_id=live.unique_id)
    live.wait_and_verify_metric(f"{live.metric_prefix}/{live.event_name}")


@pytest.mark.slow
def test_jax_compilation_metric(service: FakeMetricService) -> None:
    # jax-monitoring: tests/test_integration.py TestLiveIntegration.test_jax_compilation_metric
    live = _Live(service)

    @jax.jit
    def matmul(x: jax.Array, y: jax.Array) -> jax.Array:
        return jnp.dot(x, y)

    x = jnp.ones((8, 8))
    # First call triggers compilation
    _ = matmul(x, x).block_until_ready()
    live.wait_and_verify_metric(f"{live.metric_prefix}/jax/core/compile/backend_compile_duration")


def test_project_id_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # jax-monitoring: the setUp of TestLiveIntegration reads config.get_config().project_id after
    # init; with the project in the environment it is filled in (the original gets it from ADC).
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "env-project")
    jm.init(job_name="env", exporters=[])
    assert config.get_config().project_id == "env-project"
