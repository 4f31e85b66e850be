"""The SDK's `custom_types.metric_types` path: the same objects as `mlgoodput.diagnostics.metric_types`."""

from mlgoodput.diagnostics.metric_types import METRIC_UNITS, AcceleratorType, MetricType

__all__ = ["METRIC_UNITS", "AcceleratorType", "MetricType"]
