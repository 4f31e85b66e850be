"""Journal segments: fixed-size, memory-mapped, append-only files of encoded events.

A segment is a 4 KiB header page followed by records. The kernel keeps the pages of a
shared mapping when the process dies, even by SIGKILL, so a record is durable the moment it
is written. A record is written payload first and its length last; a reader stops at the
first zero length, so it never sees half a record.

Format version 2 (little-endian). Header page: two copies of the stream header (at 0 and
2048), each a magic, the version, a CRC32, the writer id, pid, host and the stream constants
(store URL, namespace, job) as JSON, so one damaged copy does not orphan the file; at 4056
the count of records known committed (written by the shipper and at sealing, with its
complement); at 4064 a shipping watermark (records shipped, byte offset) with its own CRC;
at 4088 a sealed flag.
Record: u32 length (of the whole record, before padding to 8 bytes), u32 sync marker, u32
CRC32 of what follows, u32 record index, u8 kind code, u8 flags (1: has name, 2: has
attrs), u16 name length, f64 time, i64 step, f64 value, then the UTF-8 name and JSON attrs.
The CRC means damaged bytes are never stored as wrong values; the marker and the index let
a reader resynchronize after a damaged record and count exactly how many it skipped.
Version 1 files (no checksums) are still read.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import math
import mmap
import os
import re
import secrets
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from mlgoodput.events import Event, Kind

MAGIC = b"MLGJ"
VERSION = 2
HEADER_SIZE = 4096
DEFAULT_SEGMENT_SIZE = 4 << 20
MIN_SEGMENT_SIZE = 64 << 10  # the smallest segment a small disk or a file-size limit gets
SUFFIX = ".seg"
NO_STEP = -(2**63)
MAX_NAME_BYTES = 0xFFFF

# -- header page ----------------------------------------------------------------------------
_COPY = struct.Struct("<4sIIqiiI")  # magic, version, crc, writer, pid, host, meta_len
_COPY_AT = (0, 2048)
_COPY_MAX = 2048 - 64
_WATERMARK = struct.Struct("<qqI")  # shipped (next record index), shipped_off, crc
_WATERMARK_AT = 4064
_SEALED_AT = 4088
_COMMITTED = struct.Struct("<II")  # records known committed (bit 31: the segment is sealed, so exact), complement
_COMMITTED_AT = 4056
_SEALED_BIT = 0x80000000
# -- records --------------------------------------------------------------------------------
LEN = struct.Struct("<I")
SYNC = 0x4A52474D  # b"MGRJ" read little-endian
SYNC_BYTES = struct.pack("<I", SYNC)
TAG = struct.Struct("<II")  # sync marker, crc (at record offset 4)
BODY = struct.Struct("<IBBHdqd")  # index, kind, flags, name_len, time, step, value (at offset 12)
REC = LEN.size + TAG.size + BODY.size  # 44: a record without name or attrs
BODY_AT = LEN.size + TAG.size
_NAN = float("nan")
_KINDS: dict[int, Kind] = {k.value: k for k in Kind}
_crc32 = zlib.crc32


def new_writer_id() -> int:
    """A random 63-bit id: fits SQLite's signed INTEGER, unique per segment in practice."""
    return secrets.randbits(63) or 1


# one encoder made once: json.dumps with options builds a new encoder at every call
_encode_attrs = json.JSONEncoder(separators=(",", ":"), default=str).encode


def encode_extra(name: str | None, attrs: dict[str, Any] | None) -> tuple[int, bytes, int]:
    """(flags, extra bytes, name length) for the optional text fields of a record."""
    flags = 0
    nb = b""
    ab = b""
    if name is not None:
        flags |= 1
        nb = name.encode("utf-8")
        if len(nb) > MAX_NAME_BYTES:
            raise ValueError(f"name must be at most {MAX_NAME_BYTES} bytes of UTF-8, got {len(nb)} bytes")
    if attrs is not None:
        flags |= 2
        ab = _encode_attrs(attrs).encode("utf-8")
    return flags, nb + ab, len(nb)


