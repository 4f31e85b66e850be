"""The durable local journal: every recorded event goes here first, then to the store.

`Journal.append` packs an event into a memory-mapped segment file (see `_segment`) and
returns: no database or network I/O, no exception for a storage problem, about a
microsecond. A background shipper (a `BackgroundWorker`) moves what is journaled into the
store in batches, numbered by (writer, seq) so a store keeps each event once however often
it is shipped. A process killed with SIGKILL leaves its segment files behind, and
`recover_journals` (or the next journal of that store to start) ships them.

One journal exists per (store URL, namespace, job, host) in a process; `for_stream` hands
out the shared instance.
"""

from __future__ import annotations

import atexit
import fcntl
import hashlib
import logging
import math
import os
import struct
import tempfile
import threading
import time
import zlib
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from mlgoodput import _env
from mlgoodput._segment import (
    BODY,
    DEFAULT_SEGMENT_SIZE,
    HEADER_SIZE,
    LEN,
    MAGIC,
    NO_STEP,
    REC,
    SUFFIX,
    SYNC,
    SYNC_BYTES,
    TAG,
    VERSION,
    Decoded,
    Segment,
    create_segment,
    decode_records_v1,
    encode_extra,
    fit_segment_size,
    memory_segment,
    new_writer_id,
    read_image,
    stream_hash,
    stream_of_name,
    write_watermark,
)
from mlgoodput._segment_columns import decode_columns
from mlgoodput._worker import BackgroundWorker, at_fork_in_child, exit_time_left
from mlgoodput.events import Event, EventBatch, Kind
from mlgoodput.store import (
    ColumnEvents,
    Store,
    StoreReplacedError,
    is_process_local,
    open_store,
    resolve_store_url,
    store_file,
    store_identity,
)

__all__ = [
    "Journal",
    "in_time_order",
    "journal_dirs",
    "recover_changed_journals",
    "recover_files",
    "recover_journals",
    "stored_losses",
]

log = logging.getLogger("mlgoodput")

SHIP_BATCH = 65536  # events per store append
SHIP_INTERVAL_S = 0.5
_NAN = float("nan")
_pack_body = BODY.pack
_pack_tagged = struct.Struct(f"{TAG.format}{BODY.size}s").pack_into  # TAG, then the packed BODY
_pack_len = LEN.pack_into
_crc32 = zlib.crc32


def journal_dirs(url: str) -> list[Path]:
    """Where journals of the store at `url` live, the preferred directory first.

    $MLGOODPUT_JOURNAL_DIR wins when set. Else a SQLite store keeps them beside its file
    (`<db>.mlgoodput-journals/`), with a per-user directory keyed by a hash of the URL as the
    fallback when that one cannot be written. Memory stores live and die with their
    process, so their journals go to a per-process temporary directory.
    """
    key = hashlib.sha256(url.encode("utf-8")).hexdigest()[:16]
    env = os.environ.get(_env.JOURNAL_DIR)
    if env:
        return [Path(env).expanduser() / key]
    if is_process_local(url):
        return [Path(tempfile.gettempdir()) / f"mlgoodput-journals-{os.getuid()}" / f"{key}-{os.getpid()}"]
    dirs: list[Path] = []
    path = store_file(url)
    if path is not None:
        dirs.append(Path(path + ".mlgoodput-journals"))
    dirs.append(_env.data_dir() / "journals" / key)
    return dirs


def _store_url(store: Any) -> str:
    if isinstance(store, Store) and not isinstance(store, (str, os.PathLike)):
        return str(store.url)
    return resolve_store_url(store)


