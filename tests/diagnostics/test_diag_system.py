"""System metrics: psutil host and process metrics, NVML when present, one sampler per host."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from mlgoodput.diagnostics import load_run, machinelearning_run
from mlgoodput.diagnostics._system import NvmlGpus, SystemSampler
from waiting import wait_for

HOST = socket.gethostname()


def test_run_samples_host_and_process_metrics() -> None:
    run = machinelearning_run(name="sys", log_system_metrics=True, system_metrics_interval_s=0.05)
    sampler = next(h for h in run.helpers if isinstance(h, SystemSampler))
    assert wait_for(lambda: sampler.samples >= 2, 20)
    run.end()
    got = load_run(run.name).system_metrics
    total = got[f"{HOST}/memory_total_bytes"]
    assert len(total) >= 2 and all(p[0] is None for p in total)  # time axis
    assert total[0][1] > 1e8
    assert 0.0 <= got[f"{HOST}/cpu_percent"][-1][1] <= 100.0 * 64
    assert got[f"{HOST}/process0/rss_bytes"][-1][1] > 1e6  # this test process, at least a MB
    assert f"{HOST}/process0/cpu_percent" in got
    # the SDK's names for the host's CPU and memory use, with the same values
    assert [p[1] for p in got[f"{HOST}/host_cpu_utilization"]] == [p[1] for p in got[f"{HOST}/cpu_percent"]]
    assert [p[1] for p in got[f"{HOST}/host_memory_utilization"]] == [p[1] for p in got[f"{HOST}/memory_percent"]]
    if not sampler.gpus or not sampler.gpus.available:
        assert not any("/gpu" in k for k in got)


def test_nvml_absent_falls_back_cleanly() -> None:
    gpus = NvmlGpus()
    try:
        import pynvml

        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
        pytest.skip("this machine has NVML; the fallback is tested where it is absent")
    except pynvml.NVMLError:
        pass
    assert not gpus.available
    assert "NVML" in gpus.reason
    assert gpus.sample() == []
    gpus.close()


def test_nvml_reports_each_gpu_where_present() -> None:
    gpus = NvmlGpus()
    if not gpus.available:
        pytest.skip(f"no NVML on this machine: {gpus.reason}")
    try:
        names = [n for n, _ in gpus.sample()]
        assert "gpu0/utilization_pct" in names and "gpu0/memory_used_bytes" in names
    finally:
        gpus.close()


def test_one_sampler_per_host_and_takeover(tmp_path: Path) -> None:
    events: list[tuple[str, float]] = []

    class Journal:
        def append(self, kind: object, t: float, step: object, value: float, name: str) -> None:
            events.append((name, value))

    class Sink:  # the parts of an MLRun a sampler uses
        sink = Journal()
        feed_put = None

    a = SystemSampler("shared", 0, interval_s=0.05, nvml=False)
    b = SystemSampler("shared", 1, interval_s=0.05, nvml=False)
    a.attach(Sink())
    b.attach(Sink())
    a.start()
    assert wait_for(lambda: a.leader, 20)
    b.start()
    assert wait_for(lambda: a.samples >= 2, 20)
    assert not b.leader and b.samples == 0
    names = {n for n, _ in events}
    # both register this one pid; the later registration (index 1) names it
    assert f"{HOST}/process1/rss_bytes" in names and f"{HOST}/cpu_percent" in names
    a.close()
    assert wait_for(lambda: b.samples >= 1, 20)  # the other process's sampler takes over
    b.close()
