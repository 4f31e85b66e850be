"""The HTTP server of `mlgoodput ui`: the pages (one shell, drawn by the scripts in static/), their static
files, the JSON API and profile downloads, on the bounded server every endpoint of ours
uses (`LimitedServer`: one event loop holds the connections, a few threads answer).

Loopback by default. Bound to any other address it requires a token, given once in the URL
(`?token=`) and then kept in a cookie, compared in constant time. On loopback it refuses
requests whose Host header names another machine (a page elsewhere rebinding its DNS name).
Profile files are served only from the configured profile directories (`_profiles`).
"""

from __future__ import annotations

import json
import math
import mimetypes
import re
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
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
from mlgoodput._limited_server import LimitedServer, Reply, bind_tcp
from mlgoodput.store import Store
from mlgoodput.ui._api import Api, ApiError
from mlgoodput.ui._profiles import MAX_PROFILE_BYTES, NotServed, ProfileFiles

STATIC = Path(str(resources.files("mlgoodput.ui") / "static"))
VENDOR = STATIC / "vendor"
BUILD_HINT = (
    "make ui-assets  (it runs npm ci in js/: install npm first where it is missing,"
    " e.g. Debian/Ubuntu: apt-get install npm; macOS: brew install node)"
)
COOKIE = "mlgoodput_ui_token"
_PAGES = re.compile(r"^/(|jobs/[^/]+|runs|runs/[^/]+|console|console/[^/]+|compare|fleet)$")
_LOOPBACK_NAMES = {"localhost", "127.0.0.1", "::1", "[::1]"}
_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
)
#: Limits of the bounded server: a request line and headers, the wait for them (also between
#: requests on a kept-alive connection), connections waiting for a request, answering threads.
MAX_REQUEST_BYTES = 32768
REQUEST_TIMEOUT_S = 30.0
MAX_CONNECTIONS = 256
WORKERS = 8
_REASONS = {
    200: "OK",
    400: "Bad Request",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    409: "Conflict",
    500: "Internal Server Error",
}


def assets_missing() -> list[str]:
    """The built chart files the pages need that are not there (see BUILD_HINT)."""
    return [n for n in ("uPlot.iife.min.js", "uPlot.min.css") if not (VENDOR / n).is_file()]


@dataclass(frozen=True, slots=True)
class Request:
    """One parsed HTTP request (header names in lower case)."""

    method: str
    target: str
    version: str
    headers: dict[str, str]

    @property
    def keep_alive(self) -> bool:
        conn = self.headers.get("connection", "").lower()
        if self.version == "HTTP/1.0":
            return "keep-alive" in conn
        return "close" not in conn


def parse_request(raw: bytes) -> Request | None:
    """The request line and headers of `raw` (up to the blank line); None when malformed."""
    try:
        text = raw.decode("latin-1")
    except UnicodeDecodeError:  # pragma: no cover - latin-1 decodes every byte
        return None
    lines = text.split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1.") or not parts[1]:
        return None
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        k, sep, v = line.partition(":")
        if not sep or not k.strip() or k != k.strip():
            return None
        headers[k.strip().lower()] = v.strip()
    return Request(parts[0], parts[1], parts[2], headers)


