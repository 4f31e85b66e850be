"""The straggler analysis's block pass (`_Live._lockstep`: all ranks' new steps as one numpy
block, the shared gaps checked as one run of bytes, a report with nothing new answered from
the last one) against the plain path: the full pass (`analyze`) and the same feeds with numpy
off ($MLGOODPUT_NUMPY=0), bit for bit, through ranks out of lockstep, a rank missing steps or
a page, a rank's clock going back, restarts, a rank joining late, repeated steps, ties and
uploads with nothing new."""

from __future__ import annotations

import math
import random
from array import array
from pathlib import Path
from typing import Any

import pytest

from mlgoodput.accounting import GoodputCalculator, _fast
from mlgoodput.events import Event, EventBatch, Kind
from mlgoodput.store import Columns, open_store
from mlgoodput.torch import _stragglers
from mlgoodput.torch._stragglers import StragglerAnalysis, StragglerReport, _Live, _packed, _span, analyze

pytest.importorskip("numpy")

_STEP, _JOB = int(Kind.STEP_START), int(Kind.JOB_START)


def _bits(rep: StragglerReport) -> str:
    def h(v: object) -> object:
        return v.hex() if isinstance(v, float) else v

    d = rep.to_dict()
    ranks = [[(k, h(v)) for k, v in r.items()] for r in d.pop("ranks")]
    return repr(([(k, h(v)) for k, v in d.items()], ranks))


def _part(kinds: list[int], times: list[float], hosts: list[int], steps: list[int]) -> Columns:
    n = len(kinds)
    return Columns(
        bytearray(kinds),
        array("d", times),
        array("i", hosts),
        array("q", steps),
        array("d", [math.nan] * n),
        None,
        None,
    )


def _steps_part(rank: int, ev: list[tuple[float, int]]) -> Columns:
    return _part([_STEP] * len(ev), [t for t, _ in ev], [rank] * len(ev), [n for _, n in ev])


