"""Resource usage of each process, sampled in the background and streamed to the console.

Off by default. When on, every connected process samples itself each `interval_s`: CPU
percent (psutil's non-blocking form: the share since the last sample), resident memory,
and, when NVML is present, the utilization and memory of the GPUs it uses.
`Usage.checkpoint(name, step)` puts a marker on the timeline.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

from mlgoodput import _env
from mlgoodput._worker import BackgroundWorker
from mlgoodput.console._protocol import MarkRec, UsageRec


class _Sampler(BackgroundWorker):
    def __init__(self, interval_s: float) -> None:
        super().__init__("mlgoodput-console-usage", interval_s=interval_s, max_backoff_s=interval_s)
        self._proc: Any = None
        self._nvml: Any = None
        self._nvml_tried = False
        self.samples = 0

    def _gpu(self) -> tuple[float | None, int | None]:
        if not self._nvml_tried:
            self._nvml_tried = True
            try:
                import pynvml

                pynvml.nvmlInit()
                self._nvml = pynvml
            except Exception:
                self._nvml = None
        nv = self._nvml
        if nv is None:
            return None, None
        pid = os.getpid()
        util, mem, found = 0.0, 0, False
        try:
            for i in range(nv.nvmlDeviceGetCount()):
                h = nv.nvmlDeviceGetHandleByIndex(i)
                for p in nv.nvmlDeviceGetComputeRunningProcesses(h):
                    if p.pid == pid:
                        found = True
                        mem += int(p.usedGpuMemory or 0)
                        util = max(util, float(nv.nvmlDeviceGetUtilizationRates(h).gpu))
        except Exception:
            return None, None
        return (util, mem) if found else (None, None)

    def _work(self) -> bool:
        from mlgoodput.console._current import current_client

        if self._proc is None:
            import psutil

            self._proc = psutil.Process(os.getpid())
            self._proc.cpu_percent(None)  # the first call only starts the measurement
            return True
        client = current_client()
        if client is None:
            return True
        # the share since the previous sample; never more than all the machine's CPUs
        cpu = min(float(self._proc.cpu_percent(None)), 100.0 * (os.cpu_count() or 1))
        rss = int(self._proc.memory_info().rss)
        gu, gm = self._gpu()
        client.put(UsageRec(time.time(), cpu, rss, gu, gm))
        self.samples += 1
        return True

    def _on_fork_in_child(self) -> None:
        self._proc = None


class Usage:
    """Per-process resource usage on the console timeline (class-level switch)."""

    _sampler: _Sampler | None = None
    _lock = threading.Lock()

    @classmethod
    def enable(cls, interval_s: float = 1.0) -> None:
        """Start sampling this process (and, through the environment, processes it starts)."""
        if isinstance(interval_s, bool) or not isinstance(interval_s, (int, float)) or not interval_s > 0:
            raise ValueError(f"interval_s must be a positive number of seconds, got {interval_s!r}")
        try:
            import psutil  # noqa: F401
        except ImportError:
            raise ImportError("Usage needs psutil: pip install 'mlgoodput[console]'") from None
        with cls._lock:
            os.environ[_env.CONSOLE_USAGE] = repr(float(interval_s))
            if cls._sampler is not None:
                if cls._sampler.interval_s == interval_s:
                    return
                cls._sampler.close(1.0)
            cls._sampler = _Sampler(float(interval_s))
            cls._sampler.start()

    @classmethod
    def disable(cls) -> None:
        with cls._lock:
            os.environ.pop(_env.CONSOLE_USAGE, None)
            s, cls._sampler = cls._sampler, None
        if s is not None:
            s.close(1.0)

    @classmethod
    def enabled(cls) -> bool:
        return cls._sampler is not None

    @classmethod
    def checkpoint(cls, name: str, step: int | None = None) -> None:
        """Mark the timeline (a vertical line in the usage report); nothing when usage is off."""
        if cls._sampler is None:
            return
        from mlgoodput.console._current import current_client

        client = current_client()
        if client is not None:
            client.put(MarkRec(time.time(), str(name), None if step is None else int(step)))
