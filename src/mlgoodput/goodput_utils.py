"""Seed-compatible `goodput_utils`: options, metric enums, detail types and small helpers.

`from mlgoodput import goodput_utils` stands in for `from ml_goodput_measurement import
goodput_utils`. The helpers need only the standard library (the seed's use numpy, scipy
and requests); the metadata-server helpers return None off Google Cloud.
"""

from __future__ import annotations

import datetime
import enum
import logging
import statistics
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypedDict

from mlgoodput.accounting import BadputType, GoodputType

if TYPE_CHECKING:
    from mlgoodput.export import GCPOptions

__all__ = [
    "ACTIVITY_EXCLUSION_LIST",
    "MACHINE_TYPE_TO_ACCELERATOR_TYPE_MAPPING",
    "BadputType",
    "ElasticIntervalWorkloadMetricDetails",
    "ElasticWorkloadMetricDetails",
    "GCPOptions",
    "GoodputInfo",
    "GoodputType",
    "IntervalMetricType",
    "IntervalWorkloadMetricDetails",
    "MetricType",
    "MonitoringWindowType",
    "StepInfo",
    "WorkloadMetricDetails",
    "compute_ideal_step_time",
    "compute_percentile",
    "compute_step_deviation_from_baseline",
    "get_accelerator_type",
    "get_anomalous_and_normal_step_times",
    "get_cluster_name",
    "get_extra_time_from_anomalous_steps",
    "get_gcp_metadata",
    "get_gcp_project_id",
    "get_node_zone",
    "get_timestamp_from_log_entry",
]

log = logging.getLogger("mlgoodput")

METADATA_SERVER_URL = "http://metadata.google.internal/computeMetadata/v1/"

#: Machine-type prefix -> accelerator type, first match wins (the seed's table).
MACHINE_TYPE_TO_ACCELERATOR_TYPE_MAPPING: dict[str, str] = {
    "tpu7x": "TPU-7x",
    "ct6e": "TPU-v6e",
    "ct5p": "TPU-v5p",
    "ct5lp": "TPU-v5e",
    "ct5l": "TPU-v5e",
    "ct4p": "TPU-v4p",
    "ct3p": "TPU-v3",
    "ct3": "TPU-v3",
    "tpu-v2": "TPU-v2",
    "tpu": "TPU",
    "a3-edgegpu": "NVIDIA-H100",
    "a3-highgpu": "NVIDIA-H100",
    "a3-megagpu": "NVIDIA-H100",
    "a3-ultragpu": "NVIDIA-H200",
    "a2": "NVIDIA-A100",
    "gpu": "GPU",
}

#: Activities that overlap training without blocking it, so they are not badput.
ACTIVITY_EXCLUSION_LIST: list[str] = ["DATA_LOADING_ASYNC"]


class MetricType(enum.Enum):
    """Keys of the cumulative metric details (`GoodputCalculator.get_job_goodput_details`)."""

    GOODPUT_TIME = "goodput_time"
    BADPUT_TIME = "badput_time"
    MAX_PRODUCTIVE_STEP = "max_productive_step"
    TOTAL_ELAPSED_TIME = "total_elapsed_time"
    DISRUPTION_COUNT = "disruption_count"
    STEP_TIME_DEVIATION = "step_time_deviation"
    IDEAL_STEP_TIME = "ideal_step_time"
    TOTAL_EXCLUDED_TIME = "total_excluded_time"


class IntervalMetricType(enum.Enum):
    """Keys of the interval metric details (`GoodputCalculator.get_interval_metric_details`)."""

    INTERVAL_GOODPUT = "interval_goodput"
    INTERVAL_BADPUT = "interval_badput"
    INTERVAL_SIZE = "interval_size"


class MonitoringWindowType(enum.Enum):
    """Whether a step-deviation summary compares with the job's history or only the recent steps."""

    CUMULATIVE = "cumulative"
    INTERVAL = "interval"