def write_record(
    buf: mmap.mmap | bytearray,
    off: int,
    index: int,
    kind: int,
    flags: int,
    name_len: int,
    time: float,
    step: int,
    value: float,
    extra: bytes,
) -> int:
    """Write one record at `off` (payload, then marker and checksum, the length last: the
    length commits it); return its padded size. struct.error leaves nothing committed."""
    body = BODY.pack(index, kind, flags, name_len, time, step, value)
    n = REC + len(extra)
    buf[off + BODY_AT : off + REC] = body
    if extra:
        buf[off + REC : off + n] = extra
        crc = _crc32(extra, _crc32(body))
    else:
        crc = _crc32(body)
    TAG.pack_into(buf, off + 4, SYNC, crc)
    LEN.pack_into(buf, off, n)
    return (n + 7) & ~7


@dataclass(slots=True)
class Segment:
    """One segment in memory: its buffer (a shared mmap, or a bytearray when no file could be
    made), the file and its lock, and counters. `count`/`off` grow under the journal's lock;
    `shipped` is the index of the next record to ship, `lost` counts damaged records skipped."""

    buf: mmap.mmap | bytearray
    size: int
    writer: int
    path: Path | None
    fd: int
    count: int = 0
    off: int = HEADER_SIZE
    shipped: int = 0
    shipped_off: int = HEADER_SIZE
    sealed: bool = False
    lost: int = 0

    @property
    def durable(self) -> bool:
        return self.path is not None

    def seal(self) -> None:
        self.sealed = True
        self.buf[_SEALED_AT] = 1
        self.note_committed(self.count)

    def note_committed(self, count: int) -> None:
        """Record in the header that `count` records are committed (exact once sealed): a
        recoverer then counts damaged records at the tail exactly. Written by the shipper
        each round and at sealing, never on the append path."""
        v = min(count, 0x7FFFFFFF) | (_SEALED_BIT if self.sealed else 0)
        _COMMITTED.pack_into(self.buf, _COMMITTED_AT, v, v ^ 0xFFFFFFFF)

    def mark_shipped(self, shipped: int, shipped_off: int) -> None:
        self.shipped = shipped
        self.shipped_off = shipped_off
        self.buf[_WATERMARK_AT : _WATERMARK_AT + _WATERMARK.size] = _watermark(shipped, shipped_off)

    def shipped_mark(self) -> int | None:
        """The records shipped as the header's watermark says (a node shipper in another
        process writes it there, see `mlgoodput._aggregator`); None when it cannot be read
        now (a torn write: its checksum fails) or the segment is released."""
        try:
            raw = bytes(self.buf[_WATERMARK_AT : _WATERMARK_AT + _WATERMARK.size])
        except ValueError:  # unmapped meanwhile
            return None
        shipped, shipped_off, crc = _WATERMARK.unpack(raw)
        if _crc32(raw[:16]) != crc or shipped < 0 or not HEADER_SIZE <= shipped_off <= self.size:
            return None
        return int(shipped)

    def release(self, *, delete: bool) -> None:
        """Unmap and close; delete the file too (only once everything in it is shipped)."""
        if delete and self.path is not None:
            try:
                self.path.unlink()
            except FileNotFoundError:
                pass
        self._release()  # closing the descriptor releases the lock: the file is now recoverable

    def forget(self) -> None:
        """In a forked child: drop the parent's segment without touching its file
        (the parent's own descriptor still holds the lock)."""
        self._release()

    def _release(self) -> None:
        """Unmap the buffer and close this process's descriptor."""
        if isinstance(self.buf, mmap.mmap):
            try:
                self.buf.close()
            except (BufferError, ValueError):
                pass
        if self.fd >= 0:
            try:
                os.close(self.fd)
            except OSError:
                pass
            self.fd = -1


def _watermark(shipped: int, shipped_off: int) -> bytes:
    head = struct.pack("<qq", shipped, shipped_off)
    return head + struct.pack("<I", _crc32(head))


def _header(writer: int, host: int, meta: dict[str, Any]) -> bytes:
    """The header page: two checksummed copies of the stream header and a zero watermark."""
    mb = json.dumps(meta, separators=(",", ":")).encode("utf-8")
    if _COPY.size + len(mb) > _COPY_MAX:
        raise ValueError(f"stream names too long for a journal header ({len(mb)} bytes)")
    tail = struct.pack("<qiiI", writer, os.getpid(), host, len(mb)) + mb
    copy = MAGIC + struct.pack("<II", VERSION, _crc32(tail)) + tail
    page = bytearray(HEADER_SIZE)
    for at in _COPY_AT:
        page[at : at + len(copy)] = copy
    page[_WATERMARK_AT : _WATERMARK_AT + _WATERMARK.size] = _watermark(0, HEADER_SIZE)
    _COMMITTED.pack_into(page, _COMMITTED_AT, 0, 0xFFFFFFFF)
    return bytes(page)


