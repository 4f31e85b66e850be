"""ExporterProcess: run exporters (and optional sample sources) in a child process.

Uploading never runs on the training process's threads: the parent only starts and stops a
child Python interpreter and hands it samples through a socket pair. The API:

    proc = ExporterProcess([TensorBoardExporter(d), PrometheusExporter(port=9100)], interval_s=10)
    proc.start()                      # raises for an exporter's configuration error only
    proc.submit(samples)              # never blocks on a backend, never raises
    proc.add_source("goodput", src)   # src.collect(now, final) -> samples: in the child at once, then each interval
    proc.flush(timeout_s=5)           # collect now and export everything pending; True if all went out
    proc.remove_source("goodput")     # one last collect and export of that source
    proc.stop(timeout_s=10)           # final flush, then the child exits; returns within timeout_s
    h = proc.stop_in_background(10)   # the same, returning at once: a StopHandle (h.wait() -> bool)

Submitted samples are exported as soon as they arrive, or, with `export_interval_s`, in
one batch per exporter every `export_interval_s` (latest value per series); source
collects and `flush` export at once.

Exporters and sources must be picklable (ours keep their live state out of the pickle).
In the child each exporter gets its own BackgroundWorker thread that keeps the latest
sample of every series (name + labels): a failed export is retried with backoff and the
next successful one carries the latest values, so a slow or broken backend never holds up
the others. The parent restarts a child that dies (re-sending its sources and the latest
submitted samples); a child whose parent dies does a final flush and exits.

The child is a fresh interpreter started with `subprocess` (spawn semantics) rather than a
multiprocessing context, so the user's `__main__` module (the training script) is never
re-imported in it.

`stop_in_background` and `remove_source_in_background` send their request at once (the
child starts the final collect right away) and leave the wait to one parent-side
BackgroundWorker shared by every ExporterProcess (`_Finisher`): it sees each reply or
deadline through, kills a child that overstays, and finishes the returned `StopHandle`. A
training process that stops its uploaders right before it records its job end is held up
for the time a message takes, not for the final upload. At interpreter exit the pending
ones are waited for, each until its own deadline, so the final upload is not cut short.
"""

from __future__ import annotations

import atexit
import logging
import os
import pickle
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from multiprocessing.connection import wait as connection_wait
from typing import Any, Protocol, runtime_checkable

from mlgoodput._spawn import helper_env, start_python
from mlgoodput._worker import BackgroundWorker, at_fork_in_child
from mlgoodput.export._base import Exporter, Sample
from mlgoodput.export._contract import check_exporter
from mlgoodput.export._series import SeriesKey as SeriesKey  # for the modules beside it
from mlgoodput.export._series import SeriesLabels

log = logging.getLogger("mlgoodput")


@runtime_checkable
class SampleSource(Protocol):
    """Something the child asks for samples every interval (a monitor computing reports).

    `final` is True for the collects of flush, remove_source and stop: the values that must
    be exact (a source may refresh costly values less often otherwise)."""

    def collect(self, now: float, final: bool = False) -> Sequence[Sample]: ...


def series_key(s: Sample) -> SeriesKey:
    """The identity of a time series: the sample name and its sorted labels."""
    labels = s.labels
    if type(labels) is SeriesLabels:  # computed once for the series (see _series)
        info = labels.memo.get(s.name)
        return (info or labels.info(s.name)).key
    raw = (s.name, tuple(labels.items()))
    try:
        got = _KEYS.get(raw)
    except TypeError:  # a label that cannot be hashed: named each time
        return (s.name, tuple(sorted((str(k), str(v)) for k, v in s.labels.items())))
    if got is None:
        got = (s.name, tuple(sorted((str(k), str(v)) for k, v in raw[1])))
        if all(type(k) is str and type(v) is str for k, v in raw[1]):  # else 1 == True, "1" != "True"
            if len(_KEYS) >= 100_000:  # series come and go (windows, ranks): keep it bounded
                _KEYS.clear()
            _KEYS[raw] = got
    return got


_KEYS: dict[tuple[str, tuple[tuple[Any, Any], ...]], SeriesKey] = {}  # (name, label items) -> series_key