class WorkloadMetricDetails(TypedDict):
    goodput_time: dict[GoodputType, float]
    badput_time: dict[BadputType, float | dict[str, float]]
    max_productive_step: int
    total_elapsed_time: float
    disruption_count: int
    step_time_deviation: dict[int, float]
    ideal_step_time: float
    total_excluded_time: float


class IntervalWorkloadMetricDetails(TypedDict):
    interval_goodput: dict[GoodputType, float]
    interval_badput: dict[BadputType, float | dict[str, float]]
    interval_size: int  # seconds


class ElasticWorkloadMetricDetails(WorkloadMetricDetails, total=False):
    stepping_slice_efficiency: float
    available_slice_efficiency: float


class ElasticIntervalWorkloadMetricDetails(IntervalWorkloadMetricDetails, total=False):
    stepping_slice_efficiency: float
    available_slice_efficiency: float


_IMPORT_TIME = datetime.datetime.now(datetime.timezone.utc)  # noqa: UP017 (the seed's spelling)


class GoodputInfo:
    """A snapshot of a job's goodput numbers (seconds), as the seed caches them."""

    def __init__(
        self,
        total_productive_time: float = 0.0,
        total_elapsed_time: float = 0.0,
        total_unproductive_time: dict[BadputType, float | dict[str, float]] | None = None,
        max_productive_step: int = 0,
        last_recorded_step: int = 0,
        last_updated_timestamp: datetime.datetime = _IMPORT_TIME,
        number_of_disruptions: int = 0,
        total_excluded_time: float = 0.0,
    ) -> None:
        self.total_productive_time = total_productive_time
        self.total_elapsed_time = total_elapsed_time
        self.total_unproductive_time = dict(total_unproductive_time or {})
        self.max_productive_step = max_productive_step
        self.last_recorded_step = last_recorded_step
        self.last_updated_timestamp = last_updated_timestamp
        self.number_of_disruptions = number_of_disruptions
        self.total_excluded_time = total_excluded_time


class StepInfo:
    """The ideal step time and each step's deviation from it."""

    def __init__(self, ideal_step_time: float, step_deviations: dict[int, float]) -> None:
        self.ideal_step_time = ideal_step_time
        self.step_deviations = step_deviations


def compute_percentile(values: list[float], percentile: float) -> float:
    """The `percentile` (0..100) of `values` with linear interpolation; 0.0 for no values."""
    if not values:
        return 0.0
    ys = sorted(values)
    pos = (len(ys) - 1) * (percentile / 100.0)
    lo = int(pos)
    hi = min(lo + 1, len(ys) - 1)
    return float(ys[lo] + (ys[hi] - ys[lo]) * (pos - lo))


def compute_step_deviation_from_baseline(
    step_time_deviation: dict[int, float],
    mode: MonitoringWindowType = MonitoringWindowType.CUMULATIVE,
    recent_window_size: int = 100,
    baseline_window_size: int = 1000,
    spike_percentile: int = 90,
) -> float:
    """One number for a series of step deviations, sensitive to recent spikes.

    Under 100 steps: the mean absolute deviation. INTERVAL: the `spike_percentile` of the
    latest `recent_window_size`. CUMULATIVE: that percentile minus the median of the
    `baseline_window_size` deviations before them (just the percentile while there are
    not enough steps for a baseline)."""
    if not step_time_deviation:
        return 0.0
    devs = [abs(d) for d in step_time_deviation.values()]
    n = len(devs)
    if n < 100:
        return statistics.fmean(devs)
    recent = devs[-recent_window_size:]
    if mode == MonitoringWindowType.INTERVAL:
        return compute_percentile(recent, spike_percentile)
    if mode == MonitoringWindowType.CUMULATIVE:
        if n < recent_window_size + baseline_window_size:
            return compute_percentile(recent, spike_percentile)
        baseline = devs[-(recent_window_size + baseline_window_size) : -recent_window_size]
        if not baseline:
            return compute_percentile(recent, spike_percentile)
        return compute_percentile(recent, spike_percentile) - float(statistics.median(baseline))
    raise ValueError(f"mode must be a MonitoringWindowType, got {mode!r}")


