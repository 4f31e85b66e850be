"""CloudMonitoringExporter and GCPOptions: the seed's `workload/*` metrics in Google Cloud Monitoring."""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from mlgoodput._gcp_metadata import metadata_value
from mlgoodput.export._base import Sample
from mlgoodput.export._names import check_name, family, label_name
from mlgoodput.export._registry import register_exporter

log = logging.getLogger("mlgoodput")

WORKLOAD_PREFIX = "compute.googleapis.com/workload/"
WORKLOAD_RESOURCE = "compute.googleapis.com/Workload"
CUSTOM_PREFIX = "custom.googleapis.com/mlgoodput/"
#: The service's rule: at most one point per series every this many seconds.
MIN_POINT_INTERVAL_S = 10.0
MAX_SERIES_PER_REQUEST = 200


@dataclasses.dataclass(frozen=True, slots=True)
class GCPOptions:
    """Where and how to write Cloud Monitoring metrics (the seed's options, same names).

    None for project_id, location or acc_type: read from the GCE metadata server when the
    exporter starts; if project or location stay unknown, Cloud Monitoring export is off.
    """

    project_id: str | None = None
    location: str | None = None
    replica_id: str = "0"
    acc_type: str | None = None
    cluster_name: str | None = None
    enable_gcp_goodput_metrics: bool = True
    enable_gcp_step_deviation_metrics: bool = True

    def __post_init__(self) -> None:
        for f in ("project_id", "location", "acc_type", "cluster_name"):
            v = getattr(self, f)
            if v is not None and (not isinstance(v, str) or not v.strip()):
                raise ValueError(f"GCPOptions.{f} must be a non-empty string or None, got {v!r}")
        if not isinstance(self.replica_id, str):
            raise TypeError(f"GCPOptions.replica_id must be a string, got {self.replica_id!r}")
        for f in ("enable_gcp_goodput_metrics", "enable_gcp_step_deviation_metrics"):
            if not isinstance(getattr(self, f), bool):
                raise TypeError(f"GCPOptions.{f} must be a bool, got {getattr(self, f)!r}")

    @property
    def enabled(self) -> bool:
        return self.enable_gcp_goodput_metrics or self.enable_gcp_step_deviation_metrics


def resolve_gcp_options(opts: GCPOptions, *, metadata_host: str | None = None, timeout_s: float = 1.0) -> GCPOptions:
    """Fill project, location and accelerator type from the metadata server where missing."""
    project, location, acc = opts.project_id, opts.location, opts.acc_type
    if project is None:
        project = metadata_value("project/project-id", host=metadata_host, timeout_s=timeout_s)
    if location is None:
        zone = metadata_value("instance/zone", host=metadata_host, timeout_s=timeout_s)
        location = zone.rsplit("/", 1)[-1] if zone else None
    if acc is None:
        acc = metadata_value("instance/attributes/accelerator-type", host=metadata_host, timeout_s=timeout_s)
    return dataclasses.replace(opts, project_id=project, location=location, acc_type=acc)


# ---------------------------------------------------------------------- metric mapping
def _upper(v: str) -> str:
    return v.upper()


def _window_seconds(v: str) -> str:
    return v[:-1] if v.endswith("s") else v