def memory_segment(size: int, host: int, meta: dict[str, Any]) -> Segment:
    """A segment that lives only in this process: used when no journal file can be made."""
    writer = new_writer_id()
    buf = bytearray(size)
    buf[:HEADER_SIZE] = _header(writer, host, meta)
    return Segment(buf, size, writer, None, -1)


def create_segment(directory: Path, size: int, host: int, meta: dict[str, Any], writer: int | None = None) -> Segment:
    """A new locked, preallocated, mapped segment file in `directory` (OSError on failure).

    The file is built under a temporary name and renamed, so a recoverer never sees a
    segment without a header. Preallocation means a full disk fails here, not later as a
    SIGBUS while writing to the mapping. `writer`: the store writer its records belong to
    (else a new one); a writer whose records span segments numbers them on with `meta["base"]`.
    """
    if writer is None:
        writer = new_writer_id()
        name = f"{os.getpid()}-{writer:016x}{stream_tag(meta)}{SUFFIX}"
    else:
        name = f"{os.getpid()}-{writer:016x}-{secrets.token_hex(4)}{stream_tag(meta)}{SUFFIX}"
    directory.mkdir(parents=True, exist_ok=True)
    final = directory / name
    tmp = final.with_suffix(".tmp")
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    buf: mmap.mmap | None = None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        try:
            os.posix_fallocate(fd, 0, size)
        except OSError as e:
            if e.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
                raise
            os.ftruncate(fd, 0)
            zeros = bytes(1 << 16)
            for _ in range(0, size, len(zeros)):
                os.write(fd, zeros)
            os.ftruncate(fd, size)
        buf = mmap.mmap(fd, size)
        buf[:HEADER_SIZE] = _header(writer, host, meta)
        os.rename(tmp, final)
    except BaseException:
        if buf is not None:
            buf.close()
        os.close(fd)
        try:
            tmp.unlink()
        except OSError:
            pass
        raise
    return Segment(buf, size, writer, final, fd)


_NAME_MAX = 200  # bytes of a segment's file name, well inside every file system's 255


def stream_tag(meta: dict[str, Any]) -> str:
    """What a segment's file name says of its stream: `+host+namespace+job`, percent-encoded
    (a job name too long for a file name is its hash, `+host+h<hash>`). Read only when both
    copies of the header are damaged, to say whose events were lost (`stream_of_name`)."""
    ns, job, host = meta.get("namespace"), meta.get("job"), meta.get("host")
    if not isinstance(ns, str) or not isinstance(job, str) or not isinstance(host, int):
        return ""
    tag = f"+{host}+{quote(ns, safe='')}+{quote(job, safe='')}"
    if len(tag) > _NAME_MAX - 64:
        tag = f"+{host}+h{stream_hash(ns, job)}"
    return tag


def stream_hash(namespace: str, job: str) -> str:
    return hashlib.sha256(f"{namespace}\0{job}".encode()).hexdigest()[:24]


_NAME = re.compile(r"^(\d+)-([0-9a-f]{16})(?:-[0-9a-f]+)?(?:\+(\d+)\+([^+]*)(?:\+([^+]*))?)?\.[a-z]+$")


@dataclass(frozen=True, slots=True)
class NamedStream:
    """What a segment's file name tells: its writer and, for names made since it was added,
    its host and (namespace, job), or the hash of those when they were too long."""

    writer: int
    host: int | None = None
    namespace: str | None = None
    job: str | None = None
    hashed: str | None = None


def stream_of_name(name: str) -> NamedStream | None:
    """Parse a segment file name (see `stream_tag`); None when it is not one of ours."""
    m = _NAME.match(name)
    if m is None:
        return None
    writer = int(m.group(2), 16)
    if m.group(3) is None:
        return NamedStream(writer)
    host = int(m.group(3))
    if m.group(5) is None:
        h = m.group(4)
        return NamedStream(writer, host, hashed=h[1:]) if h.startswith("h") else NamedStream(writer, host)
    return NamedStream(writer, host, unquote(m.group(4)), unquote(m.group(5)))