def _mad(xs: list[float]) -> tuple[float, float]:
    med = float(statistics.median(xs))
    return med, float(statistics.median(abs(x - med) for x in xs))


def compute_ideal_step_time(step_times: list[float]) -> float | None:
    """The mean of the step times of at least 1 s that are at most median + 3 * MAD (median
    absolute deviation); None when no step takes 1 s."""
    xs = [t for t in step_times if t >= 1.0]
    if not xs:
        return None
    med, mad = _mad(xs)
    normal = [t for t in xs if t <= med + 3 * mad]
    return statistics.fmean(normal) if normal else None


def get_anomalous_and_normal_step_times(step_times: list[Any]) -> tuple[list[Any], list[Any]]:
    """(step times above median + 3 * MAD, the others), each in input order."""
    med, mad = _mad([float(t) for t in step_times])
    anomalous = [t for t in step_times if t > med + 3 * mad]
    normal = [t for t in step_times if not t > med + 3 * mad]
    return anomalous, normal


def get_extra_time_from_anomalous_steps(step_times: list[Any]) -> float:
    """Seconds the anomalous steps took beyond the mean of the normal ones."""
    anomalous, normal = get_anomalous_and_normal_step_times(step_times)
    mean = statistics.fmean(normal) if normal else 0.0
    return float(sum(anomalous) - len(anomalous) * mean)


def get_timestamp_from_log_entry(entry: Mapping[str, Any]) -> datetime.datetime | None:
    """The UTC time of a seed log entry: the value of its first key containing "time"."""
    for key, value in entry.items():
        if "time" in key:
            return datetime.datetime.fromtimestamp(value, datetime.timezone.utc)  # noqa: UP017
    return None


_RETRY_STATUS = frozenset({429, 500, 502, 503, 504})


def get_gcp_metadata(category: str, attribute: str, timeout: float = 5, retries: int = 3) -> str | None:
    """`category/attribute` from the GCE metadata server (e.g. "project", "project-id"), or None
    (logged) when it cannot be had; 429 and 5xx answers are retried with backoff."""
    url = f"{METADATA_SERVER_URL}{category}/{attribute}"
    req = urllib.request.Request(url, headers={"Metadata-Flavor": "Google"})
    for attempt in range(retries + 1):
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return str(resp.read().decode())
        except urllib.error.HTTPError as e:
            if e.code not in _RETRY_STATUS or attempt == retries:
                log.warning("Failed to retrieve metadata for %s/%s: %s", category, attribute, e)
                return None
        except (OSError, ValueError) as e:
            log.warning("Failed to retrieve metadata for %s/%s: %s", category, attribute, e)
            return None
        time.sleep(0.5 * (2**attempt))
    return None


def get_gcp_project_id() -> str | None:
    """The project id of this GCE machine's project, or None."""
    return get_gcp_metadata("project", "project-id")


def get_node_zone() -> str | None:
    """This GCE machine's zone (e.g. "us-central1-a"), or None."""
    path = get_gcp_metadata("instance", "zone")
    return path.rsplit("/", 1)[-1] if path else None


def get_accelerator_type() -> str:
    """The accelerator type from this machine's type (see the mapping), or "UNKNOWN"."""
    path = get_gcp_metadata("instance", "machine-type")
    name = path.split("/")[-1] if path else None
    if not name:
        return "UNKNOWN"
    for prefix, acc in MACHINE_TYPE_TO_ACCELERATOR_TYPE_MAPPING.items():
        if prefix.lower() in name.lower():
            return acc
    return "UNKNOWN"


def get_cluster_name() -> str | None:
    """The GKE cluster name from the metadata server, or None."""
    return get_gcp_metadata("instance", "attributes/cluster-name")


def __getattr__(name: str) -> Any:
    """`GCPOptions` loads with the exporters on first use, so importing `goodput` stays light."""
    if name == "GCPOptions":
        from mlgoodput.export import GCPOptions

        globals()["GCPOptions"] = GCPOptions
        return GCPOptions
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
