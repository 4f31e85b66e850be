"""On-demand profiling from the asking side: an endpoint that does not answer fails fast."""

from __future__ import annotations

import time

import pytest
from tests.faults.trials import hanging_server

from mlgoodput.diagnostics._ondemand import capture


def test_a_silent_endpoint_fails_in_seconds_not_minutes(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process that accepts the connection and never answers (stuck, or not ours): the
    capture fails after the ping's few seconds, not after the capture's duration plus two
    minutes."""
    from mlgoodput.diagnostics import _ondemand

    monkeypatch.setattr(_ondemand, "PING_TIMEOUT_S", 0.5)  # the test's own wait; the default is 5 s
    with hanging_server() as port:
        t0 = time.monotonic()
        (r,) = capture(None, 1.0, address=f"127.0.0.1:{port}", token="t")
        took = time.monotonic() - t0
    assert r["ok"] is False and "no answer to a ping" in r["error"]
    assert took < 0.5 + 30  # it used to wait 121 s
