"""Per-host step statistics kept incrementally equal a full pass over each host's steps."""

from __future__ import annotations

import math
import random

import pytest

from mlgoodput.accounting import Engine
from mlgoodput.accounting._hoststats import stats_as_of
from mlgoodput.events import Event, Kind
from mlgoodput.store._columns import Columns

T0 = 1_700_000_000.0


def _job(rnd: random.Random, hosts: int) -> list[Event]:
    out: list[Event] = []
    for h in range(hosts):
        t = T0 + rnd.random()
        out.append(Event(Kind.JOB_START, t, host=h))
        step = 0
        for _ in range(rnd.randint(2, 300)):
            t += rnd.choice((0.5, 1.0, 1.0, 1.0, 2.5)) + rnd.random() * 0.01
            if rnd.random() < 0.02:  # a restart: steps go back a little
                t += 5
                out.append(Event(Kind.JOB_START, t, host=h))
                t += 1
                step = max(0, step - rnd.randint(0, 5))
            out.append(Event(Kind.STEP_START, t, host=h, step=step))
            step += 1
    return out


@pytest.mark.parametrize("seed", range(12))
def test_incremental_host_stats_equal_a_full_pass(seed: int) -> None:
    rnd = random.Random(seed)
    events = _job(rnd, rnd.randint(2, 6))
    # mostly in time order, in random batches; some batches arrive late (out of order)
    events.sort(key=lambda e: e.time)
    if seed % 3 == 0:
        late = rnd.sample(range(len(events)), k=min(10, len(events)))
        moved = [events[i] for i in sorted(late)]
        events = [e for i, e in enumerate(events) if i not in set(late)] + moved
    e = Engine()
    pos = 0
    while pos < len(events):
        n = rnd.randint(1, 80)
        e.timeline.ingest(Columns.from_events(events[pos : pos + n]))
        pos += n
        got = {s.host: s for s in e.host_stats(math.inf)}
        want = {h: stats_as_of(log, math.inf) for h, log in e.timeline.hosts.items()}
        want = {h: s for h, s in want.items() if s is not None}
        assert got == want
    assert e.host_stats(math.inf) == e.host_stats(math.inf)  # asked again: the same, from the cache


def test_a_query_in_the_past_sees_only_steps_started_by_then() -> None:
    e = Engine()
    ev = [Event(Kind.JOB_START, T0, host=h) for h in (0, 1)]
    ev += [Event(Kind.STEP_START, T0 + 1 + k * (1 + h), host=h, step=k) for h in (0, 1) for k in range(10)]
    e.timeline.ingest(Columns.from_events(ev))
    full = {s.host: s for s in e.host_stats(math.inf)}
    past = {s.host: s for s in e.host_stats(T0 + 5.5)}
    assert full[1].steps == 10 and full[1].median_s == pytest.approx(2.0)
    assert past[0].steps == 5 and past[1].steps == 3
