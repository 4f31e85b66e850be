"""ExporterProcess: run exporters (and optional sample sources) in a child process.

Uploading never runs on the training process's threads: the parent only starts and stops a
child Python interpreter and hands it samples through a socket pair. The API:

    proc = ExporterProcess([TensorBoardExporter(d), PrometheusExporter(port=9100)], interval_s=10)
    proc.start()                      # raises for an exporter's configuration error only
    proc.submit(samples)              # never blocks on a backend, never raises
    proc.add_source("goodput", src)   # src.collect(now, final) -> samples, called in the child each interval
    proc.flush(timeout_s=5)           # collect now and export everything pending; True if all went out
    proc.remove_source("goodput")     # one last collect and export of that source
    proc.stop(timeout_s=10)           # final flush, then the child exits; returns within timeout_s

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
"""

from __future__ import annotations

import logging
import os
import pickle
import socket
import subprocess
import threading
import time
from collections.abc import Sequence
from multiprocessing.connection import Connection
from multiprocessing.connection import wait as connection_wait
from typing import Any, Protocol, runtime_checkable

from mlgoodput._spawn import helper_env, start_python
from mlgoodput._worker import BackgroundWorker
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
        self._conn: Connection | None = None
        self._seq = 0
        self._replies: dict[int, tuple[threading.Event, list[Any]]] = {}
        self._supervisor: _Supervisor | None = None
        self._stopping = False
        self._stopped = False

    # -- public API ----------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        p = self._popen
        return p.pid if p is not None else None

    @property
    def alive(self) -> bool:
        p = self._popen
        return p is not None and p.poll() is None

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

    def add_source(self, key: str, source: SampleSource) -> None:
        """Have the child call `source.collect(now)` every interval (raises if not picklable)."""
        if not isinstance(source, SampleSource):
            raise TypeError(f"source must have collect(now), got {source!r}")
        pickle.dumps(source)
        with self._lock:
            if key in self._sources:
                raise ValueError(f"a source named {key!r} is already running")
            self._sources[key] = source
            self._send_quietly(("add", key, source))

    def has_source(self, key: str) -> bool:
        return key in self._sources

    def remove_source(self, key: str, *, final: bool = True, timeout_s: float | None = 30.0) -> bool:
        """Stop calling a source, after one last collect and export unless `final` is False."""
        with self._lock:
            if self._sources.pop(key, None) is None:
                return True
        return self._request(("remove", key, final), timeout_s)

    def flush(self, timeout_s: float | None = 30.0) -> bool:
        """Collect every source now and export all that is pending; True if every exporter succeeded."""
        return self._request(("flush",), timeout_s)

    def stop(self, timeout_s: float | None = 30.0, *, final_flush: bool = True) -> bool:
        """Final flush (unless told not to), shut the exporters down and end the child.

        Returns within `timeout_s` whatever the backends do: a child that does not finish
        in time is killed. True if everything was exported and shut down cleanly.
        """
        with self._lock:
            if self._stopped:
                return True
            self._stopping = True
        deadline = None if timeout_s is None else time.monotonic() + timeout_s

        def left(margin: float = 0.0) -> float | None:
            return None if deadline is None else max(0.0, deadline - time.monotonic() - margin)

        ok = self._request(("stop", final_flush), left(0.3)) if self.alive else False
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
        self._popen, self._conn = popen, conn
        for key, src in self._sources.items():
            conn.send(("add", key, src))
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

    def _request(self, msg: tuple[Any, ...], timeout_s: float | None) -> bool:
        ev = threading.Event()
        box: list[Any] = []
        with self._lock:
            self._seq += 1
            seq = self._seq
            self._replies[seq] = (ev, box)
            budget = None if timeout_s is None else max(0.0, timeout_s - 0.2)
            sent = self._send_quietly(("req", seq, msg[0], budget, *msg[1:]))
        try:
            if not sent:
                return False
            deadline = None if timeout_s is None else time.monotonic() + timeout_s
            while not ev.wait(0.05):
                if not self.alive:
                    return False
                if deadline is not None and time.monotonic() >= deadline:
                    return False
            return bool(box and box[0])
        finally:
            with self._lock:
                self._replies.pop(seq, None)

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
                    msg = conn.recv()
                    if msg[0] == "done":
                        with self._lock:
                            waiter = self._replies.get(msg[1])
                        if waiter is not None:
                            waiter[1].append(msg[2])
                            waiter[0].set()
                    timeout = 0.0  # what else is there now, then the round is over
            except (EOFError, OSError):
                self._child_closed(conn)
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
