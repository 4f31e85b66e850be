"""Each test also gets its own store, runtime and profile directories, and no run left over
(the environment and data directory are isolated by tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def run_state(isolated: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    tmp_path = isolated
    from mlgoodput._misuse import reset_warned
    from mlgoodput.diagnostics import metrics

    reset_warned()  # every test sees its own once-per-kind warnings
    metrics._pending.clear()
    monkeypatch.setenv("MLGOODPUT_STORE", str(tmp_path / "store.db"))
    monkeypatch.setenv("MLGOODPUT_RUNTIME_DIR", str(tmp_path / "rt"))
    monkeypatch.setenv("MLGOODPUT_PROFILE_DIR", str(tmp_path / "profiles"))
    yield tmp_path
    from mlgoodput.diagnostics import current_run

    run = current_run()
    if run is not None:
        run.end()