def _stream_key(store: Any) -> str:
    """What identifies a store for sharing journals: its URL, except that a memory store
    object is its own store whatever its URL says (tests build many `MemoryStore()`)."""
    url = _store_url(store)
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
            return [j for (_, _, jb, _), j in cls._registry.items() if jb == job and not j._closed]

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
            if j is None or j._closed:
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
    ) -> None:
        self.url = _store_url(store)
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
        self._meta = {"store": self.url, "namespace": namespace, "job": job, "host": host}
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
        self.store_changes = 0  # times the store was found replaced or recreated
        self._identity: str | None = None
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
        """Hand one batch to the store; raise unless the same store holds it afterwards.

        The store's identity (its store id, and the file's device and inode for SQLite) is
        read before and after: a store deleted or replaced meanwhile is a StoreError (the
        journal keeps the events and ships them again), never an acknowledgement."""
        before = store_identity(store)
        if before != self._identity:
            if self._identity is not None:
                self.store_changes += 1
                log.warning(
                    "mlgoodput: the store %s was replaced or recreated (was %s, now %s): events"
                    " shipped before are not in it; shipping what is journaled to the new one",
                    self.url,
                    self._identity,
                    before,
                )
            self._identity = before
        store.append(self.namespace, self.job, batch)
        after = store_identity(store)
        if after != before:
            raise StoreReplacedError(
                f"the store {self.url} changed while a batch was written"
                f" ({before} -> {after}); the batch stays journaled and is shipped again"
            )

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
                with self._lock:
                    if self._sealed and self._sealed[0] is seg:
                        self._sealed.popleft()
                seg.release(delete=True)
        if need_spare and self._want_spare():
            spare = self._new_segment(self.segment_size)
            with self._lock:
                if self._spare is None:
                    self._spare = spare
                    spare = None  # type: ignore[assignment]
            if spare is not None:
                spare.release(delete=True)
        if not self._recovered:  # once per journal: ship what dead processes left behind
            if not is_process_local(self.url):
                _recover_dead(store, self.url, self._dirs)
            self._recovered = True
        with self._lock:
            backlog = any(s.shipped < s.count for s in [*self._sealed, *([self._active] if self._active else [])])
        if backlog:
            self.wake()  # appended during this round: go again at once, not after the interval
        return True  # everything appended before this round started is in the store

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
            return sum(s.count - s.shipped for s in segs)

    # -- lifecycle -------------------------------------------------------------------
    def flush(self, timeout_s: float | None = None) -> bool:
        """True once everything appended before this call is in the store."""
        if self._closed:
            return self.pending() == 0
        return super().flush(timeout_s)

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
            _note_lost(in_memory)
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
        for s in [*self._sealed, *([self._active] if self._active else []), *([self._spare] if self._spare else [])]:
            s.forget()
        self._sealed = deque()
        self._active = None
        self._spare = None
        if self._owns_store:
            self._store = None  # reopened on first use, with a connection of the child's own
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


# -- recovery ------------------------------------------------------------------------
def recover_journals(store: Any) -> int:
    """Ship what journals of `store` left unshipped (from dead or live processes); return the
    number of events handed to the store. Idempotent: stores keep each (writer, seq) once."""
    url = _store_url(store)
    if is_process_local(url):
        return 0  # a memory store dies with its process; its live journals ship to it already
    st = open_store(store)
    owned = st is not store
    try:
        return _recover_dead(st, url, journal_dirs(url), include_live=True)
    finally:
        if owned:
            st.close()


# What each store's journal folders looked like after this process last recovered them:
# url -> (their files' names, mtimes and sizes, whether another live process held one)
_seen: dict[str, tuple[tuple[tuple[str, int, int], ...], bool]] = {}
_seen_lock = threading.Lock()


def recover_changed_journals(store: Any, url: str | None = None) -> int:
    """`recover_journals`, run by readers (the calculator, the CLI, the monitor) before they
    read: once per store in this process, then again only when the journal folders changed
    (a file appeared, went or grew) or when another live process is journaling (its files
    change without a listing showing it). Returns the events handed to the store. `url`:
    the store's URL, from a caller that holds the store object (saves finding it again)."""
    if url is None:
        url = _store_url(store)
    if is_process_local(url):  # no other process can have journaled into it
        return 0
    dirs = _dirs_of(url)
    state = _folder_state(dirs)
    with _seen_lock:
        last = _seen.get(url)
    if last is not None and not last[1] and not state[1] and last[0] == state[0]:
        return 0
    shipped = recover_journals(store)  # an OSError leaves `_seen` alone: the next call retries
    after = _folder_state(dirs)  # recovery removed what dead processes left
    with _seen_lock:
        _seen[url] = after
    return shipped


# journal_dirs of each URL, by the environment variables it reads: a reader asks before each
# query, and the folders' names cost more to make than the listing that follows
_dirs_memo: dict[tuple[str, str | None, str | None, str | None], list[Path]] = {}


