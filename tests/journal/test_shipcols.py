"""Journal records read as columns (the shipper's fast path) equal the records read one by one."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from mlgoodput._segment import HEADER_SIZE, LEN, decode_records
from mlgoodput._shipcols import decode_columns
from mlgoodput.events import Event, Kind
from mlgoodput.store import MemoryStore
from mlgoodput.store._columns import Columns


def _segment(tmp_path: Path, rnd: random.Random, n: int) -> tuple[bytearray, int]:
    """A journal segment's bytes after n random appends: mostly plain records, some with text."""
    from mlgoodput._journal import Journal

    store = MemoryStore(f"memory://shipcols-{rnd.random()}")
    j = Journal(store, "ns", "job", 5, segment_size=1 << 22, interval_s=3600)
    try:
        for i in range(n):
            r = rnd.random()
            if r < 0.8:
                j.append(Kind.STEP_START, 1000.0 + i, i)
            elif r < 0.88:
                j.append(Kind.CKPT_SAVE, 1000.0 + i, i, value=rnd.random())
            elif r < 0.94:
                j.append(Kind.CUSTOM_START, 1000.0 + i, name="eval" * rnd.randint(1, 9))
            else:
                j.append(Kind.SLICE_COUNTS, 1000.0 + i, attrs={"active": rnd.randint(0, 4), "total": 4})
        seg = j._active
        assert seg is not None
        return bytearray(seg.buf[: seg.off]), seg.off
    finally:
        j._closed = True  # nothing to ship: only the bytes were wanted


def _all(decode: object, buf: bytearray, stop: int, limit: int) -> list[Event]:
    out: list[Event] = []
    off = HEADER_SIZE
    while off < stop:
        got, end = decode(buf, off, stop, 5, limit)  # type: ignore[operator]
        evs = list(got.events()) if isinstance(got, Columns) else list(got)
        if not evs and end == off:
            break
        assert len(evs) <= limit
        out += evs
        off = end
    return out


@pytest.mark.parametrize("seed", range(8))
def test_columns_equal_records(tmp_path: Path, seed: int) -> None:
    rnd = random.Random(seed)
    buf, stop = _segment(tmp_path, rnd, rnd.choice((1, 50, 3000)))
    limit = rnd.choice((1, 7, 100000))
    want = _all(decode_records, buf, stop, limit)
    assert _all(decode_columns, buf, stop, limit) == want and want
    # a torn tail (a length word written, the record not) stops both at the same place
    cut = stop - 8 * rnd.randint(1, 4)
    LEN.pack_into(buf, cut - 32 if cut - 32 >= HEADER_SIZE else HEADER_SIZE, 0)
    assert _all(decode_columns, buf, stop, limit) == _all(decode_records, buf, stop, limit)


def test_unknown_kinds_are_skipped_like_the_record_reader(tmp_path: Path) -> None:
    buf, stop = _segment(tmp_path, random.Random(1), 200)
    buf[HEADER_SIZE + 32 * 3 + 4] = 250  # a kind this version does not know, mid-run
    assert _all(decode_columns, buf, stop, 1000) == _all(decode_records, buf, stop, 1000)
