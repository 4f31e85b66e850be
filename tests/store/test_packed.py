"""The PostgreSQL store's shorter column forms (store/_packed.py): every form reads back as
exactly the plain bytes, rows stored plain (by older versions) still read, and a real server
gets the short forms."""

from __future__ import annotations

import math
import struct
import uuid
from array import array
from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mlgoodput.events import Event, EventBatch, Kind
from mlgoodput.store import StoreError, _postgres, open_store
from mlgoodput.store._columns import NO_STEP, Columns, encode
from mlgoodput.store._packed import DELTAS, FAST_MIN, SHUFFLED, pack, unpack


def _columns(n: int) -> list[tuple[bytes, int]]:
    """(plain bytes, width) of columns a store meets: constant, counting, irregular, NaN, mixed."""
    times = array("d", [1.7e9 + i * 0.01 for i in range(n)]).tobytes()
    noisy = array("d", [1.7e9 + i * 0.37 + math.sin(i) * 1e-3 for i in range(n)]).tobytes()
    return [
        (bytes([3]) * n, 1),
        (bytes(i % 7 for i in range(n)), 1),
        (times, 8),
        (noisy, 8),
        (array("q", range(10**6, 10**6 + n)).tobytes(), 8),
        (array("q", [-(2**63)] * n).tobytes(), 8),
        (array("i", [5] * n).tobytes(), 4),
        (array("i", [i % 3 for i in range(n)]).tobytes(), 4),
        (array("d", [math.nan] * n).tobytes(), 8),
        (array("d", [math.nan if i % 2 else 0.5 for i in range(n)]).tobytes(), 8),
    ]


@pytest.mark.parametrize("n", [1, 2, 3, 1000, 65536])
def test_every_form_reads_back_the_plain_bytes(n: int) -> None:
    for plain, width in _columns(n):
        stored = pack(plain, width, n)
        assert unpack(stored, width, n) == plain
        assert unpack(plain, width, n) == plain  # a plain row (older versions) reads as it is
        if n == 1:
            assert stored == plain


def test_the_form_each_column_gets() -> None:
    n = 1000
    kinds, varied, times, _, steps, no_step, hosts, some_hosts, nans, _ = _columns(n)
    for const, width in (kinds, no_step, hosts, nans):
        assert pack(const, width, n) == const[:width]  # one item for a constant column
    assert pack(*varied, n) == varied[0]  # single bytes that vary: plain
    for col, width in (times, steps, some_hosts):
        stored = pack(col, width, n)
        assert len(stored) == width * n + 1 and stored[0] == SHUFFLED
        assert stored[1 : 1 + n] == col[0::width]  # every item's first byte comes first
    # the point of it: far fewer bytes for lz4 to compress (zlib shows the same effect)
    import zlib

    assert len(zlib.compress(pack(*steps, n), 1)) * 3 < len(zlib.compress(steps[0], 1))


@given(st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=1, max_size=300))
def test_any_doubles_round_trip(values: list[float]) -> None:
    plain = struct.pack(f"<{len(values)}d", *values)
    assert unpack(pack(plain, 8, len(values)), 8, len(values)) == plain


@given(st.binary(min_size=0, max_size=64), st.sampled_from([1, 4, 8]))
def test_any_bytes_round_trip(raw: bytes, width: int) -> None:
    n = len(raw) // width
    plain = raw[: n * width]
    assert unpack(pack(plain, width, n), width, n) == plain


