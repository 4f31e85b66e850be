"""The server's store writer: everything received goes to the store in batches, then is acked.

A client's records are acknowledged only once they are durable: in the store, or, when the
store fails or keeps a round waiting longer than `spill_after_s` (down, locked, hanging),
in the console's journal on local disk (`_spool`), which is shipped to the store once it
answers again (by this writer, or by any later process that opens the store). A client
keeps (and resends) whatever a crashed server never acknowledged. The store drops a
resent record it already has, because each client is a store writer and its record
numbers are sequences, also in the journal. The store is opened on this writer's thread,
never on the caller's, so starting a server never waits for it. What could be neither
stored nor journaled (a store down and a full disk) is counted in `lost_events` and said
in a warning when the writer closes.
"""

from __future__ import annotations

import collections
import itertools
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from mlgoodput._recovery import recover_changed_journals
from mlgoodput._worker import BackgroundWorker
from mlgoodput.console._spool import Spool
from mlgoodput.events import Event, EventBatch
from mlgoodput.store import ColumnEvents, Store, open_store, resolve_store_url

log = logging.getLogger("mlgoodput.console")

NAMESPACE = "mlgoodput.console"
#: A round that waits this long for the store (or a store that fails) sends the waiting
#: records to the console's journal, so clients are acknowledged without the store.
SPILL_AFTER_S = 2.0
#: How often the watch looks for a round stuck in the store.
WATCH_S = 0.2


@dataclass(slots=True)
class _Item:
    writer: int
    first_seq: int
    events: Sequence[Event]
    on_stored: Callable[[], None] | None
    namespace: str = NAMESPACE
    settled: bool = False  # stored, or journaled: acknowledged