def latest_by_series(samples: Sequence[Sample]) -> dict[SeriesKey, Sample]:
    """The last sample of each series (series_key), in the order each series first came."""
    out: dict[SeriesKey, Sample] = {}
    for s in samples:
        labels = s.labels
        if type(labels) is SeriesLabels:  # series_key, inlined for the monitor's samples
            info = labels.memo.get(s.name)
            out[(info or labels.info(s.name)).key] = s
        else:
            out[series_key(s)] = s
    return out


class ExporterError(RuntimeError):
    """The exporter process could not start (an exporter failed to open, the child died)."""


#: How long past its deadline a background stop may still take: the supervisor's close, a
#: child's exit or kill (see `ExporterProcess._end_child`).
FINISH_MARGIN_S = 2.0


class StopHandle:
    """A stop or final upload that an ExporterProcess finishes in the background.

    `sent` says whether the request reached the child; `wait()` blocks until it is over and
    says whether everything went out; `deadline` (time.monotonic) is when it ends at the
    latest, one way or the other (plus FINISH_MARGIN_S for ending the child)."""

    def __init__(self, what: str, deadline: float, *, sent: bool = True) -> None:
        self.what = what
        self.deadline = deadline
        self.sent = sent
        self._event = threading.Event()
        self._ok = False
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[bool], None]] = []

    @property
    def done(self) -> bool:
        return self._event.is_set()

    @property
    def ok(self) -> bool:
        """True once it is over and everything went out."""
        return self._event.is_set() and self._ok

    def wait(self, timeout_s: float | None = None) -> bool:
        """Wait until it is over (`timeout_s` None: until its deadline and the margin); True
        when it completed in full, False when it failed or is still going."""
        if timeout_s is None:
            timeout_s = max(0.0, self.deadline - time.monotonic()) + FINISH_MARGIN_S
        return self._event.wait(max(0.0, timeout_s)) and self._ok

    def add_done_callback(self, fn: Callable[[bool], None]) -> None:
        """Call `fn(ok)` once it is over (at once when it already is), on the finishing thread."""
        with self._lock:
            if not self._event.is_set():
                self._callbacks.append(fn)
                return
        fn(self._ok)

    def _finish(self, ok: bool) -> None:
        with self._lock:
            if self._event.is_set():
                return
            self._ok = ok
            self._event.set()
            callbacks, self._callbacks = self._callbacks, []
        for fn in callbacks:
            try:
                fn(ok)
            except Exception as e:  # a caller's callback never stops the others
                log.debug("mlgoodput: a stop callback failed: %s", e)

    def __repr__(self) -> str:
        state = ("ok" if self._ok else "failed") if self.done else "running"
        return f"StopHandle({self.what!r}, {state})"


