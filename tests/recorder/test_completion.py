"""The completion watcher's rule (docs/jax.md, "Asynchronous dispatch"): each step after a
watched one is recorded as starting at max(its dispatch, the watched step's completion); steps
not watched keep their dispatch time; the job end records the last step's end at its completion.
A fake device: each step's output is a threading.Event the test sets when it wants."""

from __future__ import annotations

import datetime as dt
import threading
import time

from mlgoodput._completion import CompletionWatcher
from mlgoodput.events import Kind
from mlgoodput.goodput import Recorder
from mlgoodput.store import open_store


def _events(url: str, job: str) -> dict[Kind, list[tuple[float, int | None]]]:
    out: dict[Kind, list[tuple[float, int | None]]] = {}
    for e in open_store(url).read(f"goodput_{job}", job).columns.events():
        out.setdefault(e.kind, []).append((e.time, e.step))
    return out


def test_steps_start_when_the_device_could_start_them() -> None:
    url, job = "memory://completion-rule", "cw"
    rec = Recorder(job, f"goodput_{job}", True, store=url, process_index=0)
    w = CompletionWatcher(rec, lambda ev: ev.wait(30))
    rec.record_job_start_time()
    outs = [threading.Event() for _ in range(5)]
    dispatched = []
    for i in range(5):  # the host runs ahead: five dispatches, nothing done yet
        t = dt.datetime.now(dt.UTC)
        dispatched.append(t.timestamp())
        rec.record_step_start_time(i, t)
        w.watch(i, outs[i])
    assert Kind.STEP_START not in _events(url, job) or len(_events(url, job)[Kind.STEP_START]) <= 1
    done_at = []
    for ev in outs:  # the device finishes them one by one
        done_at.append(time.time())
        ev.set()
    rec.record_job_end_time()  # waits for the watcher
    rec.close()
    got = _events(url, job)
    starts = dict((s, t) for t, s in got[Kind.STEP_START])
    assert sorted(starts) == [0, 1, 2, 3, 4]
    assert starts[0] == dispatched[0]  # nothing ran before it
    for i in range(1, 5):
        assert starts[i] >= dispatched[i] and starts[i] >= done_at[i - 1]  # not before its predecessor finished
    (end_t, end_step) = got[Kind.STEP_END][-1]
    assert end_step == 4 and end_t >= done_at[4]
    assert w.watched == 5


def test_unwatched_steps_keep_their_dispatch_time_and_a_failed_wait_never_raises() -> None:
    url, job = "memory://completion-unwatched", "cu"
    rec = Recorder(job, f"goodput_{job}", True, store=url, process_index=0)

    def wait(out: object) -> None:
        raise RuntimeError("the step failed on the device")

    w = CompletionWatcher(rec, wait)
    rec.record_job_start_time()
    t0 = time.time()
    rec.record_step_start_time(0)
    w.watch(0, object())  # its wait raises: timed at the raise, warned once
    rec.record_step_start_time(1)  # not watched
    rec.record_step_start_time(2)
    w.watch(7, object())  # names no step just started: ignored, warned once
    rec.record_job_end_time()
    rec.close()
    starts = {s: t for t, s in _events(url, job)[Kind.STEP_START]}
    assert sorted(starts) == [0, 1, 2] and starts[0] >= t0
    assert starts[2] >= starts[1] >= starts[0]