def _dirs_of(url: str) -> list[Path]:
    """`journal_dirs(url)` (read only), made again when an environment variable it reads changed."""
    env = os.environ
    key = (url, env.get(_env.JOURNAL_DIR), env.get("XDG_DATA_HOME"), env.get("HOME"))
    got = _dirs_memo.get(key)
    if got is None:
        if len(_dirs_memo) >= 64:
            _dirs_memo.clear()
        got = _dirs_memo[key] = journal_dirs(url)
    return got


def _folder_state(dirs: list[Path]) -> tuple[tuple[tuple[str, int, int], ...], bool]:
    """(name, mtime, size) of every journal file not of this process, and whether another
    live process holds one of them (checked with the lock a live owner keeps)."""
    mine = f"{os.getpid()}-"
    files: list[tuple[str, int, int]] = []
    others_live = False
    for d in dirs:
        try:
            with os.scandir(d) as it:
                entries = list(it)
        except OSError:
            continue
        for e in entries:
            if e.name.startswith(mine):
                continue  # this process's own journals ship themselves
            try:
                st = e.stat()
            except OSError:
                continue
            files.append((e.path, st.st_mtime_ns, st.st_size))
            if not others_live and e.name.endswith(SUFFIX):
                others_live = _held(e.path)
    return tuple(sorted(files)), others_live


def _held(path: str) -> bool:
    """Whether a live process holds the journal file at `path` (its owner keeps it locked)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    else:
        return False
    finally:
        os.close(fd)  # closing releases the probe's lock


def _recover_dead(store: Store, url: str, dirs: list[Path], *, include_live: bool = False) -> int:
    total = 0
    for d in dirs:
        try:
            names = sorted(os.listdir(d))
        except OSError:
            continue
        segs: list[Path] = []
        for fname in names:
            if fname.endswith(".tmp"):
                _drop_stale_tmp(d / fname)
            elif fname.endswith(SUFFIX):
                segs.append(d / fname)
        held: set[int] = set()  # writers with a segment another process holds: their later ones wait
        for p in in_time_order(segs):
            writer = _writer_of(p)
            if writer in held:
                continue
            try:
                n = _recover_segment(store, url, p, include_live)
            except OSError:
                raise  # storage trouble (StoreError is an OSError): the caller retries
            except Exception as e:  # a damaged file must not stop the others
                log.warning("mlgoodput: skipping unreadable journal %s: %s", p, e)
                continue
            if n is None:
                held.add(writer)
            else:
                total += n
    return total


def _writer_of(p: Path) -> int:
    """The writer a segment's file name gives (0 when it does not)."""
    named = stream_of_name(p.name)
    return named.writer if named is not None else 0


def recover_files(store: Store, paths: Sequence[Path]) -> int:
    """Ship the given dead segment files (a console spool's own), in time order, deleting each
    once stored; return the events handed to the store. Storage trouble raises (OSError) and
    leaves the rest for a later call."""
    url = str(store.url)
    total = 0
    held: set[int] = set()
    for p in in_time_order(list(paths)):
        writer = _writer_of(p)
        if writer in held:
            continue
        n = _recover_segment(store, url, p, False)
        if n is None:
            # another process is shipping this one: this writer's later records must not
            # reach the store before it (the store's exactly-once mark would skip them)
            held.add(writer)
        else:
            total += n
    return total


_FIRST_TIME_AT = HEADER_SIZE + LEN.size + TAG.size + 8  # a first record's time (after index, kind, flags, name length)


