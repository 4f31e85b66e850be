"""On-demand profiling: a small authenticated endpoint in the training process, and its client.

`jax.profiler.start_server` listens on every interface with no authentication. Instead,
with `on_demand_xprof=True` a run listens on 127.0.0.1 (an ephemeral port by default) or a
Unix socket, and every request must carry a random token. The address and token are
written to a 0600 file in the user's runtime directory, which is how `mlgoodput profile
--run NAME` finds the processes of a run on this machine.

Wire format: one JSON object per line, one request per connection, e.g.
`{"v": 1, "token": "...", "op": "capture", "duration_s": 3, "session": "s1"}` ->
`{"ok": true, "session": "s1", "path": "...", "files": [...], "host": 0}`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
import time
from pathlib import Path
from typing import Any

from mlgoodput import _env, _profiler
from mlgoodput._endpoint import check_exposure, is_loopback, token_matches
from mlgoodput._endpoint import parse_address as parse_host_port
from mlgoodput._limited_server import LimitedServer, bind_unix, socket_identity, unlink_own_socket
from mlgoodput._worker import at_fork_in_child
from mlgoodput.diagnostics import _run
from mlgoodput.diagnostics._xprof import Capture, check_session_id, default_session_id

log = logging.getLogger("mlgoodput.diagnostics")

PROTOCOL_VERSION = 1
MAX_REQUEST_BYTES = 65536
MAX_DURATION_S = 3600.0


def runtime_dir(create: bool = True) -> Path:
    """Private (0700) directory for endpoint files: $MLGOODPUT_RUNTIME_DIR, else <data dir>/runtime.
    `create=False` for a reader (`mlgoodput profile`), which creates nothing."""
    d = Path(os.environ.get(_env.RUNTIME_DIR) or (_env.data_dir() / "runtime"))
    if create:
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
    return d


def _endpoint_dir(run_name: str) -> Path:
    return runtime_dir() / "ondemand" / run_name


def parse_address(address: str | None) -> tuple[int, Any]:
    """(socket family, bind address) for `unix:/path` or a TCP address as
    `mlgoodput._endpoint.parse_address` reads it (`host:port`, `[v6]:port`, `:port`, `port`);
    None is 127.0.0.1:0."""
    if address is None:
        return socket.AF_INET, ("127.0.0.1", 0)
    if not isinstance(address, str):
        raise TypeError(f"on_demand_address must be 'HOST:PORT', ':PORT' or 'unix:/path', got {address!r}")
    if address.startswith("unix:"):
        path = address[len("unix:") :]
        if not path:
            raise ValueError(f"on_demand_address: empty Unix socket path in {address!r}")
        return socket.AF_UNIX, path
    hp = parse_host_port(address, "on_demand_address")
    return hp.family, (hp.host, hp.port)


class OnDemandServer:
    """Accepts authenticated capture requests for one run (see `LimitedServer` for the
    limits: a bounded request within a timeout, a cap on waiting connections, a thread pool)."""

    max_connections = 128
    request_timeout_s = 5.0
    workers = 4

    def __init__(self, run: _run.MLRun, *, address: str | None = None, token: str | None = None) -> None:
        self.run = run
        self.token = check_exposure("", token, always=True)  # every request needs it, loopback too
        self._sock_id: tuple[int, int] | None = None
        fam, bind = parse_address(address)
        try:
            if fam == socket.AF_UNIX:
                sock = bind_unix(bind)
                self._sock_id = socket_identity(bind)
                self.address = f"unix:{bind}"
            else:
                sock = socket.socket(fam, socket.SOCK_STREAM)
                try:
                    if not is_loopback(bind[0]) and not is_loopback(
                        socket.gethostbyname(bind[0]) if fam == socket.AF_INET else bind[0]
                    ):
                        log.warning(
                            "mlgoodput: on-demand profiling listens on %s, beyond this machine; requests"
                            " still need the token, which travels unencrypted",
                            address,
                        )
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    sock.bind(bind)
                except BaseException:
                    sock.close()
                    raise
                host, port = sock.getsockname()[:2]
                self.address = f"[{host}]:{port}" if fam == socket.AF_INET6 else f"{host}:{port}"
        except OSError as e:
            raise ValueError(f"on_demand_address: cannot listen on {address or '127.0.0.1:0'!r}: {e}") from e
        self._abort = threading.Event()
        self._closed = False
        self.captures = 0
        self._server = LimitedServer(
            sock,
            self._reply,
            name=f"mlgoodput-ondemand-{run.name}",
            terminator=b"\n",
            max_request_bytes=MAX_REQUEST_BYTES,
            request_timeout_s=self.request_timeout_s,
            max_connections=self.max_connections,
            workers=self.workers,
        )
        self.endpoint_file = _endpoint_dir(run.name) / f"{run.process_index}-{os.getpid()}.json"
        self.endpoint_file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.endpoint_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(
                {
                    "run": run.name,
                    "host": run.process_index,
                    "pid": os.getpid(),
                    "hostname": run.hostname,
                    "address": self.address,
                    "token": self.token,
                },
                f,
            )
        self._pid = os.getpid()
        at_fork_in_child(self._stop_in_child)

    def _stop_in_child(self) -> None:
        self._closed = True  # a forked child must not answer for the parent, nor remove its files

    def start(self) -> None:
        if not self._closed:
            self._server.start()

    @property
    def limits(self) -> LimitedServer:
        """The server underneath, with its counters (served, evicted, timed_out, oversized)."""
        return self._server

    def _reply(self, request: bytes) -> bytes:
        try:
            reply = self._handle(request.split(b"\n", 1)[0])
        except Exception as e:  # a bad client must not stop the server
            reply = {"ok": False, "error": f"{type(e).__name__}: {e}"}
        return json.dumps(reply).encode() + b"\n"

    def _handle(self, line: bytes) -> dict[str, Any]:
        try:
            req = json.loads(line)
        except ValueError:
            return {"ok": False, "error": "bad request: not JSON"}
        if not isinstance(req, dict) or req.get("v") != PROTOCOL_VERSION:
            return {"ok": False, "error": f"bad request: protocol version must be {PROTOCOL_VERSION}"}
        tok = req.get("token")
        if not token_matches(tok, self.token):
            return {"ok": False, "error": "unauthorized: wrong or missing token"}
        run = self.run
        info = {"run": run.name, "host": run.process_index, "pid": os.getpid(), "hostname": run.hostname}
        op = req.get("op")
        if op == "ping":
            return {"ok": True, **info}
        if op != "capture":
            return {"ok": False, "error": f"bad request: unknown op {op!r}"}
        dur = req.get("duration_s")
        if isinstance(dur, bool) or not isinstance(dur, (int, float)) or not 0 < dur <= MAX_DURATION_S:
            return {"ok": False, "error": f"duration_s must be in (0, {MAX_DURATION_S:g}], got {dur!r}"}
        sess = req.get("session")
        try:
            session = (
                check_session_id(sess, "session")
                if sess is not None
                else default_session_id(run.process_index, "ondemand_")
            )
        except (TypeError, ValueError) as e:
            return {"ok": False, "error": str(e)}
        cap = Capture(run, session, "on_demand")
        try:
            cap.begin()
        except _profiler.ProfilerBusyError as e:
            return {"ok": False, "busy": True, "error": str(e), **info}
        self._abort.wait(float(dur))
        files = cap.end()
        self.captures += 1
        return {"ok": True, "session": session, "path": cap.session_path, "files": files, **info}

    def flush(self, timeout_s: float | None = None) -> bool:
        return True

    def close(self, timeout_s: float | None = None) -> bool:
        """Stop serving: a capture in progress is cut short; idle connections are dropped."""
        if self._closed:
            return True
        self._closed = True
        self._abort.set()
        self._server.close(min(2.0, 2.0 if timeout_s is None else timeout_s))
        if os.getpid() != self._pid:
            return True
        with contextlib.suppress(OSError):
            self.endpoint_file.unlink()
        if self.address.startswith("unix:"):
            unlink_own_socket(self.address[len("unix:") :], self._sock_id)
        return True


def _read_line(conn: socket.socket, deadline: float | None = None) -> bytes:
    buf = b""
    while b"\n" not in buf:
        if deadline is not None:  # the whole reply within the deadline, not each piece
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no whole reply in time")
            conn.settimeout(left)
        chunk = conn.recv(4096)
        if not chunk:
            break
        buf += chunk
        if len(buf) > MAX_REQUEST_BYTES:
            raise ValueError("request too large")
    return buf.split(b"\n", 1)[0]


# -- client ----------------------------------------------------------------------------
def endpoints(run: str) -> list[dict[str, Any]]:
    """The live on-demand endpoints of a run on this machine (exact name, else a unique prefix)."""
    base = runtime_dir(create=False) / "ondemand"
    d = base / run
    if not d.is_dir():
        matches = sorted(p for p in base.glob(f"{glob_escape(run)}*") if p.is_dir()) if base.is_dir() else []
        live = [p for p in matches if _live(p)]
        if len(live) > 1:
            raise LookupError(f"run {run!r} matches several runs: {', '.join(p.name for p in live)}")
        if not live:
            raise LookupError(
                f"no process of run {run!r} accepts on-demand profiles on this machine"
                " (was it started with on_demand_xprof=True?)"
            )
        d = live[0]
    out = _live(d)
    if not out:
        raise LookupError(f"no live process of run {d.name!r} accepts on-demand profiles on this machine")
    return out


def glob_escape(s: str) -> str:
    return "".join(f"[{c}]" if c in "*?[" else c for c in s)


def _live(d: Path) -> list[dict[str, Any]]:
    out = []
    for f in sorted(d.glob("*.json")):
        try:
            ep = json.loads(f.read_text())
            os.kill(int(ep["pid"]), 0)
        except (OSError, ValueError, KeyError):
            continue
        out.append(ep)
    return sorted(out, key=lambda e: (e["host"], e["pid"]))


#: How long a process has to answer a ping before its capture is asked for.
PING_TIMEOUT_S = 5.0
#: Beyond the capture's duration, how long a process has to write the trace and reply.
CAPTURE_MARGIN_S = 60.0


def request(address: str, token: str, req: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    """Send one request to an endpoint and return its reply."""
    fam, addr = parse_address(address)
    deadline = time.monotonic() + timeout_s
    with socket.socket(fam, socket.SOCK_STREAM) as s:
        s.settimeout(timeout_s)
        s.connect(addr)
        s.sendall(json.dumps({"v": PROTOCOL_VERSION, "token": token, **req}).encode() + b"\n")
        line = _read_line(s, deadline)
    if not line:
        raise ConnectionError(f"{address}: connection closed without a reply")
    reply: dict[str, Any] = json.loads(line)
    return reply


def capture(
    run: str | None,
    duration_s: float,
    *,
    session: str | None = None,
    hosts: list[int] | None = None,
    address: str | None = None,
    token: str | None = None,
) -> list[dict[str, Any]]:
    """Ask every process of a run (or one `address`) to capture `duration_s` seconds into one session."""
    if not duration_s > 0:
        raise ValueError(f"duration must be positive, got {duration_s!r}")
    if address is not None:
        if not token:
            raise ValueError("--address needs --token")
        eps: list[dict[str, Any]] = [{"address": address, "token": token, "host": None}]
    else:
        if run is None:
            raise ValueError("give --run NAME or --address with --token")
        eps = endpoints(run)
        if hosts is not None:
            eps = [e for e in eps if e["host"] in hosts]
            if not eps:
                raise LookupError(f"none of hosts {hosts} of run {run!r} accepts on-demand profiles here")
    if session is None:
        session = default_session_id(0, "ondemand_").rsplit("_p", 1)[0]
    check_session_id(session, "session")
    results: list[dict[str, Any]] = [{} for _ in eps]

    def one(i: int, ep: dict[str, Any]) -> None:
        try:  # a process that does not answer at all fails in seconds, not after the capture's time
            request(ep["address"], ep["token"], {"op": "ping"}, timeout_s=PING_TIMEOUT_S)
        except (OSError, ValueError) as e:
            results[i] = {
                "ok": False,
                "error": f"{ep['address']}: no answer to a ping within {PING_TIMEOUT_S:g} s ({e or type(e).__name__})",
                "host": ep.get("host"),
            }
            return
        try:
            results[i] = request(
                ep["address"],
                ep["token"],
                {"op": "capture", "duration_s": duration_s, "session": session},
                timeout_s=duration_s + CAPTURE_MARGIN_S,
            )
        except (OSError, ValueError) as e:
            results[i] = {"ok": False, "error": f"{ep['address']}: {e or type(e).__name__}", "host": ep.get("host")}

    threads = [threading.Thread(target=one, args=(i, ep)) for i, ep in enumerate(eps)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results
