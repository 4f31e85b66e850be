"""The HTTP server of `mlgoodput ui`: the pages (one shell, drawn by app.js), their static
files and the JSON API, on the standard library's threading server.

Loopback by default. Bound to any other address it requires a token, given once in the URL
(`?token=`) and then kept in a cookie, compared in constant time. On loopback it refuses
requests whose Host header names another machine (a page elsewhere rebinding its DNS name).
"""

from __future__ import annotations

import json
import math
import mimetypes
import re
import socket
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

from mlgoodput._endpoint import (
    HostPort,
    check_exposure,
    check_host,
    check_port,
    is_loopback,
    token_matches,
)
from mlgoodput.store import Store
from mlgoodput.ui._api import Api, ApiError

STATIC = Path(str(resources.files("mlgoodput.ui") / "static"))
VENDOR = STATIC / "vendor"
BUILD_HINT = "make ui-assets  (or: bash scripts/build-ui-assets.sh, which runs npm ci in js/)"
COOKIE = "mlgoodput_ui_token"
_PAGES = re.compile(r"^/(|jobs/[^/]+|runs|runs/[^/]+|console|console/[^/]+|compare)$")
_LOOPBACK_NAMES = {"localhost", "127.0.0.1", "::1", "[::1]"}
_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
)


def assets_missing() -> list[str]:
    """The built chart files the pages need that are not there (see BUILD_HINT)."""
    return [n for n in ("uPlot.iife.min.js", "uPlot.min.css") if not (VENDOR / n).is_file()]


