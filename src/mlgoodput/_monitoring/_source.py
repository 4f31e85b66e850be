"""GoodputSource: runs inside the uploader process, owns a calculator, turns reports into samples."""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from mlgoodput._monitoring import _host_series, _samples
from mlgoodput._monitoring._host_series import HostSeries
from mlgoodput.export import Sample

log = logging.getLogger("mlgoodput")

# One calculator per (store, namespace, job) in the uploader process, shared by its sources,
# so the cumulative and rolling uploaders read each new event once.
_calculators: dict[tuple[str, str, str], Any] = {}


def shared_calculator(store_url: str, logger_name: str, job_name: str) -> Any:
    key = (store_url, logger_name, job_name)
    calc = _calculators.get(key)
    if calc is None:
        from mlgoodput.accounting import GoodputCalculator

        # a save writes the whole state (some hundred MB on a long job): this long-lived reader
        # saves after the job doubled, for its own restart and the readers after it
        calc = _calculators[key] = GoodputCalculator(job_name, logger_name, store=store_url, save_growth=1.0)
    return calc


@dataclasses.dataclass
class GoodputSource:
    """What one uploader computes each interval (picklable; built in the parent, run in the child).

    `mode`: "cumulative" (whole job; with badput, step deviation, slice efficiency as asked),
    "rolling" (one report per window in `windows_s`, ending now), or "step_deviation".
    """

    job_name: str
    logger_name: str
    store_url: str
    mode: str = "cumulative"
    windows_s: tuple[int, ...] = ()
    include_badput_breakdown: bool = True
    include_step_deviation: bool = False
    include_slice_efficiency: bool = False
    configured_ideal_step_time: float | None = None
    clock: Any = None  # None: time.time; a picklable callable for tests
    reports: int = 0
    _deviation: float | None = None
    # which hosts' series each upload carries (a job of many hosts; made in the uploader process)
    _hosts: HostSeries | None = dataclasses.field(default=None, repr=False, compare=False)

    def _calc(self) -> Any:
        return shared_calculator(self.store_url, self.logger_name, self.job_name)

    def open(self) -> None:
        self._calc()

    def collect(self, now: float, final: bool = False) -> list[Sample]:
        end = None if self.clock is None else float(self.clock())  # None: the calculator's now
        calc = self._calc()
        self.reports += 1
        if self.mode == "rolling":
            reports = calc.rolling_windows(list(self.windows_s), end=end)
            if any(not r.total_s > 0 for r in reports.values()):
                # a finished (or not yet started) job has no time in a window ending now:
                # its windows end at its last event instead of reading 0 %
                last = calc.report(at=end).end
                if last > 0 and (end is None or last < end):
                    reports = calc.rolling_windows(list(self.windows_s), end=last)
                reports = {w: r for w, r in reports.items() if r.total_s > 0}
            return _samples.rolling_samples(reports, include_badput_breakdown=self.include_badput_breakdown)
        report = calc.report(at=end, configured_ideal_step_time=self.configured_ideal_step_time)
        out: list[Sample] = []
        if self.mode == "cumulative":
            hosts = report.hosts
            lag = self._stragglers(report) if len(hosts) > 1 else None
            ranks = None if lag is None else lag.ranks
            if self._hosts is None:
                self._hosts = HostSeries()
            # a job of many hosts: the hosts whose series this upload carries (_host_series),
            # compared as the calculator's columns where it has them
            columns = calc.columns_of(hosts, ranks) if len(hosts) > _host_series.ALL_HOSTS_UP_TO else (None, None)
            hosts, ranks = self._hosts.pick(
                hosts, ranks or (), None if lag is None else lag.straggler, final=final, columns=columns
            )
            out = _samples.cumulative_samples(
                report,
                include_badput_breakdown=self.include_badput_breakdown,
                include_slice_efficiency=self.include_slice_efficiency,
                hosts=hosts,
            )
            if lag is not None:  # every rank's step starts: who holds the collectives back
                from mlgoodput._monitoring._straggler_samples import straggler_samples

                out += straggler_samples(report, lag, ranks=ranks)
        if self.include_step_deviation or self.mode == "step_deviation":
            value = self._step_deviation(calc, final)
            if value is not None:
                out.append(_samples.step_deviation_sample(report, value))
        return out

    def _stragglers(self, report: Any) -> Any:
        """The calculator's straggler analysis for `report` (a StragglerReport)."""
        # the whole job up to what is read (no end), so the calculator's analysis stays
        # incremental (a window ending before the latest step is a full pass); of the events
        # of this collect's report (no second read: the samples of one upload describe one
        # state of the job)
        return self._calc().stragglers(report.start, None, read=False)

    def _step_deviation(self, calc: Any, final: bool = False) -> float | None:
        """The deviation summary over the latest steps (the calculator reads only those)."""
        # the events the report of this collect was made of (no second read: the samples of one
        # upload describe one state of the job, and a store being written meanwhile is read once)
        devs = calc.get_signed_step_deviation(
            self.configured_ideal_step_time, last_n=_samples.DEVIATION_STEPS, read=False
        )
        self._deviation = _samples.step_deviation_summary(devs)
        return self._deviation
