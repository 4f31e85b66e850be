"""Journal records decoded straight into columns, for the shipper.

`decode_records` (in `_segment`) makes one `Event` per record: three Python passes per
event on the way to a store (record -> Event -> columns -> bytes). `decode_columns` gives
the same answer as columns: a run of records of one length is read field by field with
strided copies out of the record buffer (the times of 65,536 records are one copy), and
checked with one CRC pass over the run. Whatever the fast path does not take (records with
attrs, damaged bytes, gaps in the indexes, unknown kinds, the end of the data) goes through
`decode_records` one record at a time, so damaged journals decode exactly as before; a test
holds the two decoders equal on random and damaged segments.
"""

from __future__ import annotations

import json
import struct
import sys
import zlib
from array import array
from dataclasses import dataclass
from typing import Any

from mlgoodput._segment import (
    BODY_AT,
    LEN,
    REC,
    SYNC_BYTES,
    decode_records,
    tail_lost,
    valid_record,
)
from mlgoodput.events import Kind
from mlgoodput.store import Columns
from mlgoodput.store import concat_columns as concat

_KNOWN_KINDS = bytes(sorted(k.value for k in Kind))
_NATIVE_LE = sys.byteorder == "little"
_crc32 = zlib.crc32
# field offsets inside a record (see the record layout in `_segment`)
_AT_SYNC, _AT_CRC, _AT_INDEX, _AT_KIND, _AT_FLAGS, _AT_NAME_LEN = 4, 8, 12, 16, 17, 18
_AT_TIME, _AT_STEP, _AT_VALUE = 20, 28, 36
MIN_RUN = 16  # records of one shape in a row worth reading column-wise
SLOW_PIECE = 64  # records the record decoder takes at a time where runs are short


@dataclass(slots=True)
class DecodedColumns:
    """`Decoded` (see `_segment`) with the events as columns."""

    columns: Columns
    first_index: int
    next_index: int
    end: int
    lost: int = 0
    at_end: bool = False


def _same_items(a: bytes, b: bytes, width: int) -> int:
    """How many leading items of `width` bytes `a` and `b` share."""
    if a == b:
        return len(a) // width
    lo, hi = 0, min(len(a), len(b)) // width + 1  # a[:lo] equal; a[:hi] not (or too short)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[: mid * width] == b[: mid * width]:
            lo = mid
        else:
            hi = mid
    return lo


