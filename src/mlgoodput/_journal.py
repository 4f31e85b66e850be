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
import os
import struct
import tempfile
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any, ClassVar

from mlgoodput import _env
from mlgoodput._segment import (
    BODY,
    DEFAULT_SEGMENT_SIZE,
    HEADER_SIZE,
    LEN,
    NO_STEP,
    REC,
    SUFFIX,
    Segment,
    create_segment,
    decode_records,
    encode_extra,
    memory_segment,
    read_image,
    write_watermark,
)
from mlgoodput._shipcols import ship_next
from mlgoodput._worker import BackgroundWorker
from mlgoodput.events import EventBatch, Kind
from mlgoodput.store import Store, open_store, resolve_store_url

__all__ = ["Journal", "journal_dirs", "recover_journals"]

log = logging.getLogger("mlgoodput")

SHIP_BATCH = 65536  # events per store append
SHIP_INTERVAL_S = 0.5
_NAN = float("nan")
_pack_len = LEN.pack_into
_pack_body = BODY.pack_into


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
    if url.startswith("memory://"):
        return [Path(tempfile.gettempdir()) / f"mlgoodput-journals-{os.getuid()}" / f"{key}-{os.getpid()}"]
    dirs: list[Path] = []
    if url.startswith("sqlite://"):
        dirs.append(Path(url[len("sqlite://") :] + ".mlgoodput-journals"))
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
    if url.startswith("memory://") and isinstance(store, Store) and not isinstance(store, (str, os.PathLike)):
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
            try:
                _pack_body(
                    buf, off + 4, kind, flags, name_len, time,
                    NO_STEP if step is None else step,
                    _NAN if value is None else value,
                )
            except struct.error as e:  # nothing is committed: the length was not written
                raise ValueError(f"cannot journal kind={kind!r} time={time!r} step={step!r} value={value!r}: {e}") from None
            if extra:
                buf[off + REC : off + need] = extra
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
            seg = self._new_segment(size)
        self._active = seg
        return seg

    def _new_segment(self, size: int) -> Segment:
        err: OSError | None = None
        for d in self._dirs:
            try:
                return create_segment(d, size, self.host, self._meta)
            except OSError as e:
                err = e
        self._note_error(OSError(f"cannot create a journal file in {self._dirs[0]}: {err}; "
                                 "keeping events in memory until one can be made"))
        return memory_segment(size, self.host, self._meta)

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

    def _work(self) -> bool:
        store = self._get_store()
        with self._lock:
            segs = [*self._sealed]
            if self._active is not None:
                segs.append(self._active)
            snaps = [(s, s.count, s.off) for s in segs]
            need_spare = (
                self._spare is None
                and self._active is not None
                and self._active.off - HEADER_SIZE > (self._active.size - HEADER_SIZE) // 2
            )
        for seg, count, off in snaps:
            while seg.shipped < count:
                n, end = ship_next(store, self.namespace, self.job, seg, off, self.host, SHIP_BATCH)
                if not n:
                    break
                seg.mark_shipped(seg.shipped + n, end)
                self.shipped += n
                if not seg.durable:
                    self.volatile += n
            if seg.sealed and seg.shipped >= seg.count:
                with self._lock:
                    if self._sealed and self._sealed[0] is seg:
                        self._sealed.popleft()
                seg.release(delete=True)
        if need_spare:
            spare = self._new_segment(self.segment_size)
            with self._lock:
                if self._spare is None:
                    self._spare = spare
                    spare = None  # type: ignore[assignment]
            if spare is not None:
                spare.release(delete=True)
        if not self._recovered:  # once per journal: ship what dead processes left behind
            if not self.url.startswith("memory://"):
                _recover_dead(store, self.url, self._dirs)
            self._recovered = True
        with self._lock:
            return all(s.shipped >= s.count for s in [*self._sealed, *([self._active] if self._active else [])])

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

    def _on_close(self) -> None:
        _live.discard(self)
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
        if self.url.startswith("memory://"):
            try:
                self._dirs[0].rmdir()  # a per-process directory: leave nothing behind
            except OSError:
                pass

    def _after_fork_in_child(self) -> None:
        # The child must never write into the parent's shared mapping: it gets files of its own.
        self._lock = threading.Lock()
        for s in [*self._sealed, *([self._active] if self._active else []), *([self._spare] if self._spare else [])]:
            s.forget()
        self._sealed = deque()
        self._active = None
        self._spare = None
        if self._owns_store:
            self._store = None  # reopened on first use, with a connection of the child's own
        self.appended = self.shipped = self.volatile = self.closed_appends = 0
        super()._after_fork_in_child()

    def stats(self) -> dict[str, int]:
        """Counters for operators and tests."""
        return {
            "appended": self.appended,
            "shipped": self.shipped,
            "pending": self.pending(),
            "volatile": self.volatile,
            "failures": self.failures,
        }