def _step_columns(n: int) -> dict[str, list[int]]:
    big = 2**62
    return {
        "by one": list(range(10**6, 10**6 + n)),
        "start and end": [7 + i // 2 for i in range(n)],
        "down and up": [(i * 37) % 200 - 100 for i in range(n)],
        "deltas at the edges": [(-128 if i % 2 else 127) * (i % 3 != 0) for i in range(n)],
        "near the bound": [big - (i % 2) for i in range(n)],
        "below the bound": [-big + (i % 2) for i in range(n)],
        "past the bound": [big + 1 - (i % 2) for i in range(n)],
        "a step missing": [NO_STEP if i == n // 2 else i for i in range(n)],
        "a jump of 128": [i if i < n // 2 else i + 127 for i in range(n)],
        "by one, restarted": [i % 1000 for i in range(n)],
    }


@pytest.mark.parametrize("n", [FAST_MIN - 1, FAST_MIN, 3 * FAST_MIN + 5])
def test_step_columns_read_back_with_numpy_on_and_off(n: int, numpy_mode: str) -> None:
    """Each step column reads back exactly, packed with numpy or without it and read with
    or without it; the DELTAS form only where every difference fits a signed byte."""
    from mlgoodput import _numpy

    for name, values in _step_columns(n).items():
        plain = array("q", values).tobytes()
        stored = pack(plain, 8, n, integers=True)
        assert unpack(stored, 8, n) == plain, name
        _numpy.turn_off()  # a reader without numpy reads every form too
        assert unpack(stored, 8, n) == plain, name
        _numpy.reset()
        fits = all(-128 <= b - a <= 127 for a, b in pairwise(values)) and max(map(abs, values)) <= 2**62
        if numpy_mode == "on" and n >= FAST_MIN and fits:
            assert stored[0] == DELTAS and len(stored) == n + 8, name
        else:
            assert len(stored) in (8 * n + 1, 8), name
    doubles = array("q", range(n)).tobytes()  # the same bytes, not said to be integers (times are doubles)
    assert pack(doubles, 8, n)[0] == SHUFFLED


@pytest.mark.parametrize("seed", range(6))
def test_random_walks_of_steps_read_back(seed: int, numpy_mode: str) -> None:
    """Walks whose steps mostly fit a signed byte (sometimes not), anywhere in int64."""
    import random

    rnd = random.Random(seed)
    n = FAST_MIN + rnd.randrange(3000)
    reach = rnd.choice((1, 127, 128, 129))
    start = rnd.choice((0, -(2**62), 2**62 - n * reach, rnd.randrange(-(2**63) + n * 200, 2**63 - n * 200)))
    values = [start]
    for _ in range(n - 1):
        values.append(values[-1] + rnd.randint(-reach, reach))
    plain = array("q", values).tobytes()
    stored = pack(plain, 8, n, integers=True)
    assert unpack(stored, 8, n) == plain
    from mlgoodput import _numpy

    _numpy.turn_off()
    assert unpack(stored, 8, n) == plain
    _numpy.reset()


def test_a_length_no_form_has_is_a_store_error() -> None:
    with pytest.raises(StoreError, match="does not hold 10 items of 8 bytes"):
        unpack(bytes(17), 8, 10)
    with pytest.raises(StoreError):
        unpack(bytes([SHUFFLED + 1]) + bytes(80), 8, 10)  # the right length, an unknown tag
    with pytest.raises(StoreError):
        unpack(bytes([DELTAS]) + bytes(17), 4, 10)  # differences only for 8-byte items


def _events(first: int, n: int, host: int) -> list[Event]:
    return [Event(Kind.STEP_START, 1.7e9 + (first + i) * 0.01, host, step=first + i) for i in range(n)]


@pytest.mark.slow
def test_postgres_stores_short_forms_and_reads_plain_and_older_rows(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job whose rows are half plain (as older versions wrote them) and half short reads
    back exactly the events appended, by read() and by scan(); the short rows are short."""
    import psycopg

    job = uuid.uuid4().hex
    mixed = [
        *_events(0, 40, 2),
        Event(Kind.CUSTOM_START, 1.7e9 + 1, 2, name="eval"),
        Event(Kind.METRIC, 1.7e9 + 2, 3, value=0.25, name="loss", attrs={"unit": "nats"}),
    ]
    batches = [_events(0, 20000, 2), mixed, _events(20000, 1, 2), _events(20001, 5000, 4), _events(25001, 40000, 1)]
    w = uuid.uuid4().int >> 65
    st = open_store(postgres_url)
    first = 0
    with monkeypatch.context() as m:  # the first two batches stored plain, in rows of up to 65,536, as before
        m.setattr(_postgres, "pack", lambda data, width, n, integers=False: data)
        m.setattr(_postgres, "MAX_CHUNK_EVENTS", 65536)
        for evs in batches[:2]:
            st.append("ns", job, EventBatch(w, first, evs))
            first += len(evs)
    for evs in batches[2:]:
        st.append("ns", job, EventBatch(w, first, evs))
        first += len(evs)
    want = [e for evs in batches for e in evs]
    assert list(st.read("ns", job).columns.events()) == want
    scanned = [e for _, cols in st.scan("ns", job) for e in cols.events()]
    assert scanned == want
    rows = [*batches[:4], *(batches[4][i : i + 16384] for i in range(0, 40000, 16384))]  # the first: one older row
    for part, evs in zip(st.read("ns", job).parts, rows, strict=True):  # byte for byte, column by column
        plain = encode(Columns.from_events(evs))
        assert (bytes(part.kinds), part.times.tobytes(), part.hosts.tobytes()) == (
            plain.kinds,
            plain.times,
            plain.hosts,
        )
        assert (part.steps.tobytes(), part.values.tobytes()) == (plain.steps, plain.values)
    st.close()
    with psycopg.connect(postgres_url) as conn:  # each row's columns as stored (_postgres.column_bytes)
        stored = conn.execute(
            "SELECT c.n, c.data FROM mlgoodput_chunks c JOIN mlgoodput_jobs j ON j.id = c.stream"
            " WHERE j.job = %s ORDER BY c.seq",
            (job,),
        ).fetchall()
    sizes = [(n, *(len(c) for c in _postgres.column_bytes(bytes(data))[:5])) for n, data in stored]
    assert sizes[0] == (20000, 20000, 160000, 80000, 160000, 160000)  # plain, as older versions wrote
    assert sizes[1][0] == 42 and sum(sizes[1][1:]) < 42 * 29 // 2  # a small row: compact forms
    assert sizes[2][0] == 1 and sum(sizes[2][1:]) < 29
    # constant: one item; times shuffled; steps by one: their differences (where numpy is)
    from mlgoodput import _numpy

    assert sizes[3] == (5000, 1, 40001, 4, 40001 if _numpy.numpy() is None else 5008, 8)
    assert [r[0] for r in sizes[4:]] == [16384, 16384, 40000 - 2 * 16384]  # rows of at most 16,384 events


def test_postgres_marks_its_row_format_and_a_newer_one_is_refused_clearly(postgres_url: str) -> None:
    """The store records the newest row form it holds; a store marked newer than this code
    reads is refused with a message that says so (not misread), and nothing in it changes."""
    import psycopg

    st = open_store(postgres_url)
    job = uuid.uuid4().hex
    st.append("ns", job, EventBatch(uuid.uuid4().int >> 65, 0, _events(0, 10, 1)))
    st.close()
    with psycopg.connect(postgres_url) as conn:
        got = conn.execute("SELECT value FROM mlgoodput_meta WHERE key = 'format'").fetchone()
    assert got == (str(_postgres.FORMAT),)
    try:
        with psycopg.connect(postgres_url) as conn:
            conn.execute("UPDATE mlgoodput_meta SET value = %s WHERE key = 'format'", (str(_postgres.FORMAT + 1),))
        with pytest.raises(StoreError, match=rf"format {_postgres.FORMAT + 1}.*newer mlgoodput.*upgrade"):
            open_store(postgres_url).read("ns", job)
        with psycopg.connect(postgres_url) as conn:  # left as it was
            got = conn.execute("SELECT value FROM mlgoodput_meta WHERE key = 'format'").fetchone()
        assert got == (str(_postgres.FORMAT + 1),)
    finally:
        with psycopg.connect(postgres_url) as conn:
            conn.execute("UPDATE mlgoodput_meta SET value = %s WHERE key = 'format'", (str(_postgres.FORMAT),))
    assert len(open_store(postgres_url).read("ns", job).columns) == 10  # read again once the mark is ours
