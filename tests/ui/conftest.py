"""Fixtures for the web UI: a store, a server on a free loopback port, one headless browser."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mlgoodput.store import SQLiteStore
from mlgoodput.ui import UIServer, assets_missing
from mlgoodput.ui._browser import Browser, browser_missing

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    st = SQLiteStore(tmp_path / "ui.db")
    yield st
    st.close()


@pytest.fixture
def serve() -> Iterator[Any]:
    """serve(store, **kw) -> a started UIServer on a free loopback port, stopped after the test."""
    started: list[UIServer] = []

    def make(store: Any, **kw: Any) -> UIServer:
        srv = UIServer(store, "127.0.0.1", 0, **kw)
        srv.start()
        started.append(srv)
        return srv

    yield make
    for s in started:
        s.stop()


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    why = browser_missing()
    if why:
        pytest.skip(f"no browser here: {why}")
    if assets_missing():
        pytest.fail("the UI's chart files are not built: run `make ui-assets`")
    b = Browser(1280, 900)
    yield b
    b.close()
