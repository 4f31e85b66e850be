"""The console server: accepts clients on a Unix socket or TCP, shows and stores what they send.

It runs an asyncio loop on its own thread. Every connection starts with a challenge; TCP
clients must answer it with the HMAC of the server's token, Unix clients must be the same
user. Records are turned into events, handed to the store writer (acked once stored) and
to the screen. A broken or hostile peer is logged and dropped; it never stops the server.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import socket
import struct
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, Any

from mlgoodput._endpoint import check_exposure
from mlgoodput._format import duration, timestamp
from mlgoodput._limited_server import BACKLOG, bind_unix, socket_identity, unlink_own_socket
from mlgoodput._once import Once
from mlgoodput._recovery import LOSS_NAMESPACE
from mlgoodput.console import _protocol as P
from mlgoodput.console import _records
from mlgoodput.console._address import Address, parse_address
from mlgoodput.console._display import BarState, Display, clean
from mlgoodput.console._sink import NAMESPACE, StoreSink
from mlgoodput.console._storeproc import StoreProcess
from mlgoodput.events import Event, Kind
from mlgoodput.store import Store, is_process_local, resolve_store_url

log = logging.getLogger("mlgoodput.console.server")

_PROGRESS, _CLIENT = Kind.PROGRESS, Kind.CLIENT
#: Connections that have not authenticated yet, at most; a new one drops the oldest.
MAX_UNAUTHENTICATED = 128
#: How many refusals of one kind (a bad token, a malformed frame, ...) are logged; more are counted.
WARN_TIMES = 5
#: How much a connection's reader buffers before it stops reading, until it authenticates
#: (a stranger can make the server hold at most about twice this); then full frames.
PREAUTH_READ_LIMIT = 64 * 1024


@dataclass(slots=True)
class ClientState:
    """What the server remembers of one client process across its connections."""

    client: int
    process: int
    pid: int
    hostname: str
    argv: str
    next_seq: int = -1  # -1: not known (a fresh server); else every seq below was received
    first_seen: int = -1  # the first seq received while next_seq was not known (-1: none)
    stored_seq: int = 0  # every seq below is in the store (what acks promise)
    connected: bool = False
    lost: bool = False
    contrib: dict[str, float] = field(default_factory=dict)  # distributed bar -> sum of deltas
    conn: Any = None  # the current connection (a reconnect supersedes an older one)


class ConsoleServer:
    """A console server; `start()` it, connect clients to `address`, `stop()` it."""

    def __init__(
        self,
        address: str = "127.0.0.1:0",
        *,
        job: str | None = None,
        store: Any = None,
        token: str | None = None,
        display: bool | IO[str] = True,
        heartbeat_timeout_s: float = 10.0,
        handshake_timeout_s: float = 5.0,
        goodput: bool = True,
        goodput_interval_s: float = 5.0,
        store_process: bool = False,
    ) -> None:
        self._addr = parse_address(address, "address")
        if job is not None and (not isinstance(job, str) or not job.strip()):
            raise ValueError(f"job must be a non-empty string, got {job!r}")
        self.job = job or time.strftime("console-%Y%m%d-%H%M%S") + f"-{os.getpid()}"
        # the store is opened by the store writer, on its thread: starting a server (a training
        # process's `session()`) never waits for a store that is down, locked or slow
        given = isinstance(store, Store) and not isinstance(store, (str, os.PathLike))
        self.store_url = str(store.url) if given else resolve_store_url(store)
        self.auth = not self._addr.is_unix
        # TCP always needs a token: other users of this machine can reach a loopback port
        self.token = check_exposure(self._addr.host, token, always=True) if self.auth else (token or None)
        self.heartbeat_timeout_s = heartbeat_timeout_s
        self.handshake_timeout_s = handshake_timeout_s
        # store_process: write the store from a child process (a second CPU); needs a store
        # other processes can open (not a process-local one such as memory://)
        self.sink: StoreSink | StoreProcess
        self._numbers = StoreSink(store if given else self.store_url, self.job, on_open=self._read_numbers)
        if store_process and not is_process_local(self.store_url):
            self.sink = StoreProcess(self.store_url, self.job)
            self._reader_sink = self._numbers  # reads the store (numbers, goodput line); writes nothing
        else:
            self.sink = self._numbers
            self._reader_sink = self._numbers
        gp = _goodput_line(lambda: self._reader_sink.store_if_open, self.job) if goodput else None
        if display is False:
            self.display: Display | None = None
        else:
            self.display = Display(None if display is True else display, goodput=gp, goodput_every_s=goodput_interval_s)
        self.clients: dict[int, ClientState] = {}
        self.bars: dict[str, BarState] = {}
        self.refused = 0  # connections refused (bad handshake, auth)
        self.bad_frames = 0  # frames that broke the protocol
        self.received = 0  # records accepted
        self._writer_id = secrets.randbits(62)
        self._own_seq = 0
        self._loss_writer = secrets.randbits(62) or 1  # counts of records clients dropped
        self._loss_seq = 0
        self.gaps = 0  # records clients dropped before sending them
        self._runs = 0  # servings of this job so far (this one included once started)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.base_events.Server | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._start_error: BaseException | None = None
        self.address = ""
        self._warned = Once(times=WARN_TIMES)  # refused input per kind: the first few are logged
        self._writers: set[asyncio.StreamWriter] = set()
        self._unauthenticated: OrderedDict[asyncio.StreamWriter, None] = OrderedDict()
        self.max_unauthenticated = MAX_UNAUTHENTICATED
        self.evicted = 0  # unauthenticated connections dropped to admit newer ones
        self._sock_id: tuple[int, int] | None = None
        self._numbers_read = False  # the clients of earlier servings are known (read in the background)
        self._next_number = 0  # the short number the next new client gets

    # -- lifecycle -----------------------------------------------------------------------
    def start(self) -> str:
        """Listen and serve on a background thread; returns the address clients should use."""
        if self._thread is not None:
            return self.address
        if self.display is not None:
            self.display.start()
        self._thread = threading.Thread(target=self._run, name="mlgoodput-console-server", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._start_error is not None:
            err, self._start_error = self._start_error, None
            self._thread = None
            raise err
        # the store writers start once the loop runs: the store opens on their thread, and
        # what it tells (earlier clients' numbers) is handed to the loop
        self.sink.start()
        if self._reader_sink is not self.sink:
            self._reader_sink.start()
        self._reader_sink.wake()
        self._mark_run()
        self._note(f"mlgoodput console: serving job {self.job!r} at {self.address}")
        return self.address

    def _mark_run(self) -> None:
        """A `serve` marker in the store: replays tell the runs of one job name apart."""
        self._runs += 1
        ev = Event(
            _CLIENT,
            time.time(),
            0,
            None,
            None,
            "serve",
            {"pid": os.getpid(), "hostname": socket.gethostname(), "argv": " ".join(sys.argv)[:500]},
        )
        self.sink.submit_run(self._writer_id, self._own_seq, [ev])
        self._own_seq += 1

    def stop(self, timeout_s: float = 10.0) -> bool:
        """Stop accepting, close connections, store everything received; True if all was stored."""
        deadline = time.monotonic() + timeout_s
        loop, t = self._loop, self._thread
        if loop is not None and t is not None and t.is_alive():
            fut = asyncio.run_coroutine_threadsafe(self._shutdown(), loop)
            try:
                fut.result(max(0.1, deadline - time.monotonic()))
            except Exception:
                pass
            loop.call_soon_threadsafe(loop.stop)
            t.join(max(0.1, deadline - time.monotonic()))
        self._thread = None
        ok = self.sink.close(max(0.1, deadline - time.monotonic()))
        if self._reader_sink is not self.sink:
            self._reader_sink.close(max(0.1, min(1.0, deadline - time.monotonic())))
        if self.display is not None:  # (its goodput line may be stuck in a slow store: not waited for long)
            self.display.close(max(0.1, min(2.0, deadline - time.monotonic())))
        if self._addr.is_unix:
            unlink_own_socket(self._addr.path, self._sock_id)
        return ok

    @property
    def store(self) -> Store:
        """The store (opened now if the store writer has not opened it yet)."""
        return self._reader_sink.store

    @property
    def lost_records(self) -> int:
        """Records lost: dropped by clients whose buffer was full (`gaps`), and records neither
        stored nor journaled (the store down and no journal file possible)."""
        return int(self.sink.lost_events) + self.gaps

    def __enter__(self) -> ConsoleServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._listen())
        except BaseException as e:
            self._start_error = e
            self._ready.set()
            loop.close()
            return
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            try:
                loop.run_until_complete(loop.shutdown_asyncgens())
            except Exception:
                pass
            loop.close()

    async def _listen(self) -> None:
        a = self._addr
        if a.is_unix:
            # a socket nobody answers on is a leftover of a dead server: replaced; anything
            # else at the path (a regular file, a live server) is an error, never deleted
            sock = bind_unix(a.path)
            self._sock_id = socket_identity(a.path)
            self._server = await asyncio.start_unix_server(
                self._handle, sock=sock, limit=PREAUTH_READ_LIMIT, backlog=BACKLOG
            )
            self.address = str(a)
        else:
            self._server = await asyncio.start_server(
                self._handle, host=a.host, port=a.port, limit=PREAUTH_READ_LIMIT, reuse_address=True, backlog=BACKLOG
            )
            sock = self._server.sockets[0]
            host, port = sock.getsockname()[:2]
            self.address = str(Address(host=host, port=port))

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        for w in list(self._writers):
            w.close()  # its handler ends on the closed stream, as if the client had left
        for _ in range(100):
            if not self._writers:
                break
            await asyncio.sleep(0.01)

    # -- connections ---------------------------------------------------------------------
    def _warn(self, peer: str, what: str) -> None:
        """Log a refused connection or bad frame, at most a few times per kind of problem."""
        key = what.split(":", 1)[0]
        if self._warned.first(key):
            log.warning("console server: %s from %s", what, peer)
            self._note(f"refused input from {peer}: {what[:200]}")
        elif self._warned.count(key) == WARN_TIMES + 1:
            log.warning("console server: more of %r; no longer logged", key)

    def refusals(self) -> dict[str, int]:
        """Refused connections and bad frames so far, per kind of problem (the text before
        its colon: "unauthenticated", "protocol", "malformed", "error")."""
        return {str(k): n for k, n in self._warned.counts().items()}

    def _note(self, text: str) -> None:
        if self.display is not None:
            self.display.note(text)

    async def _read(self, reader: asyncio.StreamReader, maximum: int = P.MAX_FRAME_BYTES) -> tuple[Any, bytes]:
        header = await reader.readexactly(4)
        n = P.frame_length(header, maximum)
        body = await reader.readexactly(n)
        return P.decode_client(body), body

    def _admit(self, writer: asyncio.StreamWriter) -> None:
        """Count a connection that has not authenticated yet; past the cap the oldest such
        one is dropped, so idle or slow strangers can never crowd out a real client."""
        self._unauthenticated[writer] = None
        while len(self._unauthenticated) > self.max_unauthenticated:
            old, _ = self._unauthenticated.popitem(last=False)
            old.transport.abort()
            self.evicted += 1

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = "?"
        state: ClientState | None = None
        clean_exit = False
        self._writers.add(writer)
        self._admit(writer)
        try:
            sock = writer.get_extra_info("socket")
            peer = str(writer.get_extra_info("peername") or "unix")
            if self._addr.is_unix and sock is not None and hasattr(socket, "SO_PEERCRED"):
                creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
                pid, uid, _ = struct.unpack("3i", creds)
                peer = f"pid {pid}"
                if uid != os.getuid():
                    self.refused += 1
                    self._warn(peer, f"unauthenticated: uid {uid} is not the server's user")
                    return
            nonce = secrets.token_bytes(32)
            writer.write(P.frame(P.Challenge(P.VERSION, nonce, self.auth)))
            try:
                await asyncio.wait_for(writer.drain(), self.handshake_timeout_s)
                hello, _ = await asyncio.wait_for(self._read(reader, P.MAX_HELLO_BYTES), self.handshake_timeout_s)
            except TimeoutError:
                self.refused += 1
                self._warn(peer, "unauthenticated: no handshake in time")
                return
            if not isinstance(hello, P.Hello):
                self.refused += 1
                self._warn(peer, "protocol: first message was not a hello")
                return
            if hello.version != P.VERSION:
                self.refused += 1
                writer.write(P.frame(P.Refuse(f"protocol version {hello.version} is not {P.VERSION}")))
                self._warn(peer, f"protocol: version {hello.version}")
                return
            if self.auth and not (self.token and P.mac_ok(self.token, nonce, hello.mac)):
                self.refused += 1
                writer.write(P.frame(P.Refuse("authentication failed: wrong or missing token")))
                await writer.drain()
                self._warn(peer, "unauthenticated: wrong or missing token")
                return
            self._unauthenticated.pop(writer, None)
            setattr(reader, "_limit", P.MAX_FRAME_BYTES + 8)  # noqa: B010 - trusted now: full-size frames
            state = self._client_joined(hello, writer)
            writer.write(P.frame(P.Welcome(state.process, self.job, state.stored_seq)))
            await writer.drain()
            while True:
                try:
                    msg, body = await asyncio.wait_for(self._read(reader), self.heartbeat_timeout_s)
                except TimeoutError:
                    self._warn(
                        peer, f"lost: no heartbeat from process #{state.process} in {self.heartbeat_timeout_s:g} s"
                    )
                    return
                if isinstance(msg, P.Batch):
                    await self._on_batch(state, msg, writer, body)
                elif isinstance(msg, P.Ping):
                    writer.write(P.frame(P.Ack(state.stored_seq)))
                elif isinstance(msg, P.Bye):
                    clean_exit = True
                    return
                else:
                    raise P.FrameError(f"unexpected {type(msg).__name__} after the handshake")
        except P.FrameError as e:
            self.bad_frames += 1
            self._warn(peer, f"malformed: {e}")
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            pass  # the peer went away; handled below
        except asyncio.CancelledError:
            clean_exit = True
            raise
        except Exception as e:  # a bug must not take the server down
            self.bad_frames += 1
            self._warn(peer, f"error: {type(e).__name__}: {e}")
        finally:
            self._writers.discard(writer)
            self._unauthenticated.pop(writer, None)
            if state is not None and state.conn is writer:  # not when a newer connection took over
                self._client_left(state, clean_exit)
            try:
                writer.close()
            except Exception:
                pass

    # -- clients -------------------------------------------------------------------------
    def _read_numbers(self, store: Store) -> None:
        """On the store writer's thread, once the store opens: the short process numbers of a
        job served before (from its stored CLIENT events), handed to the loop to keep them."""
        loop = self._loop
        try:
            if not any(j.namespace == NAMESPACE and j.job == self.job for j in store.jobs()):
                if loop is not None:
                    loop.call_soon_threadsafe(self._keep_numbers, [], 0)
                return
            cols = store.read(NAMESPACE, self.job).columns
        except Exception:
            return
        runs = 0
        found: dict[int, ClientState] = {}
        for i in range(len(cols)):
            if cols.kinds[i] == _CLIENT:
                if cols.name(i) == "serve":
                    a = cols.attr(i) or {}
                    if (a.get("pid"), a.get("hostname")) != (os.getpid(), socket.gethostname()):
                        runs += 1  # (this serving's own marker may be stored already)
                    continue
                a = cols.attr(i) or {}
                cid = a.get("client")
                if isinstance(cid, int) and cid not in found:
                    found[cid] = ClientState(
                        cid, cols.hosts[i], int(a.get("pid", 0)), str(a.get("hostname", "")), str(a.get("argv", ""))
                    )
        if loop is not None:
            loop.call_soon_threadsafe(self._keep_numbers, list(found.values()), runs)

    def _keep_numbers(self, old: list[ClientState], runs: int) -> None:
        """On the loop: a client of an earlier serving keeps its number when it comes back (a
        number a client has taken meanwhile is not given twice). A client that joined before
        the numbers were read and is new to this job dropped what it numbered before its first
        batch, as one that joins later does."""
        self._numbers_read = True
        known = {st.client for st in old}
        for st in list(self.clients.values()):
            if st.client in known:
                continue
            if st.next_seq < 0:
                st.next_seq = 0  # no batch yet: its first one says what it dropped
            elif st.first_seen > 0:
                self._client_dropped(st, st.first_seen)
                st.first_seen = 0
        if runs:
            self._runs += runs
            self._note(f"job {self.job!r} was served {runs} time(s) before: this is run {self._runs}")
        taken = {st.process for st in self.clients.values()}
        for st in old:
            if st.client not in self.clients and st.process not in taken:
                self.clients[st.client] = st
                taken.add(st.process)
                self._next_number = max(self._next_number, st.process + 1)

    def _client_joined(self, hello: P.Hello, writer: asyncio.StreamWriter) -> ClientState:
        st = self.clients.get(hello.client)
        if st is None:
            number = self._next_number
            self._next_number += 1
            st = ClientState(hello.client, number, hello.pid, clean(hello.hostname)[:200], clean(hello.argv)[:500])
            if self._numbers_read:  # new to this job: what it numbered before its first batch, it dropped
                st.next_seq = 0
            self.clients[hello.client] = st
        st.connected, was_lost, st.lost = True, st.lost, False
        st.conn = writer
        if isinstance(self.sink, StoreProcess):
            self.sink.register_client(st.client, st.process, st.pid, st.hostname)
        self._server_event(_CLIENT, st.process, "connect", st)
        self._note(
            f"[#{st.process}] {'reconnected' if was_lost else 'joined'}: pid {st.pid} on {st.hostname} ({st.argv[:80]})"
        )
        if self.display is not None and was_lost:
            self.display.mark_lost(st.process, False)
        return st

    def _client_left(self, st: ClientState, clean_exit: bool) -> None:
        st.connected = False
        st.lost = not clean_exit
        self._server_event(_CLIENT, st.process, "disconnect" if clean_exit else "lost", st)
        if not clean_exit:
            self._note(f"[#{st.process}] lost (pid {st.pid}): its unfinished bars are marked")
            if self.display is not None:
                self.display.mark_lost(st.process, True)
            for b in self.bars.values():
                if b.process == st.process and not b.done:  # its owner died: nobody will finish it
                    b.lost = True

    def _server_event(self, kind: Kind, process: int, what: str, st: ClientState) -> None:
        ev = Event(
            kind,
            time.time(),
            process,
            None,
            None,
            what,
            {"client": st.client, "pid": st.pid, "hostname": st.hostname, "argv": st.argv},
        )
        self.sink.submit_run(self._writer_id, self._own_seq, [ev])
        self._own_seq += 1

    # -- records -------------------------------------------------------------------------
    async def _on_batch(self, st: ClientState, batch: P.Batch, writer: asyncio.StreamWriter, body: bytes) -> None:
        records = batch.records
        first = batch.first_seq
        if first < 0:
            raise P.FrameError(f"negative sequence number {first}")
        if st.next_seq < 0 and st.first_seen < 0:
            st.first_seen = first  # (what it dropped before is known once the numbers are read)
        if st.next_seq >= 0:
            skip = st.next_seq - first
            if skip >= len(records):  # all seen before (a resend): acknowledged once stored
                writer.write(P.frame(P.Ack(st.stored_seq)))
                return
            if skip > 0:
                records, first = records[skip:], st.next_seq
            elif skip < 0:  # numbers the client never sent: its buffer was full and dropped them
                self._client_dropped(st, -skip)
        proc = st.process
        disp = self.display
        end = first + len(records)
        st.next_seq = end
        self.received += len(records)
        loop = asyncio.get_running_loop()

        def stored() -> None:
            loop.call_soon_threadsafe(_stored, st, writer, end)

        if disp is not None:
            for r in records:
                if type(r) is P.LogRec:
                    disp.log(proc, r)
                elif type(r) is P.UsageRec:
                    disp.usage(proc, r)
        sink = self.sink
        if _records.simple(records):
            if isinstance(sink, StoreProcess) and first == batch.first_seq:
                sink.submit_raw(st.client, first, proc, len(records), body, stored)  # decoded over there
            else:
                evs = _records.log_columns(records, proc) or _records.log_events(records, proc, st.hostname, st.pid)
                sink.submit_run(st.client, first, evs, stored)
        else:
            events: list[Event] = []
            for r in records:
                if type(r) is P.ProgressRec:
                    events.append(self._on_progress(st, r))
                else:
                    e = _records.to_event(r, proc, st.hostname, st.pid)
                    if e is not None:
                        events.append(e)
            sink.submit_run(st.client, first, events, stored)
        # back-pressure: stop reading while the store falls far behind
        while sink.pending_events > 500_000:
            await asyncio.sleep(0.02)

    def _client_dropped(self, st: ClientState, n: int) -> None:
        """Records a client dropped (a full buffer while the server could not keep up or was
        away): counted in the store's lost stream, where `console logs` and the UI say it."""
        self.gaps += n
        self._note(f"[#{st.process}] dropped {n} records: its buffer was full")
        ev = Event(
            Kind.METRIC,
            time.time(),
            st.process,
            None,
            float(n),
            "console_lost_records",
            {"namespace": NAMESPACE, "process": st.process, "pid": st.pid, "why": "the client's buffer was full"},
        )
        self.sink.submit_run(self._loss_writer, self._loss_seq, [ev], namespace=LOSS_NAMESPACE)
        self._loss_seq += 1

    def _on_progress(self, st: ClientState, r: P.ProgressRec) -> Event:
        b = self.bars.get(r.bar)
        if b is None:
            b = self.bars[r.bar] = BarState(clean(r.desc)[:200], r.total, 0.0, st.process, r.distributed)
            if len(self.bars) > 10_000:  # forget the oldest finished bars
                for k in [k for k, v in self.bars.items() if v.done][:1000]:
                    del self.bars[k]
        if r.desc:
            b.desc = clean(r.desc)[:200]
        if r.total is not None:
            b.total = r.total
        if r.distributed:
            b.distributed = True
            st.contrib[r.bar] = st.contrib.get(r.bar, 0.0) + r.delta
            b.completed = sum(c.contrib.get(r.bar, 0.0) for c in self.clients.values())
        elif r.completed is not None:
            b.completed = r.completed
        if r.done and not b.done:
            b.done = True
            tot = f"{b.total:g}" if b.total is not None else "?"
            if b.interrupted:
                self._note(f"✗ {b.desc}: interrupted at {b.completed:g}/{tot}")
            else:
                self._note(f"✓ {b.desc}: {b.completed:g}/{tot}")
        b.updated = time.monotonic()
        if self.display is not None:
            self.display.progress(st.process, r, b)
        return Event(
            _PROGRESS,
            r.time,
            st.process,
            None,
            b.completed,
            r.bar,
            {
                "desc": b.desc,
                "total": b.total,
                "completed": b.completed,
                "delta": r.delta,
                "done": r.done,
                "distributed": r.distributed,
            },
        )


