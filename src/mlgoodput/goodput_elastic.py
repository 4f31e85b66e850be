"""Seed-compatible facade for elastic jobs: ElasticGoodputRecorder and ElasticGoodputCalculator.

An elastic job changes its number of slices while it runs; besides the usual events it
records slice counts, waits for slices (slice down / scale up) and re-initializations.
"""

from __future__ import annotations

import datetime as _dt
import operator

from mlgoodput import goodput, goodput_utils
from mlgoodput._recorder import GoodputRecorder
from mlgoodput.accounting import ElasticGoodputCalculator
from mlgoodput.events import Kind

__all__ = ["ElasticGoodputCalculator", "ElasticGoodputRecorder", "GoodputRecorder", "goodput", "goodput_utils"]

ELASTIC_EVENT_TYPES: tuple[str, ...] = ("slice_down", "scale_up")


def _count(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        if isinstance(value, float) and value.is_integer():
            return int(value)
        return None


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
        call = "record_elastic_slice_counts"
        active, total, available = _count(active_slices), _count(total_slices), _count(available_slices)
        for arg, raw, v in (
            ("active_slices", active_slices, active),
            ("total_slices", total_slices, total),
            ("available_slices", available_slices, available),
        ):
            if v is None or v < 0:
                self._misuse.report(
                    "bad_slice_counts",
                    call,
                    arg,
                    raw,
                    "not a non-negative whole number; the slice counts were not recorded",
                )
                return
        assert active is not None and total is not None and available is not None
        if total < 1 or active > total or available > total:
            bad = "total_slices" if total < 1 else "active_slices" if active > total else "available_slices"
            raw = {"total_slices": total_slices, "active_slices": active_slices, "available_slices": available_slices}[
                bad
            ]
            self._misuse.report(
                "bad_slice_counts",
                call,
                bad,
                raw,
                f"inconsistent slice counts (active {active}, total {total}, available {available}); not recorded",
            )
            return
        ts = self._time(timestamp, call, "timestamp")
        if self._closed and self._dropped_when_closed(call):
            return
        try:
            self._append(
                Kind.SLICE_COUNTS, ts, None, None, None, {"active": active, "total": total, "available": available}
            )
        except ValueError as e:  # counts beyond what the journal holds
            self._misuse.report(
                "unrecordable", call, "total_slices", total_slices, f"cannot be journaled ({e}); not recorded"
            )

    def _event_type(self, event_type: object, call: str) -> str | None:
        if event_type in ELASTIC_EVENT_TYPES:
            return str(event_type)
        self._misuse.report(
            "bad_event_type",
            call,
            "event_type",
            event_type,
            "must be 'slice_down' or 'scale_up'; the event was not recorded",
        )
        return None

    def record_elastic_wait_start_time(self, event_type: str, start_time: _dt.datetime | None = None) -> None:
        """The job started waiting for slices ('slice_down': lost some; 'scale_up': adding some)."""
        if self.logging_enabled:
            call = "record_elastic_wait_start_time"
            name = self._event_type(event_type, call)
            if name is not None:
                self._start(Kind.ELASTIC_WAIT_START, start_time, call, key=name, name=name)

    def record_elastic_wait_end_time(self, event_type: str, end_time: _dt.datetime | None = None) -> None:
        if self.logging_enabled:
            call = "record_elastic_wait_end_time"
            name = self._event_type(event_type, call)
            if name is not None:
                self._end(
                    Kind.ELASTIC_WAIT_START,
                    Kind.ELASTIC_WAIT_END,
                    end_time,
                    call,
                    key=name,
                    name=name,
                    arg="event_type",
                )

    def record_elastic_reinit_start_time(self, start_time: _dt.datetime | None = None) -> None:
        """Re-initialization after a change of slices started."""
        if self.logging_enabled:
            self._start(Kind.ELASTIC_REINIT_START, start_time, "record_elastic_reinit_start_time")

    def record_elastic_reinit_end_time(self, end_time: _dt.datetime | None = None) -> None:
        if self.logging_enabled:
            self._end(Kind.ELASTIC_REINIT_START, Kind.ELASTIC_REINIT_END, end_time, "record_elastic_reinit_end_time")