class UIServer(ThreadingHTTPServer):
    """Serves one store's pages and API; `token` is None on loopback."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(
        self,
        store: Store,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        token: str | None = None,
        stale_after_s: float = 120.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        host = check_host(host, "host")
        port = check_port(port, "port")
        self.loopback = is_loopback(host)
        self.token = check_exposure(host, token)
        self.api = Api(store, stale_after_s=stale_after_s, clock=clock)
        self.address_family = HostPort(host, port).family
        super().__init__((host, port), _Handler)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = str(self.server_address[0]), int(self.server_address[1])
        if host in ("0.0.0.0", "::"):  # every interface: name this machine
            host = socket.gethostname()
        shown = f"[{host}]" if ":" in host else host
        base = f"http://{shown}:{port}/"
        return base + (f"?token={quote(self.token)}" if self.token else "")

    def start(self) -> None:
        """Serve on a background thread (tests, screenshots, benchmarks)."""
        self._thread = threading.Thread(target=self.serve_forever, name="mlgoodput-ui", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
        self.api.close()
        if self._thread is not None:
            self._thread.join(5)


class _Handler(BaseHTTPRequestHandler):
    server: UIServer
    protocol_version = "HTTP/1.1"
    server_version = "mlgoodput-ui"

    def setup(self) -> None:
        super().setup()
        try:  # keep-alive responses must not wait on Nagle's algorithm (a 40 ms stall each)
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet; errors reach the page as JSON

    # -- responses ------------------------------------------------------------------------
    def _send(self, status: int, body: bytes, ctype: str, extra: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Content-Security-Policy", _CSP)
        self.send_header("Cache-Control", "no-store")
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: int, obj: Any) -> None:
        try:
            text = json.dumps(obj, allow_nan=False, default=str, separators=(",", ":"))
        except ValueError:  # a NaN or infinity somewhere: JSON has no such numbers, send null
            text = json.dumps(_finite(obj), allow_nan=False, default=str, separators=(",", ":"))
        body = text.encode()
        self._send(status, body, "application/json; charset=utf-8")

    def _error(self, status: int, message: str) -> None:
        self._json(status, {"error": message})

    # -- access ----------------------------------------------------------------------------
    def _allowed(self, query: dict[str, list[str]]) -> tuple[bool, bool]:
        """(allowed, set the cookie): the token from the URL or the cookie, in constant time."""
        srv = self.server
        if srv.loopback:
            host = urlsplit("//" + (self.headers.get("Host") or "")).hostname or ""
            if host and host not in _LOOPBACK_NAMES and not is_loopback(host):
                return False, False
        if srv.token is None:
            return True, False
        want = srv.token
        given = query.get("token", [""])[0]
        if given and token_matches(given, want):
            return True, True
        for part in (self.headers.get("Cookie") or "").split(";"):
            k, _, v = part.strip().partition("=")
            if k == COOKIE and token_matches(v, want):
                return True, False
        auth = self.headers.get("Authorization") or ""
        if auth.startswith("Bearer ") and token_matches(auth[7:].strip(), want):
            return True, False
        return False, False

    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        path = unquote(parts.path)
        query = parse_qs(parts.query, keep_blank_values=True)
        ok, set_cookie = self._allowed(query)
        if not ok:
            self._error(403, "forbidden: open the URL that `mlgoodput ui` printed (it holds the token)")
            return
        try:
            if parts.path.startswith("/api/"):
                self._api(parts.path[len("/api/") :], query)
            elif path.startswith("/static/"):
                self._static(path[len("/static/") :])
            elif _PAGES.match(parts.path):
                if parts.path.startswith("/jobs/"):  # the job's read starts while the page loads
                    self.server.api.prefetch(unquote(parts.path[len("/jobs/") :]), query.get("logger", [None])[0])
                self._page(set_cookie)
            else:
                self._error(404, f"no page {path!r}")
        except ApiError as e:
            self._error(e.status, str(e))
        except (BrokenPipeError, ConnectionResetError):
            pass
        except Exception as e:  # one clear line to the page, never a traceback
            self._error(500, f"{type(e).__name__}: {e}")

    def _page(self, set_cookie: bool) -> None:
        html = (STATIC / "index.html").read_bytes()
        extra = {}
        if set_cookie and self.server.token:
            extra["Set-Cookie"] = f"{COOKIE}={self.server.token}; Path=/; HttpOnly; SameSite=Strict"
        self._send(200, html, "text/html; charset=utf-8", extra)

    def _static(self, rel: str) -> None:
        target = (STATIC / rel).resolve()
        if STATIC.resolve() not in target.parents or not target.is_file():
            if rel.startswith("vendor/"):
                self._send(
                    404, f"/* missing: {rel}. Build it with: {BUILD_HINT} */".encode(), "text/plain; charset=utf-8"
                )
                return
            self._error(404, f"no file {rel!r}")
            return
        ctype = mimetypes.guess_type(target.name)[0] or "application/octet-stream"
        if ctype.startswith("text/") or ctype.endswith("javascript"):
            ctype += "; charset=utf-8"
        self._send(200, target.read_bytes(), ctype)

    def _api(self, raw: str, q: dict[str, list[str]]) -> None:
        try:
            self._api_answer(raw, q)
        finally:
            self.server.api.after_request()  # background work found due, once the answer is out

    def _api_answer(self, raw: str, q: dict[str, list[str]]) -> None:
        api = self.server.api
        seg = [unquote(x) for x in raw.split("/")]  # split first: a name may hold an encoded "/"
        rest = "/".join(seg)
        if rest == "health":
            self._json(200, {"ok": True, "assets_missing": assets_missing(), "build_hint": BUILD_HINT})
        elif rest == "jobs":
            self._json(200, api.jobs())
        elif seg[0] == "jobs" and len(seg) == 2:
            self._json(200, api.job(seg[1], q))
        elif seg[0] == "jobs" and len(seg) == 3 and seg[2] in ("timeline", "steps", "goodput", "report"):
            if seg[2] == "report":
                self._json(200, api.view(seg[1], q.get("logger", [None])[0]).report().to_dict())
            else:
                self._json(200, getattr(api, seg[2])(seg[1], q))
        elif rest == "compare":
            self._json(200, api.compare(q))
        elif rest == "runs":
            self._json(200, api.runs())
        elif seg[0] == "runs" and len(seg) == 2:
            self._json(200, api.run(seg[1], q))
        elif seg[0] == "runs" and len(seg) == 5 and seg[2] == "profiles":
            self._download(api.profile_file(seg[1], _index(seg[3]), _index(seg[4])))
        elif rest == "console":
            self._json(200, api.consoles())
        elif seg[0] == "console" and len(seg) == 3 and seg[2] in ("logs", "usage"):
            self._json(200, getattr(api, seg[2])(seg[1], q))
        else:
            raise ApiError(404, f"no API path /api/{rest}")

    def _download(self, path: str) -> None:
        p = Path(path)
        if not p.is_file():
            raise ApiError(404, f"the profile file {path!r} is not on this machine")
        name = re.sub(r"[^A-Za-z0-9._-]", "_", p.name)
        self._send(
            200, p.read_bytes(), "application/octet-stream", {"Content-Disposition": f'attachment; filename="{name}"'}
        )


def _index(s: str) -> int:
    try:
        return int(s)
    except ValueError:
        raise ApiError(404, f"not an index: {s!r}") from None


def _finite(o: Any) -> Any:
    if isinstance(o, float):
        return o if math.isfinite(o) else None
    if isinstance(o, dict):
        return {k: _finite(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_finite(v) for v in o]
    return o


def serve(store: Store, host: str, port: int, *, out: Any = None, stale_after_s: float = 120.0) -> int:
    """Run until interrupted; prints the URL first."""
    import sys

    srv = UIServer(store, host, port, stale_after_s=stale_after_s)
    srv.api.warm_all()
    out = out or sys.stdout
    missing = assets_missing()
    print(f"mlgoodput ui: serving {store.url} at {srv.url}", file=out, flush=True)
    if missing:
        print(
            f"mlgoodput ui: warning: chart files missing ({', '.join(missing)}); build them with: {BUILD_HINT}",
            file=out,
            flush=True,
        )
    if not srv.loopback:
        print("mlgoodput ui: bound to a non-loopback address; the token in the URL is required", file=out, flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        srv.server_close()
        srv.api.close()
    return 0


__all__ = ["BUILD_HINT", "UIServer", "assets_missing", "serve"]