def in_time_order(paths: list[Path]) -> list[Path]:
    """Segment files in the order their events happened (each by its first record's time), so
    a store and the accounting receive a dead process's pages as they were written, never the
    last part of a job first. Segments of one writer keep the order of their record numbers
    (`base`), which the store's exactly-once mark needs. Unreadable files go last."""
    keyed: list[tuple[float, str, int, int, Path]] = []
    for p in paths:
        t, writer, base = math.inf, 0, 0
        try:
            with open(p, "rb") as f:
                head = f.read(_FIRST_TIME_AT + 8)
            img = read_image(head[:HEADER_SIZE], os.path.getsize(p))
            if img is not None:
                writer, base = img.writer, int(img.meta.get("base", 0) or 0)
                if (
                    img.version >= 2
                    and len(head) == _FIRST_TIME_AT + 8
                    and head[HEADER_SIZE : HEADER_SIZE + 4] != bytes(4)
                ):
                    (t,) = struct.unpack_from("<d", head, _FIRST_TIME_AT)
                    if not math.isfinite(t):
                        t = math.inf
        except (OSError, ValueError, TypeError):
            pass
        keyed.append((t, p.name, writer, base, p))
    keyed.sort(key=lambda k: (k[0], k[1]))
    # one writer's segments in the order of their numbers, in the places its segments took
    places: dict[int, list[int]] = {}
    for i, k in enumerate(keyed):
        if k[2]:
            places.setdefault(k[2], []).append(i)
    out = [k[4] for k in keyed]
    for idx in places.values():
        if len(idx) > 1:
            for i, k in zip(idx, sorted((keyed[i] for i in idx), key=lambda k: k[3]), strict=True):
                out[i] = k[4]
    return out


