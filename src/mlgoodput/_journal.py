"""The durable local journal: every recorded event goes here first, then to the store.

`Journal.append` packs an event into a memory-mapped segment file (see `_segment`) and
returns: no database or network I/O, no exception for a storage problem, about a
microsecond. A background shipper (a `BackgroundWorker`) moves what is journaled into the
store in batches, numbered by (writer, seq) so a store keeps each event once however often
it is shipped. A process killed with SIGKILL leaves its segment files behind, and
`recover_journals` (or the next journal of that store to start) ships them: the recovery,
which readers use without the writer, is `mlgoodput._recovery`; import its names from there.

One journal exists per (store URL, namespace, job, host) in a process; `for_stream` hands
out the shared instance.
"""

from __future__ import annotations

import atexit
import logging
import os
import struct
import threading
import time
import zlib
from collections import deque
from typing import Any, ClassVar

from mlgoodput import _aggregator, _env
from mlgoodput._recovery import SHIP_BATCH, StoreWatch, journal_dirs, note_lost, recover_dead, store_url
from mlgoodput._segment import (
    BODY,
    DEFAULT_SEGMENT_SIZE,
    HEADER_SIZE,
    LEN,
    NO_STEP,
    REC,
    SYNC,
    TAG,
    Segment,
    create_segment,
    encode_extra,
    fit_segment_size,
    memory_segment,
)
from mlgoodput._segment_columns import decode_columns
from mlgoodput._worker import BackgroundWorker, at_fork_in_child, deadline_after, exit_time_left
from mlgoodput.events import EventBatch, Kind
from mlgoodput.store import (
    ColumnEvents,
    Store,
    is_process_local,
    open_store,
)

__all__ = ["Journal"]

log = logging.getLogger("mlgoodput")

SHIP_INTERVAL_S = 0.5
_NAN = float("nan")
_pack_body = BODY.pack
_pack_tagged = struct.Struct(f"{TAG.format}{BODY.size}s").pack_into  # TAG, then the packed BODY
_pack_len = LEN.pack_into
_crc32 = zlib.crc32


def _stream_key(store: Any) -> str:
    """What identifies a store for sharing journals: its URL, except that a memory store
    object is its own store whatever its URL says (tests build many `MemoryStore()`)."""
    url = store_url(store)
    if is_process_local(url) and isinstance(store, Store) and not isinstance(store, (str, os.PathLike)):
        return f"{url}#{id(store)}"
    return url


