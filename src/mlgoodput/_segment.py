"""Journal segments: fixed-size, memory-mapped, append-only files of encoded events.

A segment is a 4 KiB header followed by records. The kernel keeps the pages of a shared
mapping when the process dies, even by SIGKILL, so a record is durable the moment it is
written. A record is written payload first and its length last; a reader stops at the
first zero length, so it never sees half a record.

Header (little-endian): magic, version, writer id, shipped record count, shipped byte
offset, pid, host, sealed flag, and the stream constants (store URL, namespace, job) as
JSON. Record: u32 length (of the whole record, before padding to 8 bytes), u8 kind code,
u8 flags (1: has name, 2: has attrs), u16 name length, f64 time, i64 step, f64 value, then
the UTF-8 name and the JSON attrs.
"""

from __future__ import annotations

import errno
import fcntl
import json
import math
import mmap
import os
import secrets
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlgoodput.events import Event, Kind

MAGIC = b"MLGJ"
VERSION = 1
HEADER_SIZE = 4096
DEFAULT_SEGMENT_SIZE = 4 << 20
SUFFIX = ".seg"
NO_STEP = -(2**63)
MAX_NAME_BYTES = 0xFFFF

_HEAD = struct.Struct("<4sIqqqiiBxxxI")  # magic, version, writer, shipped, shipped_off, pid, host, sealed, meta_len
_WATERMARK = struct.Struct("<qq")  # shipped, shipped_off
_WATERMARK_AT = 16
_SEALED_AT = 40
_META_AT = _HEAD.size
LEN = struct.Struct("<I")
BODY = struct.Struct("<BBHdqd")  # kind, flags, name_len, time, step, value (after the length)
REC = LEN.size + BODY.size  # 32: a record without name or attrs
_NAN = float("nan")
_KINDS: dict[int, Kind] = {k.value: k for k in Kind}


def new_writer_id() -> int:
    """A random 63-bit id: fits SQLite's signed INTEGER, unique per segment in practice."""
    return secrets.randbits(63) or 1


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
        ab = json.dumps(attrs, separators=(",", ":"), default=str).encode("utf-8")
    return flags, nb + ab, len(nb)


@dataclass(slots=True)
class Segment:
    """One segment in memory: its buffer (a shared mmap, or a bytearray when no file could be
    made), the file and its lock, and counters. `count`/`off` grow under the journal's lock."""

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

    @property
    def durable(self) -> bool:
        return self.path is not None

    def seal(self) -> None:
        self.sealed = True
        self.buf[_SEALED_AT] = 1

    def mark_shipped(self, shipped: int, shipped_off: int) -> None:
        self.shipped = shipped
        self.shipped_off = shipped_off
        _WATERMARK.pack_into(self.buf, _WATERMARK_AT, shipped, shipped_off)

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


def _header(writer: int, host: int, meta: dict[str, Any]) -> bytes:
    mb = json.dumps(meta, separators=(",", ":")).encode("utf-8")
    if _META_AT + len(mb) > HEADER_SIZE:
        raise ValueError(f"stream names too long for a journal header ({len(mb)} bytes)")
    return _HEAD.pack(MAGIC, VERSION, writer, 0, HEADER_SIZE, os.getpid(), host, 0, len(mb)) + mb


def memory_segment(size: int, host: int, meta: dict[str, Any]) -> Segment:
    """A segment that lives only in this process: used when no journal file can be made."""
    writer = new_writer_id()
    buf = bytearray(size)
    h = _header(writer, host, meta)
    buf[: len(h)] = h
    return Segment(buf, size, writer, None, -1)


def create_segment(directory: Path, size: int, host: int, meta: dict[str, Any]) -> Segment:
    """A new locked, preallocated, mapped segment file in `directory` (OSError on failure).

    The file is built under a temporary name and renamed, so a recoverer never sees a
    segment without a header. Preallocation means a full disk fails here, not later as a
    SIGBUS while writing to the mapping.
    """
    writer = new_writer_id()
    directory.mkdir(parents=True, exist_ok=True)
    final = directory / f"{os.getpid()}-{writer:016x}{SUFFIX}"
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
        h = _header(writer, host, meta)
        buf[: len(h)] = h
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


def decode_records(
    buf: mmap.mmap | bytearray | bytes, start: int, stop: int, host: int, limit: int
) -> tuple[list[Event], int]:
    """Events of the records in buf[start:stop] (at most `limit`), and the offset after them.

    Stops early at a zero or impossible length: the tail of a segment whose writer died.
    """
    out: list[Event] = []
    off = start
    unpack_len = LEN.unpack_from
    unpack_body = BODY.unpack_from
    append = out.append
    while off + REC <= stop and len(out) < limit:
        (n,) = unpack_len(buf, off)
        if n < REC or off + n > stop:
            break
        kind, flags, name_len, t, step, value = unpack_body(buf, off + 4)
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
                    break  # a damaged record: treat it as the end, like a torn tail
        k = _KINDS.get(kind)
        if k is not None:
            append(
                Event(
                    k,
                    t,
                    host,
                    None if step == NO_STEP else step,
                    None if math.isnan(value) else value,
                    name,
                    attrs,
                )
            )
        off += (n + 7) & ~7
    return out, off


@dataclass(frozen=True, slots=True)
class SegmentImage:
    """A segment file's header as read by a recoverer."""

    writer: int
    shipped: int
    shipped_off: int
    host: int
    sealed: bool
    meta: dict[str, Any]


def read_image(data: bytes, size: int) -> SegmentImage | None:
    """Parse a segment header (`data`, of a file of `size` bytes); None when it is not a
    (complete) segment of ours."""
    if len(data) < HEADER_SIZE:
        return None
    magic, version, writer, shipped, shipped_off, _pid, host, sealed, meta_len = _HEAD.unpack_from(data, 0)
    if magic != MAGIC or version != VERSION or _META_AT + meta_len > HEADER_SIZE:
        return None
    try:
        meta = json.loads(data[_META_AT : _META_AT + meta_len])
    except ValueError:
        return None
    if not isinstance(meta, dict):
        return None
    if not HEADER_SIZE <= shipped_off <= size:
        shipped, shipped_off = 0, HEADER_SIZE
    return SegmentImage(writer, shipped, shipped_off, host, bool(sealed), meta)


def write_watermark(fd: int, shipped: int, shipped_off: int) -> None:
    os.pwrite(fd, _WATERMARK.pack(shipped, shipped_off), _WATERMARK_AT)