def _strided(mv: memoryview, at: int, stride: int, m: int, fmt: str, width: int) -> bytes:
    """Field bytes of `m` records of `stride` bytes, the first field at `at`."""
    if m == 1:
        return mv[at : at + width].tobytes()
    view = mv[at : at + (m - 1) * stride + width]
    if width == 1:
        return view[::stride].tobytes()
    cast: Any = view.cast  # fmt is one of the struct codes I, H, q, d
    out: bytes = cast(fmt)[:: stride // width].tobytes()
    return out


def _verified(mv: memoryview, off: int, n: int, flags: int, nxt: int, m: int) -> tuple[int, bytes]:
    """How many of the `m` records at `off` are whole, valid records of length `n` and
    flags `flags` with indexes nxt, nxt+1, ... and known kinds; and their kind codes."""
    stride = (n + 7) & ~7
    # cheap checks first, each shortening the run: lengths, markers, flags, indexes, kinds
    m = _same_items(_strided(mv, off, stride, m, "I", 4), LEN.pack(n) * m, 4)
    if m:
        m = _same_items(_strided(mv, off + _AT_SYNC, stride, m, "I", 4), SYNC_BYTES * m, 4)
    if m:
        m = _same_items(_strided(mv, off + _AT_FLAGS, stride, m, "B", 1), bytes((flags,)) * m, 1)
    if m:
        want = array("I", range(nxt, nxt + m)).tobytes()
        m = _same_items(_strided(mv, off + _AT_INDEX, stride, m, "I", 4), want, 4)
    if not m:
        return 0, b""
    kinds = _strided(mv, off + _AT_KIND, stride, m, "B", 1)
    if kinds.translate(None, _KNOWN_KINDS):
        m = next(j for j, k in enumerate(kinds) if k not in _KNOWN_KINDS)
        if not m:
            return 0, b""
    # one CRC pass: each record's checksum over its body (index .. end)
    crc = _crc32
    data = mv[off : off + m * stride].tobytes()
    data += bytes(m * stride - len(data))  # the last record's padding may lie past the buffer
    bodies = struct.Struct(f"{BODY_AT}x{n - BODY_AT}s{stride - n}x").iter_unpack(data)
    got = array("I", [crc(b) for (b,) in bodies])
    m = _same_items(got.tobytes(), _strided(mv, off + _AT_CRC, stride, m, "I", 4), 4)
    return m, kinds[:m]


def _run(
    mv: memoryview,
    off: int,
    stop: int,
    nxt: int,
    limit: int,
    host: int,
    names_cache: dict[bytes, str],
    attrs_cache: dict[bytes, Any],
) -> tuple[Columns, int] | None:
    """The longest run at `off` (at most `limit` records) of valid records of one length and
    one flags value (no attrs) whose indexes go on from `nxt`, as columns with the offset
    after it; None when the record at `off` does not start a run of at least MIN_RUN
    records (or all there are): short runs cost more this way than record by record."""
    if off + REC > stop:
        return None
    (n,) = LEN.unpack_from(mv, off)
    if n < REC or off + n > stop:
        return None
    flags = mv[off + _AT_FLAGS]
    if flags > 3:
        return None
    stride = (n + 7) & ~7
    avail = min(limit, (stop - off - n) // stride + 1)
    w = min(avail, MIN_RUN)
    m, kinds = _verified(mv, off, n, flags, nxt, w)  # a few records first: is it a run?
    if m < w:
        return None
    while m == w < avail:  # a window 8 times larger each time: the cost follows the run's length
        w = min(avail, w * 8)
        m, kinds = _verified(mv, off, n, flags, nxt, w)
    attrs: list[dict[str, Any] | None] | None = None
    if flags & 2:
        attrs = _attrs(mv, off, n, stride, m, flags, attrs_cache)
        if len(attrs) < m:  # a record whose attrs are not a JSON object: the record decoder's
            m = len(attrs)
            if not m:
                return None
            kinds = kinds[:m]
        if attrs.count(None) == m:
            attrs = None
    times = array("d")
    times.frombytes(_strided(mv, off + _AT_TIME, stride, m, "d", 8))
    steps = array("q")
    steps.frombytes(_strided(mv, off + _AT_STEP, stride, m, "q", 8))
    values = array("d")
    values.frombytes(_strided(mv, off + _AT_VALUE, stride, m, "d", 8))
    names: list[str | None] | None = None
    if flags & 1:
        raw_lens = _strided(mv, off + _AT_NAME_LEN, stride, m, "H", 2)
        names = _one_name(mv, off, stride, m, raw_lens, names_cache)
    if flags & 1 and names is None:
        lens = array("H")
        lens.frombytes(raw_lens)
        names = []
        add = names.append
        get = names_cache.get
        p = off + REC
        for ln in lens:
            raw = mv[p : p + ln].tobytes()
            s = get(raw)
            if s is None:
                s = raw.decode("utf-8", "replace")
                if len(names_cache) < 4096:
                    names_cache[raw] = s
            add(s)
            p += stride
    cols = Columns(bytearray(kinds), times, array("i", [host]) * m, steps, values, names, attrs)
    return cols, off + m * stride


_FLAT = (str, int, float, bool, type(None))


def _attrs(
    mv: memoryview, off: int, n: int, stride: int, m: int, flags: int, cache: dict[bytes, Any]
) -> list[dict[str, Any] | None]:
    """The attrs of `m` records (as `decode_records` then `Columns.from_events` make them:
    undecodable JSON and empty objects give None); shorter than `m` when a record's attrs
    are JSON but not an object (left to the record decoder). Flat objects met before are
    copied from the cache instead of parsed again."""
    out: list[dict[str, Any] | None] = []
    add = out.append
    loads = json.loads
    for j in range(m):
        at = off + j * stride
        name_len = (mv[at + _AT_NAME_LEN] | mv[at + _AT_NAME_LEN + 1] << 8) if flags & 1 else 0
        raw = mv[at + REC + name_len : at + n].tobytes()
        a = cache.get(raw)
        if a is None:
            try:
                a = loads(raw)
            except ValueError:
                a = None  # checksummed, so written this way: the event is kept without attrs
            if isinstance(a, dict) and len(cache) < 4096 and all(isinstance(v, _FLAT) for v in a.values()):
                cache[raw] = a
        if a and not isinstance(a, dict):
            break
        add(dict(a) if a else None)
    return out


def _one_name(
    mv: memoryview, off: int, stride: int, m: int, raw_lens: bytes, names_cache: dict[bytes, str]
) -> list[str | None] | None:
    """[name] * m when the `m` records all carry the same short name (checked one byte
    position at a time, with strided copies), else None."""
    if raw_lens != raw_lens[:2] * m:
        return None
    ln = raw_lens[0] | raw_lens[1] << 8
    if ln > 64:
        return None
    first = mv[off + REC : off + REC + ln].tobytes()
    for b in range(ln):
        if _strided(mv, off + REC + b, stride, m, "B", 1) != first[b : b + 1] * m:
            return None
    name = names_cache.get(first)
    if name is None:
        name = names_cache[first] = first.decode("utf-8", "replace")
    return [name] * m


def decode_columns(
    buf: Any,
    start: int,
    stop: int,
    host: int,
    limit: int,
    expect: int = 0,
    committed: int | None = None,
    exact: bool = False,
) -> DecodedColumns:
    """`decode_records` as columns: the same records, indexes, offsets and losses."""
    if not _NATIVE_LE:  # the strided copies read the file's little-endian fields natively
        return _from_records(decode_records(buf, start, stop, host, limit, expect, committed, exact))
    parts: list[Columns] = []
    count = 0
    off = start
    nxt = first = expect
    lost = 0
    names_cache: dict[bytes, str] = {}
    attrs_cache: dict[bytes, Any] = {}
    with memoryview(buf) as mv:
        while count < limit:
            got = _run(mv, off, stop, nxt, limit - count, host, names_cache, attrs_cache)
            if got is not None:
                cols, off = got
                parts.append(cols)
                count += len(cols)
                nxt += len(cols)
                continue
            if count == 0:  # nothing yet: the record decoder handles what comes first
                ask = min(limit, SLOW_PIECE)
                d = decode_records(buf, off, stop, host, ask, nxt, committed, exact)
                if not d.events or d.at_end or len(d.events) < ask:
                    return _from_records(d)
                parts.append(Columns.from_events(d.events))
                count, first, nxt, lost, off = len(d.events), d.first_index, d.next_index, d.lost, d.end
                continue
            # after events: a clean end finishes the run at its end, anything else stops it
            # here (the next call reports the damage), as `decode_records` does
            if off + REC > stop or (
                LEN.unpack_from(mv, off)[0] == 0 and not mv[off : min(stop, off + 8)].tobytes().strip(b"\0")
            ):
                return DecodedColumns(
                    _join(parts), first, nxt, off, lost + tail_lost(buf, off, stop, nxt, committed, exact), True
                )
            v = valid_record(buf, off, stop)
            if v is None or v[1] != nxt or mv[off + _AT_KIND] not in _KNOWN_KINDS:
                break
            # valid records in short runs or with attrs: the record decoder takes them, from a
            # valid record on, exactly as it would have gone on
            ask = min(limit - count, SLOW_PIECE)
            d = decode_records(buf, off, stop, host, ask, nxt, committed, exact)
            parts.append(Columns.from_events(d.events))
            count += len(d.events)
            nxt, off = d.next_index, d.end
            if d.at_end:
                return DecodedColumns(_join(parts), first, nxt, off, lost + d.lost, True)
            if len(d.events) < ask:  # it stopped at a gap or damage
                break
    return DecodedColumns(_join(parts), first, nxt, off, lost)


def _join(parts: list[Columns]) -> Columns:
    return parts[0] if len(parts) == 1 else concat(parts)


def _from_records(d: Any) -> DecodedColumns:
    return DecodedColumns(Columns.from_events(d.events), d.first_index, d.next_index, d.end, d.lost, d.at_end)
