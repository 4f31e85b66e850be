"""`decode_columns` (journal records straight into columns) gives what `decode_records`
gives, record for record, on clean, mixed and damaged segments."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mlgoodput._segment import HEADER_SIZE, REC, decode_records, encode_extra, write_record
from mlgoodput._segment_columns import decode_columns
from mlgoodput.events import Kind
from mlgoodput.store._columns import ColumnEvents, Columns, encode, encode_batch

KINDS = [int(k) for k in Kind]


def _segment(recs: list[tuple[Any, ...]], size: int = 1 << 16) -> tuple[bytearray, int]:
    """A segment body holding `recs` (kind, time, step, value, name, attrs); returns the buffer
    and the offset after the last record."""
    buf = bytearray(size)
    off = HEADER_SIZE
    for i, (kind, t, step, value, name, attrs) in enumerate(recs):
        if name is None and attrs is None:
            flags, extra, name_len = 0, b"", 0
        else:
            flags, extra, name_len = encode_extra(name, attrs)
        off += write_record(buf, off, i, kind, flags, name_len, t, step, value, extra)
    return buf, off


def _same(
    buf: Any,
    start: int,
    stop: int,
    limit: int = 1 << 20,
    expect: int = 0,
    committed: int | None = None,
    exact: bool = False,
) -> int:
    """Decode the whole range with both decoders, run by run; assert equal; return the events."""
    off, nxt, total = start, expect, 0
    for _ in range(10_000):
        old = decode_records(buf, off, stop, 7, limit, nxt, committed, exact)
        new = decode_columns(buf, off, stop, 7, limit, nxt, committed, exact)
        ref = Columns.from_events(old.events)
        got = new.columns
        assert (new.first_index, new.next_index, new.end, new.lost, new.at_end) == (
            old.first_index,
            old.next_index,
            old.end,
            old.lost,
            old.at_end,
        )
        assert bytes(got.kinds) == bytes(ref.kinds)
        assert got.times.tobytes() == ref.times.tobytes()
        assert list(got.hosts) == list(ref.hosts)
        assert list(got.steps) == list(ref.steps)
        assert [None if v != v else v for v in got.values] == [None if v != v else v for v in ref.values]
        assert got.names == ref.names
        assert got.attrs == ref.attrs
        assert list(ColumnEvents(got)) == list(ColumnEvents(ref))
        total += len(got)
        if old.at_end or (not old.events and not old.lost):
            return total
        off, nxt = old.end, old.next_index
    raise AssertionError("no end")


def _random_records(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    """Mostly plain records, or (one segment in three) mostly records with names and attrs."""
    out: list[tuple[Any, ...]] = []
    busy = rng.random() < 0.33
    for i in range(n):
        r = rng.random() * (0.3 if busy else 1.0)
        name = attrs = None
        if r < 0.15:
            name = rng.choice(["eval", "loss", "ünï", ""])
        elif r < 0.2:
            attrs = {"a": rng.randint(0, 9)}
        elif r < 0.23:
            name, attrs = "x" * rng.randint(1, 20), {}
        step = rng.choice([i, -(2**63), 0, 2**62])
        value = rng.choice([float("nan"), rng.random(), -1.0])
        out.append((rng.choice(KINDS), 1e9 + rng.random() * 1e3, step, value, name, attrs))
    return out


def _damage(rng: random.Random, buf: bytearray, stop: int) -> None:
    for _ in range(rng.randint(1, 4)):
        what = rng.random()
        at = rng.randrange(HEADER_SIZE, max(HEADER_SIZE + 1, stop))
        if what < 0.6:
            buf[at] ^= 1 << rng.randrange(8)
        elif what < 0.8:
            buf[at : at + 16] = bytes(16)
        else:
            buf[at + 16] = 200  # an unknown kind (or other damage where it lands)


@pytest.mark.parametrize("seed", range(90))
def test_random_segments_decode_the_same(seed: int) -> None:
    rng = random.Random(seed)
    buf, stop = _segment(_random_records(rng, rng.randint(0, 400)))
    if seed % 2:
        _damage(rng, buf, stop)
    limit = rng.choice([1, 3, 64, 1 << 20])
    _same(buf, HEADER_SIZE, stop, limit)
    _same(bytes(buf), HEADER_SIZE, len(buf), limit, committed=rng.choice([None, 10, 500]), exact=seed % 3 == 0)


def test_a_long_clean_run_of_step_events() -> None:
    recs = [(int(Kind.STEP_START), 1e9 + i, i, float("nan"), None, None) for i in range(5000)]
    buf, stop = _segment(recs, 1 << 20)
    assert _same(buf, HEADER_SIZE, stop) == 5000
    assert _same(buf, HEADER_SIZE, stop, limit=777) == 5000
    d = decode_columns(buf, HEADER_SIZE, stop, 3, 1 << 20)
    assert list(d.columns.steps) == list(range(5000)) and set(d.columns.hosts) == {3}
    assert d.columns.names is None and d.columns.attrs is None


def test_named_runs_share_one_string_per_name() -> None:
    recs = [(int(Kind.CUSTOM_START), 1e9 + i, -(2**63), 1.0, "eval", None) for i in range(100)]
    buf, stop = _segment(recs)
    d = decode_columns(buf, HEADER_SIZE, stop, 0, 1 << 20)
    assert d.columns.names == ["eval"] * 100 and len({id(s) for s in d.columns.names}) == 1


def test_a_damaged_record_in_the_middle_of_a_run() -> None:
    recs = [(int(Kind.STEP_START), 1e9 + i, i, 0.5, None, None) for i in range(300)]
    buf, stop = _segment(recs)
    buf[HEADER_SIZE + 150 * 48 + 30] ^= 0xFF  # the step of record 150: its checksum fails
    d = decode_columns(buf, HEADER_SIZE, stop, 0, 1 << 20)
    assert len(d.columns) == 150 and d.next_index == 150 and not d.at_end
    e = decode_columns(buf, d.end, stop, 0, 1 << 20, d.next_index)
    assert e.lost == 1 and e.first_index == 151 and len(e.columns) == 149 and e.at_end
    _same(buf, HEADER_SIZE, stop)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(KINDS),
            st.floats(allow_nan=False),
            st.integers(-(2**63), 2**63 - 1),
            st.floats(allow_nan=True),
            st.one_of(st.none(), st.text(max_size=5)),
            st.one_of(st.none(), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2)),
        ),
        max_size=60,
    ),
    st.integers(1, 70),
)
def test_property_equal_to_the_record_decoder(recs: list[tuple[Any, ...]], limit: int) -> None:
    buf, stop = _segment(recs)
    assert _same(buf, HEADER_SIZE, stop, limit) == len(recs)


def test_column_events_are_a_sequence_of_events() -> None:
    recs = [(int(Kind.STEP_START), 1e9 + i, i, float("nan"), "n" if i % 2 else None, None) for i in range(10)]
    buf, stop = _segment(recs)
    ce = ColumnEvents(decode_columns(buf, HEADER_SIZE, stop, 2, 100).columns)
    evs = list(decode_records(buf, HEADER_SIZE, stop, 2, 100).events)
    assert len(ce) == 10 and list(ce) == evs and ce[-1] == evs[-1] and list(ce[3:7]) == evs[3:7]
    assert list(ce[::3]) == evs[::3] and isinstance(ce[2:], ColumnEvents)
    with pytest.raises(IndexError):
        ce[10]
    # a store encodes the columns as it would the events
    assert encode_batch(ce, 4) == encode_batch(evs, 4)
    assert encode_batch(ce, 100) == [encode(Columns.from_events(evs))]
    assert REC == 44


def test_runs_of_records_with_attrs() -> None:
    """Attrs read in runs: objects (nested ones too), empty ones, JSON that is not an object,
    undecodable bytes, all as the record decoder gives them."""
    recs: list[tuple[Any, ...]] = []
    for i in range(200):
        attrs: Any = {"unit": "s"} if i % 50 else {"tags": [i % 7, 2], "n": None}
        recs.append((int(Kind.METRIC), 1e9 + i, i, 0.5, "loss" if i < 120 else None, attrs))
    recs[60] = (int(Kind.METRIC), 1e9, 60, 0.5, "loss", {})
    recs[90] = (int(Kind.METRIC), 1e9, 90, 0.5, "loss", [["a", 1]])  # JSON, not an object
    buf, stop = _segment(recs)
    assert _same(buf, HEADER_SIZE, stop) == 200
    assert _same(buf, HEADER_SIZE, stop, limit=33) == 200
    d = decode_columns(buf, HEADER_SIZE, stop, 0, 1 << 20)
    a = d.columns.attrs
    assert a is not None and a[1] == {"unit": "s"} and a[1] is not a[2] and a[60] is None
    # undecodable attrs bytes, checksummed as written: the event is kept without attrs
    bad = bytearray(1 << 15)
    off = HEADER_SIZE
    for i in range(40):
        off += write_record(bad, off, i, int(Kind.METRIC), 2, 0, 1e9 + i, i, 1.0, b'{"u":' if i == 20 else b'{"u":1}')
    assert _same(bad, HEADER_SIZE, off) == 40
    got = decode_columns(bad, HEADER_SIZE, off, 0, 100).columns.attrs
    assert got is not None and got[20] is None and got[21] == {"u": 1}
