"""The client side of the wire: a buffer the hot path appends to, and a thread that ships it.

A caller only appends a record to a deque (well under a microsecond). The sender thread
numbers the records, sends them in batch frames, and keeps every record until the server
acknowledges that it is stored; after a reconnect it sends the unacknowledged ones again.
The buffer is bounded where records come in: past `max_buffer` records the oldest are dropped
and counted, by `put` while the sender is busy (a connect that blocks) and by the sender for
the records it holds.
"""

from __future__ import annotations

import collections
import logging
import os
import secrets
import select
import socket
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from mlgoodput import _env
from mlgoodput._worker import BackgroundWorker
from mlgoodput.console import _protocol as P
from mlgoodput.console._address import Address, parse_address

log = logging.getLogger("mlgoodput.console")

MAX_RECORDS_PER_FRAME = 4096


class ConsoleError(ConnectionError):
    """The console server refused this client (wrong token, other protocol version)."""


class ConsoleClient(BackgroundWorker):
    """One process's connection to a console server. `put(record)` never blocks."""

    def __init__(
        self,
        address: str,
        *,
        token: str | None = None,
        max_buffer: int = 200_000,
        heartbeat_s: float = 1.0,
        timeout_s: float = 5.0,
        interval_s: float = 0.05,
    ) -> None:
        if not isinstance(max_buffer, int) or max_buffer < 1:
            raise ValueError(f"max_buffer must be a positive integer, got {max_buffer!r}")
        self.addr: Address = parse_address(address)
        self.address = str(self.addr)
        self.token = token
        self.max_buffer = max_buffer
        self.heartbeat_s = heartbeat_s
        self.timeout_s = timeout_s
        super().__init__("mlgoodput-console-client", interval_s=interval_s, max_backoff_s=0.5)
        self.tickers: list[Callable[[], None]] = []  # run at each round (held-back progress updates)
        self._drop_lock = threading.Lock()
        self._reset()

    def _reset(self) -> None:
        self.client_id = secrets.randbits(62)
        # new records; at most max_buffer: a full deque pushes its oldest out on append
        self.queue: collections.deque[Any] = collections.deque(maxlen=self.max_buffer)
        # records not yet acknowledged, in chunks [first seq, records, encoded frame or None]
        self._chunks: collections.deque[list[Any]] = collections.deque()
        self._unacked = 0  # records in _chunks
        self._first = 0  # seq of the oldest unacknowledged record
        self._next = 0  # seq of the next new record
        self._sent = 0  # seq of the next record to send
        self._sock: socket.socket | None = None
        self._rbuf = b""
        self._last_send = 0.0
        self._last_recv = 0.0
        self.process: int | None = None  # the short number the server gave us
        self.job: str | None = None
        self._put_drops = 0  # records pushed out of the full queue by `put`
        self._put_drops_numbered = 0  # of those, the ones the sender gave sequence numbers
        self._held_drops = 0  # records the sender held and pushed out of the buffer
        self.connects = 0
        self.refused_reason: str | None = None

    def put(self, record: Any) -> None:
        """Queue one record (never blocks); wakes the sender when the queue was empty. A full
        queue (`max_buffer` records) drops its oldest, counted in `dropped`."""
        # the check and the append under one lock, which the sender takes to empty the queue:
        # every record the full deque pushes out is counted, and no count is made for a record
        # that stayed (two putters at max_buffer - 1, or the sender emptying the queue between)
        with self._drop_lock:
            q = self.queue
            full = len(q) >= self.max_buffer  # the sender is busy (a connect that blocks)
            q.append(record)  # a full deque pushes its oldest out
            if full:
                self._put_drops += 1
            first = len(q) == 1
        if full:
            self._full()
        if first:
            self._wake.set()

    @property
    def dropped(self) -> int:
        """Records dropped because the buffer was full (the oldest first)."""
        return self._put_drops + self._held_drops

    @dropped.setter
    def dropped(self, n: int) -> None:
        with self._drop_lock:
            self._put_drops = self._put_drops_numbered = 0
            self._held_drops = n

    def _full(self) -> None:
        self.log_once(
            "full",
            "console client: buffer full (%d records); dropping the oldest",
            self.max_buffer,
            logger=log,
        )

    @property
    def pending(self) -> int:
        """Records not yet acknowledged by the server."""
        return len(self.queue) + self._unacked

    def handshake(self) -> bool:
        """Connect once, before the sender thread starts: True if connected, False if the server
        cannot be reached yet (records are buffered until it can); raises ConsoleError if the
        server refuses this client, so a wrong or missing token fails where it is configured."""
        if self._sock is not None:
            return True
        try:
            self._connect()
        except ConsoleError as e:
            self.refused_reason = str(e)
            raise
        except (OSError, P.FrameError, EOFError):
            self._drop_connection()
            return False
        return True

    def _refused(self, e: ConsoleError) -> None:
        """Refused after connecting first (the server restarted with another token): say so on
        stderr, where it is seen, since log records go to the console that refuses them."""
        self.refused_reason = str(e)
        log.warning("console client: %s", e)
        try:
            sys.stderr.write(f"mlgoodput console: {e}; log records of this process are not delivered\n")
            sys.stderr.flush()
        except (OSError, ValueError):
            pass

    # -- the sender thread ---------------------------------------------------------------
    def _work(self) -> bool:
        for tick in self.tickers:
            tick()
        with self._drop_lock:  # the whole queue and the drops made before it, together
            items = list(self.queue)
            self.queue.clear()
            gone = self._put_drops - self._put_drops_numbered
            self._put_drops_numbered = self._put_drops
        n = len(items)
        if n:
            if gone:
                # the records `put` pushed out keep their numbers (a gap before the queued ones),
                # so that the server counts them lost
                self._next += gone
                if not self._chunks:
                    self._first = self._sent = self._next
            for i in range(0, n, MAX_RECORDS_PER_FRAME):
                recs = items[i : i + MAX_RECORDS_PER_FRAME]
                self._chunks.append([self._next, recs, None])
                self._next += len(recs)
                self._unacked += len(recs)
            over = self._unacked - self.max_buffer
            if over > 0:
                self._drop_oldest(over)
                self._sent = max(self._sent, self._first)
                self._full()
                with self._drop_lock:  # the `dropped` setter writes it under the lock
                    self._held_drops += over
        if self._sock is None:
            if self.refused_reason is not None:
                return True  # refused for good: keep buffering (bounded), stop retrying
            try:
                self._connect()
            except ConsoleError as e:
                self._refused(e)
                return True
            except (OSError, P.FrameError, EOFError) as e:
                self._drop_connection()
                self.log_once(
                    "refused",
                    "console client: cannot reach %s yet (%s); buffering",
                    self.address,
                    e,
                    level=logging.INFO,
                    logger=log,
                )
                return False
        try:
            self._send_pending()
            self._read_acks(0.0)
            now = time.monotonic()
            if now - self._last_send >= self.heartbeat_s:
                self._send(P.frame(P.Ping(time.time())))
            if now - self._last_recv > max(5.0, 4 * self.heartbeat_s):
                raise OSError("no answer from the server")
        except (OSError, P.FrameError, EOFError):
            self._drop_connection()
            return False
        return self._sent == self._next

    def _send(self, data: bytes) -> None:
        assert self._sock is not None
        self._sock.sendall(data)
        self._last_send = time.monotonic()

    def _send_pending(self) -> None:
        for chunk in list(self._chunks):
            first, recs, data = chunk
            if first + len(recs) <= self._sent:
                continue  # sent already, waiting for its acknowledgement
            if data is None:
                try:
                    data = chunk[2] = P.frame(P.Batch(first, recs))
                except P.FrameError:  # too large for one frame: halve it
                    self._split(chunk)
                    return self._send_pending()
            self._send(data)
            self._sent = first + len(recs)
            if self._sent - self._first > 4 * MAX_RECORDS_PER_FRAME:
                self._read_acks(0.0)

    def _split(self, chunk: list[Any]) -> None:
        first, recs, _ = chunk
        if len(recs) == 1:
            raise P.FrameError("one record does not fit in a frame")
        half = len(recs) // 2
        i = self._chunks.index(chunk)
        self._chunks[i] = [first, recs[:half], None]
        self._chunks.insert(i + 1, [first + half, recs[half:], None])

    def _forget(self, next_seq: int) -> None:
        """Drop every record numbered below `next_seq` (acknowledged). The chunks may have gaps
        between them (numbers of records `put` dropped)."""
        ch = self._chunks
        while ch and ch[0][0] < next_seq:
            first, recs, _ = ch[0]
            end = first + len(recs)
            if end <= next_seq:
                ch.popleft()
                self._unacked -= len(recs)
            else:  # part of the chunk: keep its tail, encode it again when sent
                k = next_seq - first
                ch[0] = [next_seq, recs[k:], None]
                self._unacked -= k
                break
        self._first = max(self._first, ch[0][0] if ch else min(next_seq, self._next))

    def _drop_oldest(self, count: int) -> None:
        """Drop the `count` oldest records held (the buffer is full)."""
        ch = self._chunks
        while count > 0 and ch:
            first, recs, _ = ch[0]
            if len(recs) <= count:
                ch.popleft()
                self._unacked -= len(recs)
                count -= len(recs)
            else:
                ch[0] = [first + count, recs[count:], None]
                self._unacked -= count
                count = 0
        self._first = max(self._first, ch[0][0] if ch else self._next)

    def _read_acks(self, wait_s: float) -> None:
        sock = self._sock
        assert sock is not None
        while True:
            if not _readable(sock, wait_s):
                return
            data = sock.recv(65536)
            if not data:
                raise EOFError("server closed the connection")
            self._last_recv = time.monotonic()
            self._rbuf += data
            while len(self._rbuf) >= 4:
                n = P.frame_length(self._rbuf[:4])
                if len(self._rbuf) < 4 + n:
                    break
                msg = P.decode_server(self._rbuf[4 : 4 + n])
                self._rbuf = self._rbuf[4 + n :]
                if isinstance(msg, P.Ack):
                    self._ack(msg.next_seq)
                elif isinstance(msg, P.Refuse):
                    raise EOFError(f"server refused: {msg.reason}")
            wait_s = 0.0

    def _ack(self, next_seq: int) -> None:
        if next_seq > self._first:
            self._forget(min(next_seq, self._next))

    def _recv_frame(self, sock: socket.socket) -> Any:
        def exact(n: int) -> bytes:
            buf = b""
            while len(buf) < n:
                chunk = sock.recv(n - len(buf))
                if not chunk:
                    raise EOFError("server closed the connection during the handshake")
                buf += chunk
            return buf

        return P.decode_server(exact(P.frame_length(exact(4))))

    def _connect(self) -> None:
        a = self.addr
        if a.is_unix:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            target: Any = a.path
        else:
            sock = socket.socket(socket.AF_INET6 if ":" in a.host else socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            target = (a.host, a.port)
        sock.settimeout(self.timeout_s)
        try:
            sock.connect(target)
            ch = self._recv_frame(sock)
            if not isinstance(ch, P.Challenge):
                raise P.FrameError("the server did not start with a challenge")
            if ch.version != P.VERSION:
                raise ConsoleError(f"server speaks protocol version {ch.version}, this client {P.VERSION}")
            if ch.auth and not self.token:
                raise ConsoleError(
                    f"the console server at {self.address} needs a token (token= or ${_env.CONSOLE_TOKEN})"
                )
            mac = P.mac(self.token, ch.nonce) if (ch.auth and self.token) else b""
            argv = " ".join(sys.argv)[:500]
            sock.sendall(P.frame(P.Hello(P.VERSION, self.client_id, os.getpid(), socket.gethostname(), argv, mac)))
            w = self._recv_frame(sock)
            if isinstance(w, P.Refuse):
                raise ConsoleError(f"the console server refused this client: {w.reason}")
            if not isinstance(w, P.Welcome):
                raise P.FrameError("expected a welcome")
        except BaseException:
            sock.close()
            raise
        self._sock = sock
        self.process, self.job = w.process, w.job
        self.connects += 1
        self._rbuf = b""
        self._last_recv = self._last_send = time.monotonic()
        # resend everything not acknowledged; the server skips what it already stored
        self._ack(w.next_seq)
        self._sent = self._first

    def _drop_connection(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            except OSError:
                pass
        self._sock = None

    # -- leaving -------------------------------------------------------------------------
    def drain(self, timeout_s: float) -> bool:
        """Wait until the server has acknowledged everything queued before this call."""
        deadline = time.monotonic() + timeout_s
        target = self._next + len(self.queue)
        while self._first < target:
            if self.refused_reason is not None or not self.running:
                return False
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self.wake()
            time.sleep(min(0.01, left))
        return True

    def _on_close(self, timeout_s: float) -> None:
        if self._sock is not None:
            try:
                self._sock.sendall(P.frame(P.Bye()))
            except OSError:
                pass
        self._drop_connection()

    def _on_fork_in_child(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()  # the parent keeps its connection; this copy is ours to drop
            except OSError:
                pass
        self._reset()


def _readable(sock: socket.socket, wait_s: float) -> bool:
    """Whether `sock` has data within `wait_s`; poll, not select, so a process with more than
    1024 open files (a busy trainer) can still use the console."""
    p = select.poll()
    p.register(sock, select.POLLIN | select.POLLHUP | select.POLLERR)
    return bool(p.poll(max(0.0, wait_s) * 1000))
