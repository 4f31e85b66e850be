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


def tensorboard_has(logdir: object, tag: str) -> bool:
    """True once an event file in `logdir` holds a scalar `tag`: the first upload landed (the
    folder and its lock file appear earlier, while the exporter process is still starting)."""
    from pathlib import Path

    d = Path(str(logdir))
    if not any(d.glob("events.out.tfevents.*")):
        return False
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(d))
    acc.Reload()
    return tag in acc.Tags()["scalars"]
