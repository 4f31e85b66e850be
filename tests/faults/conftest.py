"""Each fault trial also gets its own runtime directory (trials may point it elsewhere);
the rest of the isolation is tests/conftest.py's."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _runtime_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLGOODPUT_RUNTIME_DIR", str(tmp_path / "runtime"))
