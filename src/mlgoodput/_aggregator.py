"""The per-node aggregator: one shipper for every journal of a store on this machine.

With the node shipper on (`MLGOODPUT_NODE_SHIPPER=1`, or `Journal(node_shipper=True)`), a
journal does not ship its own events: it keeps appending to its segment files (the hot path
is unchanged) and notes in each file's header how many records are committed. One process
per (store, node) leads, elected by an exclusive `flock` on `node-shipper.lock` in the
store's journal folder: its `NodeShipper` reads every segment of that store in the folders
each round (live ones up to their committed count, dead ones to their end) and hands all
new events of all writers to the store in one `append_batches` call, so a node costs the
store one transaction a round however many processes journal on it. Then it writes each
segment's shipped watermark into the file, where the owning journal reads it to release
sealed segments and to answer `flush()`.

The journals stay the truth: a leader killed mid-round leaves its lock to the kernel, and
the next process that tries (every process with a node-mode journal tries each round, as
does `mlgoodput aggregate`) takes over from the watermarks; what the dead leader stored and
had not marked is stored again and the store's exactly-once mark (per writer) drops it.
"""

from __future__ import annotations

import fcntl
import logging
import mmap
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mlgoodput._recovery import (
    SHIP_BATCH,
    StoreWatch,
    damage_item,
    in_time_order,
    journal_dirs,
    recover_files,
    warn_damage,
    writer_of,
)
from mlgoodput._segment import HEADER_SIZE, MAGIC, SUFFIX, VERSION, read_image, write_watermark
from mlgoodput._segment_columns import decode_columns
from mlgoodput._worker import BackgroundWorker, at_fork_in_child
from mlgoodput.events import EventBatch
from mlgoodput.store import (
    ColumnEvents,
    Store,
    append_batches,
    open_store,
)

__all__ = ["LOCK_NAME", "ROUND_EVENTS", "NodeShipper", "acquire", "node_shipper_stats", "release"]

log = logging.getLogger("mlgoodput")

LOCK_NAME = "node-shipper.lock"  # in the store's first journal folder; its flock elects the leader
ROUND_EVENTS = 1 << 20  # events one round hands to the store at most (the rest goes next round, at once)


@dataclass(slots=True)
class _Read:
    """One segment file read in a round: what to mark in it once the store has its events."""

    path: Path
    fd: int
    dead: bool
    shipped: int
    shipped_off: int
    done: bool = False  # a dead segment read to its end: deleted once stored
    events: int = 0
    losses: list[tuple[str, str, int, int, int]] = field(default_factory=list)  # ns, job, host, lost, recovered