def _stored(st: ClientState, writer: asyncio.StreamWriter, next_seq: int) -> None:
    """On the loop: records below `next_seq` are in the store; tell the client."""
    st.stored_seq = max(st.stored_seq, next_seq)
    if not writer.is_closing():
        try:
            writer.write(P.frame(P.Ack(st.stored_seq)))
        except Exception:
            pass


def _goodput_line(get_store: Callable[[], Store | None], job: str) -> Any:
    """A callable giving the live goodput line of `job`, or None when no recorder writes it
    (or the store is not open yet: it is opened in the background, never waited for here).

    Needs `mlgoodput.accounting.GoodputCalculator`, imported at the first line (on the
    display's thread, not while a training process starts its console); without it the
    console just has no line.
    """
    calcs: dict[str, Any] = {}

    def line() -> str | None:
        store = get_store()
        if store is None:
            return None
        try:
            from mlgoodput import accounting

            calc_cls = accounting.GoodputCalculator
        except Exception:
            return None
        for j in store.jobs():
            if j.job == job and not j.namespace.startswith("mlgoodput."):
                calc = calcs.get(j.namespace)
                if calc is None:
                    calc = calcs[j.namespace] = calc_cls(job, j.namespace, store=store)
                r = calc.report()
                worst = max(
                    ((b, v) for b, v in r.badput_s.items() if isinstance(v, (int, float))),
                    key=lambda bv: bv[1],
                    default=None,
                )
                text = (
                    f"goodput {r.goodput_pct:.1f}% of {duration(r.total_s)} (as of {timestamp(time.time())})"
                    f" · productive {duration(r.productive_s)} · last step {r.last_step}"
                )
                if worst is not None and worst[1] > 0:
                    text += f" · top badput {str(getattr(worst[0], 'name', worst[0])).lower()} {duration(worst[1])}"
                return text
        return None

    return line
