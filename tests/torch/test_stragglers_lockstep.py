"""Many ranks stepping together, each shipping its own page a second (the monitor's usual
input): the analysis kept up to date takes their new steps in a few numpy passes
(`_Live._lockstep`) and still gives exactly the full pass (`analyze`), bit for bit, with
numpy on and off ($MLGOODPUT_NUMPY=0), through ties, late ranks, restarts and stragglers."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mlgoodput.accounting import GoodputCalculator
from mlgoodput.events import Event, EventBatch, Kind
from mlgoodput.store import open_store
from mlgoodput.torch._stragglers import StragglerAnalysis, StragglerReport, _Live, analyze

pytest.importorskip("numpy")


def _rounds(rng: random.Random, ranks: int, rounds: int, per: int) -> Iterator[list[tuple[int, list[Event]]]]:
    """Each round: every rank's page of `per` steps (some ranks late by a round, some rounds
    with a restart of every rank, equal start times across ranks, one slow rank)."""
    step, t = 0, 1000.0
    slow = rng.randrange(ranks)
    late: dict[int, list[Event]] = {}
    for k in range(rounds):
        pages: list[tuple[int, list[Event]]] = []
        restart = k and rng.random() < 0.15
        if restart:
            t += 5.0
            for r in range(ranks):
                pages.append((r, [Event(Kind.JOB_START, t - 1.0, r)]))
            step = max(0, step - rng.randrange(per))
        for r in rng.sample(range(ranks), ranks) if rng.random() < 0.3 else range(ranks):
            evs = []
            for j in range(per):
                dt = 0.0 if rng.random() < 0.2 else rng.choice((1e-4, 3e-3, rng.random() / 50))
                dt += 0.02 if r == slow and rng.random() < 0.5 else 0.0
                evs.append(Event(Kind.STEP_START, t + j * 0.1 + dt, r, step=step + j))
            if not restart and rng.random() < 0.1:  # this rank's page comes a round late
                late.setdefault(r, []).extend(evs)
                continue
            pages.append((r, late.pop(r, []) + evs))
        for r, evs in sorted(late.items()) if k == rounds - 1 else ():
            pages.append((r, evs))
        step += per
        t += per * 0.1
        yield pages


def _want(events: list[Event]) -> StragglerReport:
    steps: dict[int, list[tuple[float, int]]] = {}
    js: dict[int, list[float]] = {}
    for e in events:
        if e.kind == Kind.STEP_START:
            steps.setdefault(e.host, []).append((e.time, e.step or 0))
        elif e.kind == Kind.JOB_START:
            js.setdefault(e.host, []).append(e.time)
    return analyze({h: sorted(v) for h, v in js.items()}, steps)


@pytest.mark.parametrize("seed", range(6))
def test_lockstep_pages_give_the_full_pass(
    tmp_path: Path, numpy_mode: str, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(seed)
    ranks = rng.randrange(3, 40)
    per = rng.choice((1, 5, 10, 30))
    store = f"sqlite://{tmp_path}/s.db"
    st = open_store(store)
    first = [Event(Kind.JOB_START, 990.0, r) for r in range(ranks)]
    st.append("goodput", "j", EventBatch(1, 0, first))
    events = list(first)
    calc = GoodputCalculator("j", "goodput", store=store, snapshot=False)
    a = StragglerAnalysis("j", "goodput", store=store)
    calc.report()
    a.report()
    calc._part_hooks.append(a.feed)
    fast = []
    real = _Live._lockstep

    def counting(self: _Live, *args: Any) -> bool:
        got = real(self, *args)
        fast.append(got)
        return got

    monkeypatch.setattr(_Live, "_lockstep", counting)
    monkeypatch.setattr("mlgoodput.torch._stragglers._LOCKSTEP_MIN", 1)
    seq = 1
    for pages in _rounds(rng, ranks, rng.randrange(4, 25), per):
        for r, evs in pages:
            st.append("goodput", "j", EventBatch(10 + r, seq, evs))
            seq += len(evs)
            events += evs
        calc.report()
        assert a.cursor == calc._cursor
        assert a.report(read=False) == _want(events)  # every float bit for bit
    if numpy_mode == "on":
        assert any(fast)  # the numpy pass took part
    else:
        assert not fast
    st.close()


def test_the_monitor_keeps_feeding_the_analysis_while_a_shipper_stores(tmp_path: Path) -> None:
    """A shipper storing between the calculator's read and the analysis's own first read must
    not leave the analysis ahead of the calculator (then it would never be fed again and read
    the store itself every upload): it reads up to the calculator's cursor, then is fed."""
    from mlgoodput._monitoring._source import GoodputSource

    store = f"sqlite://{tmp_path}/s.db"
    st = open_store(store)
    seq = 0

    def ship(k: int) -> None:
        nonlocal seq
        for r in range(3):
            evs = [Event(Kind.STEP_START, 1000.0 + (k * 5 + j) * 0.1 + r * 1e-3, r, step=k * 5 + j) for j in range(5)]
            st.append("goodput", "j", EventBatch(10 + r, seq, evs))
            seq += 5

    st.append("goodput", "j", EventBatch(1, 0, [Event(Kind.JOB_START, 990.0, r) for r in range(3)]))
    ship(0)
    src = GoodputSource("j", "goodput", store, include_badput_breakdown=False, clock=lambda: 2000.0)
    calc = src._calc()
    real = calc.report
    reads = []

    def report_then_ship(*a: object, **kw: object) -> object:
        got = real(*a, **kw)
        ship(len(reads) + 1)  # stored after the calculator read, before the analysis reads
        reads.append(calc._cursor)
        return got

    calc.report = report_then_ship  # type: ignore[method-assign]
    level = []
    for _ in range(4):
        src.collect(0.0)
        lag = src._lag
        level.append(lag is not None and lag.cursor == calc._cursor)
    assert all(level)  # never ahead of the calculator: fed from the second upload on
    got = src._lag.report(read=False)
    want = StragglerAnalysis("j", "goodput", store=store).report()  # everything stored
    assert got.steps_compared < want.steps_compared  # one shipment behind, as the calculator
    st.close()


