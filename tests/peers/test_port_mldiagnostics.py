"""google-cloud-mldiagnostics' own test cases on its public API, run against mlgoodput.diagnostics.

Each test names the SDK test it ports. The SDK's tests replace its internals with mocks
(the recorder, the control plane, jax.profiler) and assert on those mocks; here the same
public calls run for real (store, JAX on the CPU) and the test reads back what was
recorded. Only the import lines differ from the SDK's; where a case must differ, the
comment says why (docs/compatibility.md has the reasons).
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from mlgoodput.diagnostics import load_run
from mlgoodput.diagnostics.api import metrics
from mlgoodput.diagnostics.api import mlrun as api_mlrun
from mlgoodput.diagnostics.core import xprof
from mlgoodput.diagnostics.custom_types import exceptions, metric_types

HOST = socket.gethostname()


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    # the environment is cleared by tests/conftest.py's `isolated`
    monkeypatch.setenv("MLGOODPUT_STORE", str(tmp_path / "store.db"))
    monkeypatch.setenv("MLGOODPUT_JOURNAL_DIR", str(tmp_path / "journal"))
    monkeypatch.setenv("MLGOODPUT_RUNTIME_DIR", str(tmp_path / "rt"))
    monkeypatch.setenv("MLGOODPUT_PROFILE_DIR", str(tmp_path / "profiles"))
    yield
    from mlgoodput.diagnostics import current_run

    run = current_run()
    if run is not None:
        run.end()


def _work() -> float:
    import jax.numpy as jnp

    x = jnp.arange(16.0).reshape(4, 4)
    return float((x @ x).sum())


# -- api/metrics_test.py: TestMetricsAPI -------------------------------------------------------


def test_record_function_minimal_parameters() -> None:
    # SDK: TestMetricsAPI.test_record_function_minimal_parameters. The SDK passes a Mock as the
    # metric and checks the call reached its (patched) recorder with step=None, labels=None,
    # record_on_all_hosts=False; here a real MetricType is recorded and read back.
    run = api_mlrun.machinelearning_run(name="api-metrics")
    metrics.record(metric_name=metric_types.MetricType.LOSS, value=42.5)
    run.end()
    ((step, value, _t),) = load_run(run.name).metrics["loss"]
    assert (step, value) == (None, 42.5)


# -- api/mlrun_test.py: TestMachineLearningRun -------------------------------------------------


VALID_RUN_GROUP = "test_run_group"
VALID_NAME = "test_run_name"
VALID_CONFIGS = {"epochs": 100, "batch_size": 32}
VALID_GCS_PATH = "memory://test-bucket/path"  # the SDK test's "gs://test-bucket/path", in memory


def test_machinelearning_run_with_all_parameters() -> None:
    # SDK: TestMachineLearningRun.test_machinelearning_run_with_all_parameters (it checks the
    # arguments handed to its patched create_mlrun; here the run object carries them).
    run = api_mlrun.machinelearning_run(
        run_group=VALID_RUN_GROUP, name=VALID_NAME, configs=VALID_CONFIGS, gcs_path=VALID_GCS_PATH
    )
    assert (run.run_group, run.display_name, dict(run.configs), run.gcs_path) == (
        VALID_RUN_GROUP,
        VALID_NAME,
        VALID_CONFIGS,
        VALID_GCS_PATH,
    )
    assert run.location == "us-central1" and run.project is None  # the SDK's defaults
    assert run.profile_dir == f"{VALID_GCS_PATH}/{run.name}"


def test_machinelearning_run_none_run_group_raises_error() -> None:
    # SDK: TestMachineLearningRun.test_machinelearning_run_none_run_group_raises_error. In
    # 1.0.10 `run_group` is optional and `name` is the required argument, so the case is
    # the missing name: MLRunConfigurationError (a ValueError) saying it is required.
    with pytest.raises(exceptions.MLRunConfigurationError) as context:
        api_mlrun.machinelearning_run(name="")
    assert "name is required" in str(context.value)
    assert isinstance(context.value, ValueError)
    run = api_mlrun.machinelearning_run(name=VALID_NAME, run_group=None)  # type: ignore[arg-type]
    assert run.run_group == ""


def test_yaml_json_workflow_configs() -> None:
    # SDK: TestMachineLearningRun.test_yaml_json_workflow_configs
    yaml_data = {"epochs": 200, "batch_size": 64, "learning_rate": 0.001, "model_type": "transformer"}
    json_data = json.dumps(yaml_data)
    run = api_mlrun.machinelearning_run(
        run_group=VALID_RUN_GROUP, name=VALID_NAME, configs=json.loads(json_data), gcs_path=VALID_GCS_PATH
    )
    assert run.configs == yaml_data
    run.end()
    assert load_run(run.name).configs == yaml_data


# -- core/xprof_test.py: TestXprof -------------------------------------------------------------


def _profiled_run(name: str, tmp_path: Path) -> api_mlrun.mlrun_types.MLRun:
    return api_mlrun.machinelearning_run(name=name, gcs_path=str(tmp_path / "gcs"))


def test_ensure_initialized_success(tmp_path: Path) -> None:
    # SDK: TestXprof.test_ensure_initialized_success reads private fields (_resolved_run,
    # _gcs_profile_dir). The public equivalent: the profile goes under `<gcs_path>/<run name>`.
    run = _profiled_run("ensure", tmp_path)
    with xprof.Xprof(run) as prof:
        _work()
    assert prof.session_path is not None
    assert prof.session_path.startswith(f"{tmp_path / 'gcs'}/{run.name}/plugins/profile/")


def test_start_stop_success(tmp_path: Path) -> None:
    # SDK: TestXprof.test_start_stop_success (there with jax.profiler patched out)
    run = _profiled_run("startstop", tmp_path)
    prof = xprof.Xprof()
    prof.start()
    _work()
    files = prof.stop()
    assert {Path(f).name for f in files} == {f"{HOST}-0.xplane.pb", f"{HOST}-0.trace.json.gz"}
    run.end()
    assert [p["complete"] for p in load_run(run.name).profiles] == [True]


def test_context_manager_success(tmp_path: Path) -> None:
    # SDK: TestXprof.test_context_manager_success
    _profiled_run("ctx", tmp_path)
    prof = xprof.Xprof()
    with prof as p:
        assert p is prof
        _work()
    assert prof.files


def test_decorator_success(tmp_path: Path) -> None:
    # SDK: TestXprof.test_decorator_success patches start/stop on the object and counts the
    # calls; here the decorated call is profiled for real: one session per call.
    run = _profiled_run("deco", tmp_path)
    prof = xprof.Xprof()

    @prof
    def test_function(x: int, y: int) -> int:
        return x + y

    result = test_function(1, 2)
    assert result == 3
    run.end()
    assert len(load_run(run.name).profiles) == 1


# -- core/metrics_test.py: TestMetricsRecorder -----------------------------------------------
# The SDK tests its internal recorder (`core.metrics.metrics_recorder.record`, same parameters
# as `metrics.record`) against a mocked Cloud Logging client; here through `metrics.record`
# into the store. `test_metric_tracker` and the `_get_active_run_and_client` cases check
# private state behind the SDK's control plane and have no counterpart.

CUSTOM_LABELS = {"experiment": "test", "model": "v1"}


def test_record_success_all_params() -> None:
    # SDK: TestMetricsRecorder.test_record_success_all_params
    run = api_mlrun.machinelearning_run(name="all-params")
    metrics.record(metric_name="test_metric", value=100, step=5, labels=CUSTOM_LABELS)
    run.end()
    got = load_run(run.name)
    assert [p[:2] for p in got.metrics["test_metric"]] == [(5, 100.0)]
    assert got.labels["test_metric"] == CUSTOM_LABELS


def test_record_non_master_host() -> None:
    # SDK: TestMetricsRecorder.test_record_non_master_host (is_master_host patched to False;
    # here the run's process index is 1)
    run = api_mlrun.machinelearning_run(name="non-master", process_index=1)
    metrics.record(metric_name="test_metric", value=100, step=5, labels=CUSTOM_LABELS)
    run.end()
    assert "test_metric" not in load_run(run.name).metrics


def test_record_non_master_host_record_on_all_hosts() -> None:
    # SDK: TestMetricsRecorder.test_record_non_master_host_record_on_all_hosts
    run = api_mlrun.machinelearning_run(name="all-hosts", process_index=1)
    metrics.record(metric_name="test_metric", value=100, step=5, labels=CUSTOM_LABELS, record_on_all_hosts=True)
    run.end()
    got = load_run(run.name)
    assert [p[:2] for p in got.metrics["test_metric"]] == [(5, 100.0)]
    assert got.labels["test_metric"] == CUSTOM_LABELS


@pytest.mark.slow
def test_record_exception_handling(tmp_path: Path) -> None:
    # SDK: TestMetricsRecorder.test_record_exception_handling. An older SDK raised RecordingError
    # when writing failed; 1.0.10 writes in a background thread and logs. mlgoodput never raises
    # into the training loop either, and keeps the value: once the store can be written, the
    # journal ships it.
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    store = str(blocker / "store.db")
    run = api_mlrun.machinelearning_run(name="failing", store=store)
    metrics.record(metric_name="test_metric", value=100, step=5)  # no exception
    assert not run.flush(0.5)
    run.end(timeout_s=1.0)
    blocker.unlink()
    blocker.mkdir(exist_ok=True)  # the journal's shipper, still retrying, may create it first
    from mlgoodput._recovery import recover_journals

    recover_journals(store)
    assert [p[:2] for p in load_run(run.name, store).metrics["test_metric"]] == [(5, 100.0)]


def test_record_none_value() -> None:
    # SDK: TestMetricsRecorder.test_record_none_value: nothing is written (and here a warning says so)
    from mlgoodput._misuse import MlGoodputWarning, reset_warned

    reset_warned()
    run = api_mlrun.machinelearning_run(name="none-value")
    with pytest.warns(MlGoodputWarning, match="no value"):
        metrics.record(metric_name="test_metric", value=None)
    run.end()
    assert "test_metric" not in load_run(run.name).metrics
