"""PrometheusExporter: serve the latest value of every series on an HTTP /metrics endpoint."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from mlgoodput.export._base import Sample
from mlgoodput.export._names import check_name
from mlgoodput.export._process import SeriesKey, series_key
from mlgoodput.export._prom_metrics import metric_families, prometheus_name


def _require_prometheus_client() -> Any:
    try:
        import prometheus_client
        from prometheus_client import core
    except ImportError as e:  # pragma: no cover - depends on the install
        raise ImportError("PrometheusExporter needs prometheus_client: pip install 'mlgoodput[prometheus]'") from e
    return prometheus_client, core


def check_port_free(addr: str, port: int) -> None:
    """Raise ValueError naming the port if something already listens on (addr, port)."""
    fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
    with socket.socket(fam, socket.SOCK_STREAM) as s:
        try:
            s.bind((addr, port))
        except OSError as e:
            raise ValueError(f"port {port} on {addr} is not available for PrometheusExporter: {e}") from None


class PrometheusExporter:
    """An HTTP endpoint (`http://addr:port/metrics`) that a Prometheus server scrapes.

    `export` only updates the values in memory, so it never fails; the server starts in the
    process that first exports (the exporter process), on loopback unless `addr` says
    otherwise. `port=0` picks a free port (read it back from `.port` in that process).
    """

    def __init__(self, port: int = 9464, addr: str = "127.0.0.1") -> None:
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            raise ValueError(f"port must be an integer in 0..65535, got {port!r}")
        if not isinstance(addr, str) or not addr:
            raise TypeError(f"addr must be a host address string, got {addr!r}")
        if port:
            check_port_free(addr, port)
        self.port = port
        self.addr = addr
        self._values: dict[SeriesKey, Sample] = {}
        self._lock = threading.Lock()
        self._server: Any = None
        self._thread: Any = None

    def __repr__(self) -> str:
        return f"PrometheusExporter(port={self.port}, addr={self.addr!r})"

    def __getstate__(self) -> dict[str, Any]:
        return {"port": self.port, "addr": self.addr}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(port=0, addr=state["addr"])  # type: ignore[misc]
        self.port = state["port"]

    def start(self) -> None:
        """Bind the port and serve (idempotent); raises OSError if the port is taken."""
        if self._server is not None:
            return
        prometheus_client, core = _require_prometheus_client()
        registry = core.CollectorRegistry(auto_describe=False)
        registry.register(_Collector(self))
        server, thread = prometheus_client.start_http_server(self.port, addr=self.addr, registry=registry)
        self._server, self._thread = server, thread
        self.port = server.server_address[1]

    def export(self, samples: Sequence[Sample]) -> None:
        if self._server is None:
            self.start()
        with self._lock:
            for s in samples:
                check_name(s.name, s.labels)
                self._values[series_key(s)] = s

    def snapshot(self) -> list[Sample]:
        with self._lock:
            return list(self._values.values())

    def shutdown(self, timeout_s: float | None = None) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()


__all__ = ["PrometheusExporter", "check_port_free", "prometheus_name"]


class _Collector:
    def __init__(self, exporter: PrometheusExporter) -> None:
        self._exporter = exporter

    def collect(self) -> Iterator[Any]:
        _, core = _require_prometheus_client()
        yield from metric_families(self._exporter.snapshot(), core)