class UIServer:
    """Serves one store's pages and API; `token` is None on loopback."""

    def __init__(
        self,
        store: Store,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        token: str | None = None,
        clock: Callable[[], float] = time.time,
        profile_dirs: Sequence[str] | None = None,
        max_profile_bytes: int = MAX_PROFILE_BYTES,
    ) -> None:
        host = check_host(host, "host")
        port = check_port(port, "port")
        self.loopback = is_loopback(host)
        self.token = check_exposure(host, token)
        self.profiles = ProfileFiles(profile_dirs, max_profile_bytes)
        self.api = Api(store, clock=clock)
        self.address_family = HostPort(host, port).family
        sock = bind_tcp(host, port, self.address_family)
        self.server_address: tuple[Any, ...] = sock.getsockname()
        self._server = LimitedServer(
            sock,
            self._reply,
            name="mlgoodput-ui",
            terminator=b"\r\n\r\n",
            max_request_bytes=MAX_REQUEST_BYTES,
            request_timeout_s=REQUEST_TIMEOUT_S,
            max_connections=MAX_CONNECTIONS,
            workers=WORKERS,
        )
        self._stopped = threading.Event()

    @property
    def url(self) -> str:
        host, port = str(self.server_address[0]), int(self.server_address[1])
        if host in ("0.0.0.0", "::"):  # every interface: name this machine
            host = socket.gethostname()
        shown = f"[{host}]" if ":" in host else host
        base = f"http://{shown}:{port}/"
        return base + (f"?token={quote(self.token)}" if self.token else "")

    @property
    def limits(self) -> LimitedServer:
        """The bounded server underneath (its counters: served, evicted, timed out, ...)."""
        return self._server

    def start(self) -> None:
        """Serve on a background thread (the event loop's; requests are answered on the pool)."""
        self._server.start()

    def serve_forever(self) -> None:
        """Serve until `stop()` (or Ctrl-C in the calling thread)."""
        self.start()
        while not self._stopped.wait(0.5):
            pass

    def stop(self) -> None:
        self._stopped.set()
        self._server.close()
        self.api.close()

    def server_close(self) -> None:
        """Close the listening socket (a server that was built but never started)."""
        self._stopped.set()
        self._server.close(0.5)

    # -- one request -------------------------------------------------------------------------
    def _reply(self, raw: bytes) -> Reply:
        req = parse_request(raw)
        if req is None:
            return _Answer(400, "GET").json({"error": "bad request"}).reply(False)
        ans = _Answer(200, req.method)
        if req.method not in ("GET", "HEAD"):
            ans.extra["Allow"] = "GET, HEAD"
            return ans.error(405, f"method {req.method[:20]!r} not allowed").reply(False)
        try:
            self._route(req, ans)
        except ApiError as e:
            ans.error(e.status, str(e))
        except Exception as e:  # one clear line to the page, never a traceback
            ans.error(500, f"{type(e).__name__}: {e}")
        return ans.reply(req.keep_alive)

    def _allowed(self, req: Request, query: dict[str, list[str]]) -> tuple[bool, bool]:
        """(allowed, set the cookie): the token from the URL or the cookie, in constant time."""
        if self.loopback:
            host = urlsplit("//" + req.headers.get("host", "")).hostname or ""
            if host and host not in _LOOPBACK_NAMES and not is_loopback(host):
                return False, False
        if self.token is None:
            return True, False
        want = self.token
        given = query.get("token", [""])[0]
        if given and token_matches(given, want):
            return True, True
        for part in req.headers.get("cookie", "").split(";"):
            k, _, v = part.strip().partition("=")
            if k == COOKIE and token_matches(v, want):
                return True, False
        auth = req.headers.get("authorization", "")
        if auth.startswith("Bearer ") and token_matches(auth[7:].strip(), want):
            return True, False
        return False, False

    def _route(self, req: Request, ans: _Answer) -> None:
        try:
            parts = urlsplit(req.target)
        except ValueError:
            raise ApiError(400, "bad request target") from None
        path = unquote(parts.path)
        if "\0" in path or any(ord(c) < 32 for c in path):
            raise ApiError(404, "no such page")
        query = parse_qs(parts.query, keep_blank_values=True)
        ok, set_cookie = self._allowed(req, query)
        if not ok:
            ans.error(403, "forbidden: open the URL that `mlgoodput ui` printed (it holds the token)")
            return
        if parts.path.startswith("/api/"):
            api = self.api
            ans.after = api.after_request  # background work found due, once the answer is out
            self._api(parts.path[len("/api/") :], query, ans)
        elif path.startswith("/static/"):
            self._static(path[len("/static/") :], ans)
        elif _PAGES.match(parts.path):
            if parts.path.startswith("/jobs/"):  # the job's read starts while the page loads
                self.api.prefetch(unquote(parts.path[len("/jobs/") :]), query.get("logger", [None])[0])
            extra = {}
            if set_cookie and self.token:
                extra["Set-Cookie"] = f"{COOKIE}={self.token}; Path=/; HttpOnly; SameSite=Strict"
            ans.extra.update(extra)
            ans.body((STATIC / "index.html").read_bytes(), "text/html; charset=utf-8")
        else:
            ans.error(404, f"no page {path!r}")

    def _static(self, rel: str, ans: _Answer) -> None:
        target = (STATIC / rel).resolve()
        if STATIC.resolve() not in target.parents or not target.is_file():
            if rel.startswith("vendor/"):
                ans.status = 404
                ans.body(f"/* missing: {rel}. Build it with: {BUILD_HINT} */".encode(), "text/plain; charset=utf-8")
                return
            ans.error(404, f"no file {rel!r}")
            return
        ctype = mimetypes.guess_type(target.name)[0] or "application/octet-stream"
        if ctype.startswith("text/") or ctype.endswith("javascript"):
            ctype += "; charset=utf-8"
        ans.body(target.read_bytes(), ctype)

    def _api(self, raw: str, q: dict[str, list[str]], ans: _Answer) -> None:
        api = self.api
        seg = [unquote(x) for x in raw.split("/")]  # split first: a name may hold an encoded "/"
        rest = "/".join(seg)
        if rest == "health":
            ans.json({"ok": True, "assets_missing": assets_missing(), "build_hint": BUILD_HINT})
        elif rest == "jobs":
            ans.json(api.jobs())
        elif seg[0] == "jobs" and len(seg) == 2:
            ans.json(api.job(seg[1], q))
        elif seg[0] == "jobs" and len(seg) == 3 and seg[2] in ("timeline", "steps", "goodput", "report"):
            if seg[2] == "report":
                ans.json(api.view(seg[1], q.get("logger", [None])[0]).report().to_dict())
            else:
                ans.json(getattr(api, seg[2])(seg[1], q))
        elif rest == "compare":
            ans.json(api.compare(q))
        elif rest == "fleet":
            ans.json(api.fleet(q))
        elif rest == "runs":
            ans.json(api.runs())
        elif seg[0] == "runs" and len(seg) == 2:
            ans.json(api.run(seg[1], q))
        elif seg[0] == "runs" and len(seg) == 3 and seg[2] == "points":
            ans.json(api.run_points(seg[1], q))
        elif seg[0] == "runs" and len(seg) == 3 and seg[2] == "csv":
            fname, data = api.run_csv(seg[1], q)
            ans.body(data, "text/csv; charset=utf-8")
            ans.extra["Content-Disposition"] = f'attachment; filename="{re.sub(r"[^A-Za-z0-9._-]", "_", fname)}"'
        elif seg[0] == "runs" and len(seg) == 5 and seg[2] == "profiles":
            session, entry = api.profile_entry(seg[1], _index(seg[3]), _index(seg[4]))
            try:
                opened = self.profiles.open(session, entry)
            except NotServed as e:
                raise ApiError(404, f"profile file not served: {e}") from None
            ans.stream(opened.name, opened.size, opened.pieces)
        elif rest == "console":
            ans.json(api.consoles())
        elif seg[0] == "console" and len(seg) == 3 and seg[2] in ("logs", "usage"):
            ans.json(getattr(api, seg[2])(seg[1], q))
        else:
            raise ApiError(404, f"no API path /api/{rest}")