# sample name -> (workload metric, value type, fixed labels, {label from sample label: transform}, which switch)
_Mapping = tuple[str, str, dict[str, str], dict[str, tuple[str, Callable[[str], str]]], str]
WORKLOAD_METRICS: dict[str, _Mapping] = {
    "goodput/productive_seconds": ("goodput_time", "DOUBLE", {"goodput_source": "TOTAL"}, {}, "goodput"),
    "badput/{bucket}_seconds": ("badput_time", "DOUBLE", {}, {"badput_source": ("bucket", _upper)}, "goodput"),
    "badput/custom/{event}_seconds": (
        "badput_time",
        "DOUBLE",
        {},
        {"badput_source": ("event", lambda v: "CUSTOM_BADPUT_EVENTS." + v.upper())},
        "goodput",
    ),
    "goodput/total_elapsed_seconds": ("total_elapsed_time", "DOUBLE", {"window_type": "CUMULATIVE"}, {}, "goodput"),
    "goodput/max_productive_step": ("max_productive_steps", "INT64", {}, {}, "goodput"),
    "goodput/disruptions": ("disruptions", "INT64", {"window_type": "CUMULATIVE"}, {}, "goodput"),
    "goodput/ideal_step_time_seconds": ("performance", "DOUBLE", {}, {}, "goodput"),
    "goodput/step_time_deviation_seconds": ("step_time_deviation", "DOUBLE", {}, {}, "step_deviation"),
    "rolling/{window}/goodput_pct": (
        "interval_goodput",
        "DOUBLE",
        {"goodput_source": "TOTAL"},
        {"rolling_window_size": ("window", _window_seconds)},
        "goodput",
    ),
    "rolling/{window}/badput/{bucket}_pct": (
        "interval_badput",
        "DOUBLE",
        {},
        {"badput_source": ("bucket", _upper), "rolling_window_size": ("window", _window_seconds)},
        "goodput",
    ),
    "rolling/{window}/badput/custom/{event}_pct": (
        "interval_badput",
        "DOUBLE",
        {},
        {
            "badput_source": ("event", lambda v: "CUSTOM_BADPUT_EVENTS." + v.upper()),
            "rolling_window_size": ("window", _window_seconds),
        },
        "goodput",
    ),
}
#: Sample names we never send (their content is already in another series).
SKIPPED = frozenset({"badput/{bucket}_pct", "badput/custom/{event}_pct", "goodput/goodput_pct", "goodput/last_step"})
_NO_ACCELERATOR_LABEL = frozenset({"performance"})


def _require_gcm() -> Any:
    try:
        from google.cloud import monitoring_v3
    except ImportError as e:  # pragma: no cover - depends on the install
        raise ImportError("CloudMonitoringExporter needs google-cloud-monitoring: pip install 'mlgoodput[gcp]'") from e
    return monitoring_v3


