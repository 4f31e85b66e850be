"""A calculator asked again reads only what was stored since, and extends what it derived."""

from __future__ import annotations

import pytest

from mlgoodput.accounting import BadputType, GoodputCalculator
from mlgoodput.events import Event, EventBatch, Kind
from mlgoodput.store import MemoryStore, ReadResult

T0 = 1_700_000_000.0


class CountingStore(MemoryStore):
    """A memory store that remembers how many events each read returned."""

    def __init__(self) -> None:
        super().__init__("memory://counting")
        self.returned: list[int] = []

    def read(self, namespace: str, job: str, cursor: int = 0) -> ReadResult:
        res = super().read(namespace, job, cursor)
        self.returned.append(len(res))
        return res


def steps(first: int, n: int) -> list[Event]:
    return [Event(Kind.STEP_START, T0 + 10 + k, step=k) for k in range(first, first + n)]


def test_second_query_reads_only_new_events() -> None:
    st = CountingStore()
    st.append("l", "j", EventBatch(1, 0, [Event(Kind.JOB_START, T0), *steps(0, 1000)]))
    now = [T0 + 2000.0]
    calc = GoodputCalculator("j", "l", store=st, clock=lambda: now[0])
    first = calc.report()
    assert st.returned == [1001]
    st.append("l", "j", EventBatch(1, 1001, steps(1000, 10)))
    second = calc.report()
    assert st.returned == [1001, 10]  # not the whole job again
    calc.report()
    assert st.returned == [1001, 10, 0]
    assert second.last_step == 1009 and first.last_step == 999
    # and the result equals a fresh calculator's, which reads everything
    fresh = GoodputCalculator("j", "l", store=st, clock=lambda: now[0]).report()
    assert second.productive_s == pytest.approx(fresh.productive_s)
    assert second.badput_s[BadputType.STALL] == pytest.approx(fresh.badput_s[BadputType.STALL])


def test_late_event_in_the_past_is_still_counted() -> None:
    """An event that reaches back in time (a late host, a recovered journal) rebuilds the
    derived state instead of being missed."""
    st = MemoryStore()
    st.append("l", "j", EventBatch(1, 0, [Event(Kind.JOB_START, T0), *steps(0, 100)]))
    calc = GoodputCalculator("j", "l", store=st, clock=lambda: T0 + 200)
    assert calc.report().badput_s[BadputType.CUSTOM_BADPUT_EVENTS] == {}
    late = [Event(Kind.CUSTOM_START, T0 + 50.25, name="eval"), Event(Kind.CUSTOM_END, T0 + 50.75, name="eval")]
    st.append("l", "j", EventBatch(2, 0, late))
    r = calc.report()
    assert r.badput_s[BadputType.CUSTOM_BADPUT_EVENTS] == {"EVAL": pytest.approx(0.5)}
    fresh = GoodputCalculator("j", "l", store=st, clock=lambda: T0 + 200).report()
    assert r.productive_s == pytest.approx(fresh.productive_s)


@pytest.mark.parametrize(
    "tail",
    [
        [Event(Kind.CKPT_SAVE, T0 + 13.5, step=2, value=5.0)],  # a duration beyond the query time
        [Event(Kind.CUSTOM_START, T0 + 13.5, name="eval")],  # an activity with no end yet
        [Event(Kind.DATA_LOADING_START, T0 + 13.5)],
        [Event(Kind.CUSTOM_START, T0 + 13.0, name="eval"), Event(Kind.CUSTOM_END, T0 + 13.2, name="eval")],
    ],
)
def test_a_query_with_nothing_new_follows_the_clock(tail: list[Event]) -> None:
    """What a query with nothing new reuses must still move with a running attempt's end."""
    from mlgoodput.accounting import Engine
    from mlgoodput.store._columns import Columns

    events = [Event(Kind.JOB_START, T0), *steps(0, 4), *tail]
    e = Engine()
    e.timeline.ingest(Columns.from_events(events))
    for q in (T0 + 14, T0 + 16, T0 + 21, T0 + 30):
        for end in (None, q - 6.6, q - 16.9):  # windows that end before the clock, too
            fresh = Engine()
            fresh.timeline.ingest(Columns.from_events(events))
            assert e.report("j", "l", q, end=end) == fresh.report("j", "l", q, end=end)


@pytest.mark.parametrize("ended", [True, False])
def test_a_query_with_nothing_new_derives_nothing_again(ended: bool) -> None:
    """Finished or running, a job asked again with nothing new reuses its activities and
    partition (what makes such a query cost the same at any length)."""
    from mlgoodput.accounting import Engine
    from mlgoodput.store._columns import Columns

    events = [Event(Kind.JOB_START, T0), *steps(0, 50)]
    events += [Event(Kind.CUSTOM_START, T0 + 20.5, name="eval"), Event(Kind.CUSTOM_END, T0 + 20.7, name="eval")]
    if ended:
        events.append(Event(Kind.JOB_END, T0 + 61))
    e = Engine()
    e.timeline.ingest(Columns.from_events(events))
    first = e.report("j", "l", T0 + 70)
    acts, part = e.activities_cache, e.partition_cache
    again = e.report("j", "l", T0 + 80)
    assert e.activities_cache is acts and e.partition_cache is part
    assert (again == first) is ended  # a running job's report still moves with the clock
