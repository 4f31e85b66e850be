"""`TorchRecorder`: a GoodputRecorder for torchrun and hand-written PyTorch loops.

It takes its process index from torchrun (RANK), wraps the recorder's start/end pairs in
context managers, and walks a data loader for you (`steps()`): the wait for each batch is
data loading, each body of the loop is a step, and one step's FLOPs are measured once
with FlopCounterMode. No call here raises into training; misuse is logged once.
"""

from __future__ import annotations

import datetime as _dt
import math
import os
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from mlgoodput._process_window import claim_process_start, freeze_collector_at_exit
from mlgoodput._recorder import Recorder
from mlgoodput._submit import from_env as submit_time_from_env
from mlgoodput.store import Store
from mlgoodput.torch._flops import StepFlops
from mlgoodput.torch._identity import TorchrunIdentity, torchrun_identity
from mlgoodput.torch._safe import Safe

__all__ = ["TorchRecorder", "utc"]


def utc(t: float) -> _dt.datetime:
    """UNIX seconds as an aware datetime, the form the recorder takes."""
    return _dt.datetime.fromtimestamp(t, tz=_dt.UTC)


class TorchRecorder:
    """Goodput recording for one process of a PyTorch job (every rank builds one).

        gp = TorchRecorder(job_name="my-job", store="sqlite:///goodput.db")
        with gp.job():
            with gp.training_preparation():
                model, opt = build()
            for step, batch in gp.steps(loader, start=first_step):
                train_step(batch)

    `job_name=None` names the job after torchrun's run id (the same on every rank and
    restart). `measure_flops=True` counts the second step's FLOPs (FlopCounterMode, once:
    after any compile) and, on rank 0, records them for the whole job (times the world size); `peak_flops_per_s`
    records the job's peak FLOP/s for MFU.
    """

    def __init__(
        self,
        job_name: str | None = None,
        logger_name: str = "goodput",
        *,
        store: str | os.PathLike[str] | Store | None = None,
        identity: TorchrunIdentity | None = None,
        measure_flops: bool = True,
        peak_flops_per_s: float | None = None,
        logging_enabled: bool = True,
    ) -> None:
        if identity is not None and not isinstance(identity, TorchrunIdentity):
            raise TypeError(f"identity must be a TorchrunIdentity or None, got {identity!r}")
        self.identity = identity if identity is not None else torchrun_identity()
        if job_name is None:
            job_name = self.identity.default_job_name()
        self.recorder = Recorder(
            job_name,
            logger_name,
            logging_enabled,
            store=store,
            process_index=self.identity.rank,
        )
        if peak_flops_per_s is not None and not (
            isinstance(peak_flops_per_s, (int, float))
            and not isinstance(peak_flops_per_s, bool)
            and peak_flops_per_s > 0
        ):
            raise ValueError(f"peak_flops_per_s must be a positive number, got {peak_flops_per_s!r}")
        self.job_name = job_name
        self.measure_flops = bool(measure_flops)
        self._safe = Safe(f"mlgoodput.torch.TorchRecorder(job_name={job_name!r})")
        # the counter knows the job, so its compiled-step advice is given once per job (rank 0,
        # not once FLOPs are in the store, not again after a restart): docs/torch.md
        self._flops = (
            StepFlops(self.identity.world_size, rank=self.identity.rank, recorder=self.recorder)
            if self.measure_flops
            else None
        )
        self._step_open: int | None = None
        if peak_flops_per_s is not None and self.identity.is_lead:
            self._safe(
                "record_peak_flops", self.recorder.record_peak_flops, float(peak_flops_per_s), source="configured"
            )

    @property
    def step_flops(self) -> float | None:
        """FLOPs of one step on this rank, once a step was counted."""
        return None if self._flops is None else self._flops.rank_flops

    # -- single events -------------------------------------------------------------------
    def record(self, method: str, *args: Any, **kwargs: Any) -> None:
        """Call `Recorder.<method>(*args, **kwargs)` without ever raising."""
        fn = getattr(self.recorder, method, None)
        if fn is None:
            raise AttributeError(f"Recorder has no method {method!r}")
        self._safe(method, fn, *args, **kwargs)

    def start_job(self, since: str | float | None = None) -> None:
        """The job (this attempt) starts: now (None), at UNIX seconds `since`, or, with
        "process", when this process started, so that imports and model building are in
        it (only the first job of a process; a later one, or one in a notebook, starts now:
        mlgoodput._process_window). The submit time a scheduler left in
        $MLGOODPUT_JOB_SUBMIT_TIME is recorded too, read by the recorder as
        `record_job_submit_time()` reads it. Never raises: a bad `since` is said once."""
        at: float | None = None
        if since == "process":
            at = claim_process_start()
        elif isinstance(since, (int, float)) and not isinstance(since, bool) and math.isfinite(since):
            at = float(since)
        elif since is not None:
            self._safe.warn_once("since", f"start_job(since={since!r}): not 'process' nor UNIX seconds; started now")
        if submit_time_from_env(os.environ) is not None:
            self.record("record_job_submit_time")
        self.record("record_job_start_time", None if at is None else utc(at))

    def end_job(self) -> None:
        self.end_step()
        self.record("record_job_end_time")
        self.flush()
        freeze_collector_at_exit()  # the process's exit, after the job's end, takes 0.2 s instead of 1.5 s

    def start_step(self, step: int) -> None:
        """Step `step` starts now (the previous one, if still open, ends here)."""
        self.end_step()
        self.record("record_step_start_time", step)
        self._step_open = step
        if self._flops is not None and not self._flops.done:
            self._safe("count step FLOPs", self._flops.begin)

    def end_step(self) -> None:
        """The running step ended now (its FLOPs are recorded after the first one)."""
        step, self._step_open = self._step_open, None
        if step is None:
            return
        if self.recorder.completion_watcher is None:  # a watcher records the ends by the device
            self.record("record_step_end_time", step)
        if self._flops is not None and self._flops.counting:
            total = self._safe("count step FLOPs", self._flops.end)
            if total and self.identity.is_lead:
                self.record("record_step_flops", total)
            elif not total:
                self._safe.warn_once(
                    "flops",
                    "FlopCounterMode counted no FLOPs in a step (a"
                    " compiled kernel it cannot see?); record them with"
                    " recorder.record_step_flops(mlgoodput.flops.torch_step_flops(...))",
                )

    # -- intervals -------------------------------------------------------------------------
    @contextmanager
    def _interval(self, start: str, end: str, *args: Any, **kwargs: Any) -> Iterator[None]:
        self.record(start, *args, **kwargs)
        try:
            yield
        finally:
            self.record(end, *args, **kwargs)

    @contextmanager
    def job(self, since: str | float | None = None) -> Iterator[TorchRecorder]:
        """The job's (this attempt's) life: start now (or as `start_job(since)` says), end
        when the block finishes normally. An exception leaves no job end (a crash is a
        disruption); the events are flushed."""
        self.start_job(since)
        try:
            yield self
        except BaseException:
            self.end_step()
            self.flush(5.0)
            raise
        self.end_job()

    def accelerator_init(self) -> Any:
        """Accelerator / process-group initialization (`dist.init_process_group`, `.cuda()`)."""
        return self._interval("record_tpu_init_start_time", "record_tpu_init_end_time")

    def training_preparation(self) -> Any:
        """Building the model, optimizer and data pipeline."""
        return self._interval("record_training_preparation_start_time", "record_training_preparation_end_time")

    def data_loading(self) -> Any:
        """Waiting for a batch (outside a step it blocks training)."""
        return self._interval("record_data_loading_start_time", "record_data_loading_end_time")

    def checkpoint_save(self, step: int) -> Any:
        """The blocking part of saving the checkpoint of `step`."""
        return self._interval("record_checkpoint_save_start_time", "record_checkpoint_save_end_time", step)

    def checkpoint_restore(self, step: int) -> Any:
        """Restoring the checkpoint of `step`."""
        return self._interval("record_checkpoint_restore_start_time", "record_checkpoint_restore_end_time", step)

    def custom(self, event_type: str = "eval") -> Any:
        """An unproductive activity of your own, as custom badput (evaluation by default)."""
        return self._interval(
            "record_custom_badput_event_start_time",
            "record_custom_badput_event_end_time",
            custom_badput_event_type=event_type,
        )

    @contextmanager
    def step(self, step: int) -> Iterator[None]:
        """One step: `with gp.step(n): train_step(batch)`."""
        self.start_step(step)
        try:
            yield
        finally:
            self.end_step()

    def steps(self, batches: Iterable[Any], start: int = 0) -> Iterator[tuple[int, Any]]:
        """Yield (step number, batch) from `batches`, numbering from `start`: the wait for
        each batch is recorded as data loading and each loop body as a step."""
        it = iter(batches)
        step = start
        try:
            while True:
                self.record("record_data_loading_start_time")
                try:
                    batch = next(it)
                except StopIteration:
                    self.record("record_data_loading_end_time")
                    return
                self.record("record_data_loading_end_time")
                self.start_step(step)
                yield step, batch
                self.end_step()
                step += 1
        finally:
            self.end_step()

    # -- lifecycle ---------------------------------------------------------------------------
    def flush(self, timeout_s: float | None = 10.0) -> bool:
        return bool(self._safe("flush", self.recorder.flush, timeout_s))

    def close(self, timeout_s: float | None = 10.0) -> bool:
        if self._flops is not None:
            self._flops.abandon()
        return bool(self._safe("close", self.recorder.close, timeout_s))

    def __enter__(self) -> TorchRecorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        i = self.identity
        return (
            f"TorchRecorder(job_name={self.job_name!r}, rank={i.rank}, world_size={i.world_size}, attempt={i.attempt})"
        )


def now() -> float:
    return time.time()