class CloudMonitoringExporter:
    """Write samples as Cloud Monitoring time series (see docs/exporting.md for the mapping).

    Goodput samples become the seed's `compute.googleapis.com/workload/*` metrics on the
    `compute.googleapis.com/Workload` resource (location, workload_id = job name,
    replica_id); any other sample becomes `custom.googleapis.com/mlgoodput/<family>` on the
    `global` resource. Each request carries at most one point per series, and a series gets
    a point at most every `min_point_interval_s` (the service's 10 s rule): a newer value
    that comes too soon waits (only the latest is kept) for the next export or shutdown.

    `api_endpoint` and `insecure=True` point the real client at another server (tests).
    """

    def __init__(
        self,
        gcp_options: GCPOptions | None = None,
        *,
        api_endpoint: str | None = None,
        insecure: bool = False,
        credentials: Any = None,
        min_point_interval_s: float = MIN_POINT_INTERVAL_S,
        timeout_s: float = 20.0,
        metadata_host: str | None = None,
        metadata_timeout_s: float = 1.0,
    ) -> None:
        opts = GCPOptions() if gcp_options is None else gcp_options
        if not isinstance(opts, GCPOptions):
            raise TypeError(f"gcp_options must be a GCPOptions, got {gcp_options!r}")
        if not min_point_interval_s >= 0:
            raise ValueError(f"min_point_interval_s must be >= 0, got {min_point_interval_s!r}")
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s!r}")
        if insecure and not api_endpoint:
            raise ValueError("insecure=True needs api_endpoint (the default endpoint is TLS only)")
        self.gcp_options = opts
        self.api_endpoint = api_endpoint
        self.insecure = insecure
        self.credentials = credentials
        self.min_point_interval_s = float(min_point_interval_s)
        self.timeout_s = float(timeout_s)
        self.metadata_host = metadata_host
        self.metadata_timeout_s = metadata_timeout_s
        self._init_runtime()

    def _init_runtime(self) -> None:
        self._client: Any = None
        self._resolved: GCPOptions | None = None
        self._last_sent: dict[tuple[Any, ...], float] = {}
        self._deferred: dict[tuple[Any, ...], tuple[Sample, Any]] = {}
        self.requests = 0

    def __repr__(self) -> str:
        return f"CloudMonitoringExporter({self.gcp_options!r})"

    def __getstate__(self) -> dict[str, Any]:
        keep = (
            "gcp_options",
            "api_endpoint",
            "insecure",
            "credentials",
            "min_point_interval_s",
            "timeout_s",
            "metadata_host",
            "metadata_timeout_s",
        )
        return {k: getattr(self, k) for k in keep}

    def __setstate__(self, state: dict[str, Any]) -> None:
        for k, v in state.items():
            setattr(self, k, v)
        self._init_runtime()

    # -- setup -------------------------------------------------------------------------
    def start(self) -> None:
        """Resolve project/location/accelerator (metadata server, fail-fast) and build the client."""
        if self._resolved is not None:
            return
        opts = resolve_gcp_options(
            self.gcp_options, metadata_host=self.metadata_host, timeout_s=self.metadata_timeout_s
        )
        self._resolved = opts
        if not opts.enabled:
            return
        if not opts.project_id or not opts.location:
            log.warning("Cloud Monitoring export is off: project_id or location unknown (not on GCE?); set GCPOptions")
            return
        monitoring_v3 = _require_gcm()
        if self.api_endpoint and self.insecure:
            import grpc
            from google.auth.credentials import AnonymousCredentials
            from google.cloud.monitoring_v3.services.metric_service.transports import (
                MetricServiceGrpcTransport,
            )

            endpoint = self.api_endpoint

            def transport(**kw: Any) -> Any:
                return MetricServiceGrpcTransport(channel=grpc.insecure_channel(endpoint), **kw)

            self._client = monitoring_v3.MetricServiceClient(
                credentials=AnonymousCredentials(),  # type: ignore[no-untyped-call]
                client_options={"api_endpoint": endpoint},
                transport=transport,
            )
        else:
            kwargs: dict[str, Any] = {}
            if self.api_endpoint:
                kwargs["client_options"] = {"api_endpoint": self.api_endpoint}
            if self.credentials is not None:
                kwargs["credentials"] = self.credentials
            self._client = monitoring_v3.MetricServiceClient(**kwargs)

    @property
    def active(self) -> bool:
        return self._client is not None

    # -- export ------------------------------------------------------------------------
    def _series(self, s: Sample, opts: GCPOptions) -> tuple[tuple[Any, ...], dict[str, Any]] | None:
        check_name(s.name, s.labels)
        labels = {str(k): str(v) for k, v in s.labels.items()}
        m = WORKLOAD_METRICS.get(s.name)
        if m is not None:
            metric, value_type, fixed, derived, switch = m
            if switch == "goodput" and not opts.enable_gcp_goodput_metrics:
                return None
            if switch == "step_deviation" and not opts.enable_gcp_step_deviation_metrics:
                return None
            mlabels = dict(fixed)
            for k, (src, fn) in derived.items():
                mlabels[k] = fn(labels[src])
            if mlabels.get("badput_source") == "CUSTOM_BADPUT_EVENTS":
                return None  # sent per event type instead
            if metric not in _NO_ACCELERATOR_LABEL:
                mlabels["accelerator_type"] = opts.acc_type or "unknown"
            rlabels = {
                "location": opts.location or "",
                "workload_id": labels.get("job_name", ""),
                "replica_id": opts.replica_id,
            }
            spec: dict[str, Any] = {
                "type": WORKLOAD_PREFIX + metric,
                "labels": mlabels,
                "rtype": WORKLOAD_RESOURCE,
                "rlabels": rlabels,
                "vtype": value_type,
            }
        elif s.name in SKIPPED:
            return None
        else:
            mlabels = {label_name(k): v for k, v in labels.items()}
            spec = {
                "type": CUSTOM_PREFIX + family(s.name),
                "labels": mlabels,
                "rtype": "global",
                "rlabels": {"project_id": opts.project_id or ""},
                "vtype": "DOUBLE",
            }
        key = (
            spec["type"],
            tuple(sorted(spec["labels"].items())),
            spec["rtype"],
            tuple(sorted(spec["rlabels"].items())),
        )
        return key, spec

    def export(self, samples: Sequence[Sample]) -> None:
        self.start()
        opts = self._resolved
        if self._client is None or opts is None:
            return  # export is off (logged once at start)
        for s in samples:
            r = self._series(s, opts)
            if r is not None:
                self._deferred[r[0]] = (s, r[1])
        self._send_due(time.monotonic())

    def _send_due(self, now: float) -> None:
        due = [k for k in self._deferred if now - self._last_sent.get(k, -1e18) >= self.min_point_interval_s]
        for i in range(0, len(due), MAX_SERIES_PER_REQUEST):
            chunk = due[i : i + MAX_SERIES_PER_REQUEST]
            self._write([self._deferred[k] for k in chunk])
            sent_at = time.monotonic()
            for k in chunk:
                self._last_sent[k] = sent_at
                self._deferred.pop(k, None)

    @property
    def pending(self) -> int:
        """Series whose latest value waits for the 10 s rule."""
        return len(self._deferred)

    def _write(self, items: Sequence[tuple[Sample, Mapping[str, Any]]]) -> None:
        monitoring_v3 = _require_gcm()
        from google.api import metric_pb2

        kinds = metric_pb2.MetricDescriptor
        opts = self._resolved
        assert opts is not None
        series = []
        for s, spec in items:
            t = s.time if s.time is not None else time.time()
            ts = monitoring_v3.TimeSeries()
            ts.metric.type = spec["type"]
            ts.metric.labels.update(spec["labels"])
            ts.resource.type = spec["rtype"]
            ts.resource.labels.update(spec["rlabels"])
            ts.metric_kind = kinds.MetricKind.GAUGE
            secs = int(t)
            interval = monitoring_v3.TimeInterval({"end_time": {"seconds": secs, "nanos": int((t - secs) * 1e9)}})
            if spec["vtype"] == "INT64":
                ts.value_type = kinds.ValueType.INT64
                value = monitoring_v3.TypedValue(int64_value=int(s.value))
            else:
                ts.value_type = kinds.ValueType.DOUBLE
                value = monitoring_v3.TypedValue(double_value=float(s.value))
            ts.points = [monitoring_v3.Point({"interval": interval, "value": value})]
            series.append(ts)
        self._client.create_time_series(name=f"projects/{opts.project_id}", time_series=series, timeout=self.timeout_s)
        self.requests += 1

    def shutdown(self, timeout_s: float | None = None) -> None:
        """Send values still waiting for the 10 s rule if that fits in `timeout_s`; close the client."""
        deadline = time.monotonic() + (5.0 if timeout_s is None else timeout_s)
        try:
            while self._deferred and self._client is not None:
                now = time.monotonic()
                wait = min(self.min_point_interval_s - (now - self._last_sent.get(k, -1e18)) for k in self._deferred)
                if now + max(0.0, wait) >= deadline:
                    log.warning(
                        "Cloud Monitoring: %d latest values not sent (10 s rule, no time left)", len(self._deferred)
                    )
                    break
                if wait > 0:
                    time.sleep(wait)
                self._send_due(time.monotonic())
        finally:
            client, self._client = self._client, None
            if client is not None:
                try:
                    client.transport.close()
                except Exception:
                    pass


register_exporter("gcp", CloudMonitoringExporter)
