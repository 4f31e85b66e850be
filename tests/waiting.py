"""The one way tests wait: poll a condition instead of sleeping for a guessed time."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait_for(cond: Callable[[], Any], timeout_s: float = 30.0, what: str | None = None) -> Any:
    """The first truthy value of `cond()`, polled every 20 ms for up to `timeout_s`.

    On timeout: None, for `assert wait_for(...), context`; or, when `what` names the
    condition, an AssertionError saying what did not happen."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() >= deadline:
            if what is not None:
                raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")
            return None
        time.sleep(0.02)


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
