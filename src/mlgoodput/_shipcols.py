"""Journal records straight to store columns, without a Python object per event.

Records without a name or attributes (steps, most goodput events) are 32 bytes at a fixed
stride, so a run of them is read as strided views of the mapped segment: each column is one
C-level copy. Records with text go through `decode_records` as before. This keeps shipping
off the training thread's interpreter: tens of nanoseconds an event instead of microseconds.
"""

from __future__ import annotations

import mmap
from array import array
from typing import Any

from mlgoodput._segment import REC, decode_records
from mlgoodput.events import EventBatch, Kind
from mlgoodput.store._columns import Columns
from mlgoodput.store._state import ColumnStore

_PLAIN = REC.to_bytes(4, "little")  # the length word of a record without text
_VALID = bytes(0 if i in {k.value for k in Kind} else 1 for i in range(256))
_SLOW_BATCH = 4096  # records with text decoded at a time (they are rare)


def decode_columns(
    buf: mmap.mmap | bytearray | bytes, start: int, stop: int, host: int, limit: int
) -> tuple[Columns, int]:
    """Columns of the next records in buf[start:stop] (at most `limit`), and the offset after
    them: a run of plain records in one go, else a few records with text. Stops, like
    `decode_records`, at a torn or impossible record."""
    m = min((stop - start) // REC, limit)
    k = _plain_prefix(buf, start, m) if m else 0
    if k == 0:
        events, end = decode_records(buf, start, stop, host, min(limit, _SLOW_BATCH))
        return Columns.from_events(events), end
    region = memoryview(buf)[start : start + REC * k]
    try:
        kinds = region[4::REC].tobytes()
        t = array("d")
        t.frombytes(region.cast("d")[1::4].tobytes())
        s = array("q")
        s.frombytes(region.cast("q")[2::4].tobytes())
        v = array("d")
        v.frombytes(region.cast("d")[3::4].tobytes())
    finally:
        region.release()
    return Columns(bytearray(kinds), t, array("i", [host]) * k, s, v, None, None), start + REC * k


def _plain_prefix(buf: Any, start: int, m: int) -> int:
    """How many of the m records from `start` are plain (length 32, no text, a known kind)."""
    region = memoryview(buf)[start : start + REC * m]
    try:
        lens = region.cast("I")[0::8].tobytes()
        flags = region[5::REC].tobytes()
        kinds = region[4::REC].tobytes()
    finally:
        region.release()
    # the first word that is not 32 (lstrip may stop late on odd lengths: checked exactly below)
    k = (len(lens) - len(lens.lstrip(b"\x20\x00"))) // 4
    while k and lens[: 4 * k] != _PLAIN * k:
        k //= 2  # rare: a length made only of 0x20 and 0x00 bytes; settle for a shorter run
    k = min(k, len(flags) - len(flags.lstrip(b"\x00")))
    bad = kinds[:k].translate(_VALID).find(1)
    return k if bad < 0 else bad


def ship_next(store: Any, namespace: str, job: str, seg: Any, stop: int, host: int, limit: int) -> tuple[int, int]:
    """Append the segment's next unshipped records (up to `limit`, before offset `stop`) to the
    store; (how many, the offset after them). Columns when the store takes them, else events."""
    if isinstance(store, ColumnStore):
        cols, end = decode_columns(seg.buf, seg.shipped_off, stop, host, limit)
        if len(cols):
            store.append_columns(namespace, job, seg.writer, seg.shipped, cols)
        return len(cols), end
    events, end = decode_records(seg.buf, seg.shipped_off, stop, host, limit)
    if events:
        store.append(namespace, job, EventBatch(seg.writer, seg.shipped, events))
    return len(events), end