def _bits(rep: StragglerReport) -> str:
    def h(v: object) -> object:
        return v.hex() if isinstance(v, float) else v

    d = rep.to_dict()
    ranks = [[(k, h(v)) for k, v in r.items()] for r in d.pop("ranks")]
    return repr(([(k, h(v)) for k, v in d.items()], ranks))


@pytest.mark.parametrize("seed", range(8))
def test_gaps_shared_with_the_calculator_give_the_full_pass(
    tmp_path: Path, numpy_mode: str, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The monitor's analysis reads each rank's step gaps from the calculator's per-host
    statistics (`share_gaps`) while they are provably the same: bit for bit the full pass,
    also when the calculator reads ahead (two reads, one report), a host's statistics start
    over (a page stored out of order), or a rank's gaps hold a zero."""
    from mlgoodput._monitoring._source import _host_steps_of

    rng = random.Random(100 + seed)
    ranks = rng.randrange(3, 20)
    per = rng.choice((5, 10, 30))
    store = f"sqlite://{tmp_path}/s.db"
    st = open_store(store)
    first = [Event(Kind.JOB_START, 990.0, r) for r in range(ranks)]
    st.append("goodput", "j", EventBatch(1, 0, first))
    events = list(first)
    calc = GoodputCalculator("j", "goodput", store=store, snapshot=False, clock=lambda: 1e6)
    a = StragglerAnalysis("j", "goodput", store=store)
    calc.report()
    a.report()
    calc._part_hooks.append(a.feed)
    a.share_gaps(_host_steps_of(calc))
    monkeypatch.setattr("mlgoodput.torch._stragglers._LOCKSTEP_MIN", 1)
    seq, shared = 1, 0
    step, t = 0, 1000.0
    odd = seed % 4  # what breaks the sharing at round 5: a zero gap, a late page, a read ahead, nothing

    def ship(k: int) -> None:
        nonlocal seq, step, t
        for r in range(ranks):
            evs = [Event(Kind.STEP_START, t + j * 0.1 + r * 1e-3, r, step=step + j) for j in range(per)]
            if odd == 0 and k == 5 and r == 0:  # a step stored twice at the same time: a zero gap
                evs.append(Event(Kind.STEP_START, evs[-1].time, r, step=step + per))
            st.append("goodput", "j", EventBatch(10 + r, seq, evs))
            seq += len(evs)
            events.extend(evs)
        step += per + 1
        t += (per + 1) * 0.1

    for k in range(rng.randrange(8, 14)):
        ship(k)
        if odd == 1 and k == 5:  # a page of rank 1 stored late: its statistics start over
            late = [Event(Kind.STEP_START, 1000.05, 1, step=10**6)]
            st.append("goodput", "j", EventBatch(99, 0, late))
            events.extend(late)
        calc.report()
        if odd == 2 and k == 5:  # the calculator reads twice before the analysis reports
            ship(k)
            calc.report()
        if rng.random() < 0.2:
            calc.report()  # nothing new: the same statistics
        assert _bits(a.report(read=False)) == _bits(_want(events))
        live = a._live
        shared = max(shared, len(live.shared) if live is not None else 0)
    if numpy_mode == "on":
        assert shared  # the gaps were shared for a while
        # a zero gap, a late page (not the numpy pass) or a read ahead: its own gaps from then on
        assert a._share == (odd == 3)
    else:
        assert not shared
    st.close()
