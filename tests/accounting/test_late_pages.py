"""Pages of a job that reach the store out of time order (a dead process's journal recovered
late, a slow host) are put into place: the report equals the one of the same pages in order,
and each late page costs a copy, not a re-sort of the host's whole history."""

from __future__ import annotations

import itertools
import random

import pytest

from mlgoodput.accounting import GoodputCalculator
from mlgoodput.accounting._timeline import HostLog
from mlgoodput.events import Event, EventBatch, Kind
from mlgoodput.store import MemoryStore, open_store

T0 = 1_700_000_000.0


def _job(rnd: random.Random, n: int) -> list[Event]:
    """A job start, then steps with a restart (numbers going back) and a few other events."""
    evs = [Event(Kind.JOB_START, T0)]
    t, k = T0 + 5.0, 0
    for i in range(n):
        if i == n // 2:
            evs.append(Event(Kind.JOB_START, t + 3.0))
            t += 10.0
            k = max(0, k - 7)  # resumed from an earlier checkpoint
        if rnd.random() < 0.01:
            evs.append(Event(Kind.CKPT_SAVE, t + 0.1, step=k, value=0.05))
        evs.append(Event(Kind.STEP_START, t, step=k))
        t += rnd.uniform(0.5, 1.5)
        k += 1
    return evs


@pytest.mark.parametrize("numpy_mode", ["on", "off"], indirect=True)
@pytest.mark.parametrize("seed", range(6))
def test_pages_in_any_order_report_as_in_order(numpy_mode: str, seed: int) -> None:
    rnd = random.Random(seed)
    evs = _job(rnd, rnd.choice((300, 2000)))
    cuts = sorted(rnd.sample(range(1, len(evs)), rnd.randint(2, 8)))
    pages = [evs[a:b] for a, b in itertools.pairwise([0, *cuts, len(evs)])]
    order = list(range(len(pages)))
    rnd.shuffle(order)
    q = evs[-1].time + 30.0

    def report(seq: list[int]) -> dict[str, object]:
        st = MemoryStore()
        calc = GoodputCalculator("j", "l", store=st, clock=lambda: q)
        for k in seq:
            st.append("l", "j", EventBatch(k + 1, 0, pages[k]))
            calc.report()  # a query between pages: each late page lands in a held history
        return calc.report().to_dict()

    assert report(order) == report(sorted(order))


def test_a_late_page_between_two_held_ones_is_spliced_in() -> None:
    log = HostLog(0)
    log.add_steps([100.0, 101.0, 102.0], [100, 101, 102])
    log.add_steps([1.0, 2.0], [1, 2])  # before everything held
    log.add_steps([50.0, 51.0, 52.0], [50, 51, 52])  # between
    assert list(log.times) == [1.0, 2.0, 50.0, 51.0, 52.0, 100.0, 101.0, 102.0]
    assert list(log.nums) == [1, 2, 50, 51, 52, 100, 101, 102]
    assert log.monotonic and log.version == 2
    log.add_steps([60.0], [10])  # a number going back in time order: no longer monotonic
    assert not log.monotonic and list(log.nums)[5] == 10


def test_an_overlapping_late_page_is_merged_without_duplicates() -> None:
    log = HostLog(0)
    log.add_steps([1.0, 3.0, 5.0], [1, 3, 5])
    log.add_steps([2.0, 3.0, 4.0], [2, 3, 4])  # overlaps, and (3.0, 3) is held already
    assert list(log.times) == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert list(log.nums) == [1, 2, 3, 4, 5]


@pytest.mark.slow
def test_a_long_job_stored_in_reverse_reads_in_time_of_a_copy(tmp_path: object) -> None:
    """The C, A, B case of the issue at 300,000 steps: three writers' chunks, the last part of
    the job first. Each late row is a splice (counted), never a rebuild of every step."""
    db = f"{tmp_path}/cab.db"
    st = open_store(db)
    n = 300_000
    evs = [Event(Kind.JOB_START, T0)] + [Event(Kind.STEP_START, T0 + 1 + i, 0, i) for i in range(n)]
    k = len(evs) // 3
    for w, part in ((3, evs[2 * k :]), (1, evs[:k]), (2, evs[k : 2 * k])):
        st.append("l", "j", EventBatch(w, 0, part))
    st.close()
    calls = {"splice": 0, "merge": 0}
    splice, merge = HostLog._splice, HostLog._merge

    def counted_splice(self: HostLog, *a: object) -> bool:
        calls["splice"] += 1
        return splice(self, *a)  # type: ignore[arg-type]

    def counted_merge(self: HostLog, *a: object) -> float:
        calls["merge"] += 1
        return merge(self, *a)  # type: ignore[arg-type]

    mp = pytest.MonkeyPatch()
    mp.setattr(HostLog, "_splice", counted_splice)
    mp.setattr(HostLog, "_merge", counted_merge)
    try:
        r = GoodputCalculator("j", "l", store=db, clock=lambda: T0 + n + 1.0).report()
    finally:
        mp.undo()
    assert r.last_step == n - 1
    assert calls["merge"] == 0 and calls["splice"] >= 2
