"""Real servers on 127.0.0.1 for tests: an OTLP metrics receiver (gRPC and HTTP), a fake
google.monitoring.v3.MetricService, and a fake GCE metadata server.

They speak the real wire protocols (the protobuf classes that opentelemetry-proto and
google-cloud-monitoring ship), so the exporters under test use their real clients.
"""

from __future__ import annotations

import http.server
import threading
import time
from concurrent import futures
from dataclasses import dataclass, field
from typing import Any


@dataclass
class ReceivedPoint:
    """One data point a fake server received: metric name, attributes/labels, value, time."""

    name: str
    labels: dict[str, str]
    value: float
    time: float
    resource: dict[str, str] = field(default_factory=dict)


class OTLPReceiver:
    """An OTLP metrics receiver: gRPC (`protocol="grpc"`) or HTTP/protobuf (`protocol="http"`).

    `fail` (set it any time) makes it answer UNAVAILABLE / HTTP 503; `points` holds what came in.
    """

    def __init__(self, protocol: str = "grpc") -> None:
        if protocol not in ("grpc", "http"):
            raise ValueError(f"protocol must be 'grpc' or 'http', got {protocol!r}")
        self.protocol = protocol
        self.points: list[ReceivedPoint] = []
        self.requests = 0
        self.fail = False
        self._lock = threading.Lock()
        self._server: Any = None
        self.port = 0

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}" + ("/v1/metrics" if self.protocol == "http" else "")

    def _ingest(self, body: bytes) -> None:
        from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2

        req = metrics_service_pb2.ExportMetricsServiceRequest()
        req.ParseFromString(body)
        with self._lock:
            self.requests += 1
            for rm in req.resource_metrics:
                res = {a.key: a.value.string_value for a in rm.resource.attributes}
                for sm in rm.scope_metrics:
                    for m in sm.metrics:
                        kind = m.WhichOneof("data")
                        dps = getattr(m, kind).data_points if kind in ("gauge", "sum") else []
                        for dp in dps:
                            v = dp.as_double if dp.WhichOneof("value") == "as_double" else float(dp.as_int)
                            labels = {a.key: a.value.string_value for a in dp.attributes}
                            self.points.append(ReceivedPoint(m.name, labels, v, dp.time_unix_nano / 1e9, res))

    def latest(self, name: str, **labels: str) -> float | None:
        with self._lock:
            for p in reversed(self.points):
                if p.name == name and all(p.labels.get(k) == v for k, v in labels.items()):
                    return p.value
        return None

    def start(self) -> OTLPReceiver:
        if self.protocol == "grpc":
            import grpc
            from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2

            def export(request: Any, context: Any) -> Any:
                if self.fail:
                    context.abort(grpc.StatusCode.UNAVAILABLE, "receiver told to fail")
                self._ingest(request.SerializeToString())
                return metrics_service_pb2.ExportMetricsServiceResponse()

            handler = grpc.method_handlers_generic_handler(
                "opentelemetry.proto.collector.metrics.v1.MetricsService",
                {
                    "Export": grpc.unary_unary_rpc_method_handler(
                        export,
                        request_deserializer=metrics_service_pb2.ExportMetricsServiceRequest.FromString,
                        response_serializer=metrics_service_pb2.ExportMetricsServiceResponse.SerializeToString,
                    )
                },
            )
            server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
            server.add_generic_rpc_handlers((handler,))
            self.port = server.add_insecure_port("127.0.0.1:0")
            server.start()
            self._server = server
        else:
            receiver = self

            class Handler(http.server.BaseHTTPRequestHandler):
                def do_POST(self) -> None:
                    body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                    if receiver.fail or self.path != "/v1/metrics":
                        self.send_response(503 if receiver.fail else 404)
                        self.end_headers()
                        return
                    if self.headers.get("Content-Encoding") == "gzip":
                        import gzip

                        body = gzip.decompress(body)
                    receiver._ingest(body)
                    from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2

                    out = metrics_service_pb2.ExportMetricsServiceResponse().SerializeToString()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/x-protobuf")
                    self.send_header("Content-Length", str(len(out)))
                    self.end_headers()
                    self.wfile.write(out)

                def log_message(self, *args: Any) -> None:
                    pass

            httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
            self.port = httpd.server_address[1]
            threading.Thread(target=httpd.serve_forever, daemon=True, name="otlp-http-receiver").start()
            self._server = httpd
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        if self.protocol == "grpc":
            server.stop(0)
        else:
            server.shutdown()
            server.server_close()

    def __enter__(self) -> OTLPReceiver:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class FakeMetricService:
    """A google.monitoring.v3.MetricService on 127.0.0.1 that implements CreateTimeSeries
    with the service's rules: at most one point per series per request, and at least
    `min_point_interval_s` between points of a series (violations: INVALID_ARGUMENT).
    `fail` makes it answer UNAVAILABLE; `hang` makes it block."""

    def __init__(self, min_point_interval_s: float = 10.0) -> None:
        self.min_point_interval_s = min_point_interval_s
        self.points: list[ReceivedPoint] = []
        self.requests: list[str] = []  # project names
        self.rejected = 0
        self.fail = False
        self.hang = False
        self._last: dict[tuple[Any, ...], float] = {}
        self._lock = threading.Lock()
        self._server: Any = None
        self.port = 0

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> FakeMetricService:
        import grpc
        from google.cloud import monitoring_v3
        from google.protobuf import empty_pb2

        req_cls = monitoring_v3.CreateTimeSeriesRequest.pb()

        def create(request: Any, context: Any) -> Any:
            while self.hang:
                time.sleep(0.05)
            if self.fail:
                context.abort(grpc.StatusCode.UNAVAILABLE, "fake service told to fail")
            seen: set[tuple[Any, ...]] = set()
            rows = []
            for ts in request.time_series:
                key = (
                    ts.metric.type,
                    tuple(sorted(ts.metric.labels.items())),
                    ts.resource.type,
                    tuple(sorted(ts.resource.labels.items())),
                )
                if key in seen or len(ts.points) != 1:
                    self.rejected += 1
                    context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"one point per series per request: {key}")
                seen.add(key)
                p = ts.points[0]
                t = p.interval.end_time.seconds + p.interval.end_time.nanos / 1e9
                rows.append((key, ts, p, t))
            now = time.monotonic()
            with self._lock:
                for key, *_ in rows:
                    last = self._last.get(key)
                    if last is not None and now - last < self.min_point_interval_s:
                        self.rejected += 1
                        context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"points of {key} written too often")
                for key, ts, p, t in rows:
                    self._last[key] = now
                    which = p.value.WhichOneof("value")
                    v = float(getattr(p.value, which))
                    self.points.append(
                        ReceivedPoint(ts.metric.type, dict(ts.metric.labels), v, t, dict(ts.resource.labels))
                    )
                self.requests.append(request.name)
            return empty_pb2.Empty()

        handler = grpc.method_handlers_generic_handler(
            "google.monitoring.v3.MetricService",
            {
                "CreateTimeSeries": grpc.unary_unary_rpc_method_handler(
                    create,
                    request_deserializer=req_cls.FromString,
                    response_serializer=empty_pb2.Empty.SerializeToString,
                )
            },
        )
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        server.add_generic_rpc_handlers((handler,))
        self.port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        self._server = server
        return self

    def latest(self, metric_type: str, **labels: str) -> float | None:
        with self._lock:
            for p in reversed(self.points):
                if p.name == metric_type and all({**p.labels, **p.resource}.get(k) == v for k, v in labels.items()):
                    return p.value
        return None

    def stop(self) -> None:
        server, self._server = self._server, None
        self.hang = False
        if server is not None:
            server.stop(0)

    def __enter__(self) -> FakeMetricService:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class FakeMetadataServer:
    """A GCE metadata server on 127.0.0.1 answering `computeMetadata/v1/<path>` from `values`."""

    def __init__(self, values: dict[str, str]) -> None:
        self.values = dict(values)
        self.requests: list[str] = []
        self._server: Any = None
        self.port = 0

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> FakeMetadataServer:
        meta = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                meta.requests.append(self.path)
                path = self.path.removeprefix("/computeMetadata/v1/")
                value = meta.values.get(path)
                if self.headers.get("Metadata-Flavor") != "Google" or value is None:
                    self.send_response(403 if value is not None else 404)
                    self.end_headers()
                    return
                body = value.encode()
                self.send_response(200)
                self.send_header("Metadata-Flavor", "Google")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = httpd.server_address[1]
        threading.Thread(target=httpd.serve_forever, daemon=True, name="fake-metadata").start()
        self._server = httpd
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()

    def __enter__(self) -> FakeMetadataServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