def _drop_stale_tmp(p: Path) -> None:
    """A half-made segment whose maker died: nothing in it was ever appended."""
    try:
        if time.time() - p.stat().st_mtime < 60:
            return
        fd = os.open(p, os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        p.unlink()
    except OSError:
        pass
    finally:
        os.close(fd)


def _recover_segment(store: Store, url: str, p: Path, include_live: bool) -> int | None:
    """Ship one segment file; the events handed to the store, or None when it was left alone
    because another process holds it (its owner, or another recoverer) and `include_live` is
    off: one writer's later segments must then wait too."""
    try:
        fd = os.open(p, os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        return 0
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            dead = True
        except OSError:
            dead = False  # its owner is alive (or another recoverer is at it)
        if not dead and not include_live:
            return None
        size = os.fstat(fd).st_size
        img = read_image(os.pread(fd, HEADER_SIZE, 0), size)
        if img is None:
            newer = _newer_format(os.pread(fd, HEADER_SIZE, 0))
            if newer:
                log.warning(
                    "mlgoodput: journal %s is of a newer format (version %d); left for a newer mlgoodput to ship",
                    p,
                    newer,
                )
            elif dead:
                _set_aside(store, url, fd, p, size)
            return 0
        if img.meta.get("store") != url:
            return 0
        ns, job = str(img.meta.get("namespace")), str(img.meta.get("job"))
        base = img.meta.get("base", 0)  # the number of its first record, for a writer that spans segments
        base = base if isinstance(base, int) and not isinstance(base, bool) and base >= 0 else 0
        data = os.pread(fd, size, 0)
        off, nxt = img.shipped_off, img.shipped
        total = lost = 0
        while True:
            tail = (img.committed, img.exact) if dead else (None, False)
            if img.version >= 2:
                dc = decode_columns(data, off, size, img.host, SHIP_BATCH, nxt, *tail)
                events: Sequence[Event] = ColumnEvents(dc.columns)
                first, nxt, off, d_lost, at_end = dc.first_index, dc.next_index, dc.end, dc.lost, dc.at_end
            else:
                d: Decoded = decode_records_v1(data, off, size, img.host, SHIP_BATCH, nxt, *tail)
                events = d.events
                first, nxt, off, d_lost, at_end = d.first_index, d.next_index, d.end, d.lost, d.at_end
            lost += d_lost
            if events:
                store.append(ns, job, EventBatch(img.writer, base + first, events))
                total += len(events)
            if dead:
                write_watermark(fd, nxt, off)
            if at_end or (not events and not d_lost):
                break
        if lost:
            _report_damage(store, url, ns, job, img.host, img.writer, lost, total, p)
        if dead:
            p.unlink()
        if total:
            # internal bookkeeping: a debug line, never a message on a user's console
            log.debug("mlgoodput: recovered %d journaled events of %s/%s from %s", total, ns, job, p)
        return total
    finally:
        os.close(fd)


LOSS_NAMESPACE = "mlgoodput.lost"  # where recovered journals record what they could not read
UNKNOWN_STREAM = "(unknown)"  # the job of a damaged segment whose file name does not say
_lost_in_process = 0


def stored_losses(store: Store, job: str | None = None) -> dict[tuple[str, str], int]:
    """(namespace, job) -> events reported lost in the store's lost stream (damaged journal
    records, records a console client dropped); of one job when `job` is given; empty when
    nothing was ever lost."""
    out: dict[tuple[str, str], int] = {}
    for info in store.jobs():
        if info.namespace != LOSS_NAMESPACE or (job is not None and info.job != job):
            continue
        cols = store.read(LOSS_NAMESPACE, info.job).columns
        for i in range(len(cols)):
            ns = (cols.attr(i) or {}).get("namespace")
            if isinstance(ns, str):
                key = (ns, info.job)
                out[key] = out.get(key, 0) + int(cols.values[i])
    return out


def _note_lost(n: int) -> None:
    global _lost_in_process
    _lost_in_process += n


def lost_in_process() -> int:
    """Events this process reported lost (memory fallback at close, damaged journal records)."""
    return _lost_in_process


def _report_damage(
    store: Store,
    url: str,
    ns: str,
    job: str,
    host: int,
    writer: int,
    lost: int,
    recovered: int,
    p: Path,
    *,
    header: bool = False,
) -> None:
    """Keep the count of lost records in the store, where `mlgoodput jobs` and `report` show
    it, then warn. Numbered after the segment's writer, so a second recovery of the same file
    does not count it twice."""
    ev = Event(
        Kind.METRIC,
        time.time(),
        host,
        None,
        float(lost),
        "journal_lost_events",
        {"namespace": ns, "file": str(p), "recovered": recovered, **({"header": True} if header else {})},
    )
    store.append(LOSS_NAMESPACE, job, EventBatch((writer ^ 0x2A2A2A2A2A2A2A2A) or 1, 0, [ev]))
    _note_lost(lost)
    if header:
        log.warning(
            "mlgoodput: journal %s has a damaged header: its %d records of %s/%s (host %d) cannot be"
            " shipped and are reported lost (the file is kept as %s)",
            p,
            lost,
            ns,
            job,
            host,
            p.with_suffix(".damaged").name,
        )
    else:
        log.warning(
            "mlgoodput: journal %s: %d damaged records of %s/%s could not be read and are lost (%d recovered)",
            p,
            lost,
            ns,
            job,
            recovered,
        )


def _newer_format(head: bytes) -> int:
    """The version of a segment written by a newer mlgoodput (both header copies agree on a
    plausible version above ours), else 0: such a file is left alone, not set aside."""
    versions = {
        struct.unpack_from("<I", head, at + 4)[0]
        for at in (0, 2048)
        if len(head) >= at + 8 and head[at : at + 4] == MAGIC
    }
    v = versions.pop() if len(versions) == 1 else 0
    return v if VERSION < v < 100 else 0


def _set_aside(store: Store, url: str, fd: int, p: Path, size: int) -> None:
    """A dead segment whose header (both copies) is unreadable: it cannot be shipped. Its
    records are counted and the loss goes to the store's lost stream under the job and host
    its file name gives (`stream_tag`), where `jobs` and `report` show it; then the file is
    renamed `.damaged` (kept for a human). A store that fails leaves the file for a later try."""
    data = os.pread(fd, size, 0)
    n = data.count(SYNC_BYTES, HEADER_SIZE)
    named = stream_of_name(p.name)
    ns, job, host, writer = UNKNOWN_STREAM, UNKNOWN_STREAM, 0, 0
    if named is not None:
        writer, host = named.writer, named.host or 0
        if named.job is not None and named.namespace is not None:
            ns, job = named.namespace, named.job
        elif named.hashed is not None:
            for info in store.jobs():
                if stream_hash(info.namespace, info.job) == named.hashed:
                    ns, job = info.namespace, info.job
                    break
    if n:
        _report_damage(store, url, ns, job, host, writer or new_writer_id(), n, 0, p, header=True)
    try:
        os.rename(p, p.with_suffix(".damaged"))
    except OSError:
        pass


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
    global _seen_lock
    Journal._registry_lock = threading.Lock()
    _seen_lock = threading.Lock()


atexit.register(_close_all_at_exit)
at_fork_in_child(_reset_registry_in_child)
