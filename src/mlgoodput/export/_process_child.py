"""The exporter process's side of ExporterProcess: one thread per exporter, sources, replies."""

from __future__ import annotations

import gc
import logging
import os
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from multiprocessing.connection import Connection
from multiprocessing.connection import wait as connection_wait
from typing import Any

from mlgoodput._worker import BackgroundWorker
from mlgoodput.export import _contract
from mlgoodput.export._base import Exporter, Sample
from mlgoodput.export._process import SampleSource, SeriesKey, latest_by_series

log = logging.getLogger("mlgoodput")


class _ExportWorker(BackgroundWorker):
    """Child-side thread for one exporter: keeps the latest sample per series and exports them."""

    close_gives_up_on_failure = True  # on the way out a failing backend is tried once

    def __init__(
        self, exporter: Exporter, name: str, max_backoff_s: float, interval_s: float, opened: bool = True
    ) -> None:
        super().__init__(name, interval_s=interval_s, max_backoff_s=max_backoff_s)
        self.exporter = exporter
        self._pending: dict[SeriesKey, Sample] = {}
        self._plock = threading.Lock()
        self.exported = 0
        self.opened = opened  # False: its start() met a backend failure and is retried first

    def put(self, samples: Mapping[SeriesKey, Sample], wake: bool = True) -> None:
        with self._plock:
            self._pending.update(samples)
        if wake:
            self.wake()

    def _work(self) -> bool:
        if not self.opened:  # raises while the backend still fails: retried with backoff
            _contract.start(self.exporter)
            self.opened = True
            log.warning("%s: %r opened; uploads resume", self.name, self.exporter)
        with self._plock:
            batch, self._pending = self._pending, {}
        if not batch:
            return True
        try:
            self.exporter.export(list(batch.values()))
        except BaseException:
            with self._plock:
                for k, s in batch.items():
                    self._pending.setdefault(k, s)  # a newer value that came meanwhile wins
            raise
        self.exported += len(batch)
        with self._plock:
            return not self._pending


