"""OTLPExporter: samples as OpenTelemetry metrics, pushed over OTLP (gRPC or HTTP/protobuf)."""

from __future__ import annotations

import socket
import time
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from mlgoodput.export._base import Sample
from mlgoodput.export._names import check_name, family
from mlgoodput.export._registry import register_exporter

_PROTOCOLS = ("grpc", "http")


def otlp_name(sample_name: str) -> tuple[str, str, float]:
    """(metric name, unit, factor): `mlgoodput.` + family with dots; `_pct` becomes a 0..1 ratio."""
    fam = family(sample_name)
    unit, factor = "", 1.0
    if fam.endswith("_pct"):
        fam, unit, factor = fam[: -len("_pct")] + "_ratio", "1", 0.01
    elif fam.endswith("_seconds"):
        unit = "s"
    return "mlgoodput." + fam.replace("_", "."), unit, factor


def _require_otlp(protocol: str) -> Any:
    try:
        from opentelemetry.sdk.metrics import export as mexport
        from opentelemetry.sdk.metrics.export import MetricExportResult
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.util.instrumentation import InstrumentationScope

        if protocol == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
        else:
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import (  # type: ignore[assignment]
                OTLPMetricExporter,
            )
    except ImportError as e:  # pragma: no cover - depends on the install
        raise ImportError(
            "OTLPExporter needs the OpenTelemetry SDK and exporters: pip install 'mlgoodput[otlp]'"
        ) from e
    return mexport, MetricExportResult, Resource, InstrumentationScope, OTLPMetricExporter


def _host_port_ok(netloc: str) -> bool:
    """A network location with a host name or address (no blanks) and, when given, a valid port."""
    if not netloc or any(c.isspace() for c in netloc):
        return False
    parts = urlsplit("//" + netloc)
    try:
        port = parts.port
    except ValueError:
        return False
    return bool(parts.hostname) and (port is None or 0 < port < 65536)


class OTLPExporter:
    """Push each sample as an OTLP gauge (or monotonic cumulative sum for counters).

    `endpoint`: `host:port` or `http(s)://host:port` for gRPC (default port 4317), or an
    `http(s)://host:port[/v1/metrics]` URL for HTTP (path added when missing). A failed push
    raises, and the exporter process retries it with backoff.
    """

    def __init__(
        self,
        endpoint: str = "http://127.0.0.1:4317",
        protocol: str = "grpc",
        *,
        headers: dict[str, str] | None = None,
        timeout_s: float = 10.0,
        insecure: bool | None = None,
        service_name: str = "mlgoodput",
    ) -> None:
        if protocol not in _PROTOCOLS:
            raise ValueError(f"protocol must be 'grpc' or 'http', got {protocol!r}")
        if not isinstance(endpoint, str) or not endpoint.strip():
            raise ValueError(f"endpoint must be a host:port or URL, got {endpoint!r}")
        if protocol == "http":
            parts = urlsplit(endpoint)
            if parts.scheme not in ("http", "https") or not _host_port_ok(parts.netloc):
                raise ValueError(f"endpoint for protocol='http' must be an http(s):// URL, got {endpoint!r}")
            if parts.path in ("", "/"):
                endpoint = endpoint.rstrip("/") + "/v1/metrics"
        else:
            parts = urlsplit(endpoint if "://" in endpoint else "//" + endpoint)
            if (parts.scheme not in ("", "http", "https")) or parts.path.strip("/") or not _host_port_ok(parts.netloc):
                raise ValueError(
                    f"endpoint for protocol='grpc' must be HOST:PORT or an http(s)://HOST:PORT URL, got {endpoint!r}"
                )
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s!r}")
        self.endpoint = endpoint
        self.protocol = protocol
        self.headers = dict(headers or {})
        self.timeout_s = float(timeout_s)
        if insecure is None:
            insecure = protocol == "grpc" and not endpoint.startswith("https://")
        self.insecure = insecure
        self.service_name = service_name
        self._exporter: Any = None
        self._start_ns = time.time_ns()

    def __repr__(self) -> str:
        return f"OTLPExporter(endpoint={self.endpoint!r}, protocol={self.protocol!r})"

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_exporter"] = None
        return state

    def _client(self) -> Any:
        if self._exporter is None:
            *_, OTLPMetricExporter = _require_otlp(self.protocol)
            if self.protocol == "grpc":
                self._exporter = OTLPMetricExporter(
                    endpoint=self.endpoint, insecure=self.insecure, headers=self.headers or None, timeout=self.timeout_s
                )
            else:
                self._exporter = OTLPMetricExporter(
                    endpoint=self.endpoint, headers=self.headers or None, timeout=self.timeout_s
                )
        return self._exporter

    def export(self, samples: Sequence[Sample]) -> None:
        mexport, MetricExportResult, Resource, InstrumentationScope, _ = _require_otlp(self.protocol)
        now_ns = time.time_ns()
        by_name: dict[str, tuple[Sample, str, float, list[Any]]] = {}
        for s in samples:
            check_name(s.name, s.labels)
            name, unit, factor = otlp_name(s.name)
            t_ns = int(s.time * 1e9) if s.time is not None else now_ns
            point = mexport.NumberDataPoint(
                attributes={str(k): str(v) for k, v in s.labels.items()},
                start_time_unix_nano=self._start_ns,
                time_unix_nano=t_ns,
                value=float(s.value) * factor,
            )
            entry = by_name.setdefault(name, (s, unit or s.unit, factor, []))
            entry[3].append(point)
        metrics = []
        for name, (first, unit, _, points) in by_name.items():
            if first.kind == "counter":
                data = mexport.Sum(
                    data_points=points,
                    aggregation_temporality=mexport.AggregationTemporality.CUMULATIVE,
                    is_monotonic=True,
                )
            else:
                data = mexport.Gauge(data_points=points)
            metrics.append(
                mexport.Metric(name=name, description=first.description or None, unit=unit or None, data=data)
            )
        payload = mexport.MetricsData(
            resource_metrics=[
                mexport.ResourceMetrics(
                    resource=Resource.create({"service.name": self.service_name}),
                    scope_metrics=[
                        mexport.ScopeMetrics(scope=InstrumentationScope("mlgoodput"), metrics=metrics, schema_url="")
                    ],
                    schema_url="",
                )
            ]
        )
        self._check_reachable()
        result = self._client().export(payload, timeout_millis=self.timeout_s * 1000)
        if result != MetricExportResult.SUCCESS:
            raise ConnectionError(f"OTLP export to {self.endpoint} ({self.protocol}) failed")

    def _check_reachable(self) -> None:
        """Fail at once when nothing listens at the endpoint: OpenTelemetry's exporter retries
        a refused connection until its whole timeout, which held a monitor's stop for it."""
        parts = urlsplit(self.endpoint if "://" in self.endpoint else "//" + self.endpoint)
        host, port = parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)
        if not host:
            return
        try:
            socket.create_connection((host, port), timeout=min(1.0, self.timeout_s)).close()
        except ConnectionRefusedError as e:
            raise ConnectionError(f"OTLP export to {self.endpoint} ({self.protocol}) failed: refused ({e})") from None
        except OSError:
            return  # slow or unreachable networks: the exporter's own timeout decides

    def shutdown(self, timeout_s: float | None = None) -> None:
        exp, self._exporter = self._exporter, None
        if exp is not None:
            exp.shutdown(timeout_millis=(timeout_s or 5.0) * 1000)


register_exporter("otlp", OTLPExporter)
