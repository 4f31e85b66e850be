"""Journal recovery: what readers (the calculator, the CLI, the UI, the console) and a new
journal use to ship the segment files that other processes left behind.

A process killed with SIGKILL leaves its journal segments (`mlgoodput._segment`) in the
store's journal folders (`journal_dirs`). `recover_journals` ships every one of them;
`recover_changed_journals` does so for a reader before it reads, only when the folders
changed. Events are numbered by (writer, seq), so a store keeps each once however often a
file is shipped. Records that cannot be read are counted in the store's lost stream
(`LOSS_NAMESPACE`, `stored_losses`). The writer side is `mlgoodput._journal`.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import math
import os
import struct
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mlgoodput import _env
from mlgoodput._segment import (
    HEADER_SIZE,
    LEN,
    MAGIC,
    SUFFIX,
    SYNC_BYTES,
    TAG,
    VERSION,
    Decoded,
    decode_records_v1,
    new_writer_id,
    read_image,
    stream_hash,
    stream_of_name,
    write_watermark,
)
from mlgoodput._segment_columns import decode_columns
from mlgoodput._worker import at_fork_in_child
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
    "LOSS_NAMESPACE",
    "SHIP_BATCH",
    "UNKNOWN_STREAM",
    "StoreWatch",
    "damage_item",
    "in_time_order",
    "journal_dirs",
    "lost_in_process",
    "note_lost",
    "recover_changed_journals",
    "recover_dead",
    "recover_files",
    "recover_journals",
    "store_url",
    "stored_losses",
    "warn_damage",
    "writer_of",
]

log = logging.getLogger("mlgoodput")


class StoreWatch:
    """The identity of the store a shipper writes to (its store id, and the file's device and
    inode for SQLite), read before and after each write: a store deleted or replaced
    meanwhile is a StoreReplacedError (the events stay journaled and are shipped again), never
    an acknowledgement. The journal's own shipper and the node shipper both write through it."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.identity: str | None = None
        self.changes = 0  # times the store was found replaced or recreated

    def write(self, store: Store, write: Callable[[], None], what: str) -> None:
        """Run `write()` (which hands `what` to `store`) between two reads of the identity."""
        before = store_identity(store)
        if before != self.identity:
            if self.identity is not None:
                self.changes += 1
                log.warning(
                    "mlgoodput: the store %s was replaced or recreated (was %s, now %s): events"
                    " shipped before are not in it; shipping what is journaled to the new one",
                    self.url,
                    self.identity,
                    before,
                )
            self.identity = before
        write()
        after = store_identity(store)
        if after != before:
            raise StoreReplacedError(
                f"the store {self.url} changed while {what} was written ({before} -> {after});"
                " its events stay journaled and are shipped again"
            )


SHIP_BATCH = 65536  # events per store append


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


def store_url(store: Any) -> str:
    """The URL of a store given as an object, a URL or a path."""
    if isinstance(store, Store) and not isinstance(store, (str, os.PathLike)):
        return str(store.url)
    return resolve_store_url(store)


def recover_journals(store: Any) -> int:
    """Ship what journals of `store` left unshipped (from dead or live processes); return the
    number of events handed to the store. Idempotent: stores keep each (writer, seq) once."""
    url = store_url(store)
    if is_process_local(url):
        return 0  # a memory store dies with its process; its live journals ship to it already
    st = open_store(store)
    owned = st is not store
    try:
        return recover_dead(st, url, journal_dirs(url), include_live=True)
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
        url = store_url(store)
    if is_process_local(url):  # no other process can have journaled into it
        return 0
    dirs = _dirs_of(url)
    pid = os.getpid()
    with _seen_lock:
        quiet = _quiet.get(url)
    if quiet is not None and quiet[0] == pid and time.monotonic() < quiet[2] and _dir_stamps(dirs) == quiet[1]:
        return 0  # no file came or went in any folder since they were found holding none of another's
    began = time.time_ns()
    stamps = _dir_stamps(dirs)  # before the listing: a file made during it shows in the listing or a later mtime
    state = _folder_state(dirs)
    with _seen_lock:
        last = _seen.get(url)
        _quiet.pop(url, None)
    if last is not None and not last[1] and not state[1] and last[0] == state[0]:
        if not any(f[0].endswith(_SHIPPABLE) for f in state[0]) and max(stamps, default=-1) < began - _RACY_NS:
            with _seen_lock:
                if len(_quiet) >= 64:
                    _quiet.clear()
                _quiet[url] = (pid, stamps, time.monotonic() + _QUIET_FOR_S)
        return 0
    shipped = recover_journals(store)  # an OSError leaves `_seen` alone: the next call retries
    after = _folder_state(dirs)  # recovery removed what dead processes left
    with _seen_lock:
        _seen[url] = after
    return shipped