class _Job:
    """Ranks that step together, with what breaks the lockstep now and then; every event kept
    for the full pass."""

    def __init__(self, rng: random.Random, ranks: int) -> None:
        self.rng = rng
        self.ranks = list(range(ranks))
        self.t = 1000.0
        self.step = 0
        self.js: dict[int, list[float]] = {}
        self.held: dict[int, list[tuple[float, int]]] = {}  # pages held back a round

    def start(self) -> list[Columns]:
        out = []
        for r in self.ranks:
            self.js.setdefault(r, []).append(self.t - 1.0)
            out.append(_part([_JOB], [self.t - 1.0], [r], [-1]))
        return out

    def round(self, per: int, what: str) -> list[Columns]:
        rng = self.rng
        parts: list[Columns] = []
        if what == "nothing":
            return parts
        if what in ("restart", "resume"):  # resume: a restart whose step numbers go on
            self.t += 3.0
            for r in self.ranks:
                self.js[r].append(self.t - 1.0)
                parts.append(_part([_JOB], [self.t - 1.0], [r], [-1]))
            if what == "restart":
                self.step = max(0, self.step - rng.randrange(1, per + 1))
        if what == "solo":  # one rank restarts alone, its step numbers going on
            r = rng.choice(self.ranks)
            self.js[r].append(self.t - 0.01)
            parts.append(_part([_JOB], [self.t - 0.01], [r], [-1]))
        if what == "join":  # a rank seen for the first time
            r = len(self.ranks)
            self.ranks.append(r)
            self.js[r] = [self.t - 0.5]
            parts.append(_part([_JOB], [self.t - 0.5], [r], [-1]))
        odd = rng.choice(self.ranks)
        for r in self.ranks:
            ev = []
            for j in range(per):
                dt = 1e-4 * ((j * 7 + r) % 5)
                if what == "tie":
                    dt = 0.0
                if r == odd and what == "slow":
                    dt += 0.03
                ev.append((self.t + j * 0.1 + dt, self.step + j))
            if r == odd and what == "missing" and per > 2:
                del ev[per // 2]  # a step this rank never reported
            if r == odd and what == "ahead":
                ev.append((self.t + per * 0.1, self.step + per))  # a step the others report next round
            if r == odd and what == "back":  # new step numbers, started before its last one
                ev = [(t - per * 0.1 - 0.5, n) for t, n in ev]
            if r == odd and what == "repeat":
                ev.insert(1, ev[0])  # a step start stored twice
            if r == odd and what == "late":  # this rank's page comes a round late
                self.held.setdefault(r, []).extend(ev)
                continue
            ev = self.held.pop(r, []) + ev
            parts.append(_steps_part(r, ev))
        if what == "shuffle":
            rng.shuffle(parts)
        self.step += per
        self.t += per * 0.1 + 0.05
        return parts

    def want(self, parts_fed: list[Columns]) -> StragglerReport:
        steps: dict[int, list[tuple[float, int]]] = {}
        js: dict[int, list[float]] = {}
        for c in parts_fed:
            for i in range(len(c)):
                if c.kinds[i] == _STEP:
                    steps.setdefault(c.hosts[i], []).append((c.times[i], c.steps[i]))
                else:
                    js.setdefault(c.hosts[i], []).append(c.times[i])
        return analyze({h: sorted(v) for h, v in js.items()}, steps)


_WHAT = [
    "lockstep",
    "lockstep",
    "lockstep",
    "slow",
    "tie",
    "missing",
    "ahead",
    "late",
    "restart",
    "resume",
    "solo",
    "join",
]
_WHAT += ["repeat", "back", "shuffle", "nothing"]


_FIXED = [  # what the random rounds may miss: a page held over a restart, a restart in lockstep
    ["lockstep", "late", "resume", "lockstep", "lockstep"],
    ["lockstep", "resume", "lockstep", "missing", "lockstep", "restart", "lockstep"],
    ["lockstep", "ahead", "lockstep", "back", "lockstep", "join", "lockstep", "lockstep"],
    ["lockstep", "solo", "lockstep", "lockstep", "resume", "lockstep"],
]


@pytest.mark.parametrize("seed", range(10 + len(_FIXED)))
def test_fed_rounds_give_the_full_pass(
    tmp_path: Path, numpy_mode: str, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(seed)
    job = _Job(rng, rng.randrange(2, 24))
    monkeypatch.setattr(_stragglers, "_LOCKSTEP_MIN", 1)
    took: list[bool] = []
    real = _Live._lockstep

    def counting(self: _Live, *args: Any) -> bool:
        got = real(self, *args)
        took.append(got)
        return got

    monkeypatch.setattr(_Live, "_lockstep", counting)
    a = StragglerAnalysis("j", "goodput", store=f"sqlite://{tmp_path}/s.db")
    fed: list[Columns] = []
    cursor = 0

    def feed(parts: list[Columns]) -> None:
        nonlocal cursor
        for c in parts:  # as the calculator's hook: each part starts at the cursor
            a.feed(cursor, cursor + 1, c)
            cursor += 1
        fed.extend(parts)

    feed(job.start())
    per = rng.choice((1, 3, 10))
    whats = ["lockstep"] + [rng.choice(_WHAT) for _ in range(rng.randrange(8, 20))]
    if seed >= 10:
        whats, per = _FIXED[seed - 10], 6
    for what in whats:
        feed(job.round(per, what))
        got = a.report(read=False)
        assert _bits(got) == _bits(job.want(fed)), what  # every float bit for bit
        assert a.report(read=False) is got  # nothing new: the same report
    if numpy_mode == "on":
        assert any(took)
    else:
        assert not took


def test_nothing_new_answers_the_last_report_until_something_changes(tmp_path: Path) -> None:
    rng = random.Random(7)
    job = _Job(rng, 5)
    a = StragglerAnalysis("j", "goodput", store=f"sqlite://{tmp_path}/s.db")
    fed = job.start() + job.round(400, "lockstep")
    for k, c in enumerate(fed):
        a.feed(k, k + 1, c)
    first = a.report(read=False)
    calls = []
    real = _Live.report

    def counting(self: _Live) -> StragglerReport | None:
        calls.append(self.cached is not None)
        return real(self)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_Live, "report", counting)
        assert a.report(read=False) is first and calls == [True]  # from the last one
        more = job.round(400, "slow")
        for k, c in enumerate(more, start=len(fed)):
            a.feed(k, k + 1, c)
        second = a.report(read=False)
    assert calls == [True, False] and second is not first
    assert _bits(second) == _bits(job.want(fed + more))
    # a job start alone (no step) changes no number here, but is a change: reported anew
    t = max(max(c.times) for c in more) + 1.0
    last = _part([_JOB], [t], [0], [-1])
    a.feed(len(fed) + len(more), len(fed) + len(more) + 1, last)
    third = a.report(read=False)
    assert third is not second and _bits(third) == _bits(job.want([*fed, *more, last]))


def test_a_part_of_several_hosts_is_taken_event_by_event(tmp_path: Path) -> None:
    """One part with two hosts (or host numbers whose bytes differ only past the first byte) is
    not one rank's page: each event goes to its own rank."""
    a = StragglerAnalysis("j", "goodput", store=f"sqlite://{tmp_path}/s.db")
    ev = [(1000.0 + i * 0.1, i) for i in range(5)]
    c = _part([_STEP] * 10, [t for t, _ in ev] * 2, [1] * 5 + [257] * 5, [n for _, n in ev] * 2)
    a.feed(0, 1, c)
    got = a.report(read=False)
    assert [r.rank for r in got.ranks] == [1, 257] and got.steps_compared == 5
    assert got == analyze({}, {1: ev, 257: ev})


def test_span_and_packing_match_the_plain_python() -> None:
    parts = [array("d", [3.0, 1.5]), array("d", [2.0, 9.0])] * 5
    assert _span(math.inf, -math.inf, parts) == (1.5, 9.0)
    signed = [array("d", [0.0, 1.0])] * 5 + [array("d", [-0.0, 2.0])] * 5
    lo, hi = _span(math.inf, -math.inf, signed)
    assert (lo, hi) == (0.0, 2.0) and math.copysign(1.0, lo) == 1.0  # min keeps the first of equals
    nan = [array("d", [1.0])] * 9 + [array("d", [math.nan, 0.5])]
    want = (math.inf, -math.inf)
    for p in nan:
        want = (min(want[0], min(p)), max(want[1], max(p)))
    assert repr(_span(math.inf, -math.inf, nan)) == repr(want)
    lists = [[0.1, 0.2], array("d", [0.3]), [1, 2.5], (7.0,), array("f", [0.5])]
    assert _packed(lists) == array("d", [0.1, 0.2, 0.3, 1.0, 2.5, 7.0, 0.5]).tobytes()
    assert _packed([array("d", [0.1]), array("d", [0.2])]) == array("d", [0.1, 0.2]).tobytes()


def _numpy_lockstep(monkeypatch: pytest.MonkeyPatch) -> None:
    """numpy on, and the live analysis's one-pass path from the first step on."""
    monkeypatch.delenv("MLGOODPUT_NUMPY", raising=False)
    _fast.reset()
    monkeypatch.setattr(_stragglers, "_LOCKSTEP_MIN", 1)


def _calc_and_analysis(tmp_path: Path, ranks: int) -> tuple[Any, GoodputCalculator, StragglerAnalysis]:
    from mlgoodput._monitoring._source import _host_steps_of

    store = f"sqlite://{tmp_path}/s.db"
    st = open_store(store)
    st.append("goodput", "j", EventBatch(1, 0, [Event(Kind.JOB_START, 990.0, r) for r in range(ranks)]))
    calc = GoodputCalculator("j", "goodput", store=store, snapshot=False, clock=lambda: 1e6)
    a = StragglerAnalysis("j", "goodput", store=store)
    calc.report()
    a.report()
    calc._part_hooks.append(a.feed)
    a.share_gaps(_host_steps_of(calc))
    return st, calc, a


@pytest.mark.parametrize("packed", [False, True])
@pytest.mark.parametrize("tamper", ["none", "value", "count", "stats"])
def test_a_shared_copy_out_of_step_is_found_and_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, packed: bool, tamper: str
) -> None:
    """The calculator's per-host gaps are read as the analysis's own while they are provably
    the same. Its last addition one ulp off, or one gap short, and the analysis keeps its own
    again (built anew): the report stays the full pass. Statistics of another count than the
    gaps' are never used. `packed`: the calculator hands its new gaps as an array, else a list."""
    _numpy_lockstep(monkeypatch)
    if packed:
        monkeypatch.setattr(_fast, "MIN", 2)  # the calculator's gaps from numpy: arrays
    ranks, per = 6, 12
    st, calc, a = _calc_and_analysis(tmp_path, ranks)
    job = _Rounds(st, ranks, per)
    shared_seen = 0
    for k in range(8):
        job.step()
        calc.report()
        hs: Any = calc._eng._hosts[2]
        if k == 5 and tamper == "value":
            last = hs.last_new
            last[3] = math.nextafter(last[3], math.inf)  # what the analysis compares, one ulp off
        if k == 5 and tamper == "count":
            hs.last_new = hs.last_new[:-1]
        if k == 5 and tamper == "stats" and hs.stats is not None:
            s = hs.stats
            hs.stats = type(s)(s.host, s.steps + 1, s.median_s * 2, s.p90_s * 2, s.max_s * 2)
        live = a._live
        shared_seen = max(shared_seen, len(live.shared) if live is not None else 0)
        assert _bits(a.report(read=False)) == _bits(job.want())
    assert shared_seen == ranks
    assert a._share == (tamper in ("none", "stats"))
    st.close()


