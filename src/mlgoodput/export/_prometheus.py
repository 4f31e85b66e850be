"""PrometheusExporter: serve the latest value of every series on an HTTP /metrics endpoint."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from mlgoodput._endpoint import check_host
from mlgoodput.export._base import Sample
from mlgoodput.export._fleet import FLEET_PREFIX, newest_rounds_only
from mlgoodput.export._names import check_name
from mlgoodput.export._process import SeriesKey, series_key
from mlgoodput.export._prom_metrics import metric_families, prometheus_name
from mlgoodput.export._prometheus_http import ScrapeEndpoint, port_problem, render_registry
from mlgoodput.export._registry import register_exporter
from mlgoodput.export._series import SeriesLabels

log = logging.getLogger("mlgoodput")


def _require_prometheus_client() -> Any:
    try:
        import prometheus_client
        from prometheus_client import core
    except ImportError as e:  # pragma: no cover - depends on the install
        raise ImportError("PrometheusExporter needs prometheus_client: pip install 'mlgoodput[prometheus]'") from e
    return prometheus_client, core


def check_port_free(addr: str, port: int) -> None:
    """Raise ValueError naming the port if it cannot be bound now (with SO_REUSEADDR, as the
    exporter binds it: a port in TIME_WAIT after a restart counts as free)."""
    problem = port_problem(addr, port)
    if problem is not None:
        raise ValueError(f"port {port} on {addr} is not available for PrometheusExporter: {problem}")


class PrometheusExporter:
    """An HTTP endpoint (`http://addr:port/metrics`) that a Prometheus server scrapes.

    `export` only updates the values in memory, so it never fails; the server starts in the
    process that first exports (the exporter process), on loopback unless `addr` says
    otherwise. `port=0` picks a free port (read it back from `.url` in that process, or
    from `ExporterProcess.addresses`).

    Until its first export the endpoint has nothing to show: a scrape then waits for that
    export, `first_scrape_wait_s` after the start at the latest, rather than read an empty
    page as "no series".

    Every series keeps its latest value, except fleet gauges (`fleet/...`, export/_fleet.py):
    those come in rounds, and only the newest round per `by` label is served, so a group that
    left the top N does not stay at its last value.
    """

    def __init__(self, port: int = 9464, addr: str = "127.0.0.1", *, first_scrape_wait_s: float = 5.0) -> None:
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            raise ValueError(f"port must be an integer in 0..65535, got {port!r}")
        if not isinstance(addr, str) or not addr:
            raise TypeError(f"addr must be a host address string, got {addr!r}")
        if (
            isinstance(first_scrape_wait_s, bool)
            or not isinstance(first_scrape_wait_s, (int, float))
            or not 0 <= first_scrape_wait_s < float("inf")
        ):
            raise ValueError(f"first_scrape_wait_s must be seconds >= 0, got {first_scrape_wait_s!r}")
        addr = check_host(addr, "addr")
        if port:
            _warn_if_busy(addr, port)
        self.port = port
        self.addr = addr
        self.first_scrape_wait_s = float(first_scrape_wait_s)
        self._exported = threading.Event()  # set by the first export: scrapes stop waiting for it
        self._wait_until = 0.0  # (time.monotonic) the latest a scrape waits for the first export
        self._values: dict[SeriesKey, Sample] = {}
        self._version = 0  # exports so far: a scrape with none since the last renders nothing anew
        self.pages_made = 0  # metrics pages rendered (a scrape with nothing new reuses the last)
        self._lock = threading.Lock()
        self._endpoint: ScrapeEndpoint | None = None

    def __repr__(self) -> str:
        return f"PrometheusExporter(port={self.port}, addr={self.addr!r})"

    def __getstate__(self) -> dict[str, Any]:
        return {"port": self.port, "addr": self.addr, "first_scrape_wait_s": self.first_scrape_wait_s}

    def __setstate__(self, state: dict[str, Any]) -> None:
        wait_s = state.get("first_scrape_wait_s", 5.0)
        self.__init__(port=0, addr=state["addr"], first_scrape_wait_s=wait_s)  # type: ignore[misc]
        self.port = state["port"]

    def start(self) -> None:
        """Bind the port and serve (idempotent). A port that is busy now is retried in the
        background (see `status`); this never raises for it."""
        if self._endpoint is not None:
            return
        _, core = _require_prometheus_client()
        registry = core.CollectorRegistry(auto_describe=False)
        registry.register(_Collector(self))
        render = self._rendered_once(render_registry(registry))
        self._wait_until = time.monotonic() + self.first_scrape_wait_s
        ep = ScrapeEndpoint(self.addr, self.port, render, f"mlgoodput-prometheus-{self.port}")
        self._endpoint = ep
        ep.open()
        self.port = ep.port

    def _rendered_once(self, render: Callable[[str], tuple[bytes, str]]) -> Callable[[str], tuple[bytes, str]]:
        """`render`, answering a scrape from the last page made for the same Accept header while
        no export came since (at 256 hosts a page takes some 12 ms to make; scrapers, often two,
        come more often than uploads)."""
        pages: dict[str, tuple[int, bytes, str]] = {}

        def cached(accept: str) -> tuple[bytes, str]:
            if not self._exported.is_set():  # started, nothing exported yet: wait for it (bounded)
                self._exported.wait(max(0.0, self._wait_until - time.monotonic()))
            version = self._version  # read first: an export while rendering makes the next scrape render
            got = pages.get(accept)
            if got is not None and got[0] == version:
                return got[1], got[2]
            body, ctype = render(accept)
            self.pages_made += 1
            if len(pages) >= 16:  # Accept headers as scrapers send them: a handful
                pages.clear()
            pages[accept] = (version, body, ctype)
            return body, ctype

        return cached

    @property
    def status(self) -> str:
        """Where the endpoint serves, or why it does not yet ("waiting for port ...")."""
        return "not started" if self._endpoint is None else self._endpoint.status

    @property
    def serving(self) -> bool:
        return self._endpoint is not None and self._endpoint.server is not None

    @property
    def url(self) -> str | None:
        """`http://addr:port/metrics` while the endpoint serves (its port picked), else None."""
        ep = self._endpoint
        if ep is None or ep.server is None:
            return None
        host = f"[{self.addr}]" if ":" in self.addr else self.addr
        return f"http://{host}:{ep.port}/metrics"

    def export(self, samples: Sequence[Sample]) -> None:
        if self._endpoint is None:
            self.start()
        values = self._values
        rounds: list[Sample] = []  # fleet samples: their older rounds are dropped (export/_fleet.py)
        with self._lock:
            self._version += 1
            for s in samples:
                labels = s.labels
                if type(labels) is SeriesLabels:  # checked and keyed once for the series (see _series)
                    info = labels.memo.get(s.name) or labels.info(s.name)
                    if not info.ok:
                        check_name(s.name, labels)
                    values[info.key] = s
                else:
                    check_name(s.name, labels)
                    values[series_key(s)] = s
                    if s.name.startswith(FLEET_PREFIX):
                        rounds.append(s)
            if rounds:
                newest_rounds_only(values, rounds)
        self._exported.set()

    def snapshot(self) -> list[Sample]:
        with self._lock:
            return list(self._values.values())

    def shutdown(self, timeout_s: float | None = None) -> None:
        self._exported.set()  # a scrape still waiting for the first export is answered now
        ep, self._endpoint = self._endpoint, None
        if ep is not None:
            ep.close(2.0 if timeout_s is None else min(2.0, timeout_s))


def _warn_if_busy(addr: str, port: int) -> None:
    """A busy port is a condition time resolves (a previous process's port): warn, do not raise."""
    problem = port_problem(addr, port)
    if problem is not None:
        log.warning(
            "PrometheusExporter: port %d on %s is not available now (%s); the exporter keeps"
            " retrying it in the background once started",
            port,
            addr,
            problem,
        )


__all__ = ["PrometheusExporter", "check_port_free", "prometheus_name"]


class _Collector:
    def __init__(self, exporter: PrometheusExporter) -> None:
        self._exporter = exporter

    def collect(self) -> Iterator[Any]:
        _, core = _require_prometheus_client()
        yield from metric_families(self._exporter.snapshot(), core)


register_exporter("prometheus", PrometheusExporter)
