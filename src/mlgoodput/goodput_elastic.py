"""Seed-compatible facade for elastic jobs: ElasticGoodputRecorder (and the calculator).

An elastic job changes its number of slices while it runs; besides the usual events it
records slice counts, waits for slices (slice down / scale up) and re-initializations.
"""

from __future__ import annotations

import datetime as _dt

from mlgoodput._recorder import GoodputRecorder
from mlgoodput.accounting import GoodputCalculator
from mlgoodput.events import Kind, check_step, to_unix

__all__ = ["ElasticGoodputCalculator", "ElasticGoodputRecorder"]

ELASTIC_EVENT_TYPES: tuple[str, ...] = ("slice_down", "scale_up")


def _event_type(event_type: object) -> str:
    if event_type not in ELASTIC_EVENT_TYPES:
        raise ValueError(f"event_type must be 'slice_down' or 'scale_up', got {event_type!r}")
    return str(event_type)


class ElasticGoodputRecorder(GoodputRecorder):
    """A GoodputRecorder that also records slice counts, elastic waits and re-initializations."""

    def record_elastic_slice_counts(
        self,
        active_slices: int,
        total_slices: int,
        available_slices: int,
        timestamp: _dt.datetime | None = None,
    ) -> None:
        """From now on `active_slices` of `total_slices` step and `available_slices` are up."""
        if not self.logging_enabled:
            return
        active = check_step(active_slices, "active_slices")
        total = check_step(total_slices, "total_slices")
        available = check_step(available_slices, "available_slices")
        if total < 1:
            raise ValueError(f"total_slices must be at least 1, got {total_slices!r}")
        if active > total:
            raise ValueError(f"active_slices must be at most total_slices ({total}), got {active_slices!r}")
        if available > total:
            raise ValueError(f"available_slices must be at most total_slices ({total}), got {available_slices!r}")
        ts = to_unix(timestamp, "timestamp")
        self._check_open()
        self._append(Kind.SLICE_COUNTS, ts, None, None, None,
                     {"active": active, "total": total, "available": available})

    def record_elastic_wait_start_time(self, event_type: str, start_time: _dt.datetime | None = None) -> None:
        """The job started waiting for slices ('slice_down': lost some; 'scale_up': adding some)."""
        if self.logging_enabled:
            name = _event_type(event_type)
            self._start(Kind.ELASTIC_WAIT_START, start_time, "start_time", key=name, name=name)

    def record_elastic_wait_end_time(self, event_type: str, end_time: _dt.datetime | None = None) -> None:
        if self.logging_enabled:
            name = _event_type(event_type)
            self._end(Kind.ELASTIC_WAIT_START, Kind.ELASTIC_WAIT_END, end_time, "end_time",
                      f"record_elastic_wait_end_time(event_type={name!r})", key=name, name=name)

    def record_elastic_reinit_start_time(self, start_time: _dt.datetime | None = None) -> None:
        """Re-initialization after a change of slices started."""
        if self.logging_enabled:
            self._start(Kind.ELASTIC_REINIT_START, start_time, "start_time")

    def record_elastic_reinit_end_time(self, end_time: _dt.datetime | None = None) -> None:
        if self.logging_enabled:
            self._end(Kind.ELASTIC_REINIT_START, Kind.ELASTIC_REINIT_END, end_time, "end_time",
                      "record_elastic_reinit_end_time(end_time=...)")



#: Elastic accounting (slice-down, scale-up, re-initialization, slice efficiency) is part of
#: the one calculator; this name keeps the seed's import working.
ElasticGoodputCalculator = GoodputCalculator