class NodeShipper(BackgroundWorker):
    """Ships the journals of store `url` found in `dirs` (default: `journal_dirs(url)`) while
    this process holds the node's lock; tries to take it each round while another holds it."""

    after_fork = "stop"  # the lock and the rounds belong to the parent

    def __init__(
        self,
        url: str,
        *,
        dirs: Sequence[Path] | None = None,
        interval_s: float = 0.5,
        store: Store | None = None,
    ) -> None:
        super().__init__(f"mlgoodput-node-shipper[{url}]", interval_s=interval_s, max_backoff_s=2.0)
        self.url = url
        self._dirs = [Path(d) for d in dirs] if dirs is not None else journal_dirs(url)
        if not self._dirs:
            raise ValueError("dirs must name at least one journal folder")
        self._store_arg = store
        self._store: Store | None = None
        self._lock_fd = -1
        self._open_reads: list[_Read] = []  # the segments the running round holds open
        self._watch = StoreWatch(url)  # the store's identity around each round stored
        self.leader = False
        self.rounds = 0  # rounds run as the leader
        self.transactions = 0  # append_batches calls that stored a round
        self.batches = 0  # batches handed to the store
        self.events = 0  # events handed to the store
        self.segments = 0  # segment files read with something new
        self.lost = 0  # damaged records reported lost
        self.elections = 0  # times this shipper became the leader
        self.round_done = threading.Condition()  # notified after each round (flushing journals wait on it)

    # -- leadership ------------------------------------------------------------------------
    def _elect(self) -> bool:
        """Whether this shipper leads: take the node's lock if nobody holds it (a dead
        leader's lock was released by the kernel when it died)."""
        if self.leader:
            return True
        if self._lock_fd < 0:  # in the first folder that can hold it, as journals choose theirs
            err: OSError | None = None
            for d in self._dirs:
                try:
                    d.mkdir(parents=True, exist_ok=True)
                    self._lock_fd = os.open(d / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
                    break
                except OSError as e:
                    err = e
            else:
                raise OSError(f"cannot make the node shipper's lock in {self._dirs[0]}: {err}")
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False
        self.leader = True
        self.elections += 1
        log.debug("mlgoodput: process %d now ships the journals of %s on this node", os.getpid(), self.url)
        return True

    # -- rounds ----------------------------------------------------------------------------
    def _get_store(self) -> Store:
        if self._store is None:
            self._store = self._store_arg if self._store_arg is not None else open_store(self.url)
        return self._store

    def _work(self) -> bool:
        try:
            if not self._elect():
                return True  # another process ships; nothing of ours to do
            self.rounds += 1
            more = self._round()
        finally:
            with self.round_done:
                self.round_done.notify_all()
        if more:
            self.wake()  # a round's worth was left: go again at once
        return not more

    def _round(self) -> bool:
        """Read what is new in every segment, store it in one call, then mark it; True when
        the round's budget left something for the next round."""
        reads: list[_Read] = []
        self._open_reads = reads  # a child forked mid-round closes these (their locks are ours)
        items: list[tuple[str, str, EventBatch]] = []
        budget = ROUND_EVENTS
        more = False
        try:
            for d in self._dirs:
                try:
                    names = sorted(os.listdir(d))
                except OSError:
                    continue
                held: set[int] = set()  # writers whose earlier segment is not all stored: later ones wait
                for p in in_time_order([d / n for n in names if n.endswith(SUFFIX)]):
                    writer = writer_of(p)
                    if writer in held:
                        continue
                    if budget <= 0:
                        more = True
                        break
                    try:
                        r = self._read(p, budget, items)
                    except OSError:
                        raise  # storage trouble (StoreError is an OSError): the round is retried
                    except Exception as e:  # a damaged file must not stop the others
                        self.log_once(f"unreadable {p}", "mlgoodput: skipping unreadable journal %s: %s", p, e)
                        r = None
                    if r is None:
                        held.add(writer)  # its owner ships it, or it is not ours: a writer's later ones wait
                        continue
                    reads.append(r)
                    budget -= r.events
                    if not (r.done or not r.dead):
                        held.add(writer)
                    if r.events and budget <= 0:
                        more = True
            n = sum(len(b.events) for _, _, b in items)
            if items:  # the store is opened only when there is something for it
                self._store_all(self._get_store(), items)
                self.transactions += 1
                self.batches += len(items)
                self.events += n
            for r in reads:  # stored: now say so in each file
                if r.dead and r.done:
                    try:
                        r.path.unlink()
                    except OSError:
                        pass
                else:
                    write_watermark(r.fd, r.shipped, r.shipped_off)
                for ns, job, host, lost, recovered in r.losses:
                    self.lost += lost
                    warn_damage(ns, job, host, lost, recovered, r.path)
            self.segments += sum(1 for r in reads if r.events)
        finally:
            self._open_reads = []
            for r in reads:
                os.close(r.fd)  # releases a dead segment's lock
        return more

    def _store_all(self, store: Store, items: list[tuple[str, str, EventBatch]]) -> None:
        """One `append_batches`; raise unless the same store holds it afterwards (a store
        replaced meanwhile leaves the watermarks alone: everything is shipped again)."""
        self._watch.write(store, lambda: append_batches(store, items), "a round")

    @property
    def store_changes(self) -> int:
        """Times the store was found replaced or recreated under this shipper."""
        return self._watch.changes

    def _read(self, p: Path, budget: int, items: list[tuple[str, str, EventBatch]]) -> _Read | None:
        """Add what is new in segment `p` to `items`; None when it is left alone (not of this
        store, unreadable, or a live one that ships itself)."""
        try:
            fd = os.open(p, os.O_RDWR | os.O_CLOEXEC)
        except OSError:
            return None
        keep = False
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                dead = True
            except OSError:
                dead = False  # its owner is alive (or a recoverer is at it)
            size = os.fstat(fd).st_size
            img = read_image(os.pread(fd, HEADER_SIZE, 0), size) if size >= HEADER_SIZE else None
            if img is None and _newer_format(os.pread(fd, 8, 0)):
                return None  # left for a newer mlgoodput (recovery says so when a reader looks)
            if img is None or img.version < 2:
                if dead:  # an old format, or a damaged header: recovery's own way, on its own
                    os.close(fd)
                    fd = -1
                    recover_files(self._get_store(), [p])
                return None
            if img.meta.get("store") != self.url:
                return None
            if not dead and not img.meta.get("node"):
                return None  # a journal that ships itself
            ns, job = str(img.meta.get("namespace")), str(img.meta.get("job"))
            base = img.meta.get("base", 0)
            base = base if isinstance(base, int) and not isinstance(base, bool) and base >= 0 else 0
            r = _Read(p, fd, dead, img.shipped, img.shipped_off)
            if dead:
                tail: tuple[int | None, bool] = (img.committed, img.exact)
                upto = None
            else:
                upto = img.committed or 0  # a live writer's committed records only
                tail = (upto, True)
                if upto <= img.shipped:
                    return None  # nothing new
            buf = mmap.mmap(fd, size, access=mmap.ACCESS_READ)
            try:
                nxt, off = img.shipped, img.shipped_off
                while True:
                    limit = min(SHIP_BATCH, budget - r.events)
                    if upto is not None:
                        limit = min(limit, upto - nxt)
                    if limit <= 0:
                        break
                    dc = decode_columns(buf, off, size, img.host, limit, nxt, *tail)
                    n = len(dc.columns)
                    if n:
                        items.append((ns, job, EventBatch(img.writer, base + dc.first_index, ColumnEvents(dc.columns))))
                        r.events += n
                    lost = dc.lost
                    nxt, off = dc.next_index, dc.end
                    if dc.at_end and upto is not None and nxt < upto:
                        nxt = upto  # counted in dc.lost (the header says they were committed)
                    if lost:
                        items.append(damage_item(ns, job, img.host, img.writer, lost, r.events, p, seq=nxt))
                        r.losses.append((ns, job, img.host, lost, r.events))
                    if dc.at_end:
                        r.done = dead
                        break
                    if not n and not lost:
                        break
                r.shipped, r.shipped_off = nxt, off
            finally:
                try:
                    buf.close()
                except BufferError:
                    pass
            keep = True
            return r
        finally:
            if not keep and fd >= 0:
                os.close(fd)

    # -- lifecycle and reporting -------------------------------------------------------------
    def stats(self) -> dict[str, int]:
        """Counters for operators and tests: `rounds` run as the leader, store `transactions`
        (at most one a round), `batches` and `events` handed to the store, `segments` read
        with something new, `lost` records reported, `elections` won, `leader` (1 or 0)."""
        return {
            "rounds": self.rounds,
            "transactions": self.transactions,
            "batches": self.batches,
            "events": self.events,
            "segments": self.segments,
            "lost": self.lost,
            "elections": self.elections,
            "leader": int(self.leader),
            "store_changes": self.store_changes,
            "failures": self.failures,
        }

    def _on_close(self, timeout_s: float) -> None:
        if self._lock_fd >= 0:
            os.close(self._lock_fd)  # the next process to try leads
            self._lock_fd = -1
        self.leader = False
        if self._store is not None and self._store is not self._store_arg:
            self._store.close()
        self._store = None

    def _on_fork_in_child(self) -> None:
        for r in self._open_reads:  # a round was under way in the parent: its files stay its own
            try:
                os.close(r.fd)  # the parent's descriptor keeps the dead segment's lock
            except OSError:
                pass
        self._open_reads = []
        if self._lock_fd >= 0:
            try:
                os.close(self._lock_fd)  # the parent's descriptor keeps the lock
            except OSError:
                pass
            self._lock_fd = -1
        self.leader = False
        self._store = None


def _newer_format(head: bytes) -> bool:
    """Whether a header's first copy names a format newer than ours."""
    return len(head) >= 8 and head[:4] == MAGIC and VERSION < int.from_bytes(head[4:8], "little") < 100


# -- one node shipper per store in a process, shared by its node-mode journals ---------------
_shared: dict[str, tuple[NodeShipper, int]] = {}
_shared_lock = threading.Lock()


def acquire(url: str, dirs: Sequence[Path] | None = None, interval_s: float = 0.5) -> NodeShipper:
    """This process's node shipper of store `url` (started); match each call with `release`."""
    with _shared_lock:
        got = _shared.get(url)
        if got is None or got[0].closed:
            ns = NodeShipper(url, dirs=dirs, interval_s=interval_s)
            ns.start()
            _shared[url] = (ns, 1)
            return ns
        _shared[url] = (got[0], got[1] + 1)
        return got[0]


def release(shipper: NodeShipper, timeout_s: float | None = None) -> bool:
    """One user less; the last one closes the shipper (a leader's last round ships what is
    left, then its lock goes to the next process). True unless that close fell short."""
    with _shared_lock:
        got = _shared.get(shipper.url)
        if got is not None and got[0] is shipper and got[1] > 1:
            _shared[shipper.url] = (shipper, got[1] - 1)
            return True
        if got is not None and got[0] is shipper:
            del _shared[shipper.url]
    return shipper.close(timeout_s)


def _reset_in_child() -> None:
    global _shared_lock
    _shared_lock = threading.Lock()
    _shared.clear()


at_fork_in_child(_reset_in_child)


def node_shipper_stats(url: str) -> dict[str, Any] | None:
    """The stats of this process's node shipper of `url`, when it has one."""
    with _shared_lock:
        got = _shared.get(url)
    return None if got is None else got[0].stats()
