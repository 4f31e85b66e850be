"""Shared helpers for the console tests: short socket paths, a server fixture, a store reader."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest

from mlgoodput.console._replay import log_entries
from mlgoodput.store import open_store

SRC = os.path.join(os.path.dirname(__file__), "..", "..", "src")


@pytest.fixture
def sockdir() -> Iterator[str]:
    """A short private directory for Unix sockets (paths must stay under ~100 bytes)."""
    d = tempfile.mkdtemp(prefix="mlgc-")
    os.chmod(d, 0o700)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def stored_logs(store_url: str, job: str) -> list[dict[str, Any]]:
    st = open_store(store_url)
    try:
        return log_entries(st, job)
    finally:
        st.close()


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.abspath(SRC) + os.pathsep + env.get("PYTHONPATH", "")
    return env