class StoreSink(BackgroundWorker):
    """Appends submitted event runs to the store under (namespace, job), merging runs per
    writer; journals them when the store cannot take them in time (see the module)."""

    after_fork = "stop"  # the server's process stores what it received
    close_gives_up_on_failure = True  # on the way out a failing store is tried once: the journal has the rest

    def __init__(
        self,
        store: Store | str | os.PathLike[str] | None,
        job: str,
        *,
        interval_s: float = 0.05,
        spill_after_s: float = SPILL_AFTER_S,
        on_open: Callable[[Store], None] | None = None,
    ) -> None:
        super().__init__("mlgoodput-console-store", interval_s=interval_s, max_backoff_s=2.0)
        self._store: Store | None = None
        if isinstance(store, Store) and not isinstance(store, (str, os.PathLike)):
            self._store, self._own_store, self.url = store, False, str(store.url)
        else:
            self._own_store, self.url = True, resolve_store_url(store)
        self.job = job
        self.spill_after_s = float(spill_after_s)
        self._on_open = on_open
        self.spool = Spool(self.url, job)
        self._items: collections.deque[_Item] = collections.deque()
        self._lock = threading.Lock()
        self._settled = threading.Condition(self._lock)  # notified when a round stored runs
        self._open_lock = threading.Lock()
        self._spill_lock = threading.Lock()
        self._round_since: float | None = None  # when the round now talking to the store began
        self._failing = False  # the last round failed: new records go to the journal at once
        self._close_later = False  # closed while a round was stuck: that round closes the store
        self.pending_events = 0
        self.stored_events = 0
        self.spilled_events = 0  # acknowledged from the journal, not (yet) from the store
        self.lost_events = 0  # neither stored nor journaled when the writer closed
        self._watch = _Watch(self)

    # -- the store, opened on the writer's thread ---------------------------------------------
    @property
    def store(self) -> Store:
        """The store (opened now if the writer has not opened it yet)."""
        return self._open()

    @property
    def store_if_open(self) -> Store | None:
        return self._store

    def _open(self) -> Store:
        with self._open_lock:
            if self._store is None:
                st = open_store(self.url)
                try:  # what killed processes left (a console journal among them) goes in first
                    recover_changed_journals(st, st.url)
                except OSError:
                    pass
                if self._on_open is not None:
                    try:
                        self._on_open(st)
                    except Exception as e:
                        log.debug("console store: on open: %s", e)
                self._store = st  # shown to other threads (`store_if_open`) once it has answered
            return self._store

    # -- the server's side ----------------------------------------------------------------------
    def start(self) -> None:
        super().start()
        self._watch.start()

    def submit_run(
        self,
        writer: int,
        first_seq: int,
        events: Sequence[Event],
        on_stored: Callable[[], None] | None = None,
        namespace: str = NAMESPACE,
    ) -> None:
        with self._lock:
            self._items.append(_Item(writer, first_seq, events, on_stored, namespace))
            self.pending_events += len(events)
        self._wake.set()  # a round as soon as the last one ends: runs that come meanwhile go in together

    def wait_below(self, events: int, timeout_s: float) -> bool:
        """Wait until at most `events` are pending (a writer ahead of the store slows down to
        it, while the store keeps writing): False if still more after `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        with self._settled:
            while self.pending_events > events:
                left = deadline - time.monotonic()
                if left <= 0 or not self.running:
                    return False
                self._settled.wait(min(left, 0.1))
        return True

    # -- the writer's thread --------------------------------------------------------------------
    def _work(self) -> bool:
        self._round_since = time.monotonic()
        try:
            done = self._round()
        except BaseException as e:
            self._failing = True
            self._round_since = None
            self.spill(f"{type(e).__name__}: {e}")  # durable now, and acknowledged
            raise
        finally:
            if self._close_later:  # closed while this round was stuck in the store
                self._close_later = False
                self._close_store()
        self._round_since = None
        self._failing = False
        return done

    def _round(self) -> bool:
        store = self._open()
        if self.spool.pending:  # the journal first: one writer's records reach the store in order
            self.spool.ship(store)
            if self.spool.pending:  # another process is shipping a file of it: later records wait behind
                self.spill("another process is shipping the console's journal")
                return False
        with self._lock:
            items = list(self._items)
        if not items:
            return True
        # merge contiguous runs of the same writer into one append (one transaction each)
        runs: list[tuple[str, int, int, list[_Item]]] = []  # (namespace, writer, first seq, its items)
        open_by_writer: dict[tuple[str, int], int] = {}
        ends: dict[int, int] = {}
        for it in items:
            key = (it.namespace, it.writer)
            gi = open_by_writer.get(key)
            if gi is not None and ends[gi] == it.first_seq:
                runs[gi][3].append(it)
                ends[gi] += len(it.events)
                continue
            open_by_writer[key] = len(runs)
            ends[len(runs)] = it.first_seq + len(it.events)
            runs.append((it.namespace, it.writer, it.first_seq, [it]))
        groups = [(ns, w, first, _merged([it.events for it in its]), its) for ns, w, first, its in runs]
        many = getattr(store, "append_many", None)
        for ns in dict.fromkeys(g[0] for g in groups):
            mine = [g for g in groups if g[0] == ns]
            if many is not None:  # every client's run in one transaction: one commit per round
                many(ns, self.job, [EventBatch(w, first, evs) for _, w, first, evs, _ in mine if evs])
                self._settle([it for g in mine for it in g[4]], stored=True)
                continue
            for _, writer, first, evs, its in mine:
                if evs:
                    store.append(ns, self.job, EventBatch(writer, first, evs))
                self._settle(its, stored=True)
        with self._lock:
            return not self._items

    def _settle(self, its: list[_Item], *, stored: bool) -> None:
        """Mark runs durable and acknowledge them (outside the lock); runs settled already (a
        run journaled while its append was stuck, then stored after all) are skipped."""
        done: list[_Item] = []
        with self._lock:
            for it in its:
                if it.settled:
                    continue
                it.settled = True
                done.append(it)
                n = len(it.events)
                self.pending_events -= n
                if stored:
                    self.stored_events += n
                else:
                    self.spilled_events += n
            if done:
                self._items = collections.deque(x for x in self._items if not x.settled)
                self._settled.notify_all()
        for it in done:
            if it.on_stored is not None:
                try:
                    it.on_stored()
                except Exception:
                    pass

    def spill(self, why: str) -> int:
        """Journal every run not yet durable and acknowledge it; returns the events journaled.
        A run that cannot be journaled (no file can be made) stays waiting for the store."""
        with self._spill_lock:  # the watch and the writer's thread may both ask
            return self._spill(why)

    def _spill(self, why: str) -> int:
        with self._lock:
            todo = [it for it in self._items if not it.settled]
        if not todo:
            return 0
        written: list[_Item] = []
        for it in todo:
            try:
                self.spool.write(it.namespace, it.writer, it.first_seq, it.events)
            except OSError as e:
                self.log_once(
                    "spill",
                    "mlgoodput console: the store cannot take records now (%s) and the console's journal"
                    " cannot hold them either (%s): they wait in memory (logged once)",
                    why,
                    e,
                    logger=log,
                )
                break  # keep each writer's order: the rest waits too
            written.append(it)
        if written:
            self.log_once(
                "journal",
                "mlgoodput console: the store %s cannot take records now (%s); they are kept in the"
                " console's journal and stored once it can (logged once)",
                self.url,
                why,
                logger=log,
            )
        self._settle(written, stored=False)
        return sum(len(it.events) for it in written)

    def _stuck(self, for_s: float) -> bool:
        """Whether the round now running has waited on the store for `for_s` or more."""
        since = self._round_since
        return since is not None and time.monotonic() - since >= for_s

    def _check(self) -> None:
        """The watch's round: a store round stuck too long, or a failing store with records
        waiting, sends them to the journal."""
        stuck = self._stuck(self.spill_after_s)
        if stuck or self._failing:
            with self._lock:
                waiting = any(not it.settled for it in self._items)
            if waiting:
                self.spill("the store did not answer in time" if stuck else "the store fails")

    def _backlog(self) -> int:
        return self.pending_events

    # -- leaving ----------------------------------------------------------------------------------
    def close(self, timeout_s: float | None = None) -> bool:
        """Store what is waiting (the store gets at most `spill_after_s` of the deadline while
        others wait), journal the rest, and stop; True when all of it reached the store."""
        if self.closed:
            return True
        deadline = time.monotonic() + (self.deadline_s if timeout_s is None else timeout_s)
        ok = False
        if not (self._failing or self._stuck(0.5)):  # a store that answers gets its time
            ok = self.flush(max(0.0, min(deadline - time.monotonic(), self.spill_after_s)))
        if not ok:
            self.spill("the console is closing")
        left = deadline - time.monotonic()
        self._watch.close(min(0.5, max(0.0, left)))
        # everything is durable now: the store gets one more try (none if it is stuck), not
        # the whole deadline
        last = 0.1 if self._stuck(0.5) else 1.0
        super().close(max(0.0, min(left, last if self.pending_events == 0 else left)))
        with self._lock:
            lost = sum(len(it.events) for it in self._items if not it.settled)
        if lost:
            self.lost_events += lost
            log.warning(
                "mlgoodput console: %d records of job %s are lost: the store %s did not take them and the"
                " console's journal could not hold them",
                lost,
                self.job,
                self.url,
            )
        if self.spool.pending:
            log.warning(
                "mlgoodput console: %d records of job %s wait in the console's journal for the store %s;"
                " the next process that opens it stores them",
                self.spool.written - self.spool.shipped,
                self.job,
                self.url,
            )
        return ok and not lost and not self.spool.pending

    def _on_close(self, timeout_s: float) -> None:
        if self.abandoned:  # the thread is still in the store: it closes the store when it is out
            self._close_later = True
            return
        self._close_store()

    def _close_store(self) -> None:
        if self._own_store and self._store is not None:
            st, self._store = self._store, None
            try:
                st.close()
            except Exception:
                pass

    def _on_fork_in_child(self) -> None:
        # the server's process stores what it received; a forked child has no part in it
        self._items.clear()
        self._lock = threading.Lock()
        self._settled = threading.Condition(self._lock)
        self._open_lock = threading.Lock()
        self._spill_lock = threading.Lock()


class _Watch(BackgroundWorker):
    """Looks every WATCH_S at the store writer (`StoreSink._check`), from outside its thread,
    which may be stuck in the store."""

    after_fork = "stop"

    def __init__(self, sink: StoreSink) -> None:
        super().__init__("mlgoodput-console-store-watch", interval_s=WATCH_S, max_backoff_s=WATCH_S)
        self.sink = sink

    def _work(self) -> bool:
        self.sink._check()
        return True


def _merged(parts: list[Sequence[Event]]) -> Sequence[Event]:
    """Consecutive runs of one writer as one: columns stay columns (no event objects made)."""
    if len(parts) == 1:
        return parts[0]
    if all(isinstance(p, ColumnEvents) for p in parts):
        return ColumnEvents.join(parts)  # type: ignore[arg-type]
    return list(itertools.chain.from_iterable(parts))
