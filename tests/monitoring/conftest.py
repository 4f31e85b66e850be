"""Fixtures for the monitor tests: a store path and a start time 200 s ago."""

from __future__ import annotations

import time
from pathlib import Path

import pytest


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "store.db"


@pytest.fixture
def t0() -> float:
    return time.time() - 200.0
