"""What a user switching from ml-goodput-measurement sees: a misuse warning names the method
they called (not an internal one) and prints once; a monitor without `gcp_options` says that
nothing goes to Cloud Monitoring (the seed's monitor sends there by default)."""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

import pytest

import mlgoodput
from mlgoodput import _env, monitoring
from mlgoodput._misuse import reset_warned


def _monitor_(tmp_path: Path, **kw: object) -> monitoring.GoodputMonitor:
    return monitoring.GoodputMonitor(
        "sw",
        "goodput_sw",
        str(tmp_path / "tb"),
        upload_interval=1,
        monitoring_enabled=True,
        store=str(tmp_path / "s.db"),
        **kw,
    )


def test_a_misuse_warning_names_the_public_method_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "mlgoodput")
    m = _monitor_(tmp_path, skip_final_flush=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m.stop_goodput_uploader()
        m.stop_rolling_window_goodput_uploader()
    ours = [str(w.message) for w in caught if issubclass(w.category, mlgoodput.MlGoodputWarning)]
    assert len(ours) == 1 and "GoodputMonitor.stop_goodput_uploader(" in ours[0], ours
    assert not any("cumulative_uploader" in r.getMessage() for r in caplog.records)
    assert not any("uploader_not_running" in r.getMessage() for r in caplog.records)  # no second copy


def test_no_gcp_options_says_so_loudly_on_google_cloud(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.INFO, "mlgoodput")
    reset_warned()  # said once per process: this test's process too
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "my-project")
    _monitor_(tmp_path)
    _monitor_(tmp_path)
    said = [r for r in caplog.records if "nothing goes to Cloud Monitoring" in r.getMessage()]
    assert len(said) == 1 and said[0].levelno == logging.WARNING


def test_no_gcp_options_is_an_info_line_elsewhere(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.INFO, "mlgoodput")
    reset_warned()  # said once per process: this test's process too
    for v in (*_env.GCP_PROJECT_VARS, _env.TPU_NAME):
        monkeypatch.delenv(v, raising=False)
    _monitor_(tmp_path)
    said = [r for r in caplog.records if "nothing goes to Cloud Monitoring" in r.getMessage()]
    assert len(said) == 1 and said[0].levelno == logging.INFO
