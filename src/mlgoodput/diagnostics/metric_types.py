"""Predefined metric names for `metrics.record` (the SDK's `MetricType`), with their units.

Each member's value is the lower-case name under which values are stored and shown
(`loss`, `learning_rate`, ...). Any other non-empty string is a user-defined metric.
The members are also strings (a `StrEnum`), so a member and its value name one series.
"""

from __future__ import annotations

import enum

__all__ = ["METRIC_UNITS", "AcceleratorType", "MetricType"]


class MetricType(enum.StrEnum):
    """Well-known model-quality, model-performance and system metrics."""

    # model quality
    LEARNING_RATE = "learning_rate"
    LOSS = "loss"
    GRADIENT_NORM = "gradient_norm"
    TOTAL_WEIGHTS = "total_weights"
    # model performance
    STEP_TIME = "step_time"
    THROUGHPUT = "throughput"
    LATENCY = "latency"
    MFU = "mfu"
    TFLOPS = "tflops"
    # system utilization (sampled by `log_system_metrics=True`, or recorded by the user)
    TPU_DUTY_CYCLE = "tpu_duty_cycle"
    TPU_TENSORCORE_UTILIZATION = "tpu_tensorcore_utilization"
    HBM_UTILIZATION = "hbm_utilization"
    GPU_DUTY_CYCLE = "gpu_duty_cycle"
    GPU_UTILIZATION = "gpu_utilization"
    GPU_TENSORCORE_UTILIZATION = "gpu_tensorcore_utilization"
    VRAM_UTILIZATION = "vram_utilization"
    HOST_CPU_UTILIZATION = "host_cpu_utilization"
    HOST_MEMORY_UTILIZATION = "host_memory_utilization"
    # the step counter itself, for recording it on its own
    STEP = "step"


_PERCENT = "%"

#: The unit of each predefined metric, keyed by its value ("1" for a plain number).
METRIC_UNITS: dict[str, str] = {
    MetricType.LEARNING_RATE.value: "1",
    MetricType.LOSS.value: "1",
    MetricType.GRADIENT_NORM.value: "1",
    MetricType.TOTAL_WEIGHTS.value: "1",
    MetricType.STEP_TIME.value: "s",
    MetricType.THROUGHPUT.value: "1/s",
    MetricType.LATENCY.value: "s",
    MetricType.MFU.value: _PERCENT,
    MetricType.TFLOPS.value: "TFLOPS",
    MetricType.TPU_DUTY_CYCLE.value: _PERCENT,
    MetricType.TPU_TENSORCORE_UTILIZATION.value: _PERCENT,
    MetricType.HBM_UTILIZATION.value: _PERCENT,
    MetricType.GPU_DUTY_CYCLE.value: _PERCENT,
    MetricType.GPU_UTILIZATION.value: _PERCENT,
    MetricType.GPU_TENSORCORE_UTILIZATION.value: _PERCENT,
    MetricType.VRAM_UTILIZATION.value: _PERCENT,
    MetricType.HOST_CPU_UTILIZATION.value: _PERCENT,
    MetricType.HOST_MEMORY_UTILIZATION.value: _PERCENT,
    MetricType.STEP.value: "1",
}


class AcceleratorType(enum.Enum):
    """The kind of accelerator a host runs on."""

    TPU = "tpu"
    GPU = "gpu"
    CPU = "cpu"
    UNKNOWN = "unknown"
