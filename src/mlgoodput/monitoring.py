"""Seed-compatible monitoring API: `GoodputMonitor` and the names the seed's module exposes
(see docs/exporting.md and docs/compatibility.md)."""

import logging

from mlgoodput import goodput, goodput_utils
from mlgoodput._monitoring import GoodputMonitor
from mlgoodput.accounting import BadputType, GoodputCalculator
from mlgoodput.export import GCPOptions
from mlgoodput.goodput import UnproductiveTimeDict
from mlgoodput.goodput_utils import (
    ACTIVITY_EXCLUSION_LIST,
    IntervalMetricType,
    IntervalWorkloadMetricDetails,
    MetricType,
    MonitoringWindowType,
    WorkloadMetricDetails,
)

logger = logging.getLogger("mlgoodput")

__all__ = [
    "ACTIVITY_EXCLUSION_LIST",
    "BadputType",
    "GCPOptions",
    "GoodputCalculator",
    "GoodputMonitor",
    "IntervalMetricType",
    "IntervalWorkloadMetricDetails",
    "MetricType",
    "MonitoringWindowType",
    "UnproductiveTimeDict",
    "WorkloadMetricDetails",
    "goodput",
    "goodput_utils",
    "logger",
]
