"""The one timeline that framework callbacks drive: hooks in, recorder calls out.

A callback knows when things happen (train start, batch start and end, evaluation, a
checkpoint written) but its hooks do not always pair up the way the recorder's start/end
calls do. `CallbackTimeline` keeps what is open, closes it in the right order, and can
record an interval after the fact (the HF Trainer says a checkpoint was written only once it
was). Nothing here raises into training.
"""

from __future__ import annotations

import os
import time
from typing import Any

from mlgoodput._process_window import claim_process_start, freeze_collector_at_exit
from mlgoodput.events import check_name
from mlgoodput.store import Store, resolve_store_url
from mlgoodput.torch._identity import TorchrunIdentity, torchrun_identity
from mlgoodput.torch._recorder import TorchRecorder, utc


class CallbackTimeline:
    """Checked settings at construction; the recorder is built when the rank is known."""

    def __init__(
        self,
        owner: str,
        job_name: str | None,
        logger_name: str,
        store: str | os.PathLike[str] | Store | None,
        *,
        eval_event_type: str,
        measure_flops: bool,
        peak_flops_per_s: float | None,
        logging_enabled: bool,
    ) -> None:
        if job_name is not None:
            check_name(job_name, "job_name")
        check_name(logger_name, "logger_name")
        self.eval_event_type = check_name(eval_event_type, "eval_event_type")
        if not (isinstance(store, Store) and not isinstance(store, (str, os.PathLike))):
            resolve_store_url(store)  # a bad URL fails here, not in training
        if peak_flops_per_s is not None and (
            isinstance(peak_flops_per_s, bool)
            or not isinstance(peak_flops_per_s, (int, float))
            or not peak_flops_per_s > 0
        ):
            raise ValueError(f"peak_flops_per_s must be a positive number, got {peak_flops_per_s!r}")
        self.owner = owner
        self.job_name = job_name
        self.logger_name = logger_name
        self.store = store
        self.measure_flops = measure_flops
        self.peak_flops_per_s = peak_flops_per_s
        self.logging_enabled = logging_enabled
        self.created = time.time()  # the trainer's preparation began at least this early
        # the job (this attempt) began with the process: its imports and model building are
        # the job's badput (OTHER; from here on training preparation). A later job of the
        # same process, or one in a notebook, begins here (mlgoodput._process_window)
        started = claim_process_start()
        self.job_start = self.created if started is None else min(started, self.created)
        self.gp: TorchRecorder | None = None
        self._prep = self._data = self._eval = False
        self._ended = False

    # -- lifecycle ---------------------------------------------------------------------------
    def begin(self, rank: int | None = None, world_size: int | None = None) -> None:
        """Build the recorder for this rank; record the job start (the process's), the submit
        time a scheduler left in the environment, and training preparation from the
        callback's construction."""
        if self.gp is not None:
            return
        ident = torchrun_identity()
        if rank is not None and world_size is not None and world_size >= 1 and 0 <= rank < world_size:
            ident = TorchrunIdentity(
                rank=rank,
                local_rank=ident.local_rank,
                world_size=world_size,
                restart_count=ident.restart_count,
                run_id=ident.run_id,
                hostname=ident.hostname,
                launched=ident.launched,
            )
        try:
            self.gp = TorchRecorder(
                self.job_name,
                self.logger_name,
                store=self.store,
                identity=ident,
                measure_flops=self.measure_flops,
                peak_flops_per_s=self.peak_flops_per_s,
                logging_enabled=self.logging_enabled,
            )
        except Exception as e:  # the store cannot open now: the callback stays quiet
            import logging

            logging.getLogger("mlgoodput.torch").warning("%s: recording is off: %s", self.owner, e)
            return
        self.gp.start_job(self.job_start)
        self.gp.record("record_training_preparation_start_time", utc(self.created))
        self._prep = True

    def train_begin(self) -> None:
        if self.gp is None:
            return
        if self._prep:
            self._prep = False
            self.gp.record("record_training_preparation_end_time")

    def end(self) -> None:
        """The job ends now: close what is open, record the job end, ship."""
        gp = self.gp
        if gp is None or self._ended:
            return
        self._ended = True
        self.data_end()
        self.eval_end()
        self.train_begin()
        gp.end_step()
        gp.record("record_job_end_time")
        gp.flush(10.0)
        freeze_collector_at_exit()  # the process's exit, after the job's end, takes 0.2 s instead of 1.5 s

    def crashed(self) -> None:
        """An exception leaves the loop: ship what was recorded (no job end: a disruption)."""
        if self.gp is not None:
            self.gp.end_step()
            self.gp.flush(5.0)

    # -- data, steps ---------------------------------------------------------------------------
    def data_begin(self, t: float | None = None) -> None:
        if self.gp is not None and not self._data:
            self._data = True
            self.gp.record("record_data_loading_start_time", None if t is None else utc(t))

    def data_end(self) -> None:
        if self.gp is not None and self._data:
            self._data = False
            self.gp.record("record_data_loading_end_time")

    def step_begin(self, step: int) -> None:
        if self.gp is None:
            return
        self.train_begin()
        self.data_end()
        self.gp.start_step(int(step))

    def step_end(self) -> None:
        if self.gp is not None:
            self.gp.end_step()

    # -- evaluation, checkpoints -------------------------------------------------------------
    def eval_begin(self, t: float | None = None) -> None:
        if self.gp is not None and not self._eval:
            self._eval = True
            self.gp.record("record_custom_badput_event_start_time", None if t is None else utc(t), self.eval_event_type)

    def eval_end(self) -> None:
        if self.gp is not None and self._eval:
            self._eval = False
            self.gp.record("record_custom_badput_event_end_time", None, self.eval_event_type)

    def save(self, step: int, t0: float, t1: float | None = None) -> None:
        """A checkpoint save of `step` blocked training from `t0` to `t1` (default: now)."""
        if self.gp is None:
            return
        t1 = time.time() if t1 is None else t1
        self.gp.record("record_checkpoint_save_start_time", int(step), utc(t0))
        self.gp.record("record_checkpoint_save_end_time", int(step), utc(max(t0, t1)))

    def restore(self, step: int, t0: float, t1: float | None = None) -> None:
        if self.gp is None:
            return
        t1 = time.time() if t1 is None else t1
        self.gp.record("record_checkpoint_restore_start_time", int(step), utc(t0))
        self.gp.record("record_checkpoint_restore_end_time", int(step), utc(max(t0, t1)))

    @property
    def recorder(self) -> Any:
        """The underlying GoodputRecorder (None before the trainer started)."""
        return None if self.gp is None else self.gp.recorder
