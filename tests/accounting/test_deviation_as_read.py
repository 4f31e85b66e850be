"""The monitor's step deviation and straggler analysis are of the events its report just read
(no second store read); a calculator that has read nothing reads first."""

from __future__ import annotations

import pytest

from mlgoodput.accounting import GoodputCalculator
from mlgoodput.accounting._engine import Engine
from mlgoodput.events import Event, EventBatch, Kind
from mlgoodput.store import MemoryStore

T0 = 1_700_000_000.0


def _steps(first: int, n: int) -> list[Event]:
    return [Event(Kind.STEP_START, T0 + 10 + k * (2.0 + 0.1 * (k % 3)), step=k) for k in range(first, first + n)]


def test_deviation_as_read_is_of_the_last_read() -> None:
    st = MemoryStore()
    st.append("l", "j", EventBatch(1, 0, [Event(Kind.JOB_START, T0), *_steps(0, 50)]))
    calc = GoodputCalculator("j", "l", store=st, clock=lambda: T0 + 500, snapshot=False)
    calc.report()
    before = calc.get_signed_step_deviation(last_n=10)
    st.append("l", "j", EventBatch(2, 0, _steps(50, 20)))  # stored after the report
    assert calc.get_signed_step_deviation(last_n=10, read=False) == before  # of what the report read
    after = calc.get_signed_step_deviation(last_n=10)  # the public call reads the new steps
    assert after != before and max(after) > max(before)
    fresh = GoodputCalculator("j", "l", store=st, clock=lambda: T0 + 500, snapshot=False)
    assert fresh.get_signed_step_deviation(last_n=10, read=False) == after  # nothing read yet: it reads first


def test_stragglers_as_read_follow_the_same_rule() -> None:
    """`stragglers(read=False)` is of the last read, and reads first on a calculator that has
    read nothing yet (as the deviation does)."""
    st = MemoryStore()
    st.append("l", "j", EventBatch(1, 0, [Event(Kind.JOB_START, T0), *_steps(0, 50)]))
    fresh = GoodputCalculator("j", "l", store=st, clock=lambda: T0 + 500, snapshot=False)
    first = fresh.stragglers(read=False)  # nothing read yet: it reads first
    assert first.ranks[0].steps == 50
    st.append("l", "j", EventBatch(2, 0, _steps(50, 20)))
    assert fresh.stragglers(read=False) == first  # of what was read
    assert fresh.stragglers().ranks[0].steps == 70  # the public call reads the new steps


def test_a_window_of_stragglers_works_out_no_host_statistics(monkeypatch: pytest.MonkeyPatch) -> None:
    """The accounting's host statistics (a pass over every step) are worked out only for a
    straggler report of the whole job, where they are used."""
    st = MemoryStore()
    st.append("l", "j", EventBatch(1, 0, [Event(Kind.JOB_START, T0), *_steps(0, 50)]))
    calc = GoodputCalculator("j", "l", store=st, clock=lambda: T0 + 500, snapshot=False)
    calls: list[int] = []
    real = Engine.host_stats
    monkeypatch.setattr(Engine, "host_stats", lambda self, *a: calls.append(1) or real(self, *a))
    calc.stragglers(T0 + 50, T0 + 80)
    assert calls == []
    calc.stragglers()
    assert calls == [1]
