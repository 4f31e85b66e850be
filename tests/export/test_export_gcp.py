"""CloudMonitoringExporter against a fake google.monitoring.v3.MetricService on 127.0.0.1."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from mlgoodput._gcp_metadata import metadata_value
from mlgoodput.export import CloudMonitoringExporter, GCPOptions, Sample
from mlgoodput.export._gcp import resolve_gcp_options
from mlgoodput.testing import FakeMetadataServer, FakeMetricService
from waiting import wait_for

JOB = {"job_name": "run-1", "logger_name": "goodput_run-1"}
OPTS = GCPOptions(project_id="proj", location="us-east5-a", acc_type="v5p-128", replica_id="3")
W = "compute.googleapis.com/workload/"


def exporter(svc: FakeMetricService, opts: GCPOptions = OPTS, interval: float = 0.0) -> CloudMonitoringExporter:
    return CloudMonitoringExporter(
        opts, api_endpoint=svc.endpoint, insecure=True, min_point_interval_s=interval, timeout_s=5
    )


def test_seed_metric_types_resource_and_labels() -> None:
    with FakeMetricService(min_point_interval_s=0) as svc:
        exp = exporter(svc)
        exp.export(
            [
                Sample("goodput/productive_seconds", 100.0, JOB),
                Sample("badput/{bucket}_seconds", 5.0, {**JOB, "bucket": "program_startup"}),
                Sample("badput/{bucket}_seconds", 9.0, {**JOB, "bucket": "custom_badput_events"}),
                Sample("badput/custom/{event}_seconds", 9.0, {**JOB, "event": "eval_step"}),
                Sample("goodput/total_elapsed_seconds", 120.0, JOB),
                Sample("goodput/max_productive_step", 41.0, JOB),
                Sample("goodput/disruptions", 2.0, JOB),
                Sample("goodput/step_time_deviation_seconds", 0.25, JOB),
                Sample("goodput/ideal_step_time_seconds", 1.5, JOB),
                Sample("rolling/{window}/goodput_pct", 88.0, {**JOB, "window": "300s"}),
                Sample("rolling/{window}/badput/{bucket}_pct", 12.0, {**JOB, "window": "300s", "bucket": "stall"}),
            ]
        )
        exp.shutdown(1)
        by_type = {p.name: p for p in svc.points}
        assert svc.requests == ["projects/proj"]
        good = by_type[W + "goodput_time"]
        assert good.value == 100.0
        assert good.labels == {"goodput_source": "TOTAL", "accelerator_type": "v5p-128"}
        assert good.resource == {"location": "us-east5-a", "workload_id": "run-1", "replica_id": "3"}
        badput = {p.labels["badput_source"]: p.value for p in svc.points if p.name == W + "badput_time"}
        assert badput == {"PROGRAM_STARTUP": 5.0, "CUSTOM_BADPUT_EVENTS.EVAL_STEP": 9.0}  # no double count
        assert by_type[W + "total_elapsed_time"].labels["window_type"] == "CUMULATIVE"
        assert by_type[W + "max_productive_steps"].value == 41
        assert by_type[W + "disruptions"].value == 2
        assert by_type[W + "step_time_deviation"].value == 0.25
        assert by_type[W + "performance"].value == 1.5
        assert by_type[W + "interval_goodput"].labels["rolling_window_size"] == "300"
        assert by_type[W + "interval_badput"].labels["badput_source"] == "STALL"


def test_switches_turn_metric_groups_off() -> None:
    with FakeMetricService(min_point_interval_s=0) as svc:
        opts = GCPOptions(project_id="p", location="l", enable_gcp_step_deviation_metrics=False)
        exp = exporter(svc, opts)
        exp.export(
            [Sample("goodput/step_time_deviation_seconds", 1.0, JOB), Sample("goodput/productive_seconds", 1.0, JOB)]
        )
        assert [p.name for p in svc.points] == [W + "goodput_time"]


@pytest.mark.slow
def test_one_point_per_series_per_request_and_ten_second_rule() -> None:
    # the fake enforces the service's rules: a violation would be an INVALID_ARGUMENT error
    with FakeMetricService(min_point_interval_s=0.5) as svc:
        exp = exporter(svc, interval=0.5)
        exp.export([Sample("goodput/productive_seconds", 1.0, JOB), Sample("goodput/productive_seconds", 2.0, JOB)])
        assert [p.value for p in svc.points] == [2.0]  # duplicates in a batch: one point, the latest
        exp.export([Sample("goodput/productive_seconds", 3.0, JOB)])  # too soon: waits
        exp.export([Sample("goodput/productive_seconds", 4.0, JOB)])
        assert [p.value for p in svc.points] == [2.0] and exp.pending == 1
        # once the rule allows it, the next export sends the latest waiting value (the fake
        # service would reject a point sent too soon: `rejected` stays 0 below)
        wait_for(
            lambda: exp.export([]) or [p.value for p in svc.points] == [2.0, 4.0],
            timeout_s=10,
            what="the latest waiting value to go out",
        )
        assert exp.pending == 0
        exp.export([Sample("goodput/productive_seconds", 5.0, JOB)])
        exp.shutdown(timeout_s=3)  # shutdown waits out the rule for the final value
        assert [p.value for p in svc.points] == [2.0, 4.0, 5.0]
        assert svc.rejected == 0


def test_default_interval_is_the_service_rule() -> None:
    assert CloudMonitoringExporter(OPTS).min_point_interval_s == 10.0


def test_metadata_server_fills_missing_options() -> None:
    values = {
        "project/project-id": "meta-proj",
        "instance/zone": "projects/123/zones/europe-west4-b",
        "instance/attributes/accelerator-type": "v6e-16",
    }
    with FakeMetadataServer(values) as meta, FakeMetricService(min_point_interval_s=0) as svc:
        opts = resolve_gcp_options(GCPOptions(), metadata_host=meta.host)
        assert (opts.project_id, opts.location, opts.acc_type) == ("meta-proj", "europe-west4-b", "v6e-16")
        exp = CloudMonitoringExporter(GCPOptions(), api_endpoint=svc.endpoint, insecure=True, metadata_host=meta.host)
        exp.export([Sample("goodput/productive_seconds", 1.0, JOB)])
        assert svc.requests == ["projects/meta-proj"]
        assert svc.points[0].resource["location"] == "europe-west4-b"


def test_unreachable_metadata_server_fails_fast_and_turns_export_off() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        host = f"127.0.0.1:{s.getsockname()[1]}"  # bound, not listening: connection refused
    assert metadata_value("project/project-id", host=host) is None
    exp = CloudMonitoringExporter(GCPOptions(), metadata_host=host)
    exp.export([Sample("goodput/productive_seconds", 1.0, JOB)])  # no exception, nothing to do
    assert not exp.active


def test_service_errors_raise_for_the_retry_loop(tmp_path: Path) -> None:
    with FakeMetricService(min_point_interval_s=0) as svc:
        svc.fail = True
        exp = exporter(svc)
        with pytest.raises(Exception, match=r"UNAVAILABLE|unavailable|fail"):
            exp.export([Sample("goodput/productive_seconds", 1.0, JOB)])
        svc.fail = False
        exp.export([])
        assert [p.value for p in svc.points] == [1.0]  # the value kept from the failed try


def test_options_are_validated() -> None:
    with pytest.raises(ValueError, match="project_id"):
        GCPOptions(project_id="")
    with pytest.raises(TypeError, match="gcp_options"):
        CloudMonitoringExporter("proj")  # type: ignore[arg-type]
