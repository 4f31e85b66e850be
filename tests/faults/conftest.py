"""Each fault trial gets its own data and runtime directories (trials may point them elsewhere)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("MLGOODPUT_RUNTIME_DIR", str(tmp_path / "runtime"))
    for var in ("MLGOODPUT_JOURNAL_DIR", "MLGOODPUT_STORE"):
        monkeypatch.delenv(var, raising=False)
