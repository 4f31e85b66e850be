"""The monitor's samples built the plain way (fresh dicts, Sample's own __init__): the sample
builders as they were before they shared SeriesLabels, kept as the oracle the fast ones are
compared with (test_sample_paths.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mlgoodput._monitoring._productivity_samples import productivity_samples
from mlgoodput._monitoring._samples import _STATUS_DESC, DEVIATION_STEPS, STATUS_WORDS, _badput_samples
from mlgoodput.accounting import GoodputReport
from mlgoodput.export import Sample


def cumulative_samples(
    report: GoodputReport,
    *,
    include_badput_breakdown: bool = True,
    include_slice_efficiency: bool = False,
    time: float | None = None,
) -> list[Sample]:
    """Whole-job metrics: goodput, productive and total time, steps, disruptions, badput buckets."""
    base = {"job_name": report.job_name, "logger_name": report.logger_name}
    step = report.last_step

    def s(name: str, value: float, unit: str = "", extra: Mapping[str, str] | None = None, desc: str = "") -> Sample:
        labels = dict(base, **extra) if extra else base
        return Sample(name, float(value), labels, step=step, time=time, unit=unit, description=desc)

    out = [
        s("goodput/goodput_pct", report.goodput_pct, "%", desc="share of elapsed time spent on productive steps"),
        s("goodput/productive_seconds", report.productive_s, "s", desc="productive (goodput) time"),
        s("goodput/total_elapsed_seconds", report.total_s, "s", desc="elapsed time of the job"),
        s("goodput/disruptions", report.disruptions, desc="restarts of the job (attempts - 1)"),
        s(
            "goodput/ideal_step_time_seconds",
            report.ideal_step_time_s,
            "s",
            desc="ideal (median or configured) step time",
        ),
    ]
    for word in STATUS_WORDS:
        out.append(s("goodput/status/{status}", word == report.status, extra={"status": word}, desc=_STATUS_DESC))
    if report.max_productive_step is not None:
        out.append(
            s("goodput/max_productive_step", report.max_productive_step, desc="largest step whose work was kept")
        )
    if report.last_step is not None:
        out.append(s("goodput/last_step", report.last_step, desc="latest step started"))
    if include_badput_breakdown:
        out += _badput_samples("badput/", report, s)
    for h in report.hosts:  # per-host step times, for spotting stragglers
        for stat, v in (("median", h.median_s), ("p90", h.p90_s), ("max", h.max_s)):
            out.append(
                s(
                    "hosts/{host}/step_time_{stat}_seconds",
                    v,
                    "s",
                    {"host": str(h.host), "stat": stat},
                    desc="step time seen by one host (median, p90, max)",
                )
            )
    out += productivity_samples(report, s)
    if include_slice_efficiency and report.slice_efficiency is not None:
        out.append(s("elastic/stepping_slice_efficiency_pct", 100.0 * report.slice_efficiency.stepping, "%"))
        out.append(s("elastic/available_slice_efficiency_pct", 100.0 * report.slice_efficiency.available, "%"))
    return out


def step_deviation_sample(report: GoodputReport, value: float, *, time: float | None = None) -> Sample:
    return Sample(
        "goodput/step_time_deviation_seconds",
        value,
        {"job_name": report.job_name, "logger_name": report.logger_name},
        step=report.last_step,
        time=time,
        unit="s",
        description=f"median |step time - ideal| over the last {DEVIATION_STEPS} steps",
    )


def straggler_samples(report: GoodputReport, lag: Any, *, time: float | None = None) -> list[Sample]:
    """Per rank: seconds it held the others back, median step time, mean lag; and the job's
    straggler rank (-1: none) and what it cost. `lag` is a StragglerReport."""
    base = {"job_name": report.job_name, "logger_name": report.logger_name}
    step = report.last_step
    out = [
        Sample(
            "stragglers/straggler_rank",
            float(-1 if lag.straggler is None else lag.straggler),
            base,
            step=step,
            time=time,
            description="the rank holding collectives back (-1: none)",
        ),
        Sample(
            "stragglers/straggler_cost_seconds",
            lag.straggler_cost_s,
            base,
            step=step,
            time=time,
            unit="s",
            description="seconds the straggler held the other ranks back",
        ),
    ]
    for r in lag.ranks:
        labels = dict(base, rank=str(r.rank))
        out.append(Sample("stragglers/held_back_seconds", r.held_back_s, labels, step=step, time=time, unit="s"))
        out.append(Sample("stragglers/median_step_seconds", r.median_step_s, labels, step=step, time=time, unit="s"))
        out.append(Sample("stragglers/mean_lag_seconds", r.mean_lag_s, labels, step=step, time=time, unit="s"))
    return out
