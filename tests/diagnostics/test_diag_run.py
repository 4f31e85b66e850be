"""machinelearning_run: identity, configs, automatic configs, errors, and reading a run back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mlgoodput.diagnostics import current_run, list_runs, load_run, machinelearning_run
from mlgoodput.diagnostics._run import run_name


def test_name_is_stable_for_one_workload_and_unique_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLGOODPUT_WORKLOAD_ID", "job-42")
    a = machinelearning_run(name="train")
    a.end()
    b = machinelearning_run(name="train")  # the same workload restarted
    b.end()
    assert a.name == b.name and a.name.startswith("train-")
    monkeypatch.setenv("MLGOODPUT_WORKLOAD_ID", "job-43")
    c = machinelearning_run(name="train")
    c.end()
    assert c.name != a.name
    monkeypatch.delenv("MLGOODPUT_WORKLOAD_ID")
    assert run_name("train", None) != run_name("train", None)
    run = load_run(a.name)
    assert len(run.starts) == 2  # both attempts are in one run


def test_slurm_job_id_identifies_the_workload(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURM_JOB_ID", "777")
    assert run_name("x", "777") == machinelearning_run(name="x").name


def test_configs_from_dict_yaml_json_and_update(tmp_path: Path) -> None:
    y = tmp_path / "c.yaml"
    y.write_text("model:\n  layers: 12\n  dims: [128, 256]\noptimizer: adam\n")
    j = tmp_path / "c.json"
    j.write_text(json.dumps({"optimizer": "sgd", "lr": 0.1}))
    run = machinelearning_run(
        name="cfg",
        configs=[{"epochs": 100}, y, str(j)],
        run_group="sweep-1",
        project="p",
        region="r",
        environment="dev",
    )
    run.update_configs({"batch_size": 32})
    run.end()
    got = load_run(run.name)
    assert got.run_group == "sweep-1"
    assert got.configs == {
        "epochs": 100,
        "model": {"layers": 12, "dims": [128, 256]},
        "optimizer": "sgd",
        "lr": 0.1,
        "batch_size": 32,
    }
    assert got.info["project"] == "p" and got.info["environment"] == "dev"


def test_software_and_system_configs_are_collected() -> None:
    import jax

    jax.devices()
    run = machinelearning_run(name="auto")
    run.end()
    got = load_run(run.name)
    assert got.software["framework"] == "jax"
    assert got.software["framework_version"] == jax.__version__
    assert "xla_flags" in got.software and got.software["python_version"].count(".") == 2
    sysc = got.system[0]
    assert sysc["device_kind"] == "cpu" and sysc["device_count"] >= 1
    assert sysc["process_count"] == 1 and sysc["hostname"]


def test_prints_where_to_see_the_run(capsys: pytest.CaptureFixture[str]) -> None:
    run = machinelearning_run(name="loud")
    err = capsys.readouterr().err
    assert f"mlgoodput runs show {run.name}" in err and run.profile_dir in err


@pytest.mark.parametrize(
    ("kwargs", "exc", "words"),
    [
        ({"name": ""}, ValueError, "name"),
        ({"name": 3}, TypeError, "name"),
        ({"name": "ok", "configs": 5}, TypeError, "configs"),
        ({"name": "ok", "configs": {"f": object()}}, TypeError, "configs"),
        ({"name": "ok", "configs": "missing.yaml"}, ValueError, "missing.yaml"),
        ({"name": "ok", "configs": "c.txt"}, ValueError, ".json, .yaml"),
        ({"name": "ok", "run_group": 1}, TypeError, "run_group"),
        ({"name": "ok", "gcs_path": 5}, TypeError, "gcs_path"),
        ({"name": "ok", "gcs_path": "nosuchproto://bucket"}, ValueError, "gcs_path"),
        ({"name": "ok", "system_metrics_interval_s": 0, "log_system_metrics": True}, ValueError, "interval"),
        ({"name": "ok", "on_demand_xprof": True, "on_demand_address": "nonsense"}, ValueError, "on_demand_address"),
        ({"name": "ok", "exporters": [object()]}, TypeError, "exporters"),
    ],
)
def test_bad_arguments_fail_at_the_call(kwargs: dict[str, object], exc: type[Exception], words: str) -> None:
    with pytest.raises(exc, match=words.replace(".", r"\.")):
        machinelearning_run(**kwargs)  # type: ignore[arg-type]
    assert current_run() is None


def test_bad_yaml_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1, 2\n")
    with pytest.raises(ValueError, match="not valid YAML"):
        machinelearning_run(name="ok", configs=bad)


def test_unwritable_profile_directory_is_an_error_at_the_call(tmp_path: Path) -> None:
    f = tmp_path / "a-file"
    f.write_text("")
    with pytest.raises(ValueError, match="cannot write profiles"):
        machinelearning_run(name="ok", gcs_path=f / "sub")


def test_load_run_by_prefix_and_listing() -> None:
    a = machinelearning_run(name="alpha", run_group="g1")
    a.end()
    b = machinelearning_run(name="beta")
    b.end()
    assert load_run("alpha").name == a.name
    names = [r["name"] for r in list_runs()]
    assert names == [a.name, b.name]
    with pytest.raises(LookupError, match="no run"):
        load_run("gamma")


def test_a_new_run_ends_the_previous_one() -> None:
    a = machinelearning_run(name="first")
    b = machinelearning_run(name="second")
    assert current_run() is b and a._ended


def test_a_failed_start_leaves_nothing_running(tmp_path: Path) -> None:
    import socket

    from mlgoodput.testing import FileExporter

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    port = taken.getsockname()[1]
    out = tmp_path / "exp.jsonl"
    try:
        with pytest.raises(ValueError, match="cannot listen"):
            machinelearning_run(
                name="clash",
                on_demand_xprof=True,
                on_demand_address=f"127.0.0.1:{port}",
                exporters=[FileExporter(out)],
                log_system_metrics=True,
            )
    finally:
        taken.close()
    assert current_run() is None
    assert any(r.get("shutdown") for r in FileExporter.read(out))  # the exporter process was stopped
    assert not list((tmp_path / "rt" / "sampler").glob("*/*.json"))  # the sampler deregistered


def test_sdk_enums_by_member_or_name_and_metadata_only_arguments() -> None:
    from mlgoodput.diagnostics.custom_types import exceptions, mlrun_types

    run = machinelearning_run(
        "enums",
        "grp",
        None,
        None,
        "http://control-plane.invalid",
        "cluster-1",
        "proj",
        "europe-west4",
        5.0,
        False,
        False,
        "staging",
        "pytorch",
        mlrun_types.ServingEngine.VLLM,
        application_framework="maxtext",
        rl_orchestrator="TUNIX",
        metrics_exporter_config={"mode": ["otel"]},
    )  # the SDK's positional order, up to environment, framework and serving_engine
    assert (run.run_group, run.project, run.location, run.environment) == ("grp", "proj", "europe-west4", "staging")
    assert run.framework is mlrun_types.Framework.PYTORCH
    assert run.serving_engine is mlrun_types.ServingEngine.VLLM
    assert run.application_framework is mlrun_types.ApplicationFramework.MAXTEXT
    assert run.rl_orchestrator is mlrun_types.RlOrchestrator.TUNIX
    assert run.control_plane_url == "http://control-plane.invalid" and run.cluster_id == "cluster-1"
    assert run.run_phase is mlrun_types.RunPhase.PHASE_ACTIVE
    run.end()
    assert run.run_phase is mlrun_types.RunPhase.PHASE_COMPLETED
    with pytest.raises(exceptions.MLRunConfigurationError, match="application_framework"):
        machinelearning_run(name="bad", application_framework="nope")
    with pytest.raises(exceptions.MLRunConfigurationError, match="metrics_record_interval_sec"):
        machinelearning_run(name="bad", metrics_record_interval_sec=0)


def test_metric_only_run_does_not_profile() -> None:
    from mlgoodput import _profiler
    from mlgoodput.diagnostics import xprof

    run = machinelearning_run(name="metriconly", metric_only_run=True)
    with xprof() as p:
        assert _profiler.active_trace() is None
    assert p.files == []
    run.end()
    assert load_run(run.name).profiles == []


def test_configs_dict_changes_are_stored_and_never_raise() -> None:
    from mlgoodput._misuse import MlGoodputWarning

    run = machinelearning_run(name="cfgdict", configs={"lr": 0.1})
    run.configs.update({"epochs": 3})
    run.configs["optimizer"] = "adam"
    run.configs.batch_size = 64
    assert run.configs.lr == 0.1 and run.configs["batch_size"] == 64
    with pytest.warns(MlGoodputWarning, match="stored as text"):
        run.configs.callback = object()  # not JSON: kept as its text
    del run.configs.optimizer
    run.end()
    got = load_run(run.name).configs
    assert (got["lr"], got["epochs"], got["batch_size"], got["optimizer"]) == (0.1, 3, 64, None)
    assert got["callback"].startswith("<object object")


class _Unprintable:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")


def test_configs_nothing_can_print_or_journal_never_raise() -> None:
    """A value whose repr fails is stored by its type; one the journal cannot hold is reported."""
    from mlgoodput._misuse import MlGoodputWarning

    run = machinelearning_run(name="cfgodd")
    with pytest.warns(MlGoodputWarning, match="stored as text"):
        run.configs["odd"] = _Unprintable()
    with pytest.warns(MlGoodputWarning, match="cannot be journaled"):
        run.configs["huge"] = 10**5000  # an int too long to print as JSON
    run.configs["after"] = 1
    run.end()
    got = load_run(run.name).configs
    assert got["odd"] == "<_Unprintable>" and got["after"] == 1 and "huge" not in got
