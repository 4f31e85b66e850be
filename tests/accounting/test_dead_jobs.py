"""A job whose processes were killed ends at their last sign of life (docs/accounting.md,
"A job that dies"): its total stops growing, its status is `crashed`, and a later restart is
a disruption. A job whose processes live on (a hang) keeps counting, as the spec says."""

from __future__ import annotations

from pathlib import Path

import pytest

from mlgoodput.accounting import BadputType, GoodputCalculator, GoodputReport
from mlgoodput.events import Event, EventBatch, Kind
from mlgoodput.store import MemoryStore

T0 = 1_700_000_000.0
B = BadputType


def _job(alive: bool = True, steps: int = 100) -> list[Event]:
    """A job start (with its sign of life, as the recorder writes it), then one step a second."""
    evs = [Event(Kind.JOB_START, T0)]
    if alive:
        evs.append(Event(Kind.ALIVE, T0, value=15.0))
    evs += [Event(Kind.STEP_START, T0 + 1 + i, step=i) for i in range(steps)]
    return evs


def _report(events: list[Event], q: float) -> GoodputReport:
    st = MemoryStore()
    st.append("l", "j", EventBatch(1, 0, events))
    return GoodputCalculator("j", "l", store=st, clock=lambda: q).report()


def _same(a: GoodputReport, b: GoodputReport) -> None:
    assert (a.start, a.end, a.total_s, a.productive_s, a.status) == (
        b.start,
        b.end,
        b.total_s,
        b.productive_s,
        b.status,
    )
    assert a.badput_s == b.badput_s


def test_a_silent_job_ends_at_its_last_sign_of_life_and_stops_growing() -> None:
    evs = _job()
    last = T0 + 100  # the last step's start: the last thing heard
    early = _report(evs, last + 60)  # silent for a minute: still counted up to now
    assert early.status == "running" and early.total_s == pytest.approx(160.0)
    assert early.badput_s[B.STALL] > 50  # the silence shows as a hang while it might be one
    r1 = _report(evs, last + 121)
    r2 = _report(evs, last + 181)  # a minute later: the same answer
    _same(r1, r2)
    assert r1.status == "crashed"
    assert r1.end == last and r1.total_s == pytest.approx(100.0)
    assert r1.badput_s[B.STALL] == 0.0  # the time since the death is not the job's
    # the last step has no known end: its estimated end is one ideal step, the rest OTHER
    assert r1.productive_s == pytest.approx(99.0)
    assert r1.disruptions == 0


def test_signs_of_life_keep_a_hung_job_running_and_its_hang_counted() -> None:
    evs = _job() + [Event(Kind.ALIVE, T0 + 115 + 15 * k, value=15.0) for k in range(20)]  # to T0+400
    r = _report(evs, T0 + 410)
    assert r.status == "running"
    assert r.total_s == pytest.approx(410.0)
    assert r.badput_s[B.STALL] == pytest.approx(309.0)  # the running step, beyond one ideal step
    dead = _report(evs, T0 + 400 + 121)
    assert dead.status == "crashed" and dead.end == T0 + 400


def test_a_stream_without_signs_of_life_is_never_judged_dead() -> None:
    """ml-goodput-measurement's own logs, replays: silence may be a hang, so it counts on."""
    evs = _job(alive=False)
    r = _report(evs, T0 + 100 + 500)
    assert r.status == "stale"
    assert r.total_s == pytest.approx(600.0)


def test_a_restart_after_a_death_is_a_disruption() -> None:
    t1 = T0 + 1000
    evs = [*_job(), Event(Kind.JOB_START, t1), Event(Kind.ALIVE, t1, value=15.0)]
    evs += [Event(Kind.STEP_START, t1 + 1 + i, step=100 + i) for i in range(10)]
    r = _report(evs, t1 + 11)
    assert r.status == "running" and r.disruptions == 1
    # recovery from the dead attempt's last step's estimated end to the restart (spec)
    assert r.badput_s[B.INFRASTRUCTURE_RECOVERY_FROM_DISRUPTION] == pytest.approx(t1 - (T0 + 101))


def test_a_job_end_is_finished_whatever_the_silence() -> None:
    evs = [*_job(), Event(Kind.JOB_END, T0 + 101)]
    r = _report(evs, T0 + 10_000)
    assert r.status == "finished" and r.total_s == pytest.approx(101.0)


