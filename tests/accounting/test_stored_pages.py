"""The calculator reads a SQLite store a page of stored rows at a time (`scan_pages`): a page
whose rows each hold one host's step starts is checked a column at a time and gathered per
host in bulk. That must give, part for part and cursor for cursor, what taking the same rows
one by one gives, what a store of decoded pages gives (PostgreSQL's `scan`), and the timeline
that ingesting page by page gives: with numpy on and off, and runs cut anywhere."""

from __future__ import annotations

import dataclasses
import itertools
import math
import random
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mlgoodput import _recovery
from mlgoodput.accounting import GoodputCalculator, _fast
from mlgoodput.accounting import _reader as reader_mod
from mlgoodput.accounting._timeline import Timeline
from mlgoodput.events import Event, EventBatch, Kind
from mlgoodput.store import Columns, SQLiteStore, StoredRow, open_store
from mlgoodput.store._columns import decode

Part = tuple[Any, ...]  # a part's columns, frozen


def _pages(rng: random.Random, hosts: int, rounds: int, most: int) -> list[list[Event]]:
    """A job's batches as shippers store them, with what breaks a plain run of step pages."""
    out: list[list[Event]] = [[Event(Kind.JOB_START, 10.0, h)] for h in range(hosts)]
    odd = random.Random(hosts * 1000 + rounds)  # its own draws: `rng`'s jobs stay as they were
    t, step = 20.0, 0
    for _ in range(rounds):
        r = rng.random()
        if r < 0.05:  # a restart of one host
            out.append([Event(Kind.JOB_START, t, rng.randrange(hosts))])
        elif r < 0.1:  # a named event (names in the page)
            out.append([Event(Kind.CUSTOM_START, t, 0, name="eval"), Event(Kind.CUSTOM_END, t + 0.1, 0, name="eval")])
        elif r < 0.2 and hosts > 1:  # two hosts' steps in one page
            out.append([Event(Kind.STEP_START, t + 0.01 * h, h, step=step) for h in range(2)])
        t += 1.0
        per = rng.randrange(1, most + 1)
        order = list(range(hosts))
        rng.shuffle(order)  # shippers store in any order
        for h in order:
            evs = [Event(Kind.STEP_START, t + j * 0.5 + h * 1e-3, h, step=step + j) for j in range(per)]
            k = odd.random()
            if k < 0.05:  # step numbers that skip, or start again, at increasing times
                evs = [dataclasses.replace(e, step=step + 2 * j) for j, e in enumerate(evs)]
            elif k < 0.08:
                evs = [dataclasses.replace(e, step=j) for j, e in enumerate(evs)]
            if rng.random() < 0.05:
                rng.shuffle(evs)  # out of order inside a page
            if rng.random() < 0.03:
                evs.append(Event(Kind.STEP_START, evs[-1].time, h, step=evs[-1].step))  # an equal time
            out.append(evs)
        if rng.random() < 0.1 and len(out) > 3:  # a page stored late
            i = rng.randrange(len(out) - 3, len(out))
            out.append(out.pop(i))
        if rng.random() < 0.05:  # a page stored twice
            out.append(list(out[-1]))
        step += per
        t += per * 0.5
    return out


class _ColumnsOnly(SQLiteStore):
    """A paged store that hands over decoded pages only (as PostgreSQL does): no `scan_pages`."""

    scan_pages = None  # type: ignore[assignment]

    def scan(self, namespace: str, job: str, cursor: int = 0) -> Iterator[tuple[int, Columns]]:
        for rows in SQLiteStore.scan_pages(self, namespace, job, cursor):
            for r in rows:
                yield r[0], decode(*r[1:])


def _frozen(c: Columns) -> tuple[Any, ...]:
    return (
        bytes(c.kinds),
        c.times.tobytes(),
        c.hosts.tobytes(),
        c.steps.tobytes(),
        c.values.tobytes(),
        c.names,
        c.attrs,
    )


