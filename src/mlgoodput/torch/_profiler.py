"""torch.profiler traces through mlgoodput's profiling API (`mlgoodput.diagnostics.xprof`,
on-demand captures, `mlgoodput profile`): the same sessions, layout and run events as JAX
traces, with a Chrome trace (`<host>-<index>.trace.json`) per process that TensorBoard's
profile plugin, Perfetto and chrome://tracing open.

    import mlgoodput.torch as mt
    from mlgoodput.diagnostics import machinelearning_run, xprof
    mt.use_torch_profiler()
    run = machinelearning_run(name="my-run")
    with xprof():
        train_step()
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path
from typing import Any

__all__ = ["TorchProfiler", "use_torch_profiler"]


class TorchProfiler:
    """A profiler backend that drives `torch.profiler.profile` (CPU, and CUDA when present)."""

    def __init__(self, *, record_shapes: bool = False, with_stack: bool = False) -> None:
        self.record_shapes = bool(record_shapes)
        self.with_stack = bool(with_stack)
        self._prof: Any = None
        self._dir: Path | None = None

    def start_trace(self, log_dir: str) -> None:
        try:
            import torch
            from torch.profiler import ProfilerActivity, profile
        except ImportError as e:
            raise ImportError("torch profiling needs PyTorch: pip install 'mlgoodput[torch]'") from e
        acts = [ProfilerActivity.CPU]
        if torch.cuda.is_available():
            acts.append(ProfilerActivity.CUDA)
        kw: dict[str, Any] = {}
        try:  # every thread's ops, also when an on-demand capture starts on another thread
            from torch._C._profiler import _ExperimentalConfig

            kw["experimental_config"] = _ExperimentalConfig(profile_all_threads=True)
        except (ImportError, TypeError):  # a torch without it: the starting thread's ops
            pass
        prof = profile(activities=acts, record_shapes=self.record_shapes, with_stack=self.with_stack, **kw)
        prof.start()
        self._prof = prof
        self._dir = Path(log_dir)

    def stop_trace(self) -> None:
        prof, self._prof = self._prof, None
        d, self._dir = self._dir, None
        if prof is None or d is None:
            raise RuntimeError("no torch.profiler trace is running")
        prof.stop()
        stamp = time.strftime("%Y_%m_%d_%H_%M_%S", time.gmtime())
        out = d / "plugins" / "profile" / stamp
        out.mkdir(parents=True, exist_ok=True)
        prof.export_chrome_trace(str(out / f"{socket.gethostname()}-{os.getpid()}.trace.json"))


def use_torch_profiler(enabled: bool = True, **options: Any) -> None:
    """Capture every mlgoodput profile of this process with torch.profiler (`enabled=False`:
    back to JAX). `options` go to TorchProfiler (`record_shapes`, `with_stack`)."""
    from mlgoodput import _profiler

    _profiler.set_backend(TorchProfiler(**options) if enabled else None)
