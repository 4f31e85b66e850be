"""Store writing in a child process, so a busy server spreads over two CPUs.

The server checks each client frame (it must, for the screen and for safety), then hands
the same bytes to this child, which decodes them again, builds the store's columns (events
where a frame holds more than log records) and appends them through a `StoreSink`; it
reports each stored run back, and only then is the client acknowledged. Frames carrying
progress records (whose events need the server's state) go as server-built events. If the
child dies, a new one is started and given everything not yet reported stored; the store
drops what it already has. Automatic garbage collection is off in the child (see
`GC_EVERY_S`).

Parent -> child, on the child's stdin: HEADER (type, writer, first_seq, process, pid,
payload length) then the payload: type 1 a client batch body, type 2 a msgpack list of
event tuples, type 3 a client's hostname, type 4 event tuples for the lost stream (records
clients dropped). Child -> parent, on its stdout: ACK (writer, end).
"""

from __future__ import annotations

import collections
import gc
import logging
import os
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from mlgoodput._recovery import LOSS_NAMESPACE
from mlgoodput._spawn import helper_env, start_python
from mlgoodput._worker import BackgroundWorker
from mlgoodput.console import _protocol as P
from mlgoodput.console import _records
from mlgoodput.console._sink import NAMESPACE
from mlgoodput.events import Event, Kind

log = logging.getLogger("mlgoodput.console")

HEADER = struct.Struct(">BQQiqI")
ACK = struct.Struct(">QQ")
RAW, EVENTS, HOST, LOST = 1, 2, 3, 4
#: Seconds between the store helper's own garbage collections (automatic ones are off there).
GC_EVERY_S = 30.0
_enc = msgspec.msgpack.Encoder()
_dec = msgspec.msgpack.Decoder()


def _pack_events(events: Sequence[Event]) -> bytes:
    return _enc.encode([(int(e.kind), e.time, e.host, e.step, e.value, e.name, e.attrs) for e in events])


def _unpack_events(payload: bytes) -> list[Event]:
    return [Event(Kind(k), t, h, s, v, n, a) for k, t, h, s, v, n, a in _dec.decode(payload)]


class _AckReader(BackgroundWorker):
    """Reads the child's reports (blocking reads on its stdout) until the child ends."""

    after_fork = "stop"  # the reports belong to the server's process

    def __init__(self, fd: int, on_ack: Callable[[int, int], None]) -> None:
        super().__init__("mlgoodput-console-store-acks", interval_s=0.05, max_backoff_s=0.05)
        self.fd = fd
        self.on_ack = on_ack
        self.eof = False
        self._buf = b""

    def _work(self) -> bool:
        if self.eof:
            return True
        data = os.read(self.fd, 65536)  # blocks until the child reports or ends
        if not data:
            self.eof = True
            return True
        buf = self._buf + data
        n = len(buf) // ACK.size * ACK.size
        for i in range(0, n, ACK.size):
            self.on_ack(*ACK.unpack_from(buf, i))
        self._buf = buf[n:]
        return True