class ExporterProcess:
    """A supervised child process that owns exporters and sources (see the module docstring)."""

    def __init__(
        self,
        exporters: Sequence[Exporter],
        *,
        interval_s: float = 10.0,
        export_interval_s: float | None = None,
        max_backoff_s: float = 60.0,
        name: str = "mlgoodput-exporter",
        restart: bool = True,
        start_timeout_s: float = 60.0,
    ) -> None:
        if isinstance(interval_s, bool) or not isinstance(interval_s, (int, float)):
            raise TypeError(f"interval_s must be a number of seconds, got {interval_s!r}")
        if not interval_s > 0:
            raise ValueError(f"interval_s must be > 0, got {interval_s!r}")
        if export_interval_s is not None and not export_interval_s > 0:
            raise ValueError(f"export_interval_s must be > 0 or None, got {export_interval_s!r}")
        if not max_backoff_s > 0:
            raise ValueError(f"max_backoff_s must be > 0, got {max_backoff_s!r}")
        self.exporters = [check_exporter(e) for e in exporters]  # the contract: _contract.py
        self.interval_s = float(interval_s)
        self.export_interval_s = export_interval_s
        self.max_backoff_s = float(max_backoff_s)
        self.name = name
        self.restart = restart
        self.start_timeout_s = start_timeout_s
        self.restarts = 0
        self._lock = threading.RLock()
        self._sources: dict[str, SampleSource] = {}
        self._latest: dict[SeriesKey, Sample] = {}
        self._popen: subprocess.Popen[bytes] | None = None
        self._addresses: list[str | None] = [None] * len(self.exporters)
        self._conn: Connection | None = None
        self._seq = 0
        self._replies: dict[int, tuple[threading.Event, list[Any]]] = {}
        self._supervisor: _Supervisor | None = None
        self._stopping = False
        self._stopped = False
        self._stop_handle: StopHandle | None = None
        # when the child is done with the background requests sent so far (time.monotonic):
        # it takes them one at a time, so a later one's deadline counts from there
        self._busy_until = 0.0

    # -- public API ----------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        p = self._popen
        return p.pid if p is not None else None

    @property
    def alive(self) -> bool:
        p = self._popen
        return p is not None and p.poll() is None

    @property
    def addresses(self) -> list[str | None]:
        """Where each exporter serves (a PrometheusExporter's URL, its port picked by then),
        as the child reported when it started; None for one that does not serve (yet)."""
        return list(self._addresses)

    def start(self, timeout_s: float | None = None) -> None:
        """Start the child and open every exporter in it. A configuration error raises
        (ValueError, TypeError); a backend that cannot open yet (OSError) is logged here and
        retried in the child; ExporterError when the child itself cannot start."""
        with self._lock:
            if self._popen is not None:
                return
            if self._stopped:
                raise ExporterError(f"{self.name}: stopped; build a new ExporterProcess")
            self._spawn(self.start_timeout_s if timeout_s is None else timeout_s)
            self._supervisor = _Supervisor(self)
            self._supervisor.start()

    def submit(self, samples: Sequence[Sample]) -> None:
        """Hand samples over for export; the latest value of each series wins. Never raises."""
        samples = list(samples)
        if not samples:
            return
        with self._lock:
            self._latest.update(latest_by_series(samples))
            self._send_quietly(("samples", samples))

    def add_source(self, key: str, source: SampleSource, *, upload_now: bool = True) -> None:
        """Have the child call `source.collect(now)` at once (unless `upload_now` is False),
        then every interval (raises if not picklable)."""
        if not isinstance(source, SampleSource):
            raise TypeError(f"source must have collect(now), got {source!r}")
        pickle.dumps(source)
        with self._lock:
            if key in self._sources:
                raise ValueError(f"a source named {key!r} is already running")
            self._sources[key] = source
            self._send_quietly(("add", key, source, upload_now))

    def has_source(self, key: str) -> bool:
        return key in self._sources

    def remove_source(self, key: str, *, final: bool = True, timeout_s: float | None = 30.0) -> bool:
        """Stop calling a source, after one last collect and export unless `final` is False."""
        with self._lock:
            if self._sources.pop(key, None) is None:
                return True
        return self._request(("remove", key, final), timeout_s)

    def remove_source_in_background(self, key: str, *, final: bool = True, timeout_s: float = 30.0) -> StopHandle:
        """`remove_source` without the wait: the source is gone and the request on its way
        when this returns; the handle says when the last collect and export are done."""
        timeout_s = _seconds(timeout_s)
        with self._lock:
            known = self._sources.pop(key, None) is not None
        if not known:
            handle = StopHandle(f"{self.name}: remove {key}", time.monotonic())
            handle._finish(True)
            return handle
        deadline = self._background_deadline(timeout_s)
        req = self._send_request(("remove", key, final), timeout_s)
        handle = StopHandle(f"{self.name}: remove {key}", deadline, sent=req is not None)
        _finish_in_background(_RemoveDone(self, handle, req))
        return handle

    def flush(self, timeout_s: float | None = 30.0) -> bool:
        """Collect every source now and export all that is pending; True if every exporter succeeded."""
        return self._request(("flush",), timeout_s)

    def stop(self, timeout_s: float | None = 30.0, *, final_flush: bool = True) -> bool:
        """Final flush (unless told not to), shut the exporters down and end the child.

        Returns within `timeout_s` whatever the backends do: a child that does not finish
        in time is killed. True if everything was exported and shut down cleanly.
        """
        with self._lock:
            pending = self._stop_handle
            if pending is None:
                if self._stopped:
                    return True
                self._stopping = True
        if pending is not None:  # stopping in the background already: wait for that one
            return pending.wait(timeout_s)
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        left = None if deadline is None else max(0.0, deadline - time.monotonic() - 0.3)
        ok = self._request(("stop", final_flush), left) if self.alive else False
        return self._end_child(deadline) and ok

    def stop_in_background(self, timeout_s: float = 30.0, *, final_flush: bool = True) -> StopHandle:
        """`stop`, returning at once: the stop request (with its final flush unless told
        not to) is on its way when this returns, and the rest (waiting for the child, ending
        it by the deadline) happens on a background thread; the handle says how it ended.

        The deadline counts from when the child is done with the background requests sent
        before (`remove_source_in_background`): it takes them one at a time. At interpreter
        exit a stop still going on is waited for until its deadline."""
        timeout_s = _seconds(timeout_s)
        with self._lock:
            if self._stop_handle is not None:
                return self._stop_handle
            deadline = self._background_deadline(timeout_s)
            handle = self._stop_handle = StopHandle(f"{self.name}: stop", deadline)
            if self._stopped:
                handle._finish(True)
                return handle
            self._stopping = True
        req = self._send_request(("stop", final_flush), max(0.0, timeout_s - 0.3)) if self.alive else None
        handle.sent = req is not None
        _finish_in_background(_StopDone(self, handle, req))
        return handle

    def upload_once_in_background(self, key: str, source: SampleSource, timeout_s: float = 30.0) -> StopHandle:
        """One collect and export of `source`, then the end, by this process before it was
        started: the start, the upload and the stop all happen in the background (the
        seed's stop of an uploader that never ran). `timeout_s` bounds the upload and stop,
        counted once the child has started."""
        if not isinstance(source, SampleSource):
            raise TypeError(f"source must have collect(now), got {source!r}")
        pickle.dumps(source)
        timeout_s = _seconds(timeout_s)
        with self._lock:
            if self._popen is not None or self._stopped or self._stop_handle is not None:
                raise ExporterError(f"{self.name}: upload_once_in_background needs a process not started yet")
            # until the child is up its deadline is a guess: the start's own bound, then the upload's
            handle = self._stop_handle = StopHandle(
                f"{self.name}: upload {key} once", time.monotonic() + self.start_timeout_s + timeout_s
            )
        _finish_in_background(_UploadOnce(self, key, source, handle, timeout_s))
        return handle

    # -- internals -------------------------------------------------------------------
    def _forget_after_fork(self) -> None:
        self._lock = threading.RLock()
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()  # our copy only: the parent's end stays open
            except OSError:
                pass
        self._popen = None
        self._replies = {}
        self._stopped = True

    def _spawn(self, timeout_s: float) -> None:
        parent_sock, child_sock = socket.socketpair()
        code = f"from mlgoodput.export._process_child import child_main; child_main({child_sock.fileno()})"
        try:
            # Out of the terminal's process group, and SIGINT ignored: a Ctrl-C reaches the whole
            # foreground group (even while this child is still starting), and the parent must still
            # be able to make its final upload through this process after it.
            popen = start_python(
                ["-c", code],
                extra_env=helper_env(),
                ignore_sigint=True,
                pass_fds=[child_sock.fileno()],
                stdin=subprocess.DEVNULL,
                process_group=0,
            )
        finally:
            child_sock.close()
        conn = Connection(parent_sock.detach())
        init = (
            "init",
            self.exporters,
            self.interval_s,
            self.export_interval_s,
            self.max_backoff_s,
            self.name,
            os.getpid(),
        )
        try:
            conn.send(init)
            if not conn.poll(timeout_s):
                raise ExporterError(f"{self.name}: the exporter process did not start within {timeout_s} s")
            reply = conn.recv()
        except (OSError, EOFError) as e:
            popen.kill()
            conn.close()
            raise ExporterError(f"{self.name}: the exporter process died while starting: {e}") from e
        except ExporterError:
            popen.kill()
            conn.close()
            raise
        if reply[0] != "ready":
            popen.wait(5)
            conn.close()
            kind, message = reply[1], reply[2]
            exc: type[Exception] = ValueError if kind in ("ValueError", "TypeError") else ExporterError
            raise exc(f"{self.name}: an exporter could not open: {message}")
        for problem in reply[1] if len(reply) > 1 else ():  # said here too: the training process's log
            log.warning("%s: %s", self.name, problem)
        if len(reply) > 2:
            self._addresses = list(reply[2])
        self._popen, self._conn = popen, conn
        for key, src in self._sources.items():
            conn.send(("add", key, src, True))  # a restarted child uploads at once too
        if self._latest:
            conn.send(("samples", list(self._latest.values())))

    def _send_quietly(self, msg: tuple[Any, ...]) -> bool:
        conn = self._conn
        if conn is None:
            return False
        try:
            conn.send(msg)
            return True
        except (OSError, ValueError) as e:
            log.debug("%s: send failed (%s); the supervisor will restart the child", self.name, e)
            return False

    def _background_deadline(self, timeout_s: float) -> float:
        """The deadline of a background request sent now: `timeout_s` from when the child is
        done with the ones before it (they are taken in order)."""
        with self._lock:
            start = max(time.monotonic(), self._busy_until)
            self._busy_until = start + timeout_s
            return self._busy_until

    def _send_request(self, msg: tuple[Any, ...], timeout_s: float | None) -> _Request | None:
        """Send a request whose reply the supervisor delivers; None when it could not go."""
        ev = threading.Event()
        box: list[Any] = []
        with self._lock:
            self._seq += 1
            seq = self._seq
            self._replies[seq] = (ev, box)
            budget = None if timeout_s is None else max(0.0, timeout_s - 0.2)
            conn = self._conn
            if self._send_quietly(("req", seq, msg[0], budget, *msg[1:])):
                return _Request(seq, ev, box, conn)
            self._replies.pop(seq, None)
        return None

    def _unanswerable(self, req: _Request) -> bool:
        """True when no reply to `req` can come any more: the supervisor has read the socket
        it went out on to its end and dropped it (the child's replies come before the end, so
        any reply is delivered by then), or no supervisor is left to read it.

        The child's exit alone is not enough: a child exits right after its stop's reply,
        which may still be in the socket for the supervisor to read."""
        if self._conn is not req.conn:
            return True
        sup = self._supervisor
        return (sup is None or not sup.running) and not self.alive

    def _forget_request(self, req: _Request) -> None:
        with self._lock:
            self._replies.pop(req.seq, None)

    def _request(self, msg: tuple[Any, ...], timeout_s: float | None) -> bool:
        req = self._send_request(msg, timeout_s)
        if req is None:
            return False
        try:
            deadline = None if timeout_s is None else time.monotonic() + timeout_s
            while not req.event.wait(0.05):
                if self._unanswerable(req):
                    return req.ok  # (delivered as the socket ended: the event was set meanwhile)
                if deadline is not None and time.monotonic() >= deadline:
                    return False
            return req.ok
        finally:
            self._forget_request(req)

    def _end_child(self, deadline: float | None) -> bool:
        """After the stop request: close the supervisor, wait for the child's exit until the
        deadline (killing it after that) and close the socket. True unless it was killed."""

        def left() -> float | None:
            return None if deadline is None else max(0.0, deadline - time.monotonic())

        ok = True
        sup = self._supervisor
        if sup is not None:
            sup.interrupt()
            sup.close(min(0.5, left() or 0.5))
        p = self._popen
        if p is not None:
            try:
                w = left()
                p.wait(2.0 if w is None else max(0.05, min(2.0, w)))
            except subprocess.TimeoutExpired:
                pass
            if p.poll() is None:
                p.kill()
                try:
                    p.wait(1.0)
                except subprocess.TimeoutExpired:
                    pass
                ok = False
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            self._stopped = True
        return ok

    def _poll_child(self, wake: int | None = None) -> None:
        """Supervisor round: wait for the child's replies and deliver them; restart a dead
        child. The wait ends with a reply, the child's exit (its end of the socket closes),
        `wake` becoming readable (stop) or after SUPERVISE_S: an idle training process is
        not woken to look."""
        conn = self._conn
        if conn is not None:
            waiting: list[Any] = [conn] if wake is None else [conn, wake]
            try:
                timeout: float = SUPERVISE_S
                while conn in connection_wait(waiting, timeout):
                    self._deliver(conn.recv())
                    timeout = 0.0  # what else is there now, then the round is over
            except (EOFError, OSError):
                self._child_closed(conn)
            else:
                p = self._popen
                if self._conn is conn and p is not None and p.poll() is not None:
                    self._drain_dead(conn)
        elif wake is not None:
            connection_wait([wake], SUPERVISE_S)
        else:
            time.sleep(0.25)
        with self._lock:
            if self._stopping or self._stopped or self.alive:
                return
            code = self._popen.returncode if self._popen is not None else None
            if not self.restart:
                return
            log.warning("%s: exporter process ended (exit code %s); restarting it", self.name, code)
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            self._popen = None
            try:
                self._spawn(self.start_timeout_s)
                self.restarts += 1
            except Exception as e:
                raise ExporterError(f"{self.name}: could not restart the exporter process: {e}") from e

    def _deliver(self, msg: tuple[Any, ...]) -> None:
        """Hand a reply of the child to the request that waits for it."""
        if msg[0] == "done":
            with self._lock:
                waiter = self._replies.get(msg[1])
            if waiter is not None:
                waiter[1].append(msg[2])
                waiter[0].set()

    def _drain_dead(self, conn: Connection) -> None:
        """The child is dead but its socket did not end (another process holds a copy): what
        it sent is all there, so it is read and delivered, then the socket is dropped. The
        requests still waiting then learn that no reply comes (`_unanswerable`)."""
        try:
            while conn.poll(0):
                self._deliver(conn.recv())
        except (EOFError, OSError):
            pass
        self._child_closed(conn)

    def _child_closed(self, conn: Connection) -> None:
        """The child's end of the socket closed: it is ending. Its socket is dropped (no more
        waits on it: they would return at once) and its exit awaited a little, so the
        supervisor sees it dead and restarts it now."""
        with self._lock:
            if self._conn is conn:
                self._conn = None
                conn.close()
        p = self._popen
        if p is not None:
            try:
                p.wait(1.0)
            except subprocess.TimeoutExpired:
                pass