def test_the_dead_limit_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    evs = _job()
    monkeypatch.setenv("MLGOODPUT_DEAD_AFTER_S", "5")
    assert _report(evs, T0 + 104).status == "running"
    assert _report(evs, T0 + 106).status == "crashed"
    monkeypatch.setenv("MLGOODPUT_DEAD_AFTER_S", "soon")
    st = MemoryStore()
    st.append("l", "j", EventBatch(1, 0, evs))
    with pytest.raises(ValueError, match=r"MLGOODPUT_DEAD_AFTER_S.*'soon'"):
        GoodputCalculator("j", "l", store=st, clock=lambda: T0 + 300).report()


def test_a_saved_state_keeps_the_signs_of_life(tmp_path: Path) -> None:
    from mlgoodput.store import open_store

    st = open_store(str(tmp_path / "s.db"))
    st.append("l", "j", EventBatch(1, 0, _job()))
    q = T0 + 100 + 121
    c = GoodputCalculator("j", "l", store=st, clock=lambda: q, snapshot=True)
    assert c.report().status == "crashed"
    c.save_state()
    again = GoodputCalculator("j", "l", store=st, clock=lambda: q, snapshot=True).report()
    assert again.status == "crashed" and again.end == T0 + 100


@pytest.mark.parametrize("alive", [True, False])
def test_asked_again_with_nothing_new_it_answers_as_a_new_calculator(alive: bool) -> None:
    """One calculator asked on and on (nothing new comes in: what it keeps from the last query
    is reused) gives, at each time, what a new calculator gives, bit for bit: through the dead
    limit (running, then crashed), and a second attempt whose end is the one that moves."""
    t1 = T0 + 300
    evs = _job(alive) + [Event(Kind.JOB_START, t1)] + [Event(Kind.STEP_START, t1 + 1 + i, step=i) for i in range(50)]
    if alive:
        evs.append(Event(Kind.ALIVE, t1, value=15.0))
    st = MemoryStore()
    st.append("l", "j", EventBatch(1, 0, evs))
    now = [t1 + 50.0]
    calc = GoodputCalculator("j", "l", store=st, clock=lambda: now[0])
    statuses = set()
    for dt in (0.0, 0.25, 1.5, 30.0, 59.75, 60.5, 119.0, 121.0, 200.0, 5000.0):
        now[0] = t1 + 50.0 + dt
        got = calc.report()
        want = _report(evs, now[0])
        assert got == want, dt
        statuses.add(got.status)
    assert statuses == ({"running", "crashed"} if alive else {"running", "stale"})


def test_a_reader_during_an_ingest_keeps_no_state_older_than_its_event_count(monkeypatch: pytest.MonkeyPatch) -> None:
    """The UI reads a calculator's timeline through an engine of its own, outside the
    calculator's lock: what that engine keeps between queries is keyed on the timeline's event
    count, which an ingest moves only once the hosts' logs hold the events. A reader that runs
    in the middle of an ingest (here: as the job end is put in) keeps nothing the count would
    later pass off as current."""
    from mlgoodput.accounting import Engine
    from mlgoodput.accounting._timeline import HostLog
    from mlgoodput.store._columns import Columns

    owner, reader = Engine(), Engine()
    reader.timeline = tl = owner.timeline
    tl.ingest(Columns.from_events(_job(steps=5)))
    log = tl.hosts[0]
    q = T0 + 100
    assert [a.ended_by for a in reader.attempts(log, q)] == ["running"]
    add_other = HostLog.add_other

    def mid_ingest(self: HostLog, rec: object) -> float:
        reader.attempts(log, q)  # the other thread, between the events' count and their place
        return add_other(self, rec)  # type: ignore[arg-type]

    monkeypatch.setattr(HostLog, "add_other", mid_ingest)
    tl.ingest(Columns.from_events([Event(Kind.JOB_END, T0 + 10)]))
    monkeypatch.setattr(HostLog, "add_other", add_other)
    fresh = Engine()
    fresh.timeline = tl
    for at in (q, q + 1, q + 1000):
        assert [a.ended_by for a in reader.attempts(log, at)] == [a.ended_by for a in fresh.attempts(log, at)]
    assert [a.ended_by for a in reader.attempts(log, q)] == ["job_end"]


