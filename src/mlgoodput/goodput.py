"""Seed-compatible facade: `from mlgoodput import goodput` instead of
`from ml_goodput_measurement import goodput`, with the same names."""

from __future__ import annotations

import logging

from mlgoodput import goodput_utils
from mlgoodput._recorder import GoodputRecorder, Recorder
from mlgoodput.accounting import BadputType, GoodputCalculator, GoodputReport, GoodputType
from mlgoodput.goodput_utils import (
    GoodputInfo,
    IntervalMetricType,
    IntervalWorkloadMetricDetails,
    MetricType,
    StepInfo,
    WorkloadMetricDetails,
    compute_ideal_step_time,
    get_extra_time_from_anomalous_steps,
    get_timestamp_from_log_entry,
)

logger = logging.getLogger("mlgoodput")

#: The seed's type of a badput breakdown: bucket -> seconds or percent (name -> value for custom events).
UnproductiveTimeDict = dict[BadputType, float | dict[str, float]]

__all__ = [
    "BadputType",
    "GoodputCalculator",
    "GoodputInfo",
    "GoodputRecorder",
    "GoodputReport",
    "GoodputType",
    "IntervalMetricType",
    "IntervalWorkloadMetricDetails",
    "MetricType",
    "Recorder",
    "StepInfo",
    "UnproductiveTimeDict",
    "WorkloadMetricDetails",
    "compute_ideal_step_time",
    "get_extra_time_from_anomalous_steps",
    "get_timestamp_from_log_entry",
    "goodput_utils",
    "logger",
]