#: The supervisor's longest wait: the child's replies and its exit wake it at once, so this
#: only bounds how long it goes without looking (a training process is woken that rarely).
SUPERVISE_S = 5.0


class _Supervisor(BackgroundWorker):
    """Parent-side thread: delivers the child's replies and restarts it if it dies."""

    after_fork = "stop"  # a forked child (a data-loader worker) gets an inert copy

    def __init__(self, proc: ExporterProcess) -> None:
        super().__init__(proc.name + "-supervisor", interval_s=0.01, max_backoff_s=5.0)
        self._proc = proc
        # readable once `interrupt` wrote to it: the waits of every round after return at once
        self._wake_r, self._wake_w = os.pipe()

    def interrupt(self) -> None:
        """End the round's wait and let no later round wait (before close)."""
        if self._wake_w >= 0:
            try:
                os.write(self._wake_w, b"x")
            except OSError:
                pass

    def _work(self) -> bool:
        wake = self._wake_r
        self._proc._poll_child(wake if wake >= 0 else None)
        return True

    def _on_close(self, timeout_s: float) -> None:
        if not self.abandoned:  # (a round left running still waits on them: left open)
            self._close_pipe()

    def _close_pipe(self) -> None:
        """Close the wake pipe once (its numbers may belong to another file afterwards: a
        fork after the close must not close them again)."""
        fds, self._wake_r, self._wake_w = (self._wake_r, self._wake_w), -1, -1
        for fd in fds:
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass

    def _on_fork_in_child(self) -> None:
        """A process forked from the training process (a data-loader worker) must not
        supervise, restart or talk to the parent's exporter process: it gets an inert copy."""
        self._close_pipe()  # the fork's copies
        self._proc._forget_after_fork()


