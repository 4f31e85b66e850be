"""The Prometheus exporter's HTTP side: a bounded scrape endpoint and a port that is retried.

A trainer restarted on the same port must not crash on it (the old sockets linger in
TIME_WAIT for a minute, or an old process still holds the port): the socket is bound with
SO_REUSEADDR, and a port that is still busy is retried in the background, logged once and
shown by `status`, instead of raising into training. Scrapes are served by a
`LimitedServer` (no thread per idle connection, a bounded request, a timeout).
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable
from typing import Any

from mlgoodput._limited_server import LimitedServer, bind_tcp
from mlgoodput._worker import BackgroundWorker

log = logging.getLogger("mlgoodput")

MAX_REQUEST_BYTES = 16384  # a scrape's request line and headers
RETRY_MAX_S = 5.0  # longest wait between two tries of a busy port


def bind_reusable(addr: str, port: int) -> socket.socket:
    """A listening TCP socket on (addr, port) with SO_REUSEADDR; OSError when it is taken."""
    return bind_tcp(addr, port)


def port_problem(addr: str, port: int) -> str | None:
    """Why (addr, port) cannot be bound right now (as a restarted server would bind it), or None."""
    try:
        bind_reusable(addr, port).close()
    except OSError as e:
        return str(e)
    return None


def scrape_reply(request: bytes, render: Callable[[str], tuple[bytes, str]]) -> bytes:
    """The HTTP response to one request: GET or HEAD of any path gives the metrics;
    `render(accept_header)` returns (body, content type)."""
    head = request.split(b"\r\n\r\n", 1)[0].decode("latin-1")
    lines = head.split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/"):
        return _response(400, b"bad request\n", "text/plain")
    method = parts[0]
    if method not in ("GET", "HEAD"):
        return _response(405, b"method not allowed\n", "text/plain")
    accept = ""
    for line in lines[1:]:
        k, _, v = line.partition(":")
        if k.strip().lower() == "accept":
            accept = v.strip()
    body, ctype = render(accept)
    return _response(200, body, ctype, head_only=method == "HEAD")


def _response(code: int, body: bytes, ctype: str, *, head_only: bool = False) -> bytes:
    reason = {200: "OK", 400: "Bad Request", 405: "Method Not Allowed"}[code]
    head = (
        f"HTTP/1.1 {code} {reason}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode("latin-1")
    return head if head_only else head + body


class ScrapeEndpoint(BackgroundWorker):
    """Serves `render` on (addr, port) once the port can be had; until then retries it in the
    background (a worker round per try, with backoff) and reports that in `status`."""

    def __init__(self, addr: str, port: int, render: Callable[[str], tuple[bytes, str]], name: str) -> None:
        super().__init__(name, interval_s=1.0, max_backoff_s=RETRY_MAX_S)
        self.addr = addr
        self.port = port
        self._render = render
        self.server: LimitedServer | None = None
        self.tries = 0
        self.status = f"binding {addr}:{port}"

    def open(self) -> None:
        """Bind now if the port is free, else start retrying in the background; never raises
        for a busy port."""
        if not self._try_bind():
            log.warning(
                "%s: port %d on %s is not available yet (%s); retrying in the background",
                self.name,
                self.port,
                self.addr,
                self.status,
            )
            self.start()

    def _try_bind(self) -> bool:
        self.tries += 1
        try:
            sock = bind_reusable(self.addr, self.port)
        except OSError as e:
            self.status = f"waiting for port {self.port} on {self.addr}: {e} (try {self.tries})"
            return False
        self.port = sock.getsockname()[1]
        server = LimitedServer(
            sock,
            self._reply,
            name=self.name,
            terminator=b"\r\n\r\n",
            max_request_bytes=MAX_REQUEST_BYTES,
            request_timeout_s=10.0,
            workers=2,
        )
        server.start()
        self.server = server
        self.status = f"serving http://{self.addr}:{self.port}/metrics"
        if self.tries > 1:
            log.warning("%s: now %s (after %d tries)", self.name, self.status, self.tries)
        return True

    def _reply(self, request: bytes) -> bytes:
        return scrape_reply(request, self._render)

    def _work(self) -> bool:
        if self.server is not None or self._closing:
            return True
        if not self._try_bind():
            raise OSError(self.status)
        return True

    def _on_close(self, timeout_s: float) -> None:
        server, self.server = self.server, None
        if server is not None:
            server.close(min(2.0, timeout_s))


def render_registry(registry: Any) -> Callable[[str], tuple[bytes, str]]:
    """A `render(accept)` for a prometheus_client registry, in the format the scraper asks for."""
    from prometheus_client.exposition import choose_encoder

    def render(accept: str) -> tuple[bytes, str]:
        encoder, ctype = choose_encoder(accept)
        return encoder(registry), ctype

    return render