def fit_segment_size(directory: Path, size: int, need: int = 0) -> int:
    """`size`, made smaller where the disk is small or a file-size limit (`ulimit -f`) is low:
    a segment takes at most an eighth of the free space, never less than MIN_SEGMENT_SIZE
    (nor less than one record of `need` bytes)."""
    floor = HEADER_SIZE + ((need + 7) & ~7)
    limit = size
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
        if soft != resource.RLIM_INFINITY and soft > 0:
            limit = min(limit, soft)
    except (ImportError, OSError, ValueError):
        pass
    d = directory
    while not d.exists() and d != d.parent:
        d = d.parent
    try:
        st = os.statvfs(d)
        limit = min(limit, st.f_bavail * st.f_frsize // 8)
    except OSError:
        pass
    if limit >= size:
        return max(size, floor)
    limit = max(MIN_SEGMENT_SIZE, limit) & ~4095
    return max(min(size, limit), floor)


# -- reading ----------------------------------------------------------------------------------
@dataclass(slots=True)
class Decoded:
    """Records decoded in one run: `events` carry indexes first_index, first_index+1, ...;
    `end` is the offset after them; `next_index` the index expected next; `lost` counts
    damaged records skipped before `first_index`; `at_end` is True when nothing readable
    follows (a clean end or a writer's torn last record)."""

    events: list[Event]
    first_index: int
    next_index: int
    end: int
    lost: int = 0
    at_end: bool = False


def valid_record(buf: Any, off: int, stop: int) -> tuple[int, int] | None:
    """(length, index) of a whole, checksummed record at `off`, else None."""
    if off + REC > stop:
        return None
    (n,) = LEN.unpack_from(buf, off)
    if n == 0:
        n = unlengthed(buf, off, stop)
    if n < REC or off + n > stop:
        return None
    sync, crc = TAG.unpack_from(buf, off + 4)
    if sync != SYNC or _crc32(buf[off + BODY_AT : off + n]) != crc:
        return None
    return n, BODY.unpack_from(buf, off + BODY_AT)[0]


def _resync(buf: Any, off: int, stop: int) -> int:
    """The offset of the next valid record after `off`, or -1."""
    p = off + 4
    find = buf.find
    while True:
        p = int(find(SYNC_BYTES, p + 1, stop))
        if p < 0:
            return -1
        rec = p - 4
        if rec % 8 == 0 and valid_record(buf, rec, stop) is not None:
            return rec


def unlengthed(buf: Any, off: int, stop: int) -> int:
    """The length of a whole record at `off` whose length word reads zero (0 when there is none).

    The length is written last, so a record with its marker and a checksum that holds, but no
    length, was either committed and had its length damaged, or written whole a moment before
    its writer died: either way its content is intact, and it is kept rather than taken for a
    torn append. Its end is found from its content: the fixed part and name, then attrs JSON,
    which never holds a zero byte."""
    if off + REC > stop or TAG.unpack_from(buf, off + 4)[0] != SYNC:
        return 0
    flags, name_len = buf[off + BODY_AT + 5], BODY.unpack_from(buf, off + BODY_AT)[3]
    end = off + REC + name_len
    if end > stop:
        return 0
    if flags & 2:
        z = buf.find(b"\0", end, min(stop, end + (1 << 24)))
        end = stop if z < 0 else int(z)
    n = int(end - off)
    if _crc32(buf[off + BODY_AT : off + n]) != TAG.unpack_from(buf, off + 4)[1]:
        return 0
    return n


def _damaged_tail(buf: Any, off: int, stop: int) -> int:
    """Records lost in a tail at `off` that holds no valid record, counted by walking it: a
    place with an intact marker or a plausible length is one record (the length, when
    plausible, says where the next one starts; else the next marker does). Zeros end the
    walk, and so does a zero length with nothing after it: a torn last record, whose writer
    died before committing it (the append never returned), is not a loss."""
    lost = 0
    p = off
    while p + 8 <= stop:
        n, sync = struct.unpack_from("<II", buf, p)
        if n == 0 and sync == 0:
            break
        nxt = _next_marker(buf, p, stop)
        if n == 0 and nxt < 0 and sync != SYNC:
            break  # torn: the append never returned (a record with its marker is counted)
        plausible = REC <= n <= stop - p
        if sync == SYNC or plausible:
            lost += 1
        if plausible:
            p += (n + 7) & ~7
        elif nxt >= 0:
            p = nxt
        else:
            break
    return lost


def _next_marker(buf: Any, p: int, stop: int) -> int:
    """The start of the next record-aligned place after `p` holding a sync marker, or -1."""
    q = p + 4
    while True:
        q = int(buf.find(SYNC_BYTES, q + 1, stop))
        if q < 0:
            return -1
        if (q - 4) % 8 == 0:
            return q - 4


def tail_lost(buf: Any, off: int, stop: int, nxt: int, committed: int | None, exact: bool) -> int:
    """Records lost at the end of a segment: those the header says were committed and were not
    found (exact for a sealed segment), else what a walk of the damaged tail finds."""
    known = committed - nxt if committed is not None and committed > nxt else 0
    if exact:
        return known
    return max(known, _damaged_tail(buf, off, stop))


def decode_records(
    buf: mmap.mmap | bytearray | bytes,
    start: int,
    stop: int,
    host: int,
    limit: int,
    expect: int = 0,
    committed: int | None = None,
    exact: bool = False,
) -> Decoded:
    """Decode up to `limit` records of buf[start:stop] whose indexes follow each other.

    `expect` is the index the first record should have. A damaged record (bad length,
    marker or checksum) is skipped: the reader resynchronizes on the next valid record and
    counts the records between by their indexes. A run stops at such a gap so that every
    batch is contiguous; call again from `end` to go on. `committed` (and `exact`) come from
    a dead segment's header and make the count of records lost at the tail exact.
    """
    out: list[Event] = []
    off = start
    lost = 0
    first = expect
    unpack_len = LEN.unpack_from
    unpack_tag = TAG.unpack_from
    unpack_body = BODY.unpack_from
    append = out.append
    nxt = expect
    while len(out) < limit:
        if off + REC > stop:
            return Decoded(out, first, nxt, off, lost + tail_lost(buf, off, stop, nxt, committed, exact), True)
        (n,) = unpack_len(buf, off)
        if n == 0:
            n = unlengthed(buf, off, stop)
        ok = n >= REC and off + n <= stop
        if ok:
            sync, crc = unpack_tag(buf, off + 4)
            ok = sync == SYNC and _crc32(buf[off + BODY_AT : off + n]) == crc
        if ok:
            idx, kind, flags, name_len, t, step, value = unpack_body(buf, off + BODY_AT)
            if idx != nxt:
                if out:  # a gap: end this run; the next call reports it
                    return Decoded(out, first, nxt, off, lost)
                if idx > nxt:
                    lost += idx - nxt
                first = nxt = idx
        else:
            if n == 0 and not bytes(buf[off : min(stop, off + 8)]).strip(b"\0"):
                # zeros: the end of what was written (a live segment's unused space)
                return Decoded(out, first, nxt, off, lost + tail_lost(buf, off, stop, nxt, committed, exact), True)
            if out:
                return Decoded(out, first, nxt, off, lost)
            nxt_off = _resync(buf, off, stop)
            if nxt_off < 0:
                return Decoded(out, first, nxt, stop, lost + tail_lost(buf, off, stop, nxt, committed, exact), True)
            off = nxt_off
            continue
        name: str | None = None
        attrs: dict[str, Any] | None = None
        if flags:
            p = off + REC
            if flags & 1:
                name = bytes(buf[p : p + name_len]).decode("utf-8", "replace")
                p += name_len
            if flags & 2:
                try:
                    attrs = json.loads(bytes(buf[p : off + n]))
                except ValueError:
                    attrs = None  # checksummed, so written this way: keep the event
        k = _KINDS.get(kind)
        if k is None:  # a kind this version does not know: counted, never silently dropped
            if out:
                return Decoded(out, first, nxt, off, lost)
            lost += 1
            first = nxt = nxt + 1
        else:
            append(
                Event(k, t, host, None if step == NO_STEP else step, None if math.isnan(value) else value, name, attrs)
            )
            nxt += 1
        off += (n + 7) & ~7
    return Decoded(out, first, nxt, off, lost)


@dataclass(frozen=True, slots=True)
class SegmentImage:
    """A segment file's header as read by a recoverer."""

    version: int
    writer: int
    shipped: int
    shipped_off: int
    host: int
    sealed: bool
    meta: dict[str, Any]
    damaged_copies: int = 0
    committed: int | None = None  # records known committed, when the header says so
    exact: bool = False  # the segment was sealed: `committed` is all it holds


def read_image(data: bytes, size: int) -> SegmentImage | None:
    """Parse a segment header (`data`, of a file of `size` bytes); None when it is not a
    segment of ours or both copies of its header are damaged."""
    if len(data) < HEADER_SIZE:
        return None
    if data[:4] == MAGIC and struct.unpack_from("<I", data, 4)[0] == 1:
        return _read_image_v1(data, size)
    damaged = 0
    for at in _COPY_AT:
        magic, version, crc, writer, _pid, host, meta_len = _COPY.unpack_from(data, at)
        end = at + _COPY.size + meta_len
        if magic != MAGIC or version != VERSION or meta_len > _COPY_MAX or _crc32(data[at + 12 : end]) != crc:
            damaged += 1
            continue
        try:
            meta = json.loads(data[at + _COPY.size : end])
        except ValueError:
            damaged += 1
            continue
        if not isinstance(meta, dict):
            damaged += 1
            continue
        shipped, shipped_off, wcrc = _WATERMARK.unpack_from(data, _WATERMARK_AT)
        if (
            _crc32(data[_WATERMARK_AT : _WATERMARK_AT + 16]) != wcrc
            or not HEADER_SIZE <= shipped_off <= size
            or shipped_off % 8
            or shipped < 0
        ):
            shipped, shipped_off = 0, HEADER_SIZE  # start over: the store drops what it has
        c, check = _COMMITTED.unpack_from(data, _COMMITTED_AT)
        committed, exact = (c & ~_SEALED_BIT, bool(c & _SEALED_BIT)) if c ^ check == 0xFFFFFFFF else (None, False)
        return SegmentImage(
            VERSION, writer, shipped, shipped_off, host, bool(data[_SEALED_AT]), meta, damaged, committed, exact
        )
    return None


def write_watermark(fd: int, shipped: int, shipped_off: int) -> None:
    os.pwrite(fd, _watermark(shipped, shipped_off), _WATERMARK_AT)


# -- format version 1 (no checksums): still read, never written ------------------------------
_HEAD_V1 = struct.Struct("<4sIqqqiiBxxxI")
_BODY_V1 = struct.Struct("<BBHdqd")
_REC_V1 = 32


def _read_image_v1(data: bytes, size: int) -> SegmentImage | None:
    _magic, _version, writer, shipped, shipped_off, _pid, host, sealed, meta_len = _HEAD_V1.unpack_from(data, 0)
    if _HEAD_V1.size + meta_len > HEADER_SIZE:
        return None
    try:
        meta = json.loads(data[_HEAD_V1.size : _HEAD_V1.size + meta_len])
    except ValueError:
        return None
    if not isinstance(meta, dict):
        return None
    if not HEADER_SIZE <= shipped_off <= size:
        shipped, shipped_off = 0, HEADER_SIZE
    return SegmentImage(1, writer, shipped, shipped_off, host, bool(sealed), meta)


def decode_records_v1(
    buf: bytes,
    start: int,
    stop: int,
    host: int,
    limit: int,
    expect: int = 0,
    committed: int | None = None,
    exact: bool = False,
) -> Decoded:
    """Records of a version 1 segment: they stop at the first zero or impossible length."""
    out: list[Event] = []
    off = start
    while off + _REC_V1 <= stop and len(out) < limit:
        (n,) = LEN.unpack_from(buf, off)
        if n < _REC_V1 or off + n > stop:
            break
        kind, flags, name_len, t, step, value = _BODY_V1.unpack_from(buf, off + 4)
        name: str | None = None
        attrs: dict[str, Any] | None = None
        if flags:
            p = off + _REC_V1
            if flags & 1:
                name = bytes(buf[p : p + name_len]).decode("utf-8", "replace")
                p += name_len
            if flags & 2:
                try:
                    attrs = json.loads(bytes(buf[p : off + n]))
                except ValueError:
                    break
        k = _KINDS.get(kind)
        if k is not None:
            out.append(
                Event(k, t, host, None if step == NO_STEP else step, None if math.isnan(value) else value, name, attrs)
            )
        off += (n + 7) & ~7
    return Decoded(out, expect, expect + len(out), off, 0, len(out) < limit)
