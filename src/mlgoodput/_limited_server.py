"""A small request/response server that a bad client cannot starve: every endpoint we run.

Used by the on-demand profiling endpoint, the Prometheus exporter and the web UI. One
asyncio loop on a daemon thread holds every connection, so idle ones cost a few kilobytes
and no thread. A request must arrive whole (up to `terminator`), within `max_request_bytes`
and within `request_timeout_s` of connecting (or of the last reply, on a kept-alive
connection); at most `max_connections` may be waiting for their request, and a new one
evicts the oldest of those. Complete requests run on a small thread pool (`workers`), so
one slow request (a profile capture) never blocks the others; at most `max_connections`
requests wait for it, and more are dropped. A handler returns the reply's bytes, or a
`Reply` whose body is streamed in pieces read on the pool (a large file never sits whole in
memory) and whose connection may stay open for the next request (HTTP keep-alive).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import stat
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

log = logging.getLogger("mlgoodput")


@dataclass(frozen=True, slots=True)
class Reply:
    """A reply beyond plain bytes: `head` is written first, then each piece `body` yields (read
    on the pool, one at a time); `keep_alive` keeps the connection for the next request;
    `after` runs once the reply is out (work that must not delay it)."""

    head: bytes
    body: Iterator[bytes] | None = None
    keep_alive: bool = False
    after: Callable[[], None] | None = None


Handler = Callable[[bytes], "bytes | Reply"]
#: The listen backlog: a burst of connections waits in the kernel instead of retrying SYNs.
BACKLOG = 1024


class LimitedServer:
    """Serve `handle(request) -> reply` on a listening socket, with limits (see the module)."""

    def __init__(
        self,
        sock: socket.socket,
        handle: Handler,
        *,
        name: str,
        terminator: bytes = b"\n",
        max_request_bytes: int = 65536,
        request_timeout_s: float = 5.0,
        reply_timeout_s: float = 30.0,
        max_connections: int = 128,
        workers: int = 4,
    ) -> None:
        self.sock = sock
        self.name = name
        self._handle = handle
        self._term = terminator
        self._max = max_request_bytes
        self._timeout = request_timeout_s
        self._reply_timeout = reply_timeout_s
        self._cap = max_connections
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix=f"{name}-worker")
        self._waiting: OrderedDict[asyncio.StreamWriter, None] = OrderedDict()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.base_events.Server | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self.served = 0  # requests answered
        self.evicted = 0  # connections closed to admit newer ones
        self.timed_out = 0  # connections that did not send a request in time
        self.oversized = 0  # connections whose request was too large
        self.shed = 0  # complete requests dropped because `max_connections` were already queued
        self._busy = 0  # requests on or waiting for the pool

    def start(self) -> None:
        """Start serving on a daemon thread (idempotent)."""
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()
        self._ready.wait(10.0)

    def close(self, timeout_s: float = 2.0) -> None:
        """Stop listening and drop every connection; requests running on the pool are not
        waited for beyond `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        loop, t = self._loop, self._thread
        if loop is not None and t is not None and t.is_alive():
            with contextlib.suppress(RuntimeError):
                fut = asyncio.run_coroutine_threadsafe(self._shutdown(), loop)
                with contextlib.suppress(Exception):
                    fut.result(max(0.0, deadline - time.monotonic()))
                loop.call_soon_threadsafe(loop.stop)
            t.join(max(0.0, deadline - time.monotonic()))
        self._pool.shutdown(wait=False, cancel_futures=True)
        with contextlib.suppress(OSError):
            self.sock.close()

    @property
    def connections(self) -> int:
        """Connections waiting for their request now."""
        return len(self._waiting)

    # -- the loop thread -----------------------------------------------------------------
    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            if self.sock.family == socket.AF_UNIX:
                coro = asyncio.start_unix_server(
                    self._serve, sock=self.sock, limit=self._max + len(self._term), backlog=BACKLOG
                )
            else:
                coro = asyncio.start_server(
                    self._serve, sock=self.sock, limit=self._max + len(self._term), backlog=BACKLOG
                )
            self._server = loop.run_until_complete(coro)
        finally:
            self._ready.set()
        try:
            loop.run_forever()
        finally:
            with contextlib.suppress(Exception):
                loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        for w in list(self._waiting):
            w.transport.abort()
        self._waiting.clear()

    def _admit(self, writer: asyncio.StreamWriter) -> None:
        self._waiting[writer] = None
        while len(self._waiting) > self._cap:
            old, _ = self._waiting.popitem(last=False)
            old.transport.abort()
            self.evicted += 1

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._admit(writer)
        sock = writer.get_extra_info("socket")
        if sock is not None and sock.family != socket.AF_UNIX:
            with contextlib.suppress(OSError):  # a reply in pieces must not wait on Nagle's algorithm
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            while True:  # one request after another while the replies keep the connection
                try:
                    request = await asyncio.wait_for(reader.readuntil(self._term), self._timeout)
                except TimeoutError:
                    self.timed_out += 1
                    return
                except asyncio.LimitOverrunError:
                    self.oversized += 1
                    return
                except (asyncio.IncompleteReadError, ConnectionError, OSError):
                    return
                finally:
                    self._waiting.pop(writer, None)
                if self._busy >= self._cap:  # requests queued for the pool, at most: shed the rest
                    self.shed += 1
                    return
                loop = asyncio.get_running_loop()
                self._busy += 1
                try:
                    reply = await loop.run_in_executor(self._pool, self._safe_handle, request)
                except RuntimeError:  # the pool is shut down: we are closing
                    return
                finally:
                    self._busy -= 1
                if isinstance(reply, Reply):
                    ok = await self._send(loop, writer, reply)
                    if reply.after is not None:
                        try:
                            reply.after()
                        except Exception as e:
                            log.warning("%s: after a reply: %s: %s", self.name, type(e).__name__, e)
                    self.served += 1
                    if not (ok and reply.keep_alive):
                        return
                    self._admit(writer)  # idle again: it waits for its next request like a new one
                    continue
                writer.write(reply)
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(writer.drain(), self._reply_timeout)
                self.served += 1
                return
        finally:
            self._waiting.pop(writer, None)
            with contextlib.suppress(Exception):
                writer.close()

    async def _send(self, loop: asyncio.AbstractEventLoop, writer: asyncio.StreamWriter, reply: Reply) -> bool:
        """Write a `Reply`, its body piece by piece (each read on the pool, each drained within
        the reply timeout); False when the connection failed or the body could not be read."""
        body = reply.body
        try:
            writer.write(reply.head)
            await asyncio.wait_for(writer.drain(), self._reply_timeout)
            while body is not None:
                piece = await loop.run_in_executor(self._pool, next, body, None)
                if piece is None:
                    break
                writer.write(piece)
                await asyncio.wait_for(writer.drain(), self._reply_timeout)
            return True
        except Exception:  # the peer went away or stalled, or the body failed: drop the connection
            return False
        finally:
            close = getattr(body, "close", None)
            if callable(close):
                with contextlib.suppress(Exception):
                    await loop.run_in_executor(self._pool, close)

    def _safe_handle(self, request: bytes) -> bytes | Reply:
        try:
            return self._handle(request)
        except Exception as e:  # a bug or a bad request must not stop the server
            log.warning("%s: request failed: %s: %s", self.name, type(e).__name__, e)
            return b""


def bind_tcp(host: str, port: int, family: socket.AddressFamily | None = None) -> socket.socket:
    """A listening TCP socket on (host, port) with SO_REUSEADDR (a restarted server binds its
    port while the last one's connections linger in TIME_WAIT); OSError when it is taken."""
    fam = family if family is not None else (socket.AF_INET6 if ":" in host else socket.AF_INET)
    s = socket.socket(fam, socket.SOCK_STREAM)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((host, port))
        s.listen(BACKLOG)
    except BaseException:
        s.close()
        raise
    return s


def bind_unix(path: str) -> socket.socket:
    """A listening-ready Unix socket at `path`. A stale socket file of a dead server is
    replaced; anything else at the path (a regular file, a directory, a live server) is an
    OSError: we never delete what is not our own socket."""
    remove_stale_socket(path)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        old = os.umask(0o177)
        try:
            s.bind(path)
        finally:
            os.umask(old)
        os.chmod(path, 0o600)
    except BaseException:
        s.close()
        raise
    return s


def remove_stale_socket(path: str) -> None:
    """Remove a leftover socket file nobody listens on; refuse anything else at `path`."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(st.st_mode):
        raise FileExistsError(f"{path!r} exists and is not a socket; refusing to replace it")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(path)
    except OSError:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
    else:
        raise OSError(f"a server is already listening at unix:{path}")
    finally:
        probe.close()


def socket_identity(path: str) -> tuple[int, int] | None:
    """(device, inode) of the socket file at `path`, None if there is none."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino) if stat.S_ISSOCK(st.st_mode) else None


def unlink_own_socket(path: str, ident: tuple[int, int] | None) -> None:
    """Remove the socket file at `path` only if it is still the one we bound (`ident`)."""
    if ident is not None and socket_identity(path) == ident:
        with contextlib.suppress(OSError):
            os.unlink(path)
