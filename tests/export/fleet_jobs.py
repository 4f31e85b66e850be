"""Finished jobs of known sizes and labels in the last day, for the fleet gauge tests.

Every time is a whole second after an hour boundary, so a fleet range of the last days holds
each job whole and the gauges do not move between two uploads of a test."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

from mlgoodput.events import Event, EventBatch, Kind
from mlgoodput.store import SQLiteStore

H = 3600.0


def base_time() -> float:
    """An hour boundary ten hours ago: every job here starts after it and ends before now."""
    return math.floor(time.time() / H) * H - 10 * H


def job(t: float, labels: dict[str, str], accelerators: int, steps: int, kind: str = "H100") -> list[Event]:
    """Starts at `t`, 10 s of accelerator init, `steps` steps of 2 s, ends 5 s after the last."""
    ev = [
        Event(Kind.JOB_START, t),
        Event(Kind.JOB_LABELS, t, value=float(accelerators), name=kind, attrs={"labels": labels}),
        Event(Kind.ACCEL_INIT_START, t),
        Event(Kind.ACCEL_INIT_END, t + 10),
    ]
    ev += [Event(Kind.STEP_START, t + 10 + 2 * k, step=k) for k in range(steps)]
    return [*ev, Event(Kind.JOB_END, t + 10 + 2 * steps + 5)]


def write_jobs(
    path: str, jobs: Sequence[tuple[str, dict[str, str], int, int]], t0: float | None = None, writer0: int = 0
) -> float:
    """Store (name, labels, accelerators, steps) jobs at `path`, one a minute from `t0`; `t0`.
    Writer ids (global to a store) are `writer0` + 1, 2, ...: another call gives another `writer0`."""
    t0 = base_time() if t0 is None else t0
    st = SQLiteStore(path)
    try:
        for w, (name, labels, n, steps) in enumerate(jobs, start=1):
            st.append("log", name, EventBatch(writer0 + w, 0, job(t0 + 60 * w, labels, n, steps)))
    finally:
        st.close()
    return t0


#: Three teams and a job without a team: nlp has the most accelerator-hours, then vision.
TEAMS: tuple[tuple[str, dict[str, str], int, int], ...] = (
    ("a", {"team": "nlp"}, 8, 400),
    ("b", {"team": "vision"}, 4, 300),
    ("c", {"team": "speech"}, 2, 200),
    ("d", {"model": "bert"}, 1, 100),
    ("e", {"team": "nlp"}, 2, 50),
)


class FileClock:
    """A clock another process reads: the number in a file (picklable, for a source's `clock`)."""

    def __init__(self, path: str, now: float) -> None:
        self.path = path
        self.set(now)

    def set(self, now: float) -> None:
        with open(self.path + ".tmp", "w") as f:
            f.write(repr(now))
        import os

        os.replace(self.path + ".tmp", self.path)

    def __call__(self) -> float:
        with open(self.path) as f:
            return float(f.read())
