"""The torch tests (isolated by tests/conftest.py like every test).

PyTorch, Lightning, transformers and accelerate are pinned in the `test` extra (`make
test` installs them): a missing one fails these tests loudly instead of skipping them.
"""

from __future__ import annotations

from pathlib import Path

import pytest


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """No test here forks the test process: leave them (and torch's import) out of `make
    test`'s first pytest run, `-m forks`, which must fork before threaded libraries load."""
    return True if config.getoption("markexpr") == "forks" else None
