"""A run of stored step rows of many hosts is ingested as one block (`_ingest_block`: the
columns joined once, each host appended with a few C-level calls, the straggler analysis fed
one block). That must leave exactly what ingesting the run part by part leaves: the timeline
(times, step numbers as runs, flags), the reports, the per-host statistics, the saved state,
the straggler report, with numpy on and off, saved state off and always, and pages that
break the steady shape (a restart or checkpoint among the steps, a host's page stored late,
steps that skip, runs cut short)."""

from __future__ import annotations

import random
from array import array
from pathlib import Path
from typing import Any

import pytest

from mlgoodput.accounting import GoodputCalculator, _fast, _snapshot
from mlgoodput.accounting import _calculator as calc_mod
from mlgoodput.events import Event, EventBatch, Kind
from mlgoodput.store import Columns, open_store
from mlgoodput.torch import StragglerAnalysis
from mlgoodput.torch import _stragglers as lag_mod


def _job(rng: random.Random, hosts: int, rounds: int, mix: str) -> list[list[list[Event]]]:
    """Reads of a job's rows (each a list of batches), one row per host per second."""
    reads: list[list[list[Event]]] = [[[Event(Kind.JOB_START, 10.0, h)] for h in range(hosts)]]
    late: list[list[Event]] = []
    step = 0
    for r in range(rounds):
        batches: list[list[Event]] = []
        for _ in range(rng.randrange(1, 4)):
            t = 20.0 + r * 40 + step * 0.1
            order = list(range(hosts))
            rng.shuffle(order)
            for h in order:
                per = 10
                base = step
                if mix == "gap" and rng.random() < 0.1:
                    base = step + 3  # step numbers that skip
                if mix == "gap" and rng.random() < 0.05:
                    base = 0  # numbers that start again (not monotonic)
                evs = [Event(Kind.STEP_START, t + 0.1 * j + 1e-4 * h, h, step=base + j) for j in range(per)]
                if mix == "late" and rng.random() < 0.03:
                    late.append(evs)  # stored later: before the host's last step by then
                    continue
                batches.append(evs)
            if mix == "mixed" and rng.random() < 0.5:  # a restart or a checkpoint among the step rows
                at = rng.randrange(len(batches) + 1)
                h = rng.randrange(hosts)
                if rng.random() < 0.5:
                    batches.insert(at, [Event(Kind.JOB_START, t + 0.05, h)])
                else:
                    batches.insert(at, [Event(Kind.CKPT_SAVE, t + 0.05, h, step=step, value=0.5)])
            if mix == "late" and late and rng.random() < 0.5:
                batches.insert(rng.randrange(len(batches) + 1), late.pop(0))
            if mix == "late" and rng.random() < 0.1 and len(batches) > 2:  # one host's two rows swapped
                i = rng.randrange(len(batches) - 1)
                batches[i], batches[i + 1] = batches[i + 1], batches[i]
            step += 10
        reads.append(batches)
    if late:
        reads.append(late)
    return reads


def _state(calc: GoodputCalculator) -> Any:
    tl = calc.timeline
    hosts = [
        (h, log.times.tobytes(), [a.tobytes() for a in log.nums.state()], len(log.nums), log.others, log.version)
        for h, log in tl.hosts.items()
    ]
    flags = [(log.job_starts, log.monotonic) for log in tl.hosts.values()]
    return hosts, flags, tl.events, repr(tl.max_time), repr(tl.earliest_change), calc._cursor


def _dumped(calc: GoodputCalculator) -> list[bytes]:
    return list(_snapshot.dump(calc._engine, url="memory://x", namespace="goodput", job="j", cursor=calc._cursor))


def _lag_report(calc: GoodputCalculator, lag: StragglerAnalysis) -> Any:
    """As the monitor asks it (_monitoring/_source.py): fed while it keeps up, else it reads."""
    if lag.cursor != calc._cursor:
        lag.catch_up(calc._cursor)
    return lag.report(None, None, read=lag.cursor != calc._cursor)