def test_a_restarted_job_asked_with_nothing_new_walks_no_step(monkeypatch: pytest.MonkeyPatch) -> None:
    """A job restarted from a checkpoint (its step numbers go back: the redone steps are
    wasted progress) asked again with nothing new: the redone steps' figures are kept, not
    found again by a pass over its steps, and the answer is a new calculator's, bit for bit."""
    from mlgoodput.accounting._query import Query

    t1 = T0 + 300
    evs = [*_job(steps=200), Event(Kind.JOB_START, t1), Event(Kind.CKPT_RESTORE, t1 + 1, step=100, value=1.0)]
    evs += [Event(Kind.STEP_START, t1 + 3 + i, step=101 + i) for i in range(50)]
    st = MemoryStore()
    st.append("l", "j", EventBatch(1, 0, evs))
    now = [t1 + 60.0]
    calc = GoodputCalculator("j", "l", store=st, clock=lambda: now[0])
    first = calc.report()
    assert first.disruptions == 1 and first.badput_s[B.WASTED_PROGRESS_FROM_DISRUPTION] > 90
    times = [t1 + 60.0 + dt for dt in (0.5, 1.0, 30.0)]
    want = [_report(evs, t) for t in times]  # new calculators (each walks every step)
    parts = []
    real = Query._parts
    monkeypatch.setattr(Query, "_parts", lambda self, k, i: parts.append(i) or real(self, k, i))
    for t, w in zip(times, want, strict=True):
        now[0] = t
        assert calc.report() == w
    assert len(parts) < 20  # each attempt's first and last steps, not the 99 redone ones
    # new steps: the redone ones' net times are kept in order, so still no pass over them
    more = [Event(Kind.STEP_START, t1 + 53 + i, step=151 + i) for i in range(20)]
    st.append("l", "j", EventBatch(1, len(evs), more))
    monkeypatch.setattr(Query, "_parts", real)
    now[0] = t1 + 80.0
    want_more = _report(evs + more, now[0])
    parts.clear()
    monkeypatch.setattr(Query, "_parts", lambda self, k, i: parts.append(i) or real(self, k, i))
    assert calc.report() == want_more
    assert want_more.last_step == 170
    assert len(parts) < 10


@pytest.mark.parametrize("seed", range(40))
def test_redone_steps_summed_from_their_kept_net_times_equal_a_walk_over_them(seed: int) -> None:
    """Wasted progress is the productive time of the redone steps: summed from their net
    times kept in order (a query after new steps costs no pass over them), it equals the walk
    over every redone step, bit for bit, and so does the largest productive step, for jobs
    whose step numbers go back across and within attempts, asked as their events come."""
    import random

    from mlgoodput.accounting import Engine
    from mlgoodput.store._columns import Columns

    rnd = random.Random(seed)
    evs: list[Event] = []
    t, step = 0.0, 0
    for att in range(rnd.randint(2, 4)):
        evs.append(Event(Kind.JOB_START, T0 + t))
        t += 1.0
        if att:
            back = rnd.randint(0, step)
            evs.append(Event(Kind.CKPT_RESTORE, T0 + t, step=back, value=0.5))
            t, step = t + 0.5, back + rnd.randint(0, 1)
        for _ in range(rnd.randint(0, 300)):
            evs.append(Event(Kind.STEP_START, T0 + t, step=step))
            t += rnd.uniform(0.2, 1.1) if rnd.random() < 0.95 else rnd.uniform(4.0, 20.0)
            step = max(0, step + (1 if rnd.random() < 0.97 else -rnd.randint(1, 3)))
    e = Engine()
    cuts = sorted(rnd.sample(range(1, len(evs)), min(3, len(evs) - 1)))
    for lo, hi in zip([0, *cuts], [*cuts, len(evs)], strict=True):
        e.timeline.ingest(Columns.from_events(evs[lo:hi]))
        for q in (T0 + t + 1, T0 + t + 2):
            r = e.report("j", "l", q)
            found = e.query(q, None, None, None)
            assert found is not None
            ctx = found[0]
            ctx.aggregate()
            redone = ctx.redone()
            walked = 0.0
            for k, a, b in redone:
                for i in range(a, b):
                    walked += ctx._parts(k, i)[3]
            assert r.badput_s[B.WASTED_PROGRESS_FROM_DISRUPTION] == walked
            nums = ctx.log.nums
            best = None
            bad = {i for _, a, b in redone for i in range(a, b)}
            for att in ctx.atts:
                keep = [nums[i] for i in range(att.i0, att.i1) if i not in bad]
                if keep:
                    best = max(keep) if best is None else max(best, *keep)
            assert r.max_productive_step == best
