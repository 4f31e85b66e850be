"""Hugging Face Trainer: `GoodputCallback(job_name=..., store=...)`, added to `callbacks=[...]`.

    trainer = transformers.Trainer(..., callbacks=[GoodputCallback(job_name="my-job")])

What it records, on every process (process 0 leads the accounting):
- the job, from the process's start (imports and model building are in it: OTHER badput
  until the callback exists) to `on_train_end`; training preparation from the callback's
  construction until `on_train_begin`; the submit time in $MLGOODPUT_JOB_SUBMIT_TIME;
- steps from `on_step_begin` to `on_step_end`, numbered by `state.global_step`; the FLOPs of the
  second step (FlopCounterMode, once: after any compile) for MFU;
- data loading: the wait before each step (the Trainer fetches the step's batches before
  `on_step_begin`), from the last thing that happened to the step's start;
- evaluation as custom badput `eval_event_type` ("eval"): from the end of what preceded it
  (the step, its log) to `on_evaluate`;
- checkpoint saves: the Trainer calls `on_save` once the checkpoint is written, so a save
  runs from the end of what preceded it to `on_save`.
The Trainer has no hook around resuming from a checkpoint: restore time is not recorded
(it is training preparation).
"""

from __future__ import annotations

import os
import time
from typing import Any

try:
    from transformers import TrainerCallback
except ImportError as e:  # pragma: no cover - installed by the test extra
    raise ImportError(
        "mlgoodput.torch.hf needs transformers: pip install 'mlgoodput[torch]' transformers accelerate"
    ) from e

from mlgoodput.store import Store
from mlgoodput.torch._timeline import CallbackTimeline

__all__ = ["GoodputCallback"]


class GoodputCallback(TrainerCallback):
    """Records a Hugging Face Trainer job's goodput events; constructed like the recorder."""

    def __init__(
        self,
        job_name: str | None = None,
        logger_name: str = "goodput",
        *,
        store: str | os.PathLike[str] | Store | None = None,
        eval_event_type: str = "eval",
        measure_flops: bool = True,
        peak_flops_per_s: float | None = None,
        logging_enabled: bool = True,
    ) -> None:
        self._timeline = CallbackTimeline(
            "mlgoodput.torch.hf.GoodputCallback",
            job_name,
            logger_name,
            store,
            eval_event_type=eval_event_type,
            measure_flops=measure_flops,
            peak_flops_per_s=peak_flops_per_s,
            logging_enabled=logging_enabled,
        )
        self._mark = time.time()  # when the last thing we saw ended

    @property
    def recorder(self) -> Any:
        """The GoodputRecorder of this process (None until the Trainer is built)."""
        return self._timeline.recorder

    def _begin(self, args: Any) -> None:
        rank = getattr(args, "process_index", None)
        world = getattr(args, "world_size", None)
        self._timeline.begin(rank if isinstance(rank, int) else None, world if isinstance(world, int) else None)

    # -- job --------------------------------------------------------------------------------------
    def on_init_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._begin(args)

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._begin(args)
        self._timeline.train_begin()
        self._mark = time.time()

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._timeline.end()

    # -- steps and data ---------------------------------------------------------------------------
    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        tl = self._timeline
        tl.data_begin(self._mark)  # the batches of this step were fetched since the mark
        tl.step_begin(int(state.global_step))

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._timeline.step_end()
        self._mark = time.time()

    def on_log(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._mark = time.time()

    def on_epoch_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._mark = time.time()

    # -- evaluation and checkpoints ------------------------------------------------------------------
    def on_prediction_step(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._timeline.eval_begin(self._mark)

    def on_evaluate(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._timeline.eval_begin(self._mark)  # an evaluation without batches: still one
        self._timeline.eval_end()
        self._mark = time.time()

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._timeline.save(int(state.global_step), self._mark)
        self._mark = time.time()