@pytest.mark.parametrize("snapshot", ["0", "always"])
@pytest.mark.parametrize("mix", ["steady", "mixed", "late", "gap", "cut"])
@pytest.mark.parametrize("seed", range(2))
def test_a_block_ingests_what_parts_ingest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, numpy_mode: str, snapshot: str, mix: str, seed: int
) -> None:
    from mlgoodput._monitoring._source import _host_steps_of

    monkeypatch.setenv("MLGOODPUT_SNAPSHOT", snapshot)
    rng = random.Random(seed * 31 + len(mix))
    hosts = rng.choice((9, 16, 40))
    reads = _job(rng, hosts, 6, "steady" if mix == "cut" else mix)
    kinds = ("block", "plain")
    urls = {k: f"sqlite://{tmp_path}/{k}.db" for k in kinds}
    stores = {k: open_store(u) for k, u in urls.items()}
    calcs = {k: GoodputCalculator("j", "goodput", store=urls[k], clock=lambda: 1e5) for k in kinds}
    lags = {k: StragglerAnalysis("j", "goodput", store=urls[k]) for k in kinds}
    own = StragglerAnalysis("j", "goodput", store=urls["plain"])  # reads the store itself
    for k in kinds:
        calcs[k]._part_hooks.append(lags[k].feed)
        lags[k].share_gaps(_host_steps_of(calcs[k]))
    blocks: list[int] = []
    real = lag_mod.StragglerAnalysis.feed_block

    def counted(self: StragglerAnalysis, *a: Any) -> bool:
        blocks.append(len(a[2]))
        return real(self, *a)

    monkeypatch.setattr(lag_mod.StragglerAnalysis, "feed_block", counted)
    seq = 0
    for batches in reads:
        for evs in batches:
            for st in stores.values():
                st.append("goodput", "j", EventBatch(1 + evs[0].host, seq, evs))
            seq += len(evs)
        got = {}
        for k in kinds:
            with monkeypatch.context() as m:
                if mix == "cut":
                    m.setattr(calc_mod, "_RUN_EVENTS", 137)  # runs cut inside pages
                if k == "plain":
                    m.setattr(calc_mod, "_BLOCK_HOSTS", 1 << 30)
                got[k] = (
                    calcs[k].report(),
                    calcs[k]._engine.host_stats(1e5),
                    _lag_report(calcs[k], lags[k]),
                )
        assert got["block"] == got["plain"]
        assert _state(calcs["block"]) == _state(calcs["plain"])
        assert _dumped(calcs["block"]) == _dumped(calcs["plain"])
        assert got["plain"][2] == own.report()
    if numpy_mode == "on":
        assert blocks, "the block path ran"
        if mix == "steady":
            assert max(blocks) == hosts
    else:
        assert not blocks
    if snapshot == "always":  # what each saved: a calculator started from it reads the same
        again = {k: GoodputCalculator("j", "goodput", store=urls[k], clock=lambda: 1e5) for k in kinds}
        assert again["block"].report() == again["plain"].report() == got["plain"][0]
        assert _state(again["block"]) == _state(again["plain"])
    for st in stores.values():
        st.close()


def _steps(h: int, t0: float, s0: int, n: int) -> tuple[array[float], array[int]]:
    return array("d", [t0 + 0.5 * j + 1e-3 * h for j in range(n)]), array("q", range(s0, s0 + n))


def _part(h: int, t: array[float], s: array[int]) -> Columns:
    n = len(t)
    return Columns(bytearray([int(Kind.STEP_START)]) * n, t, array("i", [h]) * n, s, array("d", [0.0] * n), None, None)


