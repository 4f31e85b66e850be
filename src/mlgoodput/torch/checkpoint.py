"""`torch.distributed.checkpoint` save and load, timed into the job's checkpoint badput.

    from mlgoodput.torch import checkpoint as ckpt
    ckpt.save(state, checkpoint_id=path, recorder=gp, step=step)          # blocking save
    fut = ckpt.async_save(state, checkpoint_id=path, recorder=gp, step=step)
    ckpt.wait(fut, recorder=gp, step=step)   # only if you wait on it: that wait blocks too
    ckpt.load(state, checkpoint_id=path, recorder=gp, step=step)

The keyword arguments are passed to the dcp function unchanged. A synchronous save counts
whole; an asynchronous one counts the part the caller waits for (staging the tensors, and
any explicit wait), not the background write (docs/accounting.md, "Checkpoints"). Errors of
the save or load itself propagate as usual; recording never raises.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import Any

from mlgoodput.torch._recorder import TorchRecorder
from mlgoodput.torch._safe import Safe

__all__ = ["async_save", "load", "save", "wait"]

_safe = Safe("mlgoodput.torch.checkpoint")


def _dcp() -> Any:
    try:
        import torch.distributed.checkpoint as dcp
    except ImportError as e:
        raise ImportError("mlgoodput.torch.checkpoint needs PyTorch: pip install 'mlgoodput[torch]'") from e
    return dcp


class _Timed:
    """A checkpoint interval on any recorder; `recorder=None` records nothing."""

    def __init__(self, recorder: Any, kind: str, step: int | None) -> None:
        self.recorder = recorder
        self.kind = kind
        self.step = step

    def __enter__(self) -> None:
        r = self.recorder
        if r is None:
            return
        if isinstance(r, TorchRecorder):
            r.record(f"record_checkpoint_{self.kind}_start_time", self.step)
        else:
            _safe(
                f"record_checkpoint_{self.kind}_start_time",
                getattr(r, f"record_checkpoint_{self.kind}_start_time"),
                self.step,
            )

    def __exit__(self, *exc: object) -> None:
        r = self.recorder
        if r is None:
            return
        if isinstance(r, TorchRecorder):
            r.record(f"record_checkpoint_{self.kind}_end_time", self.step)
        else:
            _safe(
                f"record_checkpoint_{self.kind}_end_time",
                getattr(r, f"record_checkpoint_{self.kind}_end_time"),
                self.step,
            )


def _timed(recorder: Any, kind: str, step: int | None) -> AbstractContextManager[None]:
    if recorder is None:
        return nullcontext()
    if step is None:
        raise ValueError(f"step is required when recorder is given, got step={step!r}")
    return _Timed(recorder, kind, step)


def save(state_dict: dict[str, Any], *, recorder: Any = None, step: int | None = None, **kwargs: Any) -> Any:
    """`torch.distributed.checkpoint.save(state_dict, **kwargs)`, timed as the save of `step`."""
    dcp = _dcp()
    with _timed(recorder, "save", step):
        return dcp.save(state_dict, **kwargs)


def async_save(state_dict: dict[str, Any], *, recorder: Any = None, step: int | None = None, **kwargs: Any) -> Any:
    """`torch.distributed.checkpoint.async_save(...)`: the call (staging) is timed as the
    blocking part of the save of `step`; returns dcp's future."""
    dcp = _dcp()
    with _timed(recorder, "save", step):
        return dcp.async_save(state_dict, **kwargs)


def wait(future: Any, *, recorder: Any = None, step: int | None = None, timeout_s: float | None = None) -> Any:
    """Wait for an async save to finish (`future.result()`), timed as blocking save time."""
    with _timed(recorder, "save", step):
        upload = getattr(future, "upload_completion", None)  # AsyncSaveResponse in newer torch
        return (upload if upload is not None else future).result(timeout_s)


def load(state_dict: dict[str, Any], *, recorder: Any = None, step: int | None = None, **kwargs: Any) -> None:
    """`torch.distributed.checkpoint.load(state_dict, **kwargs)`, timed as the restore of `step`."""
    dcp = _dcp()
    with _timed(recorder, "restore", step):
        dcp.load(state_dict, **kwargs)
