"""Recovery has two figures, computed once by the accounting: each disruption's time down is
its share of the infrastructure recovery bucket, and its time until training was productive
again is what MTTR averages (docs/accounting.md, "Recovery: two figures")."""

from __future__ import annotations

import pytest

from mlgoodput.accounting import BadputType, GoodputCalculator
from mlgoodput.events import Event, EventBatch, Kind
from mlgoodput.store import MemoryStore

T0 = 1_700_000_000.0


def _steps(t: float, first: int, n: int) -> list[Event]:
    return [Event(Kind.STEP_START, t + i, step=first + i) for i in range(n)]


def test_down_time_is_the_bucket_and_time_to_recover_is_mttr() -> None:
    evs = [Event(Kind.JOB_START, T0), *_steps(T0 + 2, 0, 10)]  # steps at +2..+11, crash in step 9
    evs += [Event(Kind.JOB_START, T0 + 30)]  # a crash loop: no step
    evs += [Event(Kind.JOB_START, T0 + 40), Event(Kind.CKPT_RESTORE_START, T0 + 41, step=4)]
    evs += [Event(Kind.CKPT_RESTORE_END, T0 + 43, step=4), *_steps(T0 + 45, 5, 20)]
    evs += [Event(Kind.JOB_END, T0 + 65)]
    st = MemoryStore()
    st.append("l", "j", EventBatch(1, 0, evs))
    r = GoodputCalculator("j", "l", store=st).report()
    p = r.productivity
    assert p is not None and r.disruptions == 2
    (a, b) = p.disruptions
    # the first crash: work stopped one ideal step (1 s) after the last step start (+11)
    assert (a.work_stopped_at, a.restarted_at, a.down_s) == (T0 + 12, T0 + 30, 18.0)
    # the crash loop stopped at its own start; its recovery goes on to the next attempt's work
    assert (b.work_stopped_at, b.restarted_at, b.down_s) == (T0 + 30, T0 + 40, 10.0)
    bucket = r.badput_total_s(BadputType.INFRASTRUCTURE_RECOVERY_FROM_DISRUPTION)
    assert a.down_s + b.down_s == pytest.approx(bucket)  # the bucket is the union of the downs
    assert [(s0, s1) for s0, s1 in r.stops] == [
        (a.work_stopped_at, a.restarted_at),
        (b.work_stopped_at, b.restarted_at),
    ]
    # productive again at the end of the first step after the restore (+46) minus one ideal step
    assert b.recovered_at == pytest.approx(T0 + 45) and b.to_recover_s == pytest.approx(15.0)
    assert a.to_recover_s == pytest.approx(T0 + 30 - a.work_stopped_at)  # to the loop's own stop (its start)
    assert p.mttr_s == pytest.approx((a.to_recover_s + b.to_recover_s) / 2)
    for c in p.disruptions:
        assert c.to_recover_s is not None and c.to_recover_s >= c.down_s
