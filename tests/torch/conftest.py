"""Each torch test gets its own data directory and no store settings from the environment.

PyTorch, Lightning, transformers and accelerate are pinned in the `test` extra (`make
test` installs them): a missing one fails these tests loudly instead of skipping them.
"""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    for var in ("MLGOODPUT_JOURNAL_DIR", "MLGOODPUT_STORE", "RANK", "WORLD_SIZE", "LOCAL_RANK",
                "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_RUN_ID", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(var, raising=False)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """No test here forks the test process: leave them (and torch's import) out of `make
    test`'s first pytest run, `-m forks`, which must fork before threaded libraries load."""
    return True if config.getoption("markexpr") == "forks" else None
