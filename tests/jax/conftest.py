"""Each JAX test gets its own data directory and no store or cloud settings from the environment."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    for var in ("MLGOODPUT_JOURNAL_DIR", "MLGOODPUT_STORE", "GOOGLE_CLOUD_PROJECT",
                "GCLOUD_PROJECT", "GCP_PROJECT", "CLOUDSDK_CORE_PROJECT", "GCE_METADATA_HOST"):
        monkeypatch.delenv(var, raising=False)