class _Answer:
    """The reply being built for one request: status, headers, and a body or a stream."""

    def __init__(self, status: int, method: str) -> None:
        self.status = status
        self.head_only = method == "HEAD"
        self.ctype = "application/json; charset=utf-8"
        self.data = b""
        self.pieces: Any = None
        self.length = 0
        self.extra: dict[str, str] = {}
        self.after: Callable[[], None] | None = None

    def body(self, data: bytes, ctype: str) -> _Answer:
        self.data, self.ctype, self.length = data, ctype, len(data)
        return self

    def json(self, obj: Any) -> _Answer:
        try:
            text = json.dumps(obj, allow_nan=False, default=str, separators=(",", ":"))
        except ValueError:  # a NaN or infinity somewhere: JSON has no such numbers, send null
            text = json.dumps(_finite(obj), allow_nan=False, default=str, separators=(",", ":"))
        return self.body(text.encode(), "application/json; charset=utf-8")

    def error(self, status: int, message: str) -> _Answer:
        self.status = status
        self.pieces = None
        return self.json({"error": message})

    def stream(self, name: str, size: int, pieces: Any) -> None:
        safe = re.sub(r"[^A-Za-z0-9._-]", "_", name)
        self.ctype, self.length, self.pieces = "application/octet-stream", size, pieces
        self.extra["Content-Disposition"] = f'attachment; filename="{safe}"'

    def reply(self, keep_alive: bool) -> Reply:
        lines = [
            f"HTTP/1.1 {self.status} {_REASONS.get(self.status, 'Error')}",
            "Server: mlgoodput-ui",
            f"Content-Type: {self.ctype}",
            f"Content-Length: {self.length}",
            "X-Content-Type-Options: nosniff",
            "Referrer-Policy: no-referrer",
            f"Content-Security-Policy: {_CSP}",
            "Cache-Control: no-store",
            *(f"{k}: {v}" for k, v in self.extra.items()),
            f"Connection: {'keep-alive' if keep_alive else 'close'}",
        ]
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        if self.head_only:
            close = getattr(self.pieces, "close", None)
            if callable(close):
                close()
            return Reply(head, None, keep_alive, self.after)
        if self.pieces is not None:
            return Reply(head, self.pieces, keep_alive, self.after)
        return Reply(head + self.data, None, keep_alive, self.after)


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


def serve(
    store: Store,
    host: str,
    port: int,
    *,
    out: Any = None,
    profile_dirs: Sequence[str] | None = None,
    max_profile_bytes: int = MAX_PROFILE_BYTES,
) -> int:
    """Run until interrupted; prints the URL first."""
    import sys

    srv = UIServer(store, host, port, profile_dirs=profile_dirs, max_profile_bytes=max_profile_bytes)
    srv.api.warm_all()
    out = out or sys.stdout
    missing = assets_missing()
    print(f"mlgoodput ui: serving {store.url} at {srv.url}", file=out, flush=True)
    print(f"mlgoodput ui: profile files served from {srv.profiles.describe()}", file=out, flush=True)
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
        srv.stop()
    return 0


__all__ = ["BUILD_HINT", "UIServer", "assets_missing", "serve"]