def _seconds(timeout_s: object) -> float:
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not timeout_s >= 0:
        raise ValueError(f"timeout_s must be a number of seconds >= 0, got {timeout_s!r}")
    return float(timeout_s)


class _Request:
    """A request sent to the child: its reply arrives through the supervisor."""

    __slots__ = ("box", "conn", "event", "seq")

    def __init__(self, seq: int, event: threading.Event, box: list[Any], conn: Connection | None) -> None:
        self.seq, self.event, self.box = seq, event, box
        self.conn = conn  # the socket it went out on: its reply can come through that one only

    @property
    def ok(self) -> bool:
        return bool(self.event.is_set() and self.box and self.box[0])


class _RemoveDone:
    """Sees a background `remove_source` through: over with its reply, the child's death or
    the deadline."""

    def __init__(self, proc: ExporterProcess, handle: StopHandle, req: _Request | None) -> None:
        self.proc, self.handle, self.req = proc, handle, req

    def poll(self) -> bool:
        req = self.req
        if (
            req is not None
            and not req.event.is_set()
            and not self.proc._unanswerable(req)
            and time.monotonic() < self.handle.deadline
        ):
            return False
        if req is not None:
            self.proc._forget_request(req)
        self.handle._finish(req is not None and req.ok)
        return True

    def fail(self) -> None:
        self.handle._finish(False)


