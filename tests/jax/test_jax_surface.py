"""jax-monitoring's surface in mlgoodput.jax: init's order, config, register_listeners, gcp_utils."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

jax = pytest.importorskip("jax", reason="JAX is an optional extra: pip install 'mlgoodput[jax]'")
import jax.monitoring as jmon  # noqa: E402

import mlgoodput.jax as jm  # noqa: E402
from mlgoodput._misuse import MlGoodputWarning, reset_warned  # noqa: E402
from mlgoodput.jax import config, gcp_utils, listeners  # noqa: E402
from mlgoodput.testing import FileExporter  # noqa: E402


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    # cloud settings and MLGOODPUT_* are cleared by tests/conftest.py's `isolated`
    jm.shutdown()
    config.replace_config(config.Config())
    reset_warned()
    yield
    jm.shutdown()
    config.replace_config(config.Config())


def test_init_takes_project_id_first_as_jax_monitoring_does() -> None:
    s = jm.init("my-project", exporters=[], store="memory://jm-order")
    assert s.job_name == "jax_job"  # not the job name, as it was before
    assert s.options["project_id"] == "my-project"
    assert config.get_config().project_id == "my-project"
    assert config.get_config().job_name == "jax_job"


def test_job_name_keyword_still_works() -> None:
    s = jm.init(job_name="kw-job", exporters=[], store="memory://jm-kw")
    assert s.job_name == "kw-job" and config.get_config().job_name == "kw-job"


def test_set_config_changes_only_what_it_is_given() -> None:
    jm.set_config(project_id="p1", job_name="j1")
    jm.set_config(metric_prefix="custom.googleapis.com/other")
    c = config.get_config()
    assert (c.project_id, c.job_name, c.metric_prefix, c.monitored_resource_type) == (
        "p1",
        "j1",
        "custom.googleapis.com/other",
        "global",
    )
    with pytest.raises(TypeError, match="job_name"):
        jm.set_config(job_name=3)  # type: ignore[arg-type]


def test_register_listeners_uses_the_config_and_stop_listeners_stops(tmp_path: Path) -> None:
    out = tmp_path / "samples.jsonl"
    # register_listeners takes no arguments: everything comes from the config (no project: no exporter)
    jm.set_config(job_name="from-config")
    s = listeners.register_listeners()
    assert s.job_name == "from-config"
    assert jm.register_listeners() is s  # a second call returns the running session
    listeners.stop_listeners()
    assert jm.current() is None
    s2 = jm.init(job_name="filed", exporters=[FileExporter(out)], store="memory://jm-file", interval_s=0.2)
    jmon.record_event_duration_secs("/my/event", 0.5, phase="x")
    assert s2.flush(30)
    listeners.stop_listeners()
    names = {x["name"] for row in FileExporter.read(out) for x in row.get("samples", [])}  # type: ignore[attr-defined]
    assert any("my/event" in n for n in names), names


def test_init_twice_for_another_job_warns_once() -> None:
    s = jm.init(job_name="a", exporters=[], store="memory://jm-twice")
    with pytest.warns(MlGoodputWarning, match="already running for job 'a'"):
        assert jm.init(job_name="b", exporters=[], store="memory://jm-twice") is s


def test_listeners_never_raise_into_jax() -> None:
    jm.init(job_name="robust", exporters=[], store="memory://jm-robust")
    jmon.record_event_duration_secs("/odd/value", "not a number")  # type: ignore[arg-type]
    jmon.record_event("/odd/event", weird=object())
    jmon.record_scalar("/odd/scalar", float("nan"))
    assert jm.current() is not None


def test_initialize_client_with_user_credentials(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("google.cloud.monitoring_v3", reason="the gcp extra")
    cred = tmp_path / "adc.json"
    cred.write_text(
        json.dumps({"type": "authorized_user", "client_id": "id", "client_secret": "secret", "refresh_token": "token"})
    )
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(cred))
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "adc-project")
    jm.initialize_client()  # creates the client; no request is sent
    assert gcp_utils.get_client() is not None
    assert config.get_config().project_id == "adc-project"
    assert gcp_utils.get_project_path() == "projects/adc-project"


@pytest.mark.slow
def test_initialize_client_without_credentials_logs_and_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    pytest.importorskip("google.cloud.monitoring_v3", reason="the gcp extra")
    with socket.socket() as s:  # no metadata server answers here
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("GCE_METADATA_HOST", f"127.0.0.1:{port}")
    monkeypatch.setenv("GCE_METADATA_IP", f"127.0.0.1:{port}")
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "no-gcloud"))
    monkeypatch.setattr(gcp_utils, "_CLIENT", None)
    jm.initialize_client()  # no exception
    assert gcp_utils.get_client() is None
    assert any("Credentials" in r.getMessage() for r in caplog.records)
