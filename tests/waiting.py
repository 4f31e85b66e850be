"""Polling for a condition in tests that watch other processes and servers."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_for(cond: Callable[[], object], timeout_s: float = 30.0) -> bool:
    """True as soon as `cond()` is truthy; False if it is not within `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return False