class _StopDone:
    """Sees a background `stop` through: waits for the reply (or the child's death, or the
    deadline), then ends the child as `stop` does."""

    def __init__(self, proc: ExporterProcess, handle: StopHandle, req: _Request | None) -> None:
        self.proc, self.handle, self.req = proc, handle, req

    def poll(self) -> bool:
        req, deadline = self.req, self.handle.deadline
        if (
            req is not None
            and not req.event.is_set()
            and not self.proc._unanswerable(req)
            and time.monotonic() < deadline - 0.3
        ):
            return False
        ok = req is not None and req.ok
        if req is not None:
            self.proc._forget_request(req)
        ok = self.proc._end_child(deadline) and ok
        self.handle._finish(ok)
        return True

    def fail(self) -> None:
        self.handle._finish(False)


class _UploadOnce:
    """`upload_once_in_background`: its first poll starts the child (blocking: a start is
    bounded by the process's start timeout) and sends the source and the stop; the rest is a
    `_StopDone`."""

    def __init__(
        self, proc: ExporterProcess, key: str, source: SampleSource, handle: StopHandle, timeout_s: float
    ) -> None:
        self.proc, self.key, self.source, self.handle, self.timeout_s = proc, key, source, handle, timeout_s
        self.stop: _StopDone | None = None

    def poll(self) -> bool:
        if self.stop is None:
            proc = self.proc
            try:
                proc.start()
            except Exception as e:  # said in the training process's log; the handle says it failed
                log.warning("%s: the final upload of %r could not start: %s", proc.name, self.key, e)
                with proc._lock:
                    proc._stopped = True
                self.handle._finish(False)
                return True
            proc.add_source(self.key, self.source, upload_now=False)  # the stop's collect uploads it
            self.handle.deadline = time.monotonic() + self.timeout_s
            with proc._lock:
                proc._stopping = True
            req = proc._send_request(("stop", True), max(0.0, self.timeout_s - 0.3))
            self.stop = _StopDone(proc, self.handle, req)
        return self.stop.poll()

    def fail(self) -> None:
        self.handle._finish(False)