class _Child:
    def __init__(
        self,
        conn: Connection,
        exporters: list[Exporter],
        interval_s: float,
        export_interval_s: float | None,
        max_backoff_s: float,
        name: str,
        ppid: int,
        unopened: frozenset[int] = frozenset(),
    ) -> None:
        self.conn = conn
        self.interval_s = interval_s
        self.batch_submits = export_interval_s is not None
        self.name = name
        self.ppid = ppid
        self.sources: dict[str, SampleSource] = {}
        self.rounds = 0  # collect calls so far
        # without batching a worker has nothing to do until samples wake it (a failed round is
        # retried on its backoff): no idle rounds, each of which costs ~70 us of CPU a second
        self.workers = [
            _ExportWorker(
                e, f"{name}-{type(e).__name__}-{i}", max_backoff_s, export_interval_s or IDLE_S, id(e) not in unopened
            )
            for i, e in enumerate(exporters)
        ]
        self._parent = _parent_watch(ppid)

    def distribute(self, samples: Sequence[Sample], wake: bool = True) -> None:
        if samples:
            latest = latest_by_series(samples)
            for w in self.workers:
                w.put(latest, wake)

    def collect(self, keys: Sequence[str] | None = None, final: bool = True) -> None:
        if self.rounds:
            # what the exporter threads built since the last round leaves the collector's view
            # too: their first export imports their backend (tensorboardX, protobuf, ...: some
            # 170,000 objects), which the collections this round triggers would walk (~100 ms)
            gc.freeze()
        now = time.time()
        # no collection while the sources run: a round allocates many short-lived objects (at
        # 256 hosts some 2,500 stored rows and 1,600 samples) but makes no garbage cycles to
        # speak of, and the collections they triggered cost ~1.5 ms a round; the round's
        # leftovers are collected as usual once it is over (settle_gc)
        was = gc.isenabled()
        gc.disable()
        try:
            for key in list(self.sources) if keys is None else keys:
                src = self.sources.get(key)
                if src is None:
                    continue
                try:
                    self.distribute(list(src.collect(now, final)))
                except Exception as e:
                    log.warning("%s: source %r failed: %s (will retry next interval)", self.name, key, e)
        finally:
            if was:
                gc.enable()
        self.rounds += 1
        settle_gc(self.rounds)

    def flush_workers(self, timeout_s: float | None, *, final: bool = False) -> bool:
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        ok = True
        for w in self.workers:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ok = (w.final_flush(left) if final else w.flush(left)) and ok
        return ok

    def shutdown(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        ok = True
        for w in self.workers:
            ok = w.close(max(0.0, deadline - time.monotonic())) and ok
        threads = []
        for w in self.workers:
            t = threading.Thread(
                target=_quiet_shutdown, args=(w.exporter, max(0.1, deadline - time.monotonic())), daemon=True
            )
            t.start()
            threads.append(t)
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
            ok = ok and not t.is_alive()
        for src in self.sources.values():
            close = getattr(src, "close", None)
            if callable(close):
                try:
                    close()
                except Exception:
                    pass
        return ok

    def run(self) -> None:
        next_tick = time.monotonic() + self.interval_s
        watch = self._parent
        # with a pidfd the parent's exit wakes the loop; else its pid is looked at every second
        cap = self.interval_s if watch is not None else PARENT_POLL_S
        waiting: list[Any] = [self.conn] if watch is None else [self.conn, watch]
        while True:
            wait = max(0.0, min(next_tick - time.monotonic(), cap))
            try:
                ready = connection_wait(waiting, wait)
                msg = self.conn.recv() if self.conn in ready else None
            except (EOFError, OSError):
                msg = ("parent-gone",)
            if msg is None and (watch in ready if watch is not None else os.getppid() != self.ppid):
                msg = ("parent-gone",)
            if msg is not None and self.handle(msg):
                return
            if time.monotonic() >= next_tick:
                self.collect(final=False)
                next_tick = max(next_tick + self.interval_s, time.monotonic() + 0.1 * self.interval_s)

    def handle(self, msg: tuple[Any, ...]) -> bool:
        op = msg[0]
        if op == "samples":
            self.distribute(msg[1], wake=not self.batch_submits)
        elif op == "add":
            self.sources[msg[1]] = msg[2]
            opener = getattr(msg[2], "open", None)
            if callable(opener):
                try:
                    opener()
                except Exception as e:
                    log.warning("%s: source %r failed to open: %s", self.name, msg[1], e)
            if len(msg) < 4 or msg[3]:  # its first upload happens now, not one interval later
                self.collect([msg[1]], final=False)
        elif op == "parent-gone":
            self.collect()
            self.flush_workers(10.0, final=True)
            self.shutdown(5.0)
            return True
        elif op == "req":
            seq, what, budget = msg[1], msg[2], msg[3]
            ok = True
            stop = False
            if what == "flush":
                self.collect()
                ok = self.flush_workers(budget)
            elif what == "remove":
                key, final = msg[4], msg[5]
                if final:
                    self.collect([key])
                    ok = self.flush_workers(budget, final=True)
                src = self.sources.pop(key, None)
                close = getattr(src, "close", None)
                if callable(close):
                    close()
            elif what == "stop":
                final = msg[4]
                t0 = time.monotonic()
                if final:
                    self.collect()
                    ok = self.flush_workers(None if budget is None else 0.8 * budget, final=True)
                rest = 5.0 if budget is None else max(0.1, budget - (time.monotonic() - t0))
                ok = self.shutdown(rest) and ok
                stop = True
            try:
                self.conn.send(("done", seq, ok))
            except OSError:
                return True
            return stop
        return False


#: How long an exporter thread sleeps with nothing to export (samples wake it at once).
IDLE_S = 3600.0
#: Where the parent's exit cannot wake the loop (no pidfd), how often its pid is looked at.
PARENT_POLL_S = 1.0


def _parent_watch(ppid: int) -> int | None:
    """A pidfd of the parent (readable once it exits: Linux 5.3+), or None where there is none
    (then the loop looks at its parent's pid every PARENT_POLL_S). Taken while the parent is
    still ours, so the pid cannot name another process by then."""
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return None
    try:
        fd = int(opener(ppid))
    except OSError:
        return None
    if os.getppid() != ppid:  # gone before the pidfd was taken: the loop finds out at once
        os.close(fd)
        return None
    return fd


#: Every this many collect rounds the collector walks everything once (see settle_gc).
GC_FULL_EVERY = 64


def settle_gc(rounds: int) -> None:
    """After a collect round: what the sources keep (a job's history, read once and kept for
    good: a few million objects at 256 hosts) leaves the collector's view (`gc.freeze`), so
    its periodic full collection no longer walks all of it (100 ms, every few uploads, seen
    at 256 hosts). Every GC_FULL_EVERY rounds everything is collected once, which frees any
    garbage cycle that was frozen meanwhile."""
    if rounds % GC_FULL_EVERY == 0:
        gc.unfreeze()
        gc.collect()
    gc.freeze()


def _quiet_shutdown(exporter: Exporter, timeout_s: float) -> None:
    try:
        _contract.close(exporter, timeout_s)
    except Exception as e:
        log.warning("exporter %r failed to shut down: %s", exporter, e)


def child_main(fd: int) -> None:
    """Entry point of the child interpreter."""
    logging.basicConfig(
        level=logging.WARNING, format="%(asctime)s %(name)s[exporter %(process)d] %(levelname)s %(message)s"
    )
    conn = Connection(fd)
    msg = conn.recv()
    _, exporters, interval_s, export_interval_s, max_backoff_s, name, ppid = msg
    opened: list[Exporter] = []
    unopened: set[int] = set()
    problems: list[str] = []
    try:
        for e in exporters:
            try:
                _contract.start(e)
            except OSError as err:  # the backend (a full or read-only disk, ...): retried, never raised
                unopened.add(id(e))
                problems.append(f"{e!r} cannot open yet ({type(err).__name__}: {err}); retrying in the background")
                continue
            opened.append(e)
    except Exception as e:  # a configuration error (another writer holds the folder, ...)
        for o in opened:
            _quiet_shutdown(o, 1.0)
        conn.send(("error", type(e).__name__, f"{type(e).__name__}: {e}"))
        conn.close()
        os._exit(3)
    child = _Child(conn, list(exporters), interval_s, export_interval_s, max_backoff_s, name, ppid, frozenset(unopened))
    for w in child.workers:
        w.start()
    conn.send(("ready", problems, [_contract.address(e) for e in exporters]))
    try:
        child.run()
    finally:
        try:
            conn.close()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)
