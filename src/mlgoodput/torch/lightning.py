"""PyTorch Lightning: `GoodputCallback(job_name=..., store=...)`, and nothing else in your code.

    trainer = lightning.Trainer(callbacks=[GoodputCallback(job_name="my-job")], ...)

What it records, on every rank (rank 0 leads the accounting):
- the job, from the process's start (imports and model building are in it: OTHER badput
  until the callback exists) to the end of `fit`; training preparation from the callback's
  construction until the training loop starts; the submit time in
  $MLGOODPUT_JOB_SUBMIT_TIME;
- data loading: the wait for each batch (between one batch's end and the next one's start,
  and from the epoch's start to its first batch);
- steps: one per optimizer step (with gradient accumulation, from its first batch's start
  to its last batch's end), numbered by `trainer.global_step`; the FLOPs of the
  second step (FlopCounterMode, once: after any compile) for MFU;
- validation (the sanity check included) as custom badput `eval_event_type` ("eval");
- checkpoints: a save from `on_save_checkpoint` (the state being gathered) until the
  strategy's CheckpointIO has written the file, and a restore (`ckpt_path=`) around
  CheckpointIO's load. The callback wraps the strategy's CheckpointIO to see the write end:
  Lightning's hook runs before the file is written.
"""

from __future__ import annotations

import os
import time
from typing import Any

try:
    import lightning.pytorch as pl
    from lightning.fabric.plugins.io.checkpoint_io import CheckpointIO
except ImportError as e:  # pragma: no cover - installed by the test extra
    raise ImportError(
        "mlgoodput.torch.lightning needs PyTorch Lightning: pip install 'mlgoodput[torch]' lightning"
    ) from e

from mlgoodput.store import Store
from mlgoodput.torch._timeline import CallbackTimeline

__all__ = ["GoodputCallback"]


class _TimedCheckpointIO(CheckpointIO):
    """Delegates to the strategy's own CheckpointIO and tells the callback when a write or
    a load is done."""

    def __init__(self, inner: Any, owner: GoodputCallback) -> None:
        self.inner = inner
        self.owner = owner

    def save_checkpoint(self, checkpoint: dict[str, Any], path: Any, storage_options: Any = None) -> None:
        try:
            self.inner.save_checkpoint(checkpoint, path, storage_options=storage_options)
        finally:
            self.owner._saved(checkpoint)

    def load_checkpoint(self, path: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
        t0 = time.time()
        ckpt: dict[str, Any] = self.inner.load_checkpoint(path, *args, **kwargs)
        step = ckpt.get("global_step") if isinstance(ckpt, dict) else None
        self.owner._timeline.restore(int(step) if isinstance(step, int) else 0, t0)
        return ckpt

    def remove_checkpoint(self, path: Any) -> None:
        self.inner.remove_checkpoint(path)

    def teardown(self) -> None:
        self.inner.teardown()

    def __getattr__(self, name: str) -> Any:  # anything else a plugin offers
        inner = self.__dict__.get("inner")
        if inner is None:  # while being copied or unpickled
            raise AttributeError(name)
        return getattr(inner, name)


class GoodputCallback(pl.Callback):
    """Records a Lightning job's goodput events; constructed like the recorder."""

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
        super().__init__()
        self._timeline = CallbackTimeline(
            "mlgoodput.torch.lightning.GoodputCallback",
            job_name,
            logger_name,
            store,
            eval_event_type=eval_event_type,
            measure_flops=measure_flops,
            peak_flops_per_s=peak_flops_per_s,
            logging_enabled=logging_enabled,
        )
        self._save_t0: float | None = None
        self._step: int | None = None  # the optimizer step whose batches are running

    @property
    def recorder(self) -> Any:
        """The GoodputRecorder of this rank (None until `fit` starts)."""
        return self._timeline.recorder

    # -- job -------------------------------------------------------------------------------------
    def setup(self, trainer: Any, pl_module: Any, stage: str) -> None:
        if stage != "fit":
            return
        self._step = None
        self._timeline.begin(int(trainer.global_rank), int(trainer.world_size))
        strategy = trainer.strategy
        if not isinstance(strategy.checkpoint_io, _TimedCheckpointIO):
            strategy.checkpoint_io = _TimedCheckpointIO(strategy.checkpoint_io, self)

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        self._timeline.train_begin()

    def teardown(self, trainer: Any, pl_module: Any, stage: str) -> None:
        if stage == "fit":
            self._timeline.end()

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        self._timeline.crashed()

    # -- data and steps -----------------------------------------------------------------------
    def on_train_epoch_start(self, trainer: Any, pl_module: Any) -> None:
        self._timeline.data_begin()

    def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int) -> None:
        if self._step is None:  # a new optimizer step (with gradient accumulation, its first batch)
            self._step = int(trainer.global_step)
            self._timeline.step_begin(self._step)

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        if self._step is not None and int(trainer.global_step) > self._step:  # the optimizer stepped
            self._step = None
            self._timeline.step_end()
            self._timeline.data_begin()

    def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        self._timeline.data_end()

    # -- evaluation ---------------------------------------------------------------------------
    def on_validation_start(self, trainer: Any, pl_module: Any) -> None:
        self._timeline.data_end()
        self._timeline.eval_begin()

    def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
        self._timeline.eval_end()

    # -- checkpoints ---------------------------------------------------------------------------
    def on_save_checkpoint(self, trainer: Any, pl_module: Any, checkpoint: dict[str, Any]) -> None:
        self._save_t0 = time.time()

    def _saved(self, checkpoint: dict[str, Any]) -> None:
        t0, self._save_t0 = self._save_t0, None
        if t0 is None:
            t0 = time.time()
        step = checkpoint.get("global_step") if isinstance(checkpoint, dict) else None
        self._timeline.save(int(step) if isinstance(step, int) else 0, t0)
