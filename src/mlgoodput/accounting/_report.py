"""The value types the accounting produces: badput buckets and the frozen GoodputReport."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mlgoodput._quick_init import quick_init

if TYPE_CHECKING:
    from mlgoodput.accounting._figures import Productivity


class GoodputType(enum.Enum):
    """The kinds of productive time; as in ml-goodput-measurement, only the total so far."""

    TOTAL = 1


class BadputType(enum.Enum):
    """Where unproductive time went; names and values as in ml-goodput-measurement, plus STALL."""

    TPU_INITIALIZATION = 1
    TRAINING_PREP = 2
    PROGRAM_STARTUP = 3
    DATA_LOADING_SYNC = 4
    DATA_LOADING_ASYNC = 5
    UNPRODUCTIVE_CHECKPOINT_SAVE_TIME = 6
    UNPRODUCTIVE_CHECKPOINT_RESTORE_TIME = 7
    WASTED_PROGRESS_FROM_DISRUPTION = 8
    INFRASTRUCTURE_RECOVERY_FROM_DISRUPTION = 9
    CUSTOM_BADPUT_EVENTS = 10
    OTHER = 11
    ELASTIC_SLICE_DOWN = 12
    ELASTIC_SCALE_UP = 13
    ELASTIC_REINITIALIZATION = 14
    STALL = 15

    # members are singletons compared by identity: hashed by identity too (a C slot), not by
    # Enum's Python-level hash of the name (a report builds several dicts keyed by them)
    __hash__ = object.__hash__


#: Every bucket in definition order (iterating the enum itself costs a Python call a member).
ALL_BUCKETS: tuple[BadputType, ...] = tuple(BadputType)

#: The buckets of the partition (DATA_LOADING_ASYNC is reported beside it, in overlapped_s).
PARTITION_BUCKETS: tuple[BadputType, ...] = tuple(b for b in BadputType if b is not BadputType.DATA_LOADING_ASYNC)

BadputSeconds = Mapping[BadputType, "float | Mapping[str, float]"]


@dataclass(frozen=True, slots=True)
class SliceEfficiency:
    """Time-weighted means over the window of active/total and available/total slices."""

    stepping: float
    available: float

    def to_dict(self) -> dict[str, float]:
        return {"stepping": self.stepping, "available": self.available}


@dataclass(frozen=True, slots=True)
class HostStepStats:
    """Step times one host saw (spec: Hosts), for spotting stragglers."""

    host: int
    steps: int
    median_s: float
    p90_s: float
    max_s: float

    def to_dict(self) -> dict[str, float | int]:
        return {
            "host": self.host,
            "steps": self.steps,
            "median_s": self.median_s,
            "p90_s": self.p90_s,
            "max_s": self.max_s,
        }


@quick_init
@dataclass(frozen=True, slots=True)
class GoodputReport:
    """Where the wall time of one job went inside one query window (spec/accounting.md).

    `productive_s + sum of every badput_s bucket (custom ones included) == total_s`.
    """

    job_name: str
    logger_name: str
    start: float  # window start, UNIX seconds
    end: float  # window end, UNIX seconds
    total_s: float
    productive_s: float
    badput_s: Mapping[BadputType, Any]  # float, or name -> float for CUSTOM_BADPUT_EVENTS
    overlapped_s: Mapping[BadputType, float]
    disruptions: int
    last_step: int | None
    max_productive_step: int | None
    ideal_step_time_s: float
    slice_efficiency: SliceEfficiency | None = None
    hosts: tuple[HostStepStats, ...] = field(default=())
    #: MFU, scheduling goodput, MPG, ETTR and reliability (docs/accounting.md, "Productivity")
    productivity: Productivity | None = None
    #: the job at the query time, one word everywhere (docs/accounting.md, "Status"): finished,
    #: running, crashed (its writers went silent), stale (silent, and they send no signs of life)
    #: or empty
    status: str = "running"
    #: each disruption's (when the interrupted attempt's work stopped, when the next attempt
    #: started): the infrastructure recovery bucket is their union (docs/accounting.md)
    stops: tuple[tuple[float, float], ...] = ()

    @property
    def goodput_pct(self) -> float:
        return 100.0 * self.productive_s / self.total_s if self.total_s > 0 else 0.0

    @property
    def badput_pct(self) -> dict[BadputType, Any]:
        t = self.total_s
        out: dict[BadputType, Any] = {}
        for b, v in self.badput_s.items():
            if isinstance(v, Mapping):
                out[b] = {k: (100.0 * s / t if t > 0 else 0.0) for k, s in v.items()}
            else:
                out[b] = 100.0 * v / t if t > 0 else 0.0
        return out

    def badput_total_s(self, bucket: BadputType) -> float:
        v = self.badput_s.get(bucket, 0.0)
        if type(v) is float:  # most buckets: no isinstance check against an ABC (a report asks ~10 times)
            return v
        return float(sum(v.values())) if isinstance(v, Mapping) else float(v)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; enum names are lower-cased."""

        def names(m: Mapping[BadputType, Any]) -> dict[str, Any]:
            return {b.name.lower(): (dict(v) if isinstance(v, Mapping) else v) for b, v in m.items()}

        return {
            "job_name": self.job_name,
            "logger_name": self.logger_name,
            "start": self.start,
            "end": self.end,
            "total_s": self.total_s,
            "productive_s": self.productive_s,
            "goodput_pct": self.goodput_pct,
            "badput_s": names(self.badput_s),
            "badput_pct": names(self.badput_pct),
            "overlapped_s": names(self.overlapped_s),
            "disruptions": self.disruptions,
            "last_step": self.last_step,
            "max_productive_step": self.max_productive_step,
            "ideal_step_time_s": self.ideal_step_time_s,
            "slice_efficiency": None if self.slice_efficiency is None else self.slice_efficiency.to_dict(),
            "hosts": [h.to_dict() for h in self.hosts],
            "status": self.status,
            **self._productivity_dict(),
        }

    def _productivity_dict(self) -> dict[str, Any]:
        keys = ("mfu", "program_goodput", "scheduling_goodput", "ml_productivity_goodput", "ettr", "mtbi_s", "mttr_s")
        p = self.productivity
        if p is None:
            return {k: None for k in keys} | {"productivity": None}
        d = p.to_dict()
        return {k: d[k] for k in keys} | {"productivity": d}


def with_productivity(r: GoodputReport, productivity: Productivity | None) -> GoodputReport:
    """`dataclasses.replace(r, productivity=productivity)`, field by field: `replace` walks
    the fields generically, which costs a query with nothing new a noticeable share of its
    time (tests/accounting/test_report_copy.py keeps this in step with the fields)."""
    return GoodputReport(
        r.job_name,
        r.logger_name,
        r.start,
        r.end,
        r.total_s,
        r.productive_s,
        r.badput_s,
        r.overlapped_s,
        r.disruptions,
        r.last_step,
        r.max_productive_step,
        r.ideal_step_time_s,
        r.slice_efficiency,
        r.hosts,
        productivity,
        r.status,
        r.stops,
    )
