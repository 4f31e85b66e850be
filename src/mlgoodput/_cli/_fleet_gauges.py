"""FleetGauges: the sample source of `mlgoodput monitor --fleet`, run in the exporter process.

It keeps one `FleetSource` over the store for its whole life (a query re-reads only the jobs
with something new) and each interval turns `FleetSource.report(...)` for the range ending
now into fleet gauges (`mlgoodput.export.fleet_samples`: top N groups, the rest as `other`).
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import TYPE_CHECKING, Any

from mlgoodput.export import Sample, fleet_samples

if TYPE_CHECKING:
    from mlgoodput.accounting import FleetSource, Prices


def fleet_range(now: float, range_days: float) -> tuple[float, float]:
    """(since, until) of the gauges at `now`: from the start of the hour `range_days` before
    now (where a job's hours begin, so no hour of a finished job is cut) to now."""
    return math.floor((now - range_days * 86400.0) / 3600.0) * 3600.0, now


@dataclasses.dataclass
class FleetGauges:
    """What `monitor --fleet` computes each interval (picklable: built in the CLI, run in the
    exporter process, which opens the store in `open`)."""

    store_url: str
    by: str = "team"
    range_days: float = 7.0
    top_groups: int = 20
    prices: Prices | None = None
    clock: Any = None  # None: the round's time; a picklable callable for tests
    reports: int = 0
    _store: Any = dataclasses.field(default=None, repr=False, compare=False)
    _source: FleetSource | None = dataclasses.field(default=None, repr=False, compare=False)
    _at: float | None = dataclasses.field(default=None, repr=False, compare=False)  # this round's time

    def __post_init__(self) -> None:
        if not self.by or not self.by.strip():
            raise ValueError("--by must name a label (or `job`)")
        self.by = self.by.strip()
        if not (math.isfinite(self.range_days) and self.range_days > 0):
            raise ValueError(f"--range-days must be a number of days > 0, got {self.range_days!r}")
        if isinstance(self.top_groups, bool) or not isinstance(self.top_groups, int) or self.top_groups < 0:
            raise ValueError(f"--top-groups must be an integer >= 0, got {self.top_groups!r}")

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_store"] = state["_source"] = None
        return state

    def open(self) -> None:
        if self._source is None:
            from mlgoodput.accounting import FleetSource
            from mlgoodput.store import open_store

            self._store = open_store(self.store_url, "--store")
            # the source's "now" is the round's: a running job's report then ends where the
            # range does, and its last hour is not one the range cuts (asked again each round)
            self._source = FleetSource(self._store, clock=self._round_time)

    def collect(self, now: float, final: bool = False) -> list[Sample]:
        self.open()
        assert self._source is not None
        at = now if self.clock is None else float(self.clock())
        self._at = at
        since, until = fleet_range(at, self.range_days)
        report = self._source.report(since, until, self.by, self.prices)
        self.reports += 1
        return fleet_samples(report.to_dict(), top_groups=self.top_groups, time=at)

    def _round_time(self) -> float:
        return self._at if self._at is not None else time.time()

    def close(self) -> None:
        store, self._store, self._source = self._store, None, None
        if store is not None:
            store.close()
