"""Stragglers for torch users: the accounting's analysis (accounting/_stragglers.py) under the
names `mlgoodput.torch` has always had. Nothing is computed here."""

from __future__ import annotations

from typing import Any

from mlgoodput.accounting import (
    MIN_LEAD_FRACTION,
    MIN_LEAD_S,
    RankStepStats,
    StragglerReport,
    StragglerVerdict,
    compare_step_starts,
)
from mlgoodput.accounting import analyze_stragglers as analyze

__all__ = [
    "MIN_LEAD_FRACTION",
    "MIN_LEAD_S",
    "RankStepStats",
    "StragglerAnalysis",
    "StragglerReport",
    "StragglerVerdict",
    "analyze",
    "compare_step_starts",
    "saved_stragglers",
    "stragglers",
]


class StragglerAnalysis:
    """A job's straggler analysis kept between queries: a GoodputCalculator's
    (`GoodputCalculator.stragglers`), so `report()` reads only the events stored since the
    last one and costs the new steps."""

    def __init__(self, job_name: str, logger_name: str = "goodput", *, store: Any = None) -> None:
        from mlgoodput.accounting import GoodputCalculator

        self.job_name = job_name
        self.logger_name = logger_name
        self._calc = GoodputCalculator(job_name, logger_name, store=store, snapshot=False)

    @property
    def cursor(self) -> int:
        """How far into the job's stream it has read."""
        return self._calc.cursor

    def report(self, start: float | None = None, end: float | None = None, *, read: bool = True) -> StragglerReport:
        """The analysis of the steps that started in [start, end] (default: all); `read=False`:
        of the events read so far, without reading the store (an analysis that has read
        nothing yet reads first)."""
        return self._calc.stragglers(start, end, read=read)


def saved_stragglers(
    job_name: str, logger_name: str, *, store: Any, start: float | None = None, end: float | None = None
) -> StragglerReport:
    """`stragglers(...)`, answered from the analysis saved with the job's accounting state when
    nothing was stored since (else analysed, and saved with that state where the store keeps
    one: `GoodputCalculator.stragglers`)."""
    from mlgoodput.accounting import GoodputCalculator

    return GoodputCalculator(job_name, logger_name, store=store).stragglers(start, end)


def stragglers(
    job_name: str,
    logger_name: str = "goodput",
    *,
    store: Any = None,
    start: float | None = None,
    end: float | None = None,
) -> StragglerReport:
    """The straggler report of a job's stored events (one-off; keep a StragglerAnalysis, or
    ask a GoodputCalculator's `stragglers`, to query again incrementally)."""
    from mlgoodput.accounting import GoodputCalculator

    return GoodputCalculator(job_name, logger_name, store=store, snapshot=False).stragglers(start, end)
