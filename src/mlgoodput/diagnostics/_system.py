"""System metrics of a run: host and process CPU and memory (psutil), GPUs (NVML when present).

Every process of a run on a machine starts a sampler, but only the one holding the
machine's lock file samples (so there is one sampler per host, and another process takes
over if it dies). It samples the host, each live process of the run on this machine,
and each GPU, every `interval_s`, and stores the values as SYSTEM_METRIC events named
`<hostname>/<metric>`, e.g. `vm/cpu_percent`, `vm/process0/rss_bytes`, `vm/gpu0/power_w`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import time
from pathlib import Path
from typing import Any

from mlgoodput._worker import BackgroundWorker
from mlgoodput.events import Kind

log = logging.getLogger("mlgoodput.diagnostics")


class NvmlGpus:
    """Per-GPU utilization, memory and power through NVML; `available` is False (with `reason`)
    when the library or a driver is missing, and then `sample()` returns nothing."""

    def __init__(self) -> None:
        self.available = False
        self.reason = ""
        self._nvml: Any = None
        self._handles: list[Any] = []
        try:
            import pynvml

            pynvml.nvmlInit()
            n = pynvml.nvmlDeviceGetCount()
            self._handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(n)]
            self._nvml = pynvml
            self.available = True
        except ImportError:
            self.reason = "nvidia-ml-py is not installed (pip install 'mlgoodput[diagnostics]')"
        except Exception as e:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
            self.reason = f"NVML unavailable: {e}"

    def sample(self) -> list[tuple[str, float]]:
        out: list[tuple[str, float]] = []
        nv = self._nvml
        for i, h in enumerate(self._handles):
            for name, get in (
                ("utilization_pct", lambda h=h: float(nv.nvmlDeviceGetUtilizationRates(h).gpu)),
                ("memory_used_bytes", lambda h=h: float(nv.nvmlDeviceGetMemoryInfo(h).used)),
                ("memory_total_bytes", lambda h=h: float(nv.nvmlDeviceGetMemoryInfo(h).total)),
                ("power_w", lambda h=h: nv.nvmlDeviceGetPowerUsage(h) / 1000.0),
            ):
                try:
                    out.append((f"gpu{i}/{name}", get()))
                except Exception:  # a GPU without power readings, for example
                    pass
        return out

    def close(self) -> None:
        if self.available:
            with contextlib.suppress(Exception):
                self._nvml.nvmlShutdown()
            self.available = False


class SystemSampler(BackgroundWorker):
    """One per process; samples only while it holds the host's lock for the run."""

    after_fork = "stop"  # a forked child is not one of the run's samplers

    def __init__(
        self,
        run_name: str,
        process_index: int,
        *,
        interval_s: float = 10.0,
        nvml: bool = True,
        runtime: Path | None = None,
    ) -> None:
        if isinstance(interval_s, bool) or not isinstance(interval_s, (int, float)) or not interval_s > 0:
            raise ValueError(f"system_metrics_interval_s must be a positive number, got {interval_s!r}")
        try:
            import psutil
        except ImportError as e:
            raise ImportError("log_system_metrics=True needs psutil: pip install 'mlgoodput[diagnostics]'") from e
        super().__init__(f"mlgoodput-sysmetrics-{run_name}", interval_s=float(interval_s))
        self._psutil = psutil
        self.run_name = run_name
        self.process_index = process_index
        self.hostname = socket.gethostname()
        self._use_nvml = nvml
        self.gpus: NvmlGpus | None = None
        if runtime is None:
            from mlgoodput.diagnostics._ondemand import runtime_dir

            runtime = runtime_dir()
        self._dir = runtime / "sampler" / run_name
        self._dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._me = self._dir / f"{os.getpid()}.json"
        self._me.write_text(json.dumps({"pid": os.getpid(), "host": process_index}))
        self._lock_fd: int | None = None
        self._procs: dict[int, Any] = {}
        self._append: Any = None
        self._feed_put: Any = None
        self.samples = 0

    def attach(self, run: Any) -> None:
        """Write into this run's journal (and its exporters, if any)."""
        self._append = run.sink.append
        self._feed_put = run.feed_put

    @property
    def leader(self) -> bool:
        """True while this process is the host's sampler."""
        return self._lock_fd is not None

    def _try_lead(self) -> bool:
        if self._lock_fd is not None:
            return True
        import fcntl

        fd = os.open(self._dir / "leader.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        self._lock_fd = fd
        psutil = self._psutil
        psutil.cpu_percent(None)  # prime the interval-based counters
        if self._use_nvml:
            self.gpus = NvmlGpus()
            if not self.gpus.available:
                log.info("mlgoodput: no GPU metrics: %s", self.gpus.reason)
        return True

    def _work(self) -> bool:
        if self._closing or self._append is None:
            return True
        if self._lock_fd is None:
            self._try_lead()  # the first round of a new leader only primes the CPU counters
            return True
        self.sample_once()
        return True

    def sample_once(self) -> list[tuple[str, float]]:
        """Take one sample of everything and record it; returns (name, value) pairs."""
        psutil = self._psutil
        now = time.time()
        vm = psutil.virtual_memory()
        cpu = float(psutil.cpu_percent(None))
        values: list[tuple[str, float]] = [
            ("cpu_percent", cpu),
            ("memory_percent", float(vm.percent)),
            ("memory_used_bytes", float(vm.total - vm.available)),
            ("memory_total_bytes", float(vm.total)),
            # the same two under the SDK's MetricType names, which its own sampler records
            ("host_cpu_utilization", cpu),
            ("host_memory_utilization", float(vm.percent)),
        ]
        for pidx, proc in self._run_processes():
            try:
                with proc.oneshot():
                    values.append((f"process{pidx}/cpu_percent", float(proc.cpu_percent(None))))
                    values.append((f"process{pidx}/rss_bytes", float(proc.memory_info().rss)))
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
        if self.gpus is not None:
            values.extend(self.gpus.sample())
        append = self._append
        put = self._feed_put
        for name, v in values:
            full = f"{self.hostname}/{name}"
            append(Kind.SYSTEM_METRIC, now, None, v, full)
            if put is not None:
                put(("system", full, v, None, now))
        self.samples += 1
        return values

    def _run_processes(self) -> list[tuple[int, Any]]:
        psutil = self._psutil
        out = []
        for f in self._dir.glob("*.json"):
            try:
                info = json.loads(f.read_text())
                pid, pidx = int(info["pid"]), int(info["host"])
            except (OSError, ValueError, KeyError):
                continue
            proc = self._procs.get(pid)
            if proc is None:
                try:
                    proc = self._procs[pid] = psutil.Process(pid)
                    proc.cpu_percent(None)
                except psutil.NoSuchProcess:
                    with contextlib.suppress(OSError):
                        f.unlink()
                    continue
            if not proc.is_running():
                self._procs.pop(pid, None)
                with contextlib.suppress(OSError):
                    f.unlink()
                continue
            out.append((pidx, proc))
        return sorted(out, key=lambda x: x[0])

    def _on_close(self, timeout_s: float) -> None:
        with contextlib.suppress(OSError):
            self._me.unlink()
        if self.gpus is not None:
            self.gpus.close()
        if self._lock_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._lock_fd)
            self._lock_fd = None

    def _on_fork_in_child(self) -> None:
        # the child is not a process of the run's sampler set; it must not sample or hold the lock
        if self._lock_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._lock_fd)  # the parent's descriptor keeps holding the lock
            self._lock_fd = None