# -- recovery ------------------------------------------------------------------------
def recover_journals(store: Any) -> int:
    """Ship what journals of `store` left unshipped (from dead or live processes); return the
    number of events handed to the store. Idempotent: stores keep each (writer, seq) once."""
    url = _store_url(store)
    if url.startswith("memory://"):
        return 0  # a memory store dies with its process; its live journals ship to it already
    st = open_store(store)
    owned = st is not store
    try:
        return _recover_dead(st, url, journal_dirs(url), include_live=True)
    finally:
        if owned:
            st.close()


def _recover_dead(store: Store, url: str, dirs: list[Path], *, include_live: bool = False) -> int:
    total = 0
    for d in dirs:
        try:
            names = sorted(os.listdir(d))
        except OSError:
            continue
        for fname in names:
            p = d / fname
            if fname.endswith(".tmp"):
                _drop_stale_tmp(p)
            elif fname.endswith(SUFFIX):
                try:
                    total += _recover_segment(store, url, p, include_live)
                except OSError:
                    raise  # storage trouble (StoreError is an OSError): the caller retries
                except Exception as e:  # a damaged file must not stop the others
                    log.warning("mlgoodput: skipping unreadable journal %s: %s", p, e)
    return total


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


def _recover_segment(store: Store, url: str, p: Path, include_live: bool) -> int:
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
            return 0
        size = os.fstat(fd).st_size
        img = read_image(os.pread(fd, HEADER_SIZE, 0), size)
        if img is None or img.meta.get("store") != url:
            return 0
        ns, job = str(img.meta.get("namespace")), str(img.meta.get("job"))
        shipped, base = img.shipped, img.shipped_off
        tail = os.pread(fd, size - base, base)  # only what the owner has not shipped
        off = 0
        total = 0
        while True:
            events, off = decode_records(tail, off, len(tail), img.host, SHIP_BATCH)
            if not events:
                break
            store.append(ns, job, EventBatch(img.writer, shipped, events))
            shipped += len(events)
            total += len(events)
            if dead:
                write_watermark(fd, shipped, base + off)
        if dead:
            p.unlink()
        if total:
            log.info("mlgoodput: recovered %d journaled events of %s/%s from %s", total, ns, job, p)
        return total
    finally:
        os.close(fd)


# -- process exit and fork -------------------------------------------------------------
_live: set[Journal] = set()
EXIT_TIMEOUT_S = 5.0


def _close_all_at_exit() -> None:
    """Ship what we can at exit within one shared deadline; the rest stays journaled."""
    deadline = time.monotonic() + EXIT_TIMEOUT_S
    for j in list(_live):
        left = max(0.0, deadline - time.monotonic())
        try:
            j._users = 1
            j.close(left)
        except Exception:  # at exit, never raise; the journal file keeps the events
            pass


def _reset_registry_in_child() -> None:
    Journal._registry_lock = threading.Lock()


atexit.register(_close_all_at_exit)
os.register_at_fork(after_in_child=_reset_registry_in_child)
