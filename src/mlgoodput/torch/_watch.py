"""`CompletionWatcher` for PyTorch: steps timed by when their CUDA work finished."""

from __future__ import annotations

from typing import Any

from mlgoodput._completion import CompletionWatcher as _Watcher


def _synchronize(event: Any) -> None:
    if event is not None:
        event.synchronize()  # a host wait on the event, on the watcher's thread


class CompletionWatcher(_Watcher):
    """Times the recorder's steps by CUDA completion (docs/torch.md, "Asynchronous CUDA work").

        watcher = CompletionWatcher(recorder)    # a TorchRecorder or a GoodputRecorder
        for step in ...:
            recorder.record_step_start_time(step)
            loss = train_step(batch)
            watcher.watch(step)                  # a CUDA event on the current stream

    `watch` records a `torch.cuda.Event` after the step's work; the watcher's thread waits on
    it. Without CUDA (CPU tensors run eagerly) each step is done when its call returns.
    """

    def __init__(self, recorder: Any) -> None:
        inner = getattr(recorder, "recorder", recorder)  # TorchRecorder keeps its recorder there
        super().__init__(inner, _synchronize, name="torch")

    def watch(self, step: int, out: Any = None) -> None:
        """Step `step`'s work was queued on the current CUDA stream (never raises)."""
        event = None
        try:
            import torch

            cuda: Any = torch.cuda  # partly untyped
            if cuda.is_available() and cuda.is_initialized():
                event = cuda.Event()
                event.record()
        except Exception as e:  # never into training
            self._say("event", f"no CUDA event could be recorded: {e!r}; step {step} timed at its call")
        super().watch(step, event)
