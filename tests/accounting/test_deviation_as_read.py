"""The monitor's step deviation is of the events its report just read (no second store read)."""

from __future__ import annotations

from mlgoodput.accounting import GoodputCalculator
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