class _Finisher(BackgroundWorker):
    """The parent-side thread that sees every background stop and final upload through.

    Its items are polled in turn (each poll returns at once while the child works, so one
    slow backend does not hold the others' results back); a round with items left is
    "not done", so the worker comes back after FINISH_POLL_S and `flush()` waits for all."""

    after_fork = "restart"  # a forked child gets an empty one of its own

    def __init__(self) -> None:
        super().__init__("mlgoodput-exporter-finisher", interval_s=3600.0, max_backoff_s=FINISH_POLL_S)
        self._items: list[_RemoveDone | _StopDone | _UploadOnce] = []

    def _work(self) -> bool:
        self._items.extend(self._take())
        left = []
        for item in self._items:
            try:
                if not item.poll():
                    left.append(item)
            except Exception as e:  # reported once; the item is over (failed), never retried forever
                self._report_error(e)
                item.fail()
        self._items = left
        return not left

    def _backlog(self) -> int:
        return len(self._items) + super()._backlog()

    def latest_deadline(self) -> float:
        """The latest deadline among the stops still going on (0.0: none)."""
        items = list(self._items) + self._queue.items()
        return max((it.handle.deadline for it in items), default=0.0)

    def _on_fork_in_child(self) -> None:
        self._items = []  # the parent's: it sees them through


#: How often the finisher looks at the stops still going on.
FINISH_POLL_S = 0.05

_finisher: _Finisher | None = None
_finisher_lock = threading.Lock()


def _finish_in_background(item: _RemoveDone | _StopDone | _UploadOnce) -> None:
    global _finisher
    with _finisher_lock:
        f = _finisher
        if f is None or f.closed:
            if f is None:
                atexit.register(_finish_at_exit)
            f = _finisher = _Finisher()
    if not f.submit(item):
        item.fail()


def _finish_at_exit() -> None:
    """Wait for the stops still going on, each until its own deadline: the final upload a
    stop handed over is not cut short by the interpreter's exit."""
    f = _finisher
    if f is None:
        return
    try:
        if f._backlog():
            f.flush(max(0.0, f.latest_deadline() - time.monotonic()) + FINISH_MARGIN_S)
    except Exception:  # at exit, never raise
        pass


def _reset_finisher_lock_in_child() -> None:
    global _finisher_lock
    _finisher_lock = threading.Lock()


at_fork_in_child(_reset_finisher_lock_in_child)
