"""A store over a user's cloud_logger: a flush that fails at close is said, never raised."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from mlgoodput.events import Event, EventBatch, Kind
from mlgoodput.store import from_cloud_logger


class _FailingFlushLogger:
    """Holds entries in a list; its flush() fails, as a logger whose transport is down would."""

    def __init__(self) -> None:
        self.entries: list[dict[str, Any]] = []

    def write_cloud_logging_entry(self, entry: dict[str, Any]) -> None:
        self.entries.append(entry)

    def read_cloud_logging_entries(self) -> list[dict[str, Any]]:
        return list(self.entries)

    def flush(self) -> None:
        raise ConnectionError("transport down")


def test_a_failing_flush_at_close_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    cl = _FailingFlushLogger()
    store = from_cloud_logger(cl, "log")
    store.append("log", "job", EventBatch(1, 0, [Event(Kind.JOB_START, 100.0)]))
    with caplog.at_level(logging.WARNING, logger="mlgoodput"):
        store.close()  # does not raise
    assert len(cl.entries) == 1
    assert any("flush() failed at close" in m and "transport down" in m for m in caplog.messages)
