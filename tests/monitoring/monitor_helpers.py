"""A small recorded job in a real SQLite store, written the way the recorder ships events."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path

from mlgoodput.events import Event, EventBatch, Kind
from mlgoodput.export import Sample
from mlgoodput.store import open_store
from mlgoodput.testing import FileExporter

_writer_ids = itertools.count(1000)


def write_events(db: str | Path, logger: str, job: str, events: list[Event]) -> None:
    st = open_store(str(db))
    try:
        st.append(logger, job, EventBatch(next(_writer_ids), 0, events))
    finally:
        st.close()


def finished_job(t0: float, steps: int = 40, step_s: float = 1.0) -> list[Event]:
    """init 3 s, prep 2 s, steps with a slow first one, an eval (custom badput), a checkpoint, a job end."""
    ev = [
        Event(Kind.JOB_START, t0),
        Event(Kind.ACCEL_INIT_START, t0 + 0.5),
        Event(Kind.ACCEL_INIT_END, t0 + 3.5),
        Event(Kind.TRAINING_PREP_START, t0 + 3.5),
        Event(Kind.TRAINING_PREP_END, t0 + 5.5),
    ]
    t = t0 + 6.0
    for i in range(steps):
        ev.append(Event(Kind.STEP_START, t, step=i))
        t += step_s * (4 if i == 0 else 1)
        if i == 20:
            ev.append(Event(Kind.CUSTOM_START, t, name="eval_step"))
            ev.append(Event(Kind.CUSTOM_END, t + 2.0, name="eval_step"))
            ev.append(Event(Kind.CKPT_SAVE, t + 2.0, step=i, value=1.5))
            t += 3.5
    ev.append(Event(Kind.JOB_END, t))
    return ev


class CountingFileExporter(FileExporter):
    """A FileExporter that first appends one line to `attempts` per export call (a failed one
    too), so a test can wait for the uploader's rounds instead of sleeping for them."""

    def __init__(self, path: str | Path, attempts: str | Path, *, fail_flag: str | None = None) -> None:
        super().__init__(path, fail_flag=fail_flag)
        self.attempts = str(attempts)

    def export(self, samples: Sequence[Sample]) -> None:
        with open(self.attempts, "a") as f:
            f.write("1\n")
        super().export(samples)

    @staticmethod
    def count(attempts: str | Path) -> int:
        """Export calls so far (0 before the first)."""
        try:
            return len(Path(attempts).read_text().splitlines())
        except FileNotFoundError:
            return 0
