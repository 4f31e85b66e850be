"""GoodputCalculator: the seed-compatible query API over a store, incremental across calls."""

from __future__ import annotations

import dataclasses
import datetime as _dt
import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from mlgoodput._journal import recover_journals
from mlgoodput.accounting._engine import Engine
from mlgoodput.accounting._facts import FactsCache, facts_from_timeline
from mlgoodput.accounting._productivity import productivity
from mlgoodput.accounting._report import BadputType, GoodputReport
from mlgoodput.store import Store, open_store
from mlgoodput.store._columns import Columns

TimeArg = _dt.datetime | float | int | None


def _when(value: TimeArg, arg: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, _dt.datetime):
        return value.timestamp()
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    raise TypeError(f"{arg} must be a datetime, UNIX seconds or None, got {value!r}")


class GoodputCalculator:
    """Computes Goodput and the Badput breakdown of one job from its recorded events.

    A calculator keeps what it has read: asking again reads only the events stored since
    (its own cursor), and the engine extends its derived state for them.
    """

    def __init__(
        self,
        job_name: str,
        logger_name: str,
        *,
        store: Any = None,
        using_pathways: bool = False,
        stall_factor: float = 3.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not isinstance(job_name, str) or not job_name:
            raise ValueError(f"job_name must be a non-empty string, got {job_name!r}")
        if not isinstance(logger_name, str) or not logger_name:
            raise ValueError(f"logger_name must be a non-empty string, got {logger_name!r}")
        self.job_name = job_name
        self.logger_name = logger_name
        self.using_pathways = using_pathways  # accepted for compatibility; no effect here
        self._store: Store = open_store(store)
        self._clock = clock
        self._stall_factor = stall_factor
        self._engine = Engine(stall_factor=stall_factor)
        self._cursor = 0
        self._facts = FactsCache()  # the last scan of the non-step events, for productivity
        self._lock = threading.Lock()

    @property
    def store(self) -> Store:
        return self._store

    def _refresh(self) -> None:
        try:
            recover_journals(self._store)  # what killed processes left behind
        except OSError:
            pass  # a journal we cannot read now is read by a later query
        res = self._store.read(self.logger_name, self.job_name, self._cursor)
        for part in res.parts:
            self._engine.timeline.ingest(part)
        self._cursor = res.cursor

    # -- ours ----------------------------------------------------------------------------
    def report(
        self,
        start: TimeArg = None,
        end: TimeArg = None,
        *,
        configured_ideal_step_time: float | None = None,
        at: TimeArg = None,
    ) -> GoodputReport:
        """The report for the window [start, end] (default: the whole job) as of `at` (default: now).

        `at` in the past gives the job as it looked then: later events are ignored and the
        step running at `at` counts up to `at`.
        """
        a = _when(start, "start")
        b = _when(end, "end")
        q_at = _when(at, "at")
        ideal = _check_ideal(configured_ideal_step_time)
        with self._lock:
            self._refresh()
            q = self._clock() if q_at is None else q_at
            if q_at is not None and q_at < self._engine.timeline.max_time:
                engine = self._engine_as_of(q_at)
            else:
                engine = self._engine
                q = max(q, engine.timeline.max_time) if q_at is None else q
            return _with_productivity(
                engine, engine.report(self.job_name, self.logger_name, q, a, b, ideal), q, a,
                self._facts if engine is self._engine else None,
            )

    def _engine_as_of(self, q: float) -> Engine:
        res = self._store.read(self.logger_name, self.job_name, 0)
        e = Engine(stall_factor=self._stall_factor)
        for cols in res.parts:
            keep = [i for i in range(len(cols)) if cols.times[i] <= q]
            if len(keep) == len(cols):
                e.timeline.ingest(cols)
            elif keep:
                e.timeline.ingest(Columns.from_events(cols.event(i) for i in keep))
        return e

    def rolling_windows(
        self,
        windows_s: Iterable[float],
        end: TimeArg = None,
        *,
        configured_ideal_step_time: float | None = None,
    ) -> dict[int, GoodputReport]:
        """Reports for the windows [end - w, end] (end: now), keyed by window seconds."""
        ws = list(windows_s)
        for w in ws:
            if isinstance(w, bool) or not isinstance(w, (int, float)) or not w > 0:
                raise ValueError(f"windows_s must hold positive numbers of seconds, got {w!r}")
        q_at = _when(end, "end")
        ideal = _check_ideal(configured_ideal_step_time)
        with self._lock:
            self._refresh()
            q = q_at if q_at is not None else max(self._clock(), self._engine.timeline.max_time)
            engine = self._engine if q >= self._engine.timeline.max_time else self._engine_as_of(q)
            return {
                int(w): _with_productivity(
                    engine, engine.report(self.job_name, self.logger_name, q, q - w, q, ideal), q, q - w,
                    self._facts if engine is self._engine else None,
                )
                for w in ws
            }

    # -- seed API ------------------------------------------------------------------------
    def get_job_goodput(
        self, include_badput_breakdown: bool = False, configured_ideal_step_time: float | None = None
    ) -> tuple[float, dict[BadputType, Any], int]:
        """(goodput %, badput breakdown in % (empty unless asked), last step)."""
        r = self.report(configured_ideal_step_time=configured_ideal_step_time)
        breakdown = _breakdown(r) if include_badput_breakdown else {}
        return r.goodput_pct, breakdown, r.last_step if r.last_step is not None else 0

    def get_job_goodput_interval(
        self, interval_start: TimeArg, interval_end: TimeArg
    ) -> tuple[float, dict[BadputType, Any], int, float, int]:
        """(goodput %, badput breakdown %, last step, total seconds, disruptions) in a window."""
        a = _when(interval_start, "interval_start")
        b = _when(interval_end, "interval_end")
        if a is None or b is None:
            raise ValueError(
                f"interval_start and interval_end are required, got {interval_start!r}, {interval_end!r}"
            )
        if b <= a:
            raise ValueError(
                f"interval_end must be after interval_start, got {interval_start!r} .. {interval_end!r}"
            )
        r = self.report(a, b)
        return (
            r.goodput_pct,
            _breakdown(r),
            r.last_step if r.last_step is not None else 0,
            r.total_s,
            r.disruptions,
        )

    def get_step_deviation(
        self, configured_ideal_step_time: float | None = None, *, last_n: int | None = None
    ) -> dict[int, float]:
        """Step number -> net step time minus the ideal step time, for steps with a known end;
        `last_n` keeps only the latest steps (and costs only that much)."""
        ideal = _check_ideal(configured_ideal_step_time)
        if last_n is not None and (isinstance(last_n, bool) or not isinstance(last_n, int) or last_n < 1):
            raise ValueError(f"last_n must be a positive integer or None, got {last_n!r}")
        with self._lock:
            self._refresh()
            engine = self._engine
            q = max(self._clock(), engine.timeline.max_time)
            return engine.step_deviation(q, ideal, last_n)


def _with_productivity(
    engine: Engine, r: GoodputReport, q: float, start: float | None, cache: FactsCache | None = None
) -> GoodputReport:
    """The report with its productivity figures (docs/accounting.md, "Productivity")."""
    facts = facts_from_timeline(engine.timeline, q, cache)
    if facts.empty:
        return r
    return dataclasses.replace(r, productivity=productivity(facts, r, start))


def _check_ideal(v: float | None) -> float | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not (math.isfinite(v) and v >= 0):
        raise ValueError(f"configured_ideal_step_time must be a non-negative number of seconds, got {v!r}")
    return float(v)


def _breakdown(r: GoodputReport) -> dict[BadputType, Any]:
    out: dict[BadputType, Any] = dict(r.badput_pct)
    t = r.total_s
    for b, v in r.overlapped_s.items():
        out[b] = 100.0 * v / t if t > 0 else 0.0
    custom = out.get(BadputType.CUSTOM_BADPUT_EVENTS)
    if isinstance(custom, Mapping):
        out[BadputType.CUSTOM_BADPUT_EVENTS] = dict(custom)
    return out