def _record_parts(monkeypatch: pytest.MonkeyPatch, into: dict[int, list[Part]]) -> None:
    """Keep every part a timeline ingests, per timeline (its public `ingest` and
    `ingest_steps`): what the reader gathered from the store's pages. The block path (all
    hosts' rows at once, `ingest_step_block`) is left out, so that parts are compared."""
    ingest, ingest_steps = Timeline.ingest, Timeline.ingest_steps

    def kept(tl: Timeline, cols: Columns) -> None:
        into.setdefault(id(tl), []).append(_frozen(cols))
        ingest(tl, cols)

    def kept_steps(tl: Timeline, cols: Columns, by_one: bool | None = None) -> None:
        into.setdefault(id(tl), []).append(_frozen(cols))
        ingest_steps(tl, cols, by_one)

    monkeypatch.setattr(Timeline, "ingest", kept)
    monkeypatch.setattr(Timeline, "ingest_steps", kept_steps)
    monkeypatch.setattr(reader_mod, "_BLOCK_HOSTS", 1 << 30)


def _state(calc: GoodputCalculator) -> Any:
    tl = calc.timeline
    hosts = {
        h: (log.times.tobytes(), list(log.nums), log.others, log.job_starts, log.monotonic, log.version)
        for h, log in tl.hosts.items()
    }
    return hosts, tl.events, tl.max_time, tl.earliest_change, calc._cursor