@pytest.mark.parametrize("extra", ["none", "parts-too", "new-rank", "rank-order"])
def test_the_straggler_analysis_takes_a_block_as_its_parts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, numpy_mode: str, extra: str
) -> None:
    """A fed block leaves the analysis as feeding each rank's part in that order leaves it (with
    parts fed beside it, a rank new to the analysis, ranks not in order); a block that does
    not start at the analysis's cursor is not taken and changes nothing."""
    ranks = 12
    url = f"sqlite://{tmp_path}/s.db"
    st = open_store(url)
    st.append("goodput", "j", EventBatch(1, 0, [Event(Kind.JOB_START, 1.0, r) for r in range(ranks)]))
    a = StragglerAnalysis("j", "goodput", store=url)
    b = StragglerAnalysis("j", "goodput", store=url)
    a.report()
    b.report()
    cur = a.cursor
    rng = random.Random(len(extra))
    for k in range(5):
        order = list(range(ranks))
        if extra == "rank-order":
            rng.shuffle(order)
        if extra == "new-rank" and k == 3:
            order.append(ranks + 5)
        cols = [_steps(h, 10.0 + 40 * k, 100 * k, 30) for h in order]
        if extra == "parts-too":
            h = rng.randrange(ranks)
            t, s = _steps(h, 10.0 + 40 * k + 20, 100 * k + 30, 5)
            a.feed(cur, cur + 1, _part(h, t, s))
            b.feed(cur, cur + 1, _part(h, t, s))
            cur += 1
        assert not a.feed_block(cur - 1, cur + 2, order, [30] * len(order), b"", b"")  # not at its cursor
        assert a.cursor == cur
        times = b"".join(t.tobytes() for t, _ in cols)
        steps = b"".join(s.tobytes() for _, s in cols)
        assert a.feed_block(cur, cur + 2, order, [30] * len(order), times, steps)
        for i, (h, (t, s)) in enumerate(zip(order, cols, strict=True)):
            b.feed(cur if i == 0 else cur + 2, cur + 2, _part(h, t, s))
        cur += 2
        assert a.cursor == b.cursor == cur
        ra, rb = a.report(read=False), b.report(read=False)
        assert ra == rb
        assert a._columns() == b._columns()
        assert a._span == b._span
    st.close()


def test_an_analysis_behind_the_calculator_is_fed_the_parts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, numpy_mode: str
) -> None:
    """An analysis hooked on while behind the calculator takes no block (nor any of the parts
    that the calculator then hands it one by one, as without blocks) and reads the store
    itself: its report is the one of an analysis that only reads."""
    rng = random.Random(5)
    reads = _job(rng, 12, 4, "steady")
    kinds = ("block", "plain")
    urls = {k: f"sqlite://{tmp_path}/{k}.db" for k in kinds}
    stores = {k: open_store(u) for k, u in urls.items()}
    calcs = {k: GoodputCalculator("j", "goodput", store=urls[k], snapshot=False, clock=lambda: 1e5) for k in kinds}
    lags = {k: StragglerAnalysis("j", "goodput", store=urls[k]) for k in kinds}
    seen: dict[str, list[tuple[int, int, int]]] = {k: [] for k in kinds}
    real = lag_mod.StragglerAnalysis.feed
    blocks: list[bool] = []
    real_block = lag_mod.StragglerAnalysis.feed_block

    def feed(self: StragglerAnalysis, b: int, e: int, c: Columns) -> None:
        seen["block" if self is lags["block"] else "plain"].append((b, e, len(c)))
        real(self, b, e, c)

    def feed_block(self: StragglerAnalysis, *a: Any) -> bool:
        blocks.append(real_block(self, *a))
        return blocks[-1]

    monkeypatch.setattr(lag_mod.StragglerAnalysis, "feed", feed)
    monkeypatch.setattr(lag_mod.StragglerAnalysis, "feed_block", feed_block)
    seq = 0
    for i, batches in enumerate(reads):
        for evs in batches:
            for st in stores.values():
                st.append("goodput", "j", EventBatch(1 + evs[0].host, seq, evs))
            seq += len(evs)
        for k in kinds:
            lag = lags[k]
            if i == 2:  # hooked on now, its cursor 0: behind
                calcs[k]._part_hooks.append(lag.feed)
            with monkeypatch.context() as m:
                if k == "plain":
                    m.setattr(calc_mod, "_BLOCK_HOSTS", 1 << 30)
                calcs[k].report()
        assert _state(calcs["block"]) == _state(calcs["plain"])
        assert seen["block"] == seen["plain"]
        if i >= 2:
            assert lags["block"].cursor == lags["plain"].cursor == 0  # nothing taken
    assert seen["block"]
    assert (blocks and not any(blocks)) if numpy_mode == "on" else not blocks  # offered, never taken
    monkeypatch.setattr(lag_mod.StragglerAnalysis, "feed_block", lambda *a: pytest.fail("fed a block"))
    assert lags["block"].report() == lags["plain"].report()
    for st in stores.values():
        st.close()