class StoreProcess(BackgroundWorker):
    """Feeds the child; same calls as StoreSink (`submit_run`, `pending_events`, `stored_events`)."""

    after_fork = "stop"  # the store child belongs to the server's process

    def __init__(self, store_url: str, job: str) -> None:
        super().__init__("mlgoodput-console-store-feeder", interval_s=0.05, max_backoff_s=1.0)
        self.store_url = store_url
        self.job = job
        self._lock = threading.Lock()
        # each writer's runs not yet reported stored, in order: [writer, end_seq, frame bytes,
        # n events, on_stored, sent to the current child]; kept per writer, so a report costs
        # the runs it settles, however many clients there are
        self._waiting: dict[int, collections.deque[list[Any]]] = {}
        self._unsent: collections.deque[list[Any]] = collections.deque()  # frames for the child, in order
        self._hosts: dict[int, bytes] = {}  # writer -> its HOST frame, resent to a new child
        self._proc: subprocess.Popen[bytes] | None = None
        self._reader: _AckReader | None = None
        self.pending_events = 0
        self.stored_events = 0  # stored, or journaled by the child when the store could not take them
        self.lost_events = 0
        self.restarts = 0

    # -- the server's side -----------------------------------------------------------------
    def register_client(self, writer: int, process: int, pid: int, hostname: str) -> None:
        data = HEADER.pack(HOST, writer, 0, process, pid, len(hostname.encode())) + hostname.encode()
        with self._lock:
            self._hosts[writer] = data
            self._unsent.append([writer, -1, data, 0, None, False])

    def submit_raw(
        self,
        writer: int,
        first_seq: int,
        process: int,
        n: int,
        body: bytes,
        on_stored: Callable[[], None] | None = None,
    ) -> None:
        data = HEADER.pack(RAW, writer, first_seq, process, 0, len(body)) + body
        self._add(writer, first_seq + n, data, n, on_stored)

    def submit_run(
        self,
        writer: int,
        first_seq: int,
        events: Sequence[Event],
        on_stored: Callable[[], None] | None = None,
        namespace: str = NAMESPACE,
    ) -> None:
        payload = _pack_events(events)
        typ = LOST if namespace == LOSS_NAMESPACE else EVENTS
        if typ == EVENTS and namespace != NAMESPACE:
            raise ValueError(f"the store helper writes the console's streams only, not {namespace!r}")
        data = HEADER.pack(typ, writer, first_seq, 0, 0, len(payload)) + payload
        self._add(writer, first_seq + len(events), data, len(events), on_stored)

    def _add(self, writer: int, end: int, data: bytes, n: int, on_stored: Callable[[], None] | None) -> None:
        it = [writer, end, data, n, on_stored, False]
        with self._lock:
            dq = self._waiting.get(writer)
            if dq is None:
                dq = self._waiting[writer] = collections.deque()
            dq.append(it)
            self._unsent.append(it)
            self.pending_events += n
        self._wake.set()

    # -- the child, from the parent ------------------------------------------------------
    def _spawn(self) -> None:
        self._proc = start_python(
            [
                "-c",
                "import sys; from mlgoodput.console._storeproc import child_main;"
                " sys.exit(child_main(sys.argv[1], sys.argv[2]))",
                self.store_url,
                self.job,
            ],
            extra_env=helper_env(),
            # Out of the terminal's process group, and SIGINT ignored: a terminal's Ctrl-C reaches
            # the whole foreground group (even while this child is still starting), and the server
            # stops this child itself once it has stored everything
            ignore_sigint=True,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            close_fds=True,
            process_group=0,
        )
        assert self._proc.stdout is not None
        self._reader = _AckReader(self._proc.stdout.fileno(), self._on_ack)
        self._reader.start()

    def _on_ack(self, writer: int, end: int) -> None:
        done: list[list[Any]] = []
        with self._lock:
            dq = self._waiting.get(writer)
            while dq and dq[0][1] <= end and dq[0][5]:  # sent in order: the first unsent ends it
                it = dq.popleft()
                done.append(it)
                self.pending_events -= it[3]
                self.stored_events += it[3]
        for it in done:
            if it[4] is not None:
                try:
                    it[4]()
                except Exception:
                    pass
        self._wake.set()

    def _work(self) -> bool:
        proc = self._proc
        if proc is None or proc.poll() is not None:
            if proc is not None:
                self.restarts += 1
                if self._reader is not None:
                    self._reader.close(1.0)
                with self._lock:  # a new child gets every client's host, then all not stored
                    self._unsent = collections.deque([w, -1, d, 0, None, False] for w, d in self._hosts.items())
                    for dq in self._waiting.values():
                        for it in dq:
                            it[5] = False
                        self._unsent.extend(dq)
            self._spawn()
            proc = self._proc
        assert proc is not None and proc.stdin is not None
        with self._lock:
            todo, self._unsent = self._unsent, collections.deque()
        try:
            for it in todo:
                it[5] = True  # before the write: its report can come as soon as the bytes leave
                proc.stdin.write(it[2])
            proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            return False
        with self._lock:
            return self.pending_events == 0

    def _on_close(self, timeout_s: float) -> None:
        proc = self._proc
        deadline = time.monotonic() + timeout_s
        if proc is not None:
            try:
                if proc.stdin is not None:
                    proc.stdin.close()  # the child stores (or journals) what it has and exits
                proc.wait(max(0.1, timeout_s))
            except Exception:
                proc.kill()  # what it acknowledged is durable; the rest the clients still hold
        if self._reader is not None:
            self._reader.close(max(0.1, min(5.0, deadline - time.monotonic())))

    def flush(self, timeout_s: float | None = None) -> bool:
        """Wait until everything handed over before this call is stored (the child said so)."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        if self._thread is None:
            self.start()
        while self.pending_events > 0:
            if deadline is not None and time.monotonic() >= deadline:
                return False
            self._wake.set()
            time.sleep(0.01)
        return True

    def close(self, timeout_s: float | None = None) -> bool:
        """Wait until everything handed over is durable (stored, or journaled by the child when
        the store cannot take it), or `timeout_s`, then stop the child."""
        if self._closed:
            return True
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        ok = self.flush(timeout_s)
        super().close(None if deadline is None else max(0.1, deadline - time.monotonic()))
        if self.pending_events:
            self.lost_events += self.pending_events
            log.warning(
                "mlgoodput console: %d records of job %s are lost: the store helper did not take them in time",
                self.pending_events,
                self.job,
            )
        return ok

    def _on_fork_in_child(self) -> None:
        self._proc = None
        self._waiting.clear()
        self._unsent.clear()


# -- the child ---------------------------------------------------------------------------------
def _records_count(payload: bytes, typ: int) -> list[Any]:
    try:
        obj = _dec.decode(payload)
        return list(obj[2]) if typ == RAW else list(obj)
    except Exception:
        return []


def child_main(store_url: str, job: str) -> int:
    """Read frames on stdin, store them, report stored runs on stdout; exit at end of input."""
    from mlgoodput.console._sink import StoreSink

    sink = StoreSink(store_url, job)  # opened on its own thread: reading stdin never waits for the store
    sink.start()
    # Every record pending here holds a dict (its attrs) that the collector would walk again
    # and again while it waits for the store: collect on a clock instead (a few % of the CPU)
    gc.disable()
    next_gc = time.monotonic() + GC_EVERY_S
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    out_lock = threading.Lock()
    hosts: dict[int, tuple[str, int]] = {}

    def acker(writer: int, end: int) -> Callable[[], None]:
        def ack() -> None:
            with out_lock:
                out.write(ACK.pack(writer, end))
                out.flush()

        return ack

    while True:
        hdr = inp.read(HEADER.size)
        if len(hdr) < HEADER.size:
            break
        typ, writer, first, process, pid, n = HEADER.unpack(hdr)
        payload = inp.read(n)
        if time.monotonic() >= next_gc:
            gc.collect()
            next_gc = time.monotonic() + GC_EVERY_S
        if typ == HOST:
            hosts[writer] = (payload.decode(), pid)
            continue
        try:
            if typ == RAW:  # checked by the server with the same schema; decoded again here
                batch = P.decode_client(payload)
                hostname, cpid = hosts.get(writer, ("?", 0))
                events: Sequence[Event] | None = _records.log_columns(batch.records, process)
                if events is None:  # usage or checkpoint records among the logs
                    events = _records.log_events(batch.records, process, hostname, cpid)
            else:
                events = _unpack_events(payload)
        except Exception as e:  # never loop on a frame that cannot be stored: report and go on
            print(f"mlgoodput console store helper: dropped a frame of writer {writer}: {e}", file=sys.stderr)
            acker(writer, first + len(_records_count(payload, typ)))()
            continue
        ns = LOSS_NAMESPACE if typ == LOST else NAMESPACE
        sink.submit_run(writer, first, events, acker(writer, first + len(events)), ns)
        if sink.pending_events > 200_000:  # far ahead of the store: read on once it caught up some
            sink.wait_below(100_000, 30)
    sink.close(60)  # what the store does not take in time is journaled, and acknowledged
    return 0