# url -> (pid, each journal folder's mtime, until when) when this process last found the folders holding
# no journal file of another process and unchanged since the listing before: a reader asks before each
# query, and one stat a folder tells whether a file came or went since (files that only grow
# are another process's, and then the folders are listed every time). Only mtimes older than
# the listing by _RACY_NS are kept: a file made in the same clock tick as an earlier change
# could leave a fresher mtime as it was.
_quiet: dict[str, tuple[int, tuple[int, ...], float]] = {}
_RACY_NS = 2_000_000_000
# and for this long at most: a folder whose mtimes cannot be trusted (a file system whose clock
# lags this host's, or coarser than _RACY_NS, a tool that sets them back) is listed again then
_QUIET_FOR_S = 10.0
_SHIPPABLE = (SUFFIX, ".tmp")  # what recovery reads; other files (a node shipper's lock, a
# damaged segment put aside) can stay in a quiet folder: they never grow into events


_EFFECTIVE = os.access in os.supports_effective_ids  # what a listing can see, in a setuid process too


def _dir_stamps(dirs: list[Path]) -> tuple[int, ...]:
    """Each folder's mtime in ns (-1: not there or unreadable): changes when a file comes or goes."""
    out = []
    for d in dirs:
        if not os.access(d, os.F_OK, effective_ids=_EFFECTIVE):  # (no exception for a folder not there)
            out.append(-1)
            continue
        try:
            out.append(os.stat(d).st_mtime_ns)
        except OSError:
            out.append(-1)
    return tuple(out)


# journal_dirs of each URL, by the environment variables it reads: a reader asks before each
# query, and the folders' names cost more to make than the listing that follows
_dirs_memo: dict[tuple[str, str | None, str | None, str | None], list[Path]] = {}


def _dirs_of(url: str) -> list[Path]:
    """`journal_dirs(url)` (read only), made again when an environment variable it reads changed."""
    key = (url, _env.get(_env.JOURNAL_DIR), _env.get("XDG_DATA_HOME"), _env.get("HOME"))
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


def recover_dead(store: Store, url: str, dirs: list[Path], *, include_live: bool = False) -> int:
    """Ship the segment files in `dirs` that their writers left (dead processes; live ones
    too with `include_live`), oldest first; return the events handed to the store."""
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
            writer = writer_of(p)
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


def writer_of(p: Path) -> int:
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
        writer = writer_of(p)
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


def _gone(p: Path, fd: int) -> bool:
    """Whether the file open as `fd` is no longer at `p`: removed (or replaced) after it was
    opened. Whoever removes a segment holds its lock, so a recoverer that gets the lock of a
    file already shipped and removed finds it so here and leaves it."""
    try:
        st = os.stat(p)
    except FileNotFoundError:
        return True
    mine = os.fstat(fd)
    return (st.st_ino, st.st_dev) != (mine.st_ino, mine.st_dev)


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
        if dead and _gone(p, fd):
            return 0  # another recoverer shipped and removed it between our open and our lock
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
            p.unlink(missing_ok=True)
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


def note_lost(n: int) -> None:
    """Count `n` events this process lost (`lost_in_process`)."""
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
    store.append(*damage_item(ns, job, host, writer, lost, recovered, p, header=header))
    warn_damage(ns, job, host, lost, recovered, p, header=header)


def damage_item(
    ns: str,
    job: str,
    host: int,
    writer: int,
    lost: int,
    recovered: int,
    p: Path,
    *,
    header: bool = False,
    seq: int = 0,
) -> tuple[str, str, EventBatch]:
    """The lost stream's (namespace, job, batch) that says `lost` records of a segment of
    `writer` could not be read: numbered after that writer (and `seq`, where in the segment
    the loss was found), so the same loss reported again is stored once."""
    ev = Event(
        Kind.METRIC,
        time.time(),
        host,
        None,
        float(lost),
        "journal_lost_events",
        {"namespace": ns, "file": str(p), "recovered": recovered, **({"header": True} if header else {})},
    )
    return LOSS_NAMESPACE, job, EventBatch((writer ^ 0x2A2A2A2A2A2A2A2A) or 1, seq, [ev])


def warn_damage(ns: str, job: str, host: int, lost: int, recovered: int, p: Path, *, header: bool = False) -> None:
    """Count a loss that is now in the store (`lost_in_process`) and say so once."""
    note_lost(lost)
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


def _reset_in_child() -> None:
    global _seen_lock
    _seen_lock = threading.Lock()


at_fork_in_child(_reset_in_child)