def _per_rank(events: list[Event]) -> dict[int, list[tuple[float, int]]]:
    out: dict[int, list[tuple[float, int]]] = {}
    for e in events:
        if e.kind == Kind.STEP_START:
            out.setdefault(e.host, []).append((e.time, e.step or 0))
    return out


class _Rounds:
    """A job whose ranks step together: each `step()` stores one page of `per` steps per rank
    (a shipper's second); `want()` is the full pass over everything stored so far."""

    def __init__(self, st: Any, ranks: int, per: int) -> None:
        self.st, self.ranks, self.per = st, ranks, per
        self.events: list[Event] = [Event(Kind.JOB_START, 990.0, r) for r in range(ranks)]
        self.seq, self.step_no, self.t = 1, 0, 1000.0

    def step(self) -> None:
        per = self.per
        for r in range(self.ranks):
            evs = [Event(Kind.STEP_START, self.t + j * 0.1 + r * 1e-3, r, step=self.step_no + j) for j in range(per)]
            self.st.append("goodput", "j", EventBatch(10 + r, self.seq, evs))
            self.seq += per
            self.events.extend(evs)
        self.step_no += per
        self.t += per * 0.1 + 0.05

    def want(self) -> Any:
        return analyze({r: [990.0] for r in range(self.ranks)}, _per_rank(self.events))