@pytest.mark.parametrize("run_events", [1 << 16, 37, 1], ids=["runs", "short-runs", "page-runs"])
@pytest.mark.parametrize("seed", range(6))
def test_bulk_pages_equal_row_by_row_columns_and_plain(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, numpy_mode: str, seed: int, run_events: int
) -> None:
    rng = random.Random(seed)
    big = seed % 2 == 0  # runs of thousands of steps: numpy's one pass over every host
    pages = _pages(rng, rng.randrange(1, 9), rng.randrange(10, 40), 60 if big else 8)
    url = f"sqlite://{tmp_path}/s.db"
    st = open_store(url)
    kinds = ("bulk", "rows", "columns", "plain")
    calcs = {
        k: GoodputCalculator(
            "j",
            "goodput",
            store=_ColumnsOnly(tmp_path / "s.db") if k == "columns" else url,
            snapshot=False,
            clock=lambda: 1e5,
        )
        for k in kinds
    }
    parts: dict[int, list[Part]] = {}
    _record_parts(monkeypatch, parts)
    seen: dict[str, list[Part]] = {}
    seq = i = 0
    while i < len(pages):
        n = rng.randrange(1, 3 * len(pages) // 4 + 2)
        for evs in pages[i : i + n]:
            st.append("goodput", "j", EventBatch(1 + evs[0].host, seq, evs))
            seq += len(evs)
        i += n
        reports = {}
        for k in kinds:
            with monkeypatch.context() as m:
                m.setattr(reader_mod, "_RUN_EVENTS", 0 if k == "plain" else run_events)
                if k == "rows":  # every page checked and gathered row by row
                    m.setattr(reader_mod, "_step_rows", lambda rows: None)
                reports[k] = calcs[k].report()
        assert reports["bulk"] == reports["rows"] == reports["columns"] == reports["plain"]
        want = _state(calcs["plain"])
        for k in ("bulk", "rows", "columns"):
            assert _state(calcs[k]) == want, k
        seen = {k: parts.get(id(calcs[k].timeline), []) for k in kinds}
        assert seen["bulk"] == seen["rows"] == seen["columns"]
    assert sum(len(p[0]) for p in seen["bulk"]) == calcs["plain"].timeline.events
    if run_events > 1:
        assert len(seen["bulk"]) < len(seen["plain"])  # pages were taken together
    st.close()


def _row(
    seq: int, kinds: bytes, times: list[float], hosts: list[int], steps: list[int], values: list[float]
) -> list[Any]:
    return [
        seq,
        kinds,
        array("d", times).tobytes(),
        array("i", hosts).tobytes(),
        array("q", steps).tobytes(),
        array("d", values).tobytes(),
        None,
        None,
    ]


def _good_row(rng: random.Random, seq: int, size: int = 0) -> list[Any]:
    n = size or rng.choice((1, 2, 5, 10))
    h = rng.choice((0, 1, 7, 2**31 - 1, 256))
    return _row(seq, bytes([9]) * n, [rng.random() for _ in range(n)], [h] * n, list(range(n)), [math.nan] * n)


def _flawed(rng: random.Random, r: list[Any]) -> list[Any]:
    """The row with one thing wrong for a run of step pages (or nothing, now and then)."""
    n, seq = len(r[1]), r[0]
    h = array("i", r[3][:4])[0]
    flaw = rng.randrange(12)
    if flaw == 0:
        r[1] = bytes([9]) * (n - 1) + bytes([1])  # not only step starts
    elif flaw == 1:
        r = _row(seq, bytes([9]) * 3, [1.0, 2.0, 3.0], [h, h, h ^ 1], [0, 1, 2], [0.0] * 3)  # two hosts
    elif flaw == 2:
        r[6] = '["x"]'  # a name
    elif flaw == 3:
        r[7] = "[{}]"
    elif flaw == 4:
        r[2] = r[2][:-1]  # a column one byte short
    elif flaw == 5:
        r[4] = r[4] + bytes(8)  # a column one value long
    elif flaw == 6:
        r[5] = r[5][:-8]
    elif flaw == 7:
        r[3] = r[3] + bytes(4)
    elif flaw == 8:
        r = _row(seq, b"", [], [], [], [])  # no events
    elif flaw == 9:
        m = reader_mod._RUN_PAGE
        r = _row(seq, bytes([9]) * m, [float(k) for k in range(m)], [h] * m, list(range(m)), [0.0] * m)
    elif flaw == 10:
        r = _row(seq, bytes([9]), [1.0], [h], [0], [0.0])
        r[3] = r[3][:2]  # one event, a host of two bytes
    return r


@pytest.mark.parametrize("seed", range(60))
def test_page_check_equals_the_row_checks(numpy_mode: str, seed: int) -> None:
    rng = random.Random(seed)
    # pages of _fast.ROWS_MIN rows or more: the hosts checked in numpy (with numpy on)
    size = rng.choice((1, 10)) if seed % 3 == 0 else 0  # every row of one size, or sizes mixed
    rows = [_good_row(rng, k, size) for k in range(rng.randrange(1, 30) if seed % 2 else rng.randrange(64, 200))]
    if seed % 4:  # one row with one flaw
        k = rng.randrange(len(rows))
        rows[k] = _flawed(rng, rows[k])
    page: list[StoredRow] = [tuple(r) for r in rows]
    one_by_one = reader_mod._StepRun()
    each = [one_by_one.take_row(r) for r in page]
    got = reader_mod._step_rows(page)
    assert (got is not None) == all(each)
    if got is not None:
        firsts, ns = got
        assert firsts == [array("i", r[3][:4])[0] for r in page]
        assert ns == [len(r[1]) for r in page]


def _cols(times: list[float], host: int = 3, first_step: int = 0) -> Columns:
    n = len(times)
    return Columns(
        bytearray([9]) * n,
        array("d", times),
        array("i", [host]) * n,
        array("q", range(first_step, first_step + n)),
        array("d", [math.nan]) * n,
        None,
        None,
    )


@pytest.mark.parametrize(
    "parts",
    [
        [[1.0, 2.0, 3.0], [4.0, 5.0]],
        [[1.0, 2.0, 3.0], [3.0, 5.0]],  # an equal time at the seam: a merge
        [[5.0, 6.0], [1.0, 2.0]],  # before what is there
        [[-0.0], [0.0, 1.0]],
        [[math.nan]],
        [[1.0], [math.nan]],  # (a merge with a NaN there orders by the NaN's identity: not here)
        [[math.inf], [1.0]],
    ],
)
def test_ingest_steps_equals_ingest(parts: list[list[float]]) -> None:
    a, b = Timeline(), Timeline()
    step = 0
    for ts in parts:
        c = _cols(ts, first_step=step)
        step += len(ts)
        a.ingest(c)
        b.ingest_steps(c)
        la, lb = a.hosts[3], b.hosts[3]
        assert (la.times.tobytes(), list(la.nums), la.monotonic, la.version) == (
            lb.times.tobytes(),
            list(lb.nums),
            lb.monotonic,
            lb.version,
        )
        assert (a.events, repr(a.max_time), repr(a.earliest_change)) == (
            b.events,
            repr(b.max_time),
            repr(b.earliest_change),
        )


@pytest.mark.parametrize("seed", range(10))
def test_increasing_each_equals_the_python_check(numpy_mode: str, seed: int) -> None:
    rng = random.Random(seed)
    chunks = []
    for _ in range(rng.randrange(1, 300)):
        t = sorted(rng.random() for _ in range(rng.randrange(1, 80)))
        k = rng.random()
        if k < 0.1 and len(t) > 1:
            t[rng.randrange(len(t) - 1)] = t[-1]  # a value out of order or equal
        elif k < 0.15:
            t[rng.randrange(len(t))] = math.nan
        elif k < 0.2 and len(t) > 1:
            t[-1] = t[-2]
        chunks.append(array("d", t).tobytes())
    want = []
    for c in chunks:
        a = array("d")
        a.frombytes(c)
        want.append(all(map(float.__lt__, a[:-1], a[1:])))
    got = _fast.increasing_each(chunks)
    if got is not None:
        assert got == want
    elif numpy_mode == "on":
        assert sum(len(c) for c in chunks) < 8 * _fast.EACH_MIN


def test_scan_pages_hold_what_scan_chunks_and_scan_hold(tmp_path: Path) -> None:
    st = SQLiteStore(tmp_path / "s.db")
    seq = 0
    for k in range(200):
        evs = [Event(Kind.STEP_START, float(k * 10 + j), k % 3, step=k * 10 + j) for j in range(1 + k % 7)]
        if k % 50 == 0:
            evs.append(Event(Kind.CUSTOM_START, float(k * 10), 0, name="eval", attrs={"a": 1}))
        st.append("n", "j", EventBatch(1, seq, evs))
        seq += len(evs)
    for cursor in (0, 5, 150):
        pages = list(st.scan_pages("n", "j", cursor))
        assert all(pages) and len(pages) > 1
        rows = [r for p in pages for r in p]
        assert [(r[0], r[1:]) for r in rows] == list(st.scan_chunks("n", "j", cursor))
        assert [r[0] for r in rows] == [c for c, _ in st.scan("n", "j", cursor)]
        assert rows[0][0] > cursor and all(a[0] < b[0] for a, b in itertools.pairwise(rows))
    assert list(st.scan_pages("n", "j", rows[-1][0])) == []
    st.close()


def test_journal_folders_follow_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite://{tmp_path}/s.db"
    monkeypatch.setenv("MLGOODPUT_JOURNAL_DIR", str(tmp_path / "a"))
    assert _recovery._dirs_of(url) == _recovery.journal_dirs(url)
    monkeypatch.setenv("MLGOODPUT_JOURNAL_DIR", str(tmp_path / "b"))
    assert _recovery._dirs_of(url) == _recovery.journal_dirs(url) != [tmp_path / "a"]
    monkeypatch.delenv("MLGOODPUT_JOURNAL_DIR")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "x"))
    assert _recovery._dirs_of(url) == _recovery.journal_dirs(url)


@pytest.mark.parametrize("seed", range(10))
def test_by_one_each_equals_the_python_check(numpy_mode: str, seed: int) -> None:
    rng = random.Random(seed)
    chunks = []
    want = []
    for _ in range(rng.randrange(1, 300)):
        first = rng.choice((0, 7, 2**63 - 40, -5))
        s = [(first + j + 2**63) % 2**64 - 2**63 for j in range(rng.randrange(1, 80))]  # int64, wrapping
        k = rng.random()
        if k < 0.1 and len(s) > 1:
            s[rng.randrange(len(s))] += rng.choice((-1, 1, 2))  # one number off
        elif k < 0.15 and len(s) > 1:
            s[-1] = s[-2]  # a repeat
        s = [min(max(x, -(2**63)), 2**63 - 1) for x in s]
        chunks.append(array("q", s).tobytes())
        want.append(all((s[j + 1] - s[j]) % 2**64 == 1 for j in range(len(s) - 1)))
    got = _fast.by_one_each(chunks)
    if got is not None:
        assert got == want
    elif numpy_mode == "on":
        assert sum(len(c) for c in chunks) < 8 * _fast.EACH_MIN
