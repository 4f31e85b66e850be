"""Each test gets its own data directory, so fallback journal directories never leak."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _isolated_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("MLGOODPUT_JOURNAL_DIR", raising=False)
    monkeypatch.delenv("MLGOODPUT_STORE", raising=False)
