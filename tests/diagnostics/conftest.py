"""Each test gets its own store, data, journal, runtime and profile directories, and no run left over."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

_VARS = ("MLGOODPUT_STORE", "MLGOODPUT_JOURNAL_DIR", "MLGOODPUT_WORKLOAD_ID", "MLGOODPUT_PROCESS_INDEX",
         "MLGOODPUT_PROFILE_DIR", "MLGOODPUT_RUNTIME_DIR", "SLURM_JOB_ID", "TORCHELASTIC_RUN_ID")


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    for v in _VARS:
        monkeypatch.delenv(v, raising=False)
    monkeypatch.delenv("MLGOODPUT_STRICT", raising=False)
    from mlgoodput._misuse import reset_warned
    from mlgoodput.diagnostics import metrics

    reset_warned()  # every test sees its own once-per-kind warnings
    metrics._pending.clear()
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("MLGOODPUT_STORE", str(tmp_path / "store.db"))
    monkeypatch.setenv("MLGOODPUT_RUNTIME_DIR", str(tmp_path / "rt"))
    monkeypatch.setenv("MLGOODPUT_PROFILE_DIR", str(tmp_path / "profiles"))
    yield tmp_path
    from mlgoodput.diagnostics import current_run

    run = current_run()
    if run is not None:
        run.end()
