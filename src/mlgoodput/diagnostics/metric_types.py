"""Predefined metric names for `metrics.record` (the seed's `MetricType`).

Each member's value is the lower-case name under which values are stored and shown
(`loss`, `learning_rate`, ...). Any other non-empty string is a user-defined metric.
"""

from __future__ import annotations

import enum

__all__ = ["MetricType"]


class MetricType(enum.StrEnum):
    """Well-known model-quality and model-performance metrics."""

    # model quality
    LEARNING_RATE = "learning_rate"
    LOSS = "loss"
    GRADIENT_NORM = "gradient_norm"
    TOTAL_WEIGHTS = "total_weights"
    # model performance
    STEP_TIME = "step_time"
    THROUGHPUT = "throughput"
    LATENCY = "latency"
    TFLOPS = "tflops"
    MFU = "mfu"