def test_step_blocks_says_what_the_checks_of_each_part_say() -> None:
    """`_fast.step_blocks` over parts joined: what `_increasing` and `counts_up` say of each."""
    pytest.importorskip("numpy")
    from mlgoodput.accounting._calculator import _increasing
    from mlgoodput.accounting._stepnums import counts_up

    big = 2**63 - 1
    parts = [
        ([1.0, 2.0, 3.0], [0, 1, 2]),
        ([4.0], [-1]),  # a negative first number
        ([5.0, 6.0], [big, -(2**63)]),  # wraps around in int64
        ([7.0, 8.0], [5, 7]),  # skips
        ([9.0], [3]),
        ([-0.0, 0.5], [2**62, 2**62 + 1]),
        ([10.0, 11.0, 12.0], [9, 8, 9]),
        ([float("nan")], [0]),  # alone: increasing, as `_increasing` says
        ([20.0, 21.0], [big - 1, big]),
    ]
    times = b"".join(array("d", t).tobytes() for t, _ in parts)
    steps = b"".join(array("q", s).tobytes() for _, s in parts)
    got = _fast.step_blocks(times, steps, [len(t) for t, _ in parts])
    assert got is not None
    ok, first_t, last_t, first_s, counted = got
    assert ok
    assert [repr(x) for x in first_t] == [repr(t[0]) for t, _ in parts]
    assert [repr(x) for x in last_t] == [repr(t[-1]) for t, _ in parts]
    assert first_s == [s[0] for _, s in parts]
    assert counted == [counts_up(array("q", s)) for _, s in parts]
    assert all(_increasing(array("d", t)) for t, _ in parts)
    for bad in ([1.0, 1.0], [2.0, 1.0], [1.0, float("nan")]):
        t2 = times + array("d", bad).tobytes()
        s2 = steps + array("q", [0, 1]).tobytes()
        got = _fast.step_blocks(t2, s2, [len(t) for t, _ in parts] + [2])
        assert got is not None and not got[0]


def test_extend_run_is_extend_of_a_run() -> None:
    """`StepNums.extend_run` leaves what `extend` of the same numbers leaves, and returns the
    last number before them."""
    from mlgoodput.accounting._stepnums import StepNums

    rng = random.Random(3)
    a, b = StepNums(), StepNums()
    for _ in range(300):
        m = rng.randrange(1, 80)
        last = a.last()
        if rng.random() < 0.3:  # numbers that do not count up: packed segments between runs
            xs = [rng.randrange(0, 50) for _ in range(m)]
            a.extend(xs)
            b.extend(xs)
            continue
        first = last + 1 if last is not None and last >= 0 and rng.random() < 0.6 else rng.randrange(0, 1000)
        assert b.extend_run(first, m) == last
        a.extend(range(first, first + m))
        assert [x.tobytes() for x in a.state()] == [x.tobytes() for x in b.state()]
        assert len(a) == len(b) and a.last() == b.last()


def test_another_hook_keeps_the_parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A part hook that takes no block (anything but a bound `feed` beside a `feed_block`)
    keeps the run part by part: every hook gets each host's part, none a block."""
    pytest.importorskip("numpy")
    monkeypatch.delenv("MLGOODPUT_NUMPY", raising=False)
    _fast.reset()
    url = f"sqlite://{tmp_path}/s.db"
    st = open_store(url)
    calc = GoodputCalculator("j", "goodput", store=url, snapshot=False, clock=lambda: 1e5)
    lag = StragglerAnalysis("j", "goodput", store=url)
    parts: list[tuple[int, int, int]] = []
    calc._part_hooks.append(lag.feed)
    calc._part_hooks.append(lambda b, e, c: parts.append((b, e, len(c))))
    monkeypatch.setattr(lag_mod.StragglerAnalysis, "feed_block", lambda *a: pytest.fail("fed a block"))
    seq = 0
    for batches in _job(random.Random(1), 16, 2, "steady"):
        for evs in batches:
            st.append("goodput", "j", EventBatch(1 + evs[0].host, seq, evs))
            seq += len(evs)
        calc.report()
    assert len(parts) >= 2 * 16 and sum(n for _, _, n in parts) == calc.timeline.events
    assert lag.cursor == calc._cursor
    st.close()
