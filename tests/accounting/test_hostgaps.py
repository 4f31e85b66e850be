"""A host's gaps with a side list (HostGaps) answer exactly as a SortedFloats extended with the
same values, bit for bit, with numpy on and off; per-host statistics built on them equal the
plain structure's through restarts, out-of-order rebuilds and a saved state."""

from __future__ import annotations

import math
import random
import struct
from array import array
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mlgoodput import _numpy
from mlgoodput.accounting import Engine, _fast, _sorted
from mlgoodput.accounting._hoststats import HostSteps, stats_as_of
from mlgoodput.accounting._sorted import HostGaps, SortedFloats
from mlgoodput.accounting._timeline import HostLog
from mlgoodput.events import Event, Kind
from mlgoodput.store._columns import Columns

T0 = 1_700_000_000.0


def _bits(x: float) -> bytes:
    return struct.pack("<d", x)


def _same(g: HostGaps, s: SortedFloats, rnd: random.Random) -> None:
    """Same length, order statistics and (merged) values as the plain structure, bit for bit."""
    n = len(s)
    assert len(g) == n
    if not n:
        assert g.median() == 0.0
        return
    ks = {0, n - 1, n // 2, max(0, n // 2 - 1), min(n - 1, int(0.9 * n))}
    ks.update(rnd.randrange(n) for _ in range(5))
    for k in ks:
        assert _bits(g.kth(k)) == _bits(s.kth(k)), k
    assert _bits(g.median()) == _bits(s.median())


# gaps with many ties (a few values, +0.0 among them), some spread, short and long batches
_value = st.one_of(st.sampled_from([0.0, 0.1, 0.25, 1.0, 1.0, 2.5]), st.floats(0.0, 10.0, allow_nan=False))
_batches = st.lists(st.lists(_value, min_size=0, max_size=60), min_size=1, max_size=40)


@settings(max_examples=60, deadline=None)
@given(first=st.lists(_value, min_size=0, max_size=400), batches=_batches, seed=st.integers(0, 2**16))
def test_side_list_answers_as_the_plain_structure(first: list[float], batches: list[list[float]], seed: int) -> None:
    rnd = random.Random(seed)
    for mode in ("on", "off"):
        if mode == "off":
            _numpy.turn_off()  # numpy off (reset by the finally below)
        try:
            old = _sorted._SIDE
            _sorted._SIDE = rnd.choice((8, 64, 300, old))  # merges of the side list at various sizes
            g, s = HostGaps(), SortedFloats()
            g.extend(first)
            s.extend(first)
            _same(g, s, rnd)
            for xs in batches:
                arr = rnd.random() < 0.5
                g.extend(array("d", xs) if arr else list(xs))
                s.extend(list(xs))
                _same(g, s, rnd)
            assert g.values().tobytes() == s.values().tobytes()  # merged: the same values in order
            assert g.pending() == 0
            _same(g, s, rnd)
        finally:
            _sorted._SIDE = old
            _fast.reset()


def test_the_side_list_is_used_and_merged(numpy_mode: str) -> None:
    rnd = random.Random(5)
    g, s = HostGaps(), SortedFloats()
    base = [rnd.choice((0.1, 0.2, rnd.random())) for _ in range(10_000)]
    g.extend(base)
    s.extend(base)
    seen = set()
    for _ in range(40):
        xs = [rnd.choice((0.1, 0.2, 0.0, rnd.random())) for _ in range(100)]
        g.extend(xs)
        s.extend(xs)
        seen.add(g.pending())
        _same(g, s, rnd)
    assert max(seen) > 0 and min(seen) < 200  # values waited aside, and were merged
    # every other use merges first, and then answers as the plain structure
    assert g.above(0.5)[0] == s.above(0.5)[0] and g.pending() == 0
    g.extend([0.3] * 50)
    s.extend([0.3] * 50)
    g.remove(0.3)
    s.remove(0.3)
    g.add(0.7)
    s.add(0.7)
    assert g.values().tobytes() == s.values().tobytes()
    _same(g, s, rnd)


@pytest.mark.parametrize("odd", [-0.0, math.nan])
@pytest.mark.parametrize("kind", [list, lambda xs: array("d", xs)])
def test_a_nan_or_a_negative_zero_ends_the_side_list(numpy_mode: str, odd: float, kind: Any) -> None:
    rnd = random.Random(6)
    ref = [rnd.random() + 0.5 for _ in range(5000)]
    g = HostGaps(ref)

    def add(xs: list[float]) -> None:
        g.extend(kind(xs))
        ref.extend(xs)

    add([rnd.random() for _ in range(100)])
    add([0.0] * 3 + [rnd.random() for _ in range(20)])  # +0.0 is fine
    assert g.pending() == 123 and g.kth(0) == 0.0
    add([rnd.random() for _ in range(50)])
    assert g.pending() == 173
    add([0.5] * 20 + [odd] + [0.25] * 5)
    assert g.pending() == 0
    add([0.25] * 30)
    assert g.pending() == 0 and len(g) == 5229  # a SortedFloats from now on
    got = [x for x in g.values() if x == x]
    assert got == sorted(x for x in ref if x == x) and len(got) == len(g) - (odd != odd)


def test_a_nan_or_a_negative_zero_in_restored_buckets_is_found(numpy_mode: str) -> None:
    for odd in (-0.0, math.nan):
        s = SortedFloats([odd] + [1.0 + i for i in range(3000)])
        g = HostGaps.adopt(s)
        g.extend([2.5] * 50)
        assert g.pending() == 0
    g = HostGaps.adopt(SortedFloats([0.0] * 10 + [1.0 + i for i in range(3000)]))  # +0.0 is fine
    g.extend([2.5] * 50)
    assert g.pending() == 50


def _host_job(rnd: random.Random, hosts: int, steps: int) -> list[Event]:
    out: list[Event] = []
    for h in range(hosts):
        t = T0 + rnd.random()
        out.append(Event(Kind.JOB_START, t, host=h))
        step = 0
        for _ in range(steps):
            r = rnd.random()
            if r < 0.05:
                dt = 0.0  # a tie: two steps at the same time (a zero gap)
            elif r < 0.6:
                dt = rnd.choice((0.5, 1.0, 1.0, 2.5))  # exact repeats: ties among the gaps
            else:
                dt = 1.0 + rnd.random() * 0.01
            t += dt
            if rnd.random() < 0.003:  # a restart between steps
                t += 5
                out.append(Event(Kind.JOB_START, t, host=h))
                t += 1
                step = max(0, step - rnd.randint(0, 5))
            out.append(Event(Kind.STEP_START, t, host=h, step=step))
            step += 1
    return out


def _engine_stats(events: list[Event], cuts: list[int], side: int) -> list[Any]:
    old = _sorted._SIDE
    _sorted._SIDE = side
    try:
        e = Engine()
        got = []
        pos = 0
        for c in cuts:
            e.timeline.ingest(Columns.from_events(events[pos:c]))
            pos = c
            got.append(e.host_stats(math.inf))
        return got
    finally:
        _sorted._SIDE = old


@pytest.mark.parametrize("seed", range(6))
def test_host_stats_equal_the_plain_structure(numpy_mode: str, seed: int) -> None:
    rnd = random.Random(seed)
    events = _host_job(rnd, rnd.randint(2, 4), rnd.randint(300, 3000))
    events.sort(key=lambda e: e.time)
    if seed % 2:  # some events arrive late: those hosts rebuild
        late = sorted(rnd.sample(range(len(events)), k=8))
        events = [e for i, e in enumerate(events) if i not in set(late)] + [events[i] for i in late]
    cuts = sorted({rnd.randrange(1, len(events)) for _ in range(40)} | {len(events)})
    plain = _engine_stats(events, cuts, 0)
    for side in (16, 200, _sorted._SIDE):
        assert _engine_stats(events, cuts, side) == plain
    for a, b in zip(plain[-1], _engine_stats(events, cuts, 16)[-1], strict=True):
        assert (_bits(a.median_s), _bits(a.p90_s), _bits(a.max_s)) == (
            _bits(b.median_s),
            _bits(b.p90_s),
            _bits(b.max_s),
        )
    e = Engine()
    e.timeline.ingest(Columns.from_events(events))
    want = [stats_as_of(log, math.inf) for _, log in sorted(e.timeline.hosts.items())]
    assert list(plain[-1]) == [w for w in want if w is not None]


def test_new_gaps_wait_aside(numpy_mode: str) -> None:
    log = HostLog(0)
    times = [T0 + k * 0.5 + (k % 3) * 0.01 for k in range(5000)]
    log.add_steps(times[:4000], list(range(4000)))
    hs = HostSteps()
    hs.update(log)
    hs.update(log)
    log.add_steps(times[4000:4100], list(range(4000, 4100)))
    hs.update(log)
    assert hs.diffs.pending() == 100  # waiting aside
    want = [b - a for a, b in pairwise(times[3999:4100])]
    assert sorted(hs.diffs.side_values()) == sorted(want)
    assert len(hs.diffs) == 4099


@pytest.mark.parametrize("together", [False, True])
@pytest.mark.parametrize("lazy", [False, True])
def test_a_saved_state_with_values_aside_restores_and_goes_on_the_same(
    numpy_mode: str, lazy: bool, together: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mlgoodput.accounting import _hoststats, _snapshot

    if together:  # the hosts updated together (update_all), before the save and after
        monkeypatch.setattr(_hoststats, "_TOGETHER", 2)
    rnd = random.Random(9)
    events = _host_job(rnd, 3, 6000)
    events.sort(key=lambda e: e.time)
    cuts = [len(events) // 2 + i * 150 for i in range(12)] + [len(events)]
    e, plain = Engine(), Engine()
    old = _sorted._SIDE
    try:
        for eng, side in ((e, 512), (plain, 0)):
            _sorted._SIDE = side
            eng.timeline.ingest(Columns.from_events(events[: cuts[0]]))
            eng.host_stats(math.inf)
            for a, b in pairwise(cuts[:4]):
                eng.timeline.ingest(Columns.from_events(events[a:b]))
                eng.host_stats(math.inf)
        _sorted._SIDE = 512
        assert any(hs.diffs.pending() for hs in e.host_steps.values())  # saved while values wait aside
        pieces = iter(list(_snapshot.dump(e, url="memory://x", namespace="l", job="j", cursor=1)))
        head = _snapshot.header(next(pieces))
        r = (
            _snapshot.Saved(head, pieces, stall_factor=3.0).engine()
            if lazy
            else _snapshot.load(head, pieces, stall_factor=3.0)
        )
        used = 0
        for a, b in pairwise(cuts[3:]):
            for eng, side in ((e, 512), (r, 512), (plain, 0)):
                _sorted._SIDE = side
                eng.timeline.ingest(Columns.from_events(events[a:b]))
            _sorted._SIDE = 0
            want = plain.host_stats(math.inf)
            _sorted._SIDE = 512
            assert e.host_stats(math.inf) == want
            assert r.host_stats(math.inf) == want
            used = max([used] + [hs.diffs.pending() for hs in r.host_steps.values()])
        assert used  # the restored ones used their side lists too
    finally:
        _sorted._SIDE = old


def _many_hosts_job(rnd: random.Random, hosts: int, rounds: int) -> list[list[Event]]:
    """Events of `hosts` hosts in `rounds` deliveries: ties, zero gaps, restarts between steps,
    hosts that send nothing in a round, now and then a late step (that host rebuilds)."""
    t = {h: T0 + rnd.random() for h in range(hosts)}
    step = dict.fromkeys(range(hosts), 0)
    style = {h: rnd.choice(("ties", "spread", "drift")) for h in range(hosts)}
    out: list[list[Event]] = [[Event(Kind.JOB_START, t[h], host=h) for h in range(hosts)]]
    for r in range(rounds):
        evs: list[Event] = []
        for h in range(hosts):
            if rnd.random() < 0.15:
                continue  # nothing new from this host this round
            for _ in range(rnd.choice((1, 5, 40, 120)) if r else rnd.randint(300, 2500)):
                u = rnd.random()
                if u < 0.02:
                    dt = 0.0
                elif style[h] == "ties" or u < 0.3:
                    dt = rnd.choice((0.5, 1.0, 1.0, 1.0, 2.5))
                elif style[h] == "drift":
                    dt = 1.0 + r * 0.05 + rnd.random() * 0.01
                else:
                    dt = rnd.expovariate(1.0)
                t[h] += dt
                if rnd.random() < 0.002:  # a restart between steps
                    t[h] += 5
                    evs.append(Event(Kind.JOB_START, t[h], host=h))
                    t[h] += 1
                evs.append(Event(Kind.STEP_START, t[h], host=h, step=step[h]))
                step[h] += 1
        if rnd.random() < 0.1 and evs:  # a late step: before that host's last one
            e = rnd.choice(evs)
            evs.append(Event(Kind.STEP_START, e.time - 1e-3, host=e.host, step=10**6 + r))
        out.append(evs)
    return out


def _rounds_stats(rounds: list[list[Event]], together: int, half: int, side: int, mid: int = 128) -> list[Any]:
    from mlgoodput.accounting import _hoststats

    old = (_hoststats._TOGETHER, _hoststats._HALF, _sorted._SIDE, _hoststats._MID)
    _hoststats._TOGETHER, _hoststats._HALF, _sorted._SIDE, _hoststats._MID = together, half, side, mid
    try:
        e = Engine()
        got = []
        for evs in rounds:
            e.timeline.ingest(Columns.from_events(evs))
            got.append(
                [(s.host, s.steps, _bits(s.median_s), _bits(s.p90_s), _bits(s.max_s)) for s in e.host_stats(math.inf)]
            )
        assert e._together.used <= len(e.host_steps)  # one row per host at most, whatever happened
        for hs in e.host_steps.values():  # what the structures answer themselves agrees too
            d = hs.diffs
            if len(d) and hs.stats is not None:
                k = len(d)
                assert (_bits(d.median()), _bits(d.kth(min(k - 1, int(0.9 * k))))) == (
                    _bits(hs.stats.median_s),
                    _bits(hs.stats.p90_s),
                )
        return got
    finally:
        _hoststats._TOGETHER, _hoststats._HALF, _sorted._SIDE, _hoststats._MID = old


@pytest.mark.slow
@settings(max_examples=12, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    half=st.sampled_from([1, 4, 96]),
    side=st.sampled_from([64, 8192]),
    mid=st.sampled_from([1, 8, 128]),
)
def test_many_hosts_read_together_equal_one_by_one(seed: int, half: int, side: int, mid: int) -> None:
    rnd = random.Random(seed)
    rounds = _many_hosts_job(rnd, rnd.randint(16, 24), 14)
    for mode in ("on", "off"):
        if mode == "off":
            _numpy.turn_off()
        try:
            plain = _rounds_stats(rounds, 10**9, half, side)
            assert _rounds_stats(rounds, 2, half, side, mid) == plain
        finally:
            _fast.reset()
    # and the plain structure's (no side list) answers the same
    assert _rounds_stats(rounds, 10**9, half, 0) == plain


@pytest.mark.parametrize("new", ["1", "3", "8", "9", "1-3"])
def test_hosts_updated_together_with_as_many_new_steps_each_or_not(numpy_mode: str, new: str) -> None:
    """update_all with every host bringing the same number of new steps, or each its own:
    the same statistics, to the bit, as each host updated on its own."""
    from mlgoodput.accounting._hoststats import Together, update_all

    rnd = random.Random(len(new))
    logs = [HostLog(h) for h in range(40)]
    for log in logs:
        log.add_steps([T0 + k * 0.5 + rnd.random() * 0.01 for k in range(1500)], list(range(1500)))
    mine, plain = [HostSteps() for _ in logs], [HostSteps() for _ in logs]
    tg = Together()
    lo, _, hi = new.partition("-")
    for r in range(12):
        for log in logs:
            t, s = log.times[-1], log.nums.last()
            k = rnd.randint(int(lo), int(hi or lo))
            log.add_steps([t + 0.5 * (j + 1) + rnd.random() * 0.01 for j in range(k)], [s + 1 + j for j in range(k)])
        got = update_all(list(zip(mine, logs, strict=True)), tg)
        want = [hs.update(log) for hs, log in zip(plain, logs, strict=True)]
        assert _stats_bits(got) == _stats_bits(want), r
    assert tg.used == (40 if numpy_mode == "on" else 0)


def test_a_nan_among_the_new_gaps_of_hosts_updated_together(numpy_mode: str) -> None:
    from mlgoodput.accounting._hoststats import Together, update_all

    rnd = random.Random(3)
    logs = [HostLog(h) for h in range(20)]
    for log in logs:
        log.add_steps([T0 + k * 0.5 + rnd.random() * 0.01 for k in range(3000)], list(range(3000)))
    mine, plain = [HostSteps() for _ in logs], [HostSteps() for _ in logs]
    tg = Together()

    def both() -> None:
        got = update_all(list(zip(mine, logs, strict=True)), tg)
        want = [hs.update(log) for hs, log in zip(plain, logs, strict=True)]
        for h, (a, b) in enumerate(zip(got, want, strict=True)):
            assert a is not None and b is not None
            assert a.steps == b.steps
            if h == 5 and math.isnan(b.max_s):
                # where a NaN sits depends on when the values were merged, for the plain
                # structure too (HostGaps' docstring): only the count is the same
                continue
            assert (_bits(a.median_s), _bits(a.p90_s), _bits(a.max_s)) == (
                _bits(b.median_s),
                _bits(b.p90_s),
                _bits(b.max_s),
            )

    both()
    for r in range(6):
        for log in logs:
            t = log.times[-1]
            log.add_steps(
                [t + 0.5 + rnd.random() * 0.01 + k * 0.5 for k in range(100)],
                list(range(3000 + r * 100, 3100 + r * 100)),
            )
        if r == 3:  # inf - inf: a NaN gap on one host
            logs[5].add_steps([math.inf, math.inf], [10**6, 10**6 + 1])
        both()


def _stats_bits(got: list[Any]) -> list[Any]:
    return [None if s is None else (s.host, s.steps, _bits(s.median_s), _bits(s.p90_s), _bits(s.max_s)) for s in got]


@pytest.mark.parametrize("seed", range(3))
def test_hosts_off_the_usual_path_among_those_updated_together(numpy_mode: str, seed: int) -> None:
    """update_all reads and writes its hosts a column at a time; hosts that leave the usual path
    (no job start at all, a restart after the last step, a new host, a host updated on its own
    between two updates together, a host with nothing new, a rebuilt host) get what one by one
    gives, and so do the others around them."""
    from mlgoodput.accounting._hoststats import Together, update_all

    rnd = random.Random(seed)
    logs = [HostLog(h) for h in range(96)]
    for h, log in enumerate(logs):
        if h % 3:  # a third of the hosts never record a job start
            log.job_starts.append(T0 - 1.0)
        log.add_steps([T0 + k * 0.5 + rnd.random() * 0.01 for k in range(2000)], list(range(2000)))
    mine, plain = [HostSteps() for _ in logs], [HostSteps() for _ in logs]
    tg = Together()
    step = 2000
    for r in range(10):
        if r == 4:  # a new host joins
            logs.append(HostLog(len(logs)))
            logs[-1].add_steps([T0 + k * 0.5 for k in range(3000)], list(range(3000)))
            mine.append(HostSteps())
            plain.append(HostSteps())
        for h, log in enumerate(logs):
            if r and h % 7 == r % 7:
                continue  # nothing new from this host this time
            t = log.times[-1]
            if r == 3 and h in (5, 6):  # a restart after the last step (its gap is cut)
                log.job_starts.append(t + 0.2)
            log.add_steps([t + 0.5 + rnd.random() * 0.01, t + 1.0 + rnd.random() * 0.01], [step, step + 1])
        if r == 6:  # a late step: that host rebuilds
            logs[9].add_steps([logs[9].times[10] + 1e-3], [10**6])
        if r == 5:  # one host updated on its own in between (its row is stale after)
            mine[13].update(logs[13])
        step += 2
        got = update_all(list(zip(mine, logs, strict=True)), tg)
        want = [hs.update(log) for hs, log in zip(plain, logs, strict=True)]
        assert _stats_bits(got) == _stats_bits(want), r
        for a, b in zip(mine, plain, strict=True):
            assert (a.n, a.version, a.stats) == (b.n, b.version, b.stats)
            assert len(a.diffs) == len(b.diffs)
    if numpy_mode == "on":
        assert tg.used >= 64  # (most hosts went together)


def test_rows_from_columns_are_the_dataclass_objects() -> None:
    """The column-wise maker gives objects equal to the dataclass's own, field by field, with
    the same hash, repr and frozenness; wrong shapes are refused."""
    import dataclasses

    from mlgoodput.accounting._hoststats import rows_from_columns
    from mlgoodput.accounting._report import HostStepStats
    from mlgoodput.accounting._stragglers import RankStepStats

    rnd = random.Random(1)
    n = 300
    cols = [list(range(n)), [rnd.randrange(9) for _ in range(n)]] + [[rnd.random() for _ in range(n)] for _ in range(3)]
    got = rows_from_columns(HostStepStats, *cols)
    want = list(map(HostStepStats, *cols))
    assert got == want
    assert [hash(x) for x in got] == [hash(x) for x in want]
    assert [repr(x) for x in got] == [repr(x) for x in want]
    assert [x.to_dict() for x in got] == [x.to_dict() for x in want]
    with pytest.raises(dataclasses.FrozenInstanceError):
        got[0].steps = 3  # type: ignore[misc]
    rcols = [*cols, [rnd.random() for _ in range(n)], list(range(n)), [0.5] * n]
    assert rows_from_columns(RankStepStats, *rcols) == list(map(RankStepStats, *rcols))
    assert rows_from_columns(HostStepStats, [], [], [], [], []) == []
    with pytest.raises(TypeError):
        rows_from_columns(HostStepStats, *cols[:4])
    with pytest.raises(ValueError):
        rows_from_columns(HostStepStats, *cols[:4], cols[4][:-1])


@pytest.mark.parametrize("seed", range(3))
def test_engine_host_stats_a_column_at_a_time_equal_host_by_host(numpy_mode: str, seed: int) -> None:
    """Engine.host_stats reads its hosts a column at a time when every host holds two steps or
    more and the query is past them all; it answers what the host-by-host way answers (hosts
    with one step or none, a query inside the steps: the host-by-host way itself)."""
    rnd = random.Random(seed)
    rounds = _many_hosts_job(rnd, 20, 10)
    cols, rows = Engine(), Engine()
    used = 0
    for evs in rounds:
        for e in (cols, rows):
            e.timeline.ingest(Columns.from_events(evs))
        if cols._host_stats_columns(math.inf) is not None:  # (it updated cols' hosts: asked again below)
            used += 1
        got = cols.host_stats(math.inf)
        assert _stats_bits(list(got)) == _stats_bits(list(rows._host_stats_rows(math.inf)))
        q = cols.timeline.max_time - 1.0  # inside the last steps: each host as of q
        assert cols._host_stats_columns(q) is None
        assert _stats_bits(list(cols.host_stats(q))) == _stats_bits(list(rows._host_stats_rows(q)))
    assert used  # the column-wise way was taken


def test_hosts_read_round_after_round_from_a_store_as_one_block(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """20 hosts each storing its own page of steps every round (the monitor's usual input, read
    as one block): while only steps come after each host's last, their statistics are updated
    without reading each host's steps taken, version and job starts again (`appended`); a
    restart after a host's last step (its next gap cut), a new host with one step (the host by
    host path in between) and a late step change that. Every round: a fresh read's statistics."""
    pytest.importorskip("numpy")
    from mlgoodput.accounting import GoodputCalculator, _engine
    from mlgoodput.events import EventBatch
    from mlgoodput.store import open_store

    calls: list[bool] = []
    real = _engine.update_columns

    def seen(*a: Any) -> Any:
        calls.append(bool(a[4]) if len(a) > 4 else False)
        return real(*a)

    monkeypatch.setattr(_engine, "update_columns", seen)
    url = f"sqlite://{tmp_path}/s.db"
    st = open_store(url)
    rnd = random.Random(4)
    seq: dict[int, int] = {}

    def put(h: int, events: list[Event]) -> None:
        st.append("goodput", "j", EventBatch(10 + h, seq.get(h, 0), events))
        seq[h] = seq.get(h, 0) + len(events)

    hosts = list(range(20))
    for h in hosts:
        put(
            h,
            [Event(Kind.JOB_START, T0 - 1, h)]
            + [Event(Kind.STEP_START, T0 + k + rnd.random() * 0.01, h, step=k) for k in range(400)],
        )
    calc = GoodputCalculator("j", "goodput", store=url, snapshot=False)
    calc.report()
    step, t = 400, T0 + 400
    for r in range(12):
        if r == 3:  # host 5 restarts after its last step: its next gap is no step time
            put(5, [Event(Kind.JOB_START, t - 0.5, 5)])
        if r == 6:  # a new host with a single step: statistics host by host this round
            hosts.append(20)
        if r == 9:  # a late step of host 2
            put(2, [Event(Kind.STEP_START, T0 + 100.5, 2, step=10**6)])
        for h in hosts:
            if r == 3 and h == 5:
                continue  # (no step of host 5 with its restart)
            k = 1 if (h == 20 and r == 6) else 2
            put(h, [Event(Kind.STEP_START, t + j + rnd.random() * 0.01, h, step=step + j) for j in range(k)])
        step, t = step + 2, t + 2
        got = calc.report().hosts
        want = GoodputCalculator("j", "goodput", store=url, snapshot=False).report().hosts
        assert [(s.host, s.steps, _bits(s.median_s), _bits(s.p90_s), _bits(s.max_s)) for s in got] == [
            (s.host, s.steps, _bits(s.median_s), _bits(s.p90_s), _bits(s.max_s)) for s in want
        ], r
    st.close()
    assert calls.count(True) >= 5 and False in calls[2:]