class Journal(BackgroundWorker):
    """The journal of one (store, namespace, job, host) stream in this process."""

    _registry: ClassVar[dict[tuple[str, str, str, int], Journal]] = {}
    _registry_lock: ClassVar[threading.Lock] = threading.Lock()

    @classmethod
    def live(cls, job: str) -> list[Journal]:
        """The open journals of `job` in this process (any store, namespace and host)."""
        with cls._registry_lock:
            return [j for (_, _, jb, _), j in cls._registry.items() if jb == job and not j.closed]

    @classmethod
    def for_stream(cls, store: Any, namespace: str, job: str, host: int) -> Journal:
        """The shared journal of this stream; each call must be matched by one `close()`."""
        for arg, v in (("namespace", namespace), ("job", job)):
            if not isinstance(v, str) or not v:
                raise ValueError(f"{arg} must be a non-empty string, got {v!r}")
        if isinstance(host, bool) or not isinstance(host, int) or host < 0:
            raise ValueError(f"host must be a non-negative integer, got {host!r}")
        key = (_stream_key(store), namespace, job, host)
        with cls._registry_lock:
            j = cls._registry.get(key)
            if j is None or j.closed:
                j = cls(store, namespace, job, host)
                cls._registry[key] = j
            j._users += 1
            return j

    def __init__(
        self,
        store: Any,
        namespace: str,
        job: str,
        host: int,
        *,
        segment_size: int = DEFAULT_SEGMENT_SIZE,
        interval_s: float = SHIP_INTERVAL_S,
        node_shipper: bool | None = None,
    ) -> None:
        """`node_shipper`: hand this journal's events to the node's shipper (one per store and
        machine, `mlgoodput._aggregator`) instead of shipping them here; None reads
        MLGOODPUT_NODE_SHIPPER ("1" turns it on). A process-local store ships here always."""
        self.url = store_url(store)
        super().__init__(f"mlgoodput-journal[{namespace}/{job}/{host}]", interval_s=interval_s, max_backoff_s=2.0)
        self._store_arg = store
        self._store: Store | None = None
        self._owns_store = False
        self.namespace = namespace
        self.job = job
        self.host = host
        if segment_size < HEADER_SIZE + 4 * REC:
            raise ValueError(f"segment_size must be at least {HEADER_SIZE + 4 * REC}, got {segment_size!r}")
        self.segment_size = int(segment_size)
        self._meta: dict[str, Any] = {"store": self.url, "namespace": namespace, "job": job, "host": host}
        if node_shipper is None:
            node_shipper = os.environ.get(_env.NODE_SHIPPER, "").strip().lower() in ("1", "true", "yes", "on")
        self.node_shipper = bool(node_shipper) and not is_process_local(self.url)
        self._node: _aggregator.NodeShipper | None = None  # this process's, once the worker runs
        self._settle_lock = threading.Lock()  # one taker of the node shipper's watermarks at a time
        if self.node_shipper:
            self._meta["node"] = True  # the header tells the node shipper this file is its to ship
        self._dirs = journal_dirs(self.url)
        self._users = 0
        self._lock = threading.Lock()
        self._active: Segment | None = None
        self._spare: Segment | None = None
        self._sealed: deque[Segment] = deque()
        self._recovered = False
        self._names: dict[str | None, tuple[int, bytes, int]] = {}  # encoded names, reused
        self._shipper: threading.Thread | None = None
        self.appended = 0  # events appended in this process
        self.shipped = 0  # events handed to the store
        self.volatile = 0  # events that went to a memory-only segment (no journal file)
        self.closed_appends = 0  # events appended after close: left on disk for recovery
        self.lost = 0  # events reported lost (damaged records, memory fallback at exit)
        self._watch = StoreWatch(self.url)  # the store's identity around each batch shipped
        self._fallback = ""  # why events went to memory, when they did
        self._alive_every = 0.0  # keep_alive's period; 0: no signs of life
        self._alive_seen = 0  # `appended` when the worker last looked
        self._alive_at = time.time()  # when it last saw an append (or wrote a sign of life)
        _live.add(self)
        with self._lock:
            self._active = self._new_segment(self.segment_size)  # the first append stays cheap

    # -- the hot path ----------------------------------------------------------------
    def append(
        self,
        kind: Kind,
        time: float,
        step: int | None = None,
        value: float | None = None,
        name: str | None = None,
        attrs: dict[str, Any] | None = None,
    ) -> None:
        """Journal one event. Never blocks on I/O in the common case and never raises for a
        storage problem; an oversized name is the caller's error (ValueError)."""
        if name is None and attrs is None:
            need = REC
            flags = 0
            extra = b""
            name_len = 0
        else:
            if attrs is None:
                enc = self._names.get(name)
                if enc is None:
                    enc = encode_extra(name, None)
                    if len(self._names) < 1024:
                        self._names[name] = enc
            else:
                enc = encode_extra(name, attrs)
            flags, extra, name_len = enc
            need = REC + len(extra)
        with self._lock:
            seg = self._active
            if seg is None or seg.off + need > seg.size:
                seg = self._rotate(need)
            off = seg.off
            buf = seg.buf
            try:  # write_record, inlined: the payload, then marker and checksum, the length last
                body = _pack_body(
                    seg.count,
                    kind,
                    flags,
                    name_len,
                    time,
                    NO_STEP if step is None else step,
                    _NAN if value is None else value,
                )
            except struct.error as e:  # nothing is written
                raise ValueError(
                    f"cannot journal kind={kind!r} time={time!r} step={step!r} value={value!r}: {e}"
                ) from None
            if extra:
                buf[off + REC : off + need] = extra
                _pack_tagged(buf, off + 4, SYNC, _crc32(extra, _crc32(body)), body)
            else:
                _pack_tagged(buf, off + 4, SYNC, _crc32(body), body)  # marker, checksum and payload at once
            _pack_len(buf, off, need)  # the length goes last: it commits the record
            seg.off = off + ((need + 7) & ~7)
            seg.count += 1
            self.appended += 1
            if self._closed:
                self.closed_appends += 1
            elif self._thread is None:
                self.start()

    def _rotate(self, need: int) -> Segment:
        """Seal the full segment and switch to the spare or a new one (under the lock)."""
        old = self._active
        if old is not None:
            old.seal()
            self._sealed.append(old)
        size = max(self.segment_size, HEADER_SIZE + ((need + 7) & ~7))
        seg = self._spare if self._spare is not None and self._spare.size >= size else None
        if seg is not None:
            self._spare = None
        else:
            seg = self._new_segment(size, need)
        self._active = seg
        return seg

    def _new_segment(self, size: int, need: int = REC) -> Segment:
        err: OSError | None = None
        for d in self._dirs:
            try:
                return create_segment(d, fit_segment_size(d, size, need), self.host, self._meta)
            except OSError as e:
                err = e
        self._fallback = f"no journal file could be made in {self._dirs[0]}: {err}"
        self._report_error(
            OSError(
                f"cannot create a journal file in {self._dirs[0]}: {err}; "
                "keeping events in memory until one can be made"
            )
        )
        return memory_segment(size, self.host, self._meta)

    def _want_spare(self) -> bool:
        """A spare segment only where the disk has room for it at full size."""
        return fit_segment_size(self._dirs[0], self.segment_size) >= self.segment_size

    # -- shipping (the worker thread) ------------------------------------------------
    def _get_store(self) -> Store:
        if self._store is None:
            st = self._store_arg
            if isinstance(st, Store) and not isinstance(st, (str, os.PathLike)):
                self._store = st
            else:
                self._store = open_store(self.url)
                self._owns_store = True
        return self._store

    def _ship(self, store: Store, batch: EventBatch) -> None:
        """Hand one batch to the store; raise unless the same store holds it afterwards
        (`StoreWatch`: the journal keeps the events and ships them again)."""
        self._watch.write(store, lambda: store.append(self.namespace, self.job, batch), "a batch")

    @property
    def store_changes(self) -> int:
        """Times the store was found replaced or recreated while this journal's events went
        to it (with the node shipper on: as this process's node shipper found it)."""
        node = self._node
        return self._watch.changes + (node.store_changes if node is not None else 0)

    def keep_alive(self, every_s: float) -> None:
        """While this journal is open, append a sign of life (`Kind.ALIVE`, value `every_s`)
        whenever `every_s` seconds pass without an append: the accounting tells a writer that
        was killed from one that is busy or hung by it. Costs the hot path nothing; 0 stops."""
        if not every_s >= 0:
            raise ValueError(f"every_s must be >= 0, got {every_s!r}")
        self._alive_every = float(every_s)
        if every_s and self._thread is None and not self._closed:
            self.start()

    def _sign_of_life(self) -> None:
        n = self.appended
        now = time.time()
        if n != self._alive_seen:
            self._alive_seen, self._alive_at = n, now
        elif now - self._alive_at >= self._alive_every:
            self.append(Kind.ALIVE, now, value=self._alive_every)
            self._alive_seen, self._alive_at = self.appended, now

    def _work(self) -> bool:
        if self._alive_every > 0 and not self._closing and not self._closed:
            self._sign_of_life()
        if self.node_shipper:
            return self._work_handed_over()
        store = self._get_store()
        with self._lock:
            segs = [*self._sealed]
            if self._active is not None:
                segs.append(self._active)
            snaps = [(s, s.count, s.off) for s in segs]
            if self._active is not None:
                self._active.note_committed(self._active.count)  # under the lock: never after a seal
            need_spare = (
                self._spare is None
                and self._active is not None
                and self._active.off - HEADER_SIZE > (self._active.size - HEADER_SIZE) // 2
            )
        self._ship_segments(store, snaps)
        if need_spare:
            self._make_spare()
        if not self._recovered:  # once per journal: ship what dead processes left behind
            if not is_process_local(self.url):
                recover_dead(store, self.url, self._dirs)
            self._recovered = True
        with self._lock:
            backlog = any(s.shipped < s.count for s in [*self._sealed, *([self._active] if self._active else [])])
        if backlog:
            self.wake()  # appended during this round: go again at once, not after the interval
        return True  # everything appended before this round started is in the store

    def _work_handed_over(self) -> bool:
        """A round with the node shipper on: note in the header what is committed (the node
        shipper reads no further), take the shipped watermarks it wrote and release the sealed
        segments it finished. Segments held in memory (no file: the node shipper cannot see
        them) ship here as before."""
        if self._node is None:
            self._node = _aggregator.acquire(self.url, self._dirs, self.interval_s)
        with self._lock:
            segs = [*self._sealed, *([self._active] if self._active else [])]
            memory = [(s, s.count, s.off) for s in segs if not s.durable]
            if self._active is not None:
                self._active.note_committed(self._active.count)
            need_spare = (
                self._spare is None
                and self._active is not None
                and self._active.off - HEADER_SIZE > (self._active.size - HEADER_SIZE) // 2
            )
        if memory:
            self._ship_segments(self._get_store(), memory)
        self._settle()
        if need_spare:
            self._make_spare()
        return True

    def _settle(self) -> None:
        """Take the node shipper's watermarks and release the sealed segments it finished
        (by the worker each round, and by a flush that saw its records stored)."""
        with self._settle_lock:
            with self._lock:
                segs = [*self._sealed, *([self._active] if self._active else [])]
            for seg in segs:
                if seg.durable:
                    self._take_watermark(seg)
                    if seg.sealed and seg.shipped >= seg.count:
                        self._drop_sealed(seg)

    def _take_watermark(self, seg: Segment) -> None:
        """Move `seg.shipped` (and the `shipped` counter) to the node shipper's watermark."""
        m = seg.shipped_mark()
        if m is not None and m > seg.shipped:
            m = min(m, seg.count)
            self.shipped += m - seg.shipped
            seg.shipped = m

    def _shipped_of(self, seg: Segment) -> int:
        """Records of `seg` in the store: its own count, or the node shipper's watermark."""
        if not self.node_shipper or not seg.durable:
            return seg.shipped
        m = seg.shipped_mark()
        return seg.shipped if m is None else max(seg.shipped, min(m, seg.count))

    def _wait_handed_over(self, targets: list[tuple[Segment, int]], deadline: float) -> bool:
        """Wait (by the node shipper's rounds, or its interval when another process leads)
        until the node shipper has stored each segment's first `count` records."""
        while True:
            if all(self._shipped_of(s) >= c for s, c in targets):
                return True
            left = deadline - self._clock()
            node = self._node
            if left <= 0 or node is None:
                return False
            node.wake()
            with node.round_done:
                node.round_done.wait(min(left, self.interval_s))

    def _drop_sealed(self, seg: Segment) -> None:
        """A sealed segment all in the store: out of the queue, its file deleted (once)."""
        with self._lock:
            try:
                self._sealed.remove(seg)
            except ValueError:
                return  # another thread dropped it
        seg.release(delete=True)

    def _make_spare(self) -> None:
        if self._want_spare():
            spare = self._new_segment(self.segment_size)
            with self._lock:
                if self._spare is None:
                    self._spare = spare
                    spare = None  # type: ignore[assignment]
            if spare is not None:
                spare.release(delete=True)

    def _ship_segments(self, store: Store, snaps: list[tuple[Segment, int, int]]) -> None:
        """Ship each segment's records up to its snapshot (count, offset) in this process."""
        for seg, count, off in snaps:
            while seg.shipped < count:
                # records -> columns directly: no Event object per record on this interpreter
                d = decode_columns(seg.buf, seg.shipped_off, off, self.host, SHIP_BATCH, seg.shipped)
                n = len(d.columns)
                if n:
                    self._ship(store, EventBatch(seg.writer, d.first_index, ColumnEvents(d.columns)))
                    self.shipped += n
                    if not seg.durable:
                        self.volatile += n
                lost = d.lost + (count - d.next_index if d.at_end and d.next_index < count else 0)
                if lost:
                    self._report_lost(seg, lost)
                seg.mark_shipped(max(d.next_index, count) if d.at_end else d.next_index, d.end)
                if not n and d.at_end:
                    break
            if seg.sealed and seg.shipped >= seg.count:
                self._drop_sealed(seg)

    def _report_lost(self, seg: Segment, n: int) -> None:
        """Damaged records in this process's own segment (its memory was overwritten)."""
        seg.lost += n
        self.lost += n
        log.warning(
            "mlgoodput: %d damaged journal records of %s/%s skipped in %s",
            n,
            self.namespace,
            self.job,
            seg.path or "memory",
        )

    def pending(self) -> int:
        """Events journaled but not yet in the store."""
        with self._lock:
            segs = [*self._sealed, *([self._active] if self._active else [])]
            return sum(s.count - self._shipped_of(s) for s in segs)

    # -- lifecycle -------------------------------------------------------------------
    def flush(self, timeout_s: float | None = None) -> bool:
        """True once everything appended before this call is in the store (with the node
        shipper on: once the node shipper, of this process or another, has stored it)."""
        if self._closed:
            return self.pending() == 0
        if not self.node_shipper:
            return super().flush(timeout_s)
        deadline = deadline_after(timeout_s, self.deadline_s, self._clock)
        with self._lock:
            targets = [(s, s.count) for s in [*self._sealed, *([self._active] if self._active else [])] if s.durable]
        # a round of our own after this call notes these records committed (and ships memory ones)
        if not super().flush(max(0.0, deadline - self._clock())):
            return False
        if not self._wait_handed_over(targets, deadline):
            return False
        self._settle()
        return True

    def close(self, timeout_s: float | None = None) -> bool:
        """Release one user; the last one ships what is left and stops the shipper. What
        cannot be shipped now stays in the journal file for `recover_journals`."""
        with Journal._registry_lock:
            if self._users > 1:
                self._users -= 1
                return self.flush(timeout_s)
            self._users = 0
            key = (_stream_key(self._store_arg), self.namespace, self.job, self.host)
            if Journal._registry.get(key) is self:
                del Journal._registry[key]
        self._shipper = self._thread
        return super().close(timeout_s)

    def _on_close(self, timeout_s: float) -> None:
        _live.discard(self)
        deadline = deadline_after(timeout_s, timeout_s, self._clock)
        if self.node_shipper:  # wait (within close's time) for the node shipper to store the rest
            with self._lock:
                segs = [*self._sealed, *([self._active] if self._active else [])]
                if self._active is not None:
                    self._active.note_committed(self._active.count)
            self._wait_handed_over([(s, s.count) for s in segs if s.durable], deadline)
            self._settle()
        self._report_unshipped()
        t = self._shipper
        if t is not None and t.is_alive():
            return  # still stuck in the store: leave the files mapped; recovery ships them
        with self._lock:
            segs = [*self._sealed, *([self._active] if self._active else [])]
            for s in segs:
                s.release(delete=s.shipped >= s.count)
            self._sealed.clear()
            self._active = None
            if self._spare is not None:
                self._spare.release(delete=True)
                self._spare = None
        if self._owns_store and self._store is not None:
            self._store.close()
        self._store = None
        node, self._node = self._node, None
        if node is not None:  # the last journal of this process closes its node shipper
            _aggregator.release(node, max(0.0, deadline - self._clock()))
        if is_process_local(self.url):
            try:
                self._dirs[0].rmdir()  # a per-process directory: leave nothing behind
            except OSError:
                pass

    def _report_unshipped(self) -> None:
        """At close: say what did not reach the store. Events in journal files wait for the
        next process of this store; events held in memory (no file could be made) are lost,
        and a warning gives their count and where they could not go."""
        with self._lock:
            segs = [*self._sealed, *([self._active] if self._active else [])]
            on_disk = sum(s.count - s.shipped for s in segs if s.durable)
            in_memory = sum(s.count - s.shipped for s in segs if not s.durable)
        if in_memory:
            self.lost += in_memory
            note_lost(in_memory)
            log.warning(
                "mlgoodput: %d events of %s/%s are lost: they were held in memory because %s,"
                " and could not be stored in %s before the journal closed",
                in_memory,
                self.namespace,
                self.job,
                self._fallback or "no journal file could be made",
                self.url,
            )
        if on_disk and not is_process_local(self.url):
            log.warning(
                "mlgoodput: %d events of %s/%s are not in %s yet; they stay in the journal under %s"
                " and the next process that opens this store ships them",
                on_disk,
                self.namespace,
                self.job,
                self.url,
                self._dirs[0],
            )

    def _on_fork_in_child(self) -> None:
        # The child must never write into the parent's shared mapping: it gets files of its own.
        self._lock = threading.Lock()
        self._settle_lock = threading.Lock()
        for s in [*self._sealed, *([self._active] if self._active else []), *([self._spare] if self._spare else [])]:
            s.forget()
        self._sealed = deque()
        self._active = None
        self._spare = None
        if self._owns_store:
            self._store = None  # reopened on first use, with a connection of the child's own
        self._node = None  # the child gets a node shipper of its own (the parent's stays the parent's)
        self.appended = self.shipped = self.volatile = self.closed_appends = self.lost = 0
        self._alive_every = 0.0  # a forked child (a data loader worker) is not the writer that lives

    def stats(self) -> dict[str, int]:
        """Counters for operators and tests."""
        return {
            "appended": self.appended,
            "shipped": self.shipped,
            "pending": self.pending(),
            "volatile": self.volatile,
            "lost": self.lost,
            "store_changes": self.store_changes,
            "failures": self.failures,
            "abandoned": self.abandoned,
        }

    def _backlog(self) -> int:
        return self.pending()


# -- process exit and fork -------------------------------------------------------------
_live: set[Journal] = set()


def _close_all_at_exit() -> None:
    """Ship what we can within the process's exit deadline (EXIT_DEADLINE_S, shared with the
    other at-exit closers); the rest stays journaled for the next process."""
    for j in list(_live):
        try:
            j._users = 1
            j.close(exit_time_left())
        except Exception:  # at exit, never raise; the journal file keeps the events
            pass


def _reset_registry_in_child() -> None:
    Journal._registry_lock = threading.Lock()


atexit.register(_close_all_at_exit)
at_fork_in_child(_reset_registry_in_child)