def test_a_structure_the_calculator_let_go_of_becomes_the_ranks_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The calculator starting a host's statistics over (a new structure) leaves the analysis
    the old one as its own: still the full pass, still sharing the other ranks'."""
    _numpy_lockstep(monkeypatch)
    ranks, per = 4, 10
    st, calc, a = _calc_and_analysis(tmp_path, ranks)
    job = _Rounds(st, ranks, per)
    for k in range(6):
        if k == 4:  # the calculator's structure of rank 1 replaced by an equal copy
            from mlgoodput.accounting import SortedFloats

            hs: Any = calc._eng._hosts[1]
            hs.diffs = SortedFloats(hs.diffs.values())
        job.step()
        calc.report()
        assert _bits(a.report(read=False)) == _bits(job.want())
    live = a._live
    assert live is not None and a._share
    assert 1 in live.no_share and 1 not in live.shared and len(live.shared) == ranks - 1
    st.close()


def _feed_all(a: StragglerAnalysis, parts: list[Columns], at: int) -> int:
    for c in parts:  # as the calculator's hook: each part starts at the cursor
        a.feed(at, at + 1, c)
        at += 1
    return at


@pytest.mark.parametrize("seed", range(6))
def test_fed_blocks_in_any_part_order_give_the_full_pass(
    tmp_path: Path, numpy_mode: str, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ranks first seen out of rank order (ties then go to the highest rank, not the last
    index), a rank's steps split over parts fed apart, parts in any order, blocks put in each
    rank's columns now and then and read by a windowed report: the full pass, bit for bit."""
    rng = random.Random(100 + seed)
    job = _Job(rng, rng.randrange(3, 12))
    monkeypatch.setattr(_stragglers, "_LOCKSTEP_MIN", 1)
    monkeypatch.setattr(_stragglers, "_BLOCKS_KEPT", 3)
    blocks: list[bool] = []
    real = StragglerAnalysis._take_block

    def counting(self: StragglerAnalysis, parts: list[Columns]) -> bool:
        got = real(self, parts)
        blocks.append(got)
        return got

    monkeypatch.setattr(StragglerAnalysis, "_take_block", counting)
    a = StragglerAnalysis("j", "goodput", store=f"sqlite://{tmp_path}/s.db")
    start = job.start()
    rng.shuffle(start)  # first-seen order: not the ranks' order
    fed = list(start)
    at = _feed_all(a, start, 0)
    for k in range(12):
        what = rng.choice(["lockstep", "tie", "tie", "slow", "lockstep"])
        parts = job.round(rng.choice((2, 5)), what)
        if k % 3 == 1:  # each rank's steps in two parts, the second halves fed after all first ones
            halves = [(_cut(c, 0, len(c) // 2), _cut(c, len(c) // 2, len(c))) for c in parts]
            parts = [h for h, _ in halves if len(h)] + [t for _, t in halves if len(t)]
        if k % 2 == 0:  # (the first round too: ranks first seen out of order)
            rng.shuffle(parts)
        at = _feed_all(a, parts, at)
        fed += parts
        got = a.report(read=False)
        assert _bits(got) == _bits(job.want(fed)), (k, what)
        if k % 4 == 3:  # a window: the full pass over every rank's columns, blocks included
            lo = min(min(c.times) for c in parts)
            want = analyze({h: sorted(v) for h, v in _job_starts(fed).items()}, _per_rank_parts(fed), lo, math.inf)
            assert _bits(a.report(lo, None, read=False)) == _bits(want)
    assert any(blocks) == (numpy_mode == "on")
    times, nums = a._columns()  # every fed step in its rank's columns, in stored order
    assert {h: list(zip(times[h], nums[h], strict=True)) for h in times} == _per_rank_parts(fed)


def _cut(c: Columns, i: int, j: int) -> Columns:
    return _part(list(c.kinds[i:j]), list(c.times[i:j]), list(c.hosts[i:j]), list(c.steps[i:j]))


def _job_starts(parts: list[Columns]) -> dict[int, list[float]]:
    out: dict[int, list[float]] = {}
    for c in parts:
        for i in range(len(c)):
            if c.kinds[i] == _JOB:
                out.setdefault(c.hosts[i], []).append(c.times[i])
    return out


def _per_rank_parts(parts: list[Columns]) -> dict[int, list[tuple[float, int]]]:
    out: dict[int, list[tuple[float, int]]] = {}
    for c in parts:
        for i in range(len(c)):
            if c.kinds[i] == _STEP:
                out.setdefault(c.hosts[i], []).append((c.times[i], c.steps[i]))
    return out


def test_a_block_through_time_zero_spans_as_the_plain_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fed block holding a start at 0.0 (whose sign min and max could pick by position)
    widens the span as rank-by-rank min and max do: a window from 0.0 still takes the live path."""
    monkeypatch.setattr(_stragglers, "_LOCKSTEP_MIN", 1)
    a = StragglerAnalysis("j", "goodput", store=f"sqlite://{tmp_path}/s.db")
    fed = [_part([_JOB], [-5.0], [r], [-1]) for r in range(3)]
    fed += [_steps_part(r, [(-2.0 + 0.25 * k + r * 1e-3, k) for k in range(3)]) for r in range(3)]
    at = _feed_all(a, fed, 0)
    a.report(read=False)
    # the latest start: -0.0 for rank 0, 0.0 for the others (the plain path keeps the first)
    more = [
        _steps_part(r, [(-0.5 + r * 1e-3, 3), (-0.25 + r * 1e-3, 4), (-0.0 if r == 0 else 0.0, 5)]) for r in range(3)
    ]
    _feed_all(a, more, at)
    got = a.report(read=False)
    want_span = (math.inf, -math.inf)
    for r in range(3):  # what the plain path does: rank by rank
        t = a._columns()[0][r]
        want_span = (min(want_span[0], min(t)), max(want_span[1], max(t)))
    assert repr(a._span) == repr(want_span) == "(-2.0, -0.0)"
    assert _bits(got) == _bits(analyze({r: [-5.0] for r in range(3)}, _per_rank_parts(fed + more)))


def test_sharing_starts_at_the_first_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Given the calculator's gaps before its first report, the analysis compares them while it
    builds (a monitor's first upload), not at the next report; the reports stay the full pass."""
    from mlgoodput._monitoring._source import _host_steps_of

    _numpy_lockstep(monkeypatch)
    ranks, per = 5, 20
    store = f"sqlite://{tmp_path}/s.db"
    st = open_store(store)
    job = _Rounds(st, ranks, per)
    st.append("goodput", "j", EventBatch(1, 0, list(job.events)))
    round_ = job.step
    round_()
    calc = GoodputCalculator("j", "goodput", store=store, snapshot=False, clock=lambda: 1e6)
    calc.report()
    a = StragglerAnalysis("j", "goodput", store=store)
    a.share_gaps(_host_steps_of(calc))
    a.catch_up(calc._cursor)
    assert _bits(a.report(read=False)) == _bits(job.want())
    live = a._live
    assert live is not None and len(live.shared) == ranks and a._share
    calc._part_hooks.append(a.feed)
    for _ in range(3):
        round_()
        calc.report()
        assert _bits(a.report(read=False)) == _bits(job.want())
        assert a._live is live and len(live.shared) == ranks
    st.close()


def test_fed_parts_then_a_read_of_the_store_keep_the_stored_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Parts fed and not yet taken come before what the analysis then reads itself (a report
    that reads the store): the full pass of everything stored, bit for bit."""
    _numpy_lockstep(monkeypatch)
    ranks, per = 4, 6
    st, calc, a = _calc_and_analysis(tmp_path, ranks)
    job = _Rounds(st, ranks, per)
    for k in range(5):
        job.step()
        if k % 2 == 0:
            calc.report()  # fed to the analysis (taken at its next report)
        if k >= 1:
            got = a.report()  # reads what was not fed, after what was
            assert _bits(got) == _bits(job.want()), k
            assert a.cursor >= calc._cursor
    st.close()


def test_blocks_read_back_without_numpy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks taken with numpy, read back (a window) once numpy is off: the same columns and
    the same full pass."""
    _numpy_lockstep(monkeypatch)
    rng = random.Random(3)
    job = _Job(rng, 5)
    a = StragglerAnalysis("j", "goodput", store=f"sqlite://{tmp_path}/s.db")
    fed = job.start() + job.round(4, "lockstep")
    at = _feed_all(a, fed, 0)
    a.report(read=False)
    for _ in range(3):
        parts = job.round(4, "lockstep")
        at = _feed_all(a, parts, at)
        fed += parts
        a.report(read=False)
    assert len(a._blocks) == 3
    assert a._blocks[2][0] is a._blocks[1][0] is a._blocks[0][0]  # one layout, kept once
    monkeypatch.setenv("MLGOODPUT_NUMPY", "0")
    _fast.reset()
    try:
        lo = min(min(c.times) for c in fed if c.kinds[0] == _STEP) + 0.25
        want = analyze(_job_starts(fed), _per_rank_parts(fed), lo, None)
        assert _bits(a.report(lo, None, read=False)) == _bits(want)
        times, nums = a._columns()
        assert {h: list(zip(times[h], nums[h], strict=True)) for h in times} == _per_rank_parts(fed)
    finally:
        _fast.reset()
