"""Step times from when each step's device work finished, not when the host dispatched it.

JAX (and CUDA streams) return from a step call as soon as the work is queued: a loop that
reads the loss only every tenth step records nine step starts a fraction of a millisecond
apart and one that waited for ten steps. The accounting then takes a dispatch for the ideal
step time and the waits for STALL (docs/jax.md, "Asynchronous dispatch").

A `CompletionWatcher` attached to a recorder takes over the step starts: `watch(step, out)`
hands it something that is ready when the step's work is done, a worker thread waits on it,
and the step after it is recorded as starting when the device could start it: at
`max(its dispatch, the previous step's completion)`. Each recorded step then spans the device
time it really had. The job end (and `close()`) waits for the watched steps, bounded, and
records the last one's end at its completion.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mlgoodput._once import Once
from mlgoodput._worker import BackgroundWorker
from mlgoodput.events import Kind

if TYPE_CHECKING:
    from mlgoodput._journal import Journal
    from mlgoodput._recorder import GoodputRecorder

log = logging.getLogger("mlgoodput")

#: How long the job end waits for the device to finish the watched steps.
DRAIN_TIMEOUT_S = 60.0
#: Steps handed over and not finished yet beyond this are no longer watched (their outputs
#: would stay alive in the watcher): the loop runs that far ahead of the device only by mistake.
MAX_IN_FLIGHT = 4096


@dataclass(slots=True)
class _Step:
    step: int
    dispatched: float
    start: float | None = None  # decided start (written to the journal once known)
    watched: bool = False
    done: float | None = None  # completion time, once the wait returned


class CompletionWatcher(BackgroundWorker):
    """Records each step as starting when its device work could start; see the module doc.

    `wait(out)` must block until `out`'s work is done (JAX: `jax.block_until_ready`). Costs
    the training thread a queue append per `watch`; the waits run on the watcher's thread.
    """

    batch_size = 1
    after_fork = "stop"

    def __init__(self, recorder: GoodputRecorder, wait: Callable[[Any], Any], *, name: str = "completion") -> None:
        super().__init__(f"mlgoodput-{name}-watcher[{recorder.job_name}]", interval_s=1.0)
        self._rec = recorder
        self._wait = wait
        self._mu = threading.Lock()
        self._journal: Journal | None = recorder.journal
        self._steps: deque[_Step] = deque()  # started steps whose start or completion is open
        self._prev: _Step | None = None  # the last settled step before `_steps`
        self._said = Once()
        self.watched = 0  # steps whose completion was recorded
        if self._journal is not None:
            recorder.completion_watcher = self

    # -- the training thread ---------------------------------------------------------------
    def started(self, step: int, t: float) -> None:
        """The recorder's step start, handed over instead of written (never raises)."""
        with self._mu:
            self._steps.append(_Step(step, t))
            self._settle()

    def watch(self, step: int, out: Any) -> None:
        """Step `step`'s work is done when `out` is ready (its loss, its new state). Call it
        right after the step's call returns, before the next step starts. Never raises."""
        try:
            with self._mu:
                target = self._steps[-1] if self._steps and self._steps[-1].step == step else None
                if target is None or target.watched:
                    self._say("unknown", f"watch(step={step!r}) names no step that was just started; ignored")
                    return
                if len(self._steps) > MAX_IN_FLIGHT:
                    self._say("far", f"more than {MAX_IN_FLIGHT} steps in flight: later steps are not watched")
                    return
                target.watched = True
            self.submit((target, out))
        except Exception as e:  # never into training
            self._say("error", f"watch failed: {e!r}")

    # -- the watcher's thread ----------------------------------------------------------------
    def _handle(self, items: list[Any]) -> None:
        for s, out in items:
            try:
                self._wait(out)
            except Exception as e:  # the step itself failed: it ended when the wait did
                self._say("wait", f"waiting on step {s.step}'s output raised {e!r}; timed at the raise")
            done = time.time()
            del out  # the device buffers are the loop's again
            with self._mu:
                s.done = done
                self.watched += 1
                self._settle()

    def _settle(self) -> None:
        """Decide (and write) every start that can be decided now, in order; drop settled steps.
        Under the lock."""
        prev = self._prev
        for s in self._steps:
            if s.start is None:
                if prev is None:
                    s.start = s.dispatched
                elif prev.watched:
                    if prev.done is None:
                        break
                    s.start = max(s.dispatched, prev.done)
                else:
                    s.start = max(s.dispatched, prev.start if prev.start is not None else s.dispatched)
                self._write(Kind.STEP_START, s.start, s.step)
            prev = s
        while len(self._steps) > 1:
            head = self._steps[0]
            if head.start is None or (head.watched and head.done is None):
                break
            self._prev = self._steps.popleft()

    def _write(self, kind: Kind, t: float, step: int) -> None:
        j = self._journal
        if j is None:
            return
        try:
            j.append(kind, t, step)
        except Exception as e:  # a journal problem is the journal's to report; never raise here
            self._say("write", f"a step event could not be journaled: {e!r}")

    # -- the end of an attempt ---------------------------------------------------------------
    def drain(self, timeout_s: float = DRAIN_TIMEOUT_S) -> bool:
        """Wait (bounded) for the watched steps, write what they decide, and record the last
        step's end at its completion. The recorder calls it before a job end and at close."""
        ok = self.flush(timeout_s)
        with self._mu:
            self._settle()
            last = self._steps[-1] if self._steps else self._prev
            pending = [s for s in self._steps if s.start is None]
            for s in pending:  # not finished in time: their dispatch is all that is known
                s.start = s.dispatched
                self._write(Kind.STEP_START, s.start, s.step)
            if last is not None and last.done is not None and last.start is not None:
                self._write(Kind.STEP_END, max(last.done, last.start), last.step)
            self._steps.clear()
            self._prev = None
        return ok

    def _on_close(self, timeout_s: float) -> bool | None:
        self._rec.completion_watcher = None
        return None

    def _say(self, key: str, message: str) -> None:
        self._said.warning(log, key, "mlgoodput: %s: %s (logged once)", self.name, message)
