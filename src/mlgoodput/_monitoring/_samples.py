"""Turn GoodputReports into Samples with the canonical names listed in docs/exporting.md."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from mlgoodput._monitoring._productivity_samples import productivity_samples
from mlgoodput.accounting import PARTITION_BUCKETS, BadputType, GoodputReport, HostStepStats
from mlgoodput.export import Sample, SeriesLabels, new_sample

#: How many of the most recent steps the step-time deviation summarizes.
DEVIATION_STEPS = 100

#: The accounting's status words (GoodputReport.status), exported as a state set.
STATUS_WORDS = ("running", "finished", "crashed", "stale", "empty")
_STATUS_DESC = "1 for the job's status (the word of mlgoodput report and jobs), 0 for the others"

HOST_STEP_TIME = "hosts/{host}/step_time_{stat}_seconds"
HOST_STEP_TIME_DESC = "step time seen by one host (median, p90, max)"

# The label sets the monitor exports every upload, built once and shared by the samples of
# every upload (SeriesLabels: what each export stage derives from them is computed once).
_LABELS: dict[tuple[str, ...], SeriesLabels] = {}  # (job, logger[, key, value]) -> labels
_HOSTS: dict[tuple[str, str], dict[int, tuple[SeriesLabels, SeriesLabels, SeriesLabels]]] = {}
# (job, logger) -> the host statistics last turned into samples, their step, and those samples
# (a query with nothing new returns the very same statistics: the samples are the same too)
_LAST_HOSTS: dict[tuple[str, str], tuple[Sequence[HostStepStats], int | None, list[Sample]]] = {}


def job_labels(job_name: str, logger_name: str, *extra: str) -> SeriesLabels:
    """The shared labels {job_name, logger_name} and `extra` (key, value, key, value...)."""
    key = (job_name, logger_name, *extra)
    got = _LABELS.get(key)
    if got is None:
        if len(_LABELS) >= 100_000:  # label sets come and go (windows, custom events): bounded
            _LABELS.clear()
        items = [("job_name", job_name), ("logger_name", logger_name), *zip(extra[::2], extra[1::2], strict=True)]
        got = _LABELS[key] = SeriesLabels(items)
    return got


def _host_labels(job_name: str, logger_name: str) -> dict[int, tuple[SeriesLabels, SeriesLabels, SeriesLabels]]:
    """host -> the labels of its median, p90 and max step-time samples (filled by the caller)."""
    got = _HOSTS.get((job_name, logger_name))
    if got is None or len(got) > 100_000:
        if len(_HOSTS) >= 1_000:
            _HOSTS.clear()
        got = _HOSTS[(job_name, logger_name)] = {}
    return got


def _bucket(b: BadputType) -> str:
    return b.name.lower()


def cumulative_samples(
    report: GoodputReport,
    *,
    include_badput_breakdown: bool = True,
    include_slice_efficiency: bool = False,
    time: float | None = None,
    hosts: Sequence[HostStepStats] | None = None,
) -> list[Sample]:
    """Whole-job metrics: goodput, productive and total time, steps, disruptions, badput buckets;
    the per-host step times of `hosts` (default: every host of the report; the source passes
    the hosts an upload of a large job carries, `_host_series`)."""
    job, logger = report.job_name, report.logger_name
    base = job_labels(job, logger)
    step = report.last_step

    def s(name: str, value: float, unit: str = "", extra: Mapping[str, str] | None = None, desc: str = "") -> Sample:
        labels = job_labels(job, logger, *(x for kv in extra.items() for x in kv)) if extra else base
        return new_sample(name, float(value), labels, "gauge", step, time, unit, desc)

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
    for word in STATUS_WORDS:  # a state set: the job's word is 1, the others 0
        out.append(s("goodput/status/{status}", word == report.status, extra={"status": word}, desc=_STATUS_DESC))
    if report.max_productive_step is not None:
        out.append(
            s("goodput/max_productive_step", report.max_productive_step, desc="largest step whose work was kept")
        )
    if report.last_step is not None:
        out.append(s("goodput/last_step", report.last_step, desc="latest step started"))
    if include_badput_breakdown:
        out += _badput_samples("badput/", report, s)
    if hosts is None:
        hosts = report.hosts
    if hosts:  # per-host step times, for spotting stragglers
        out += _host_samples(report, hosts, step, time)
    out += productivity_samples(report, s)
    if include_slice_efficiency and report.slice_efficiency is not None:
        out.append(s("elastic/stepping_slice_efficiency_pct", 100.0 * report.slice_efficiency.stepping, "%"))
        out.append(s("elastic/available_slice_efficiency_pct", 100.0 * report.slice_efficiency.available, "%"))
    return out


def _host_samples(
    report: GoodputReport, hosts: Sequence[HostStepStats], step: int | None, time: float | None
) -> list[Sample]:
    """Each host's median, p90 and max step time (`hosts/{host}/step_time_{stat}_seconds`)."""
    job, logger = report.job_name, report.logger_name
    last = _LAST_HOSTS.get((job, logger))
    if time is None and last is not None:
        was, last_step, samples = last
        if was is hosts and type(last_step) is type(step) and last_step == step:
            return list(samples)  # Samples cannot change: the same ones again
    labels = _host_labels(job, logger)
    out: list[Sample] = []
    add = out.append
    name, desc = HOST_STEP_TIME, HOST_STEP_TIME_DESC
    for h in hosts:
        trio = labels.get(h.host)
        if trio is None:
            host = str(h.host)
            trio = labels[h.host] = (
                job_labels(job, logger, "host", host, "stat", "median"),
                job_labels(job, logger, "host", host, "stat", "p90"),
                job_labels(job, logger, "host", host, "stat", "max"),
            )
        add(new_sample(name, float(h.median_s), trio[0], "gauge", step, time, "s", desc))
        add(new_sample(name, float(h.p90_s), trio[1], "gauge", step, time, "s", desc))
        add(new_sample(name, float(h.max_s), trio[2], "gauge", step, time, "s", desc))
    if time is None:
        if len(_LAST_HOSTS) >= 1_000:
            _LAST_HOSTS.clear()
        _LAST_HOSTS[(job, logger)] = (hosts, step, out)
        return list(out)
    return out


def _badput_samples(prefix: str, report: GoodputReport, s: Any, *, seconds: bool = True) -> list[Sample]:
    out: list[Sample] = []
    total = report.total_s
    pct = report.badput_pct
    for b in PARTITION_BUCKETS:
        secs = report.badput_total_s(b)
        p = 100.0 * secs / total if total > 0 else 0.0
        if seconds:
            out.append(s(prefix + "{bucket}_seconds", secs, "s", {"bucket": _bucket(b)}))
        out.append(s(prefix + "{bucket}_pct", p, "%", {"bucket": _bucket(b)}))
    custom = report.badput_s.get(BadputType.CUSTOM_BADPUT_EVENTS)
    if isinstance(custom, Mapping):
        cpct = pct.get(BadputType.CUSTOM_BADPUT_EVENTS, {})
        for name, secs in sorted(custom.items()):
            if seconds:
                out.append(s(prefix + "custom/{event}_seconds", secs, "s", {"event": str(name)}))
            out.append(s(prefix + "custom/{event}_pct", cpct.get(name, 0.0), "%", {"event": str(name)}))
    if seconds:
        for b, secs in report.overlapped_s.items():
            out.append(s("overlapped/{bucket}_seconds", secs, "s", {"bucket": _bucket(b)}))
    return out


def rolling_samples(
    reports: Mapping[int, GoodputReport], *, time: float | None = None, include_badput_breakdown: bool = True
) -> list[Sample]:
    """Per-window goodput and badput (`rolling/{window}/...`, window label like `60s`)."""
    out: list[Sample] = []
    for w, report in sorted(reports.items()):
        base = {"job_name": report.job_name, "logger_name": report.logger_name, "window": f"{int(w)}s"}
        step = report.last_step

        def s(
            name: str,
            value: float,
            unit: str = "",
            extra: Mapping[str, str] | None = None,
            desc: str = "",
            _base: dict[str, str] = base,
            _step: int | None = step,
        ) -> Sample:
            labels = dict(_base, **extra) if extra else _base
            return Sample(name, float(value), labels, step=_step, time=time, unit=unit, description=desc)

        out.append(s("rolling/{window}/goodput_pct", report.goodput_pct, "%", desc="goodput over the trailing window"))
        out.append(s("rolling/{window}/productive_seconds", report.productive_s, "s"))
        out.append(s("rolling/{window}/total_seconds", report.total_s, "s"))
        if include_badput_breakdown:
            out += _badput_samples("rolling/{window}/badput/", report, s, seconds=False)
    return out


def step_deviation_summary(deviations: Mapping[int, float], last_n: int = DEVIATION_STEPS) -> float | None:
    """Median absolute deviation from the ideal step time over the last `last_n` steps (seconds)."""
    if not deviations:
        return None
    steps = sorted(deviations)[-last_n:]
    return float(statistics.median(abs(deviations[k]) for k in steps))


def step_deviation_sample(report: GoodputReport, value: float, *, time: float | None = None) -> Sample:
    return new_sample(
        "goodput/step_time_deviation_seconds",
        value,
        job_labels(report.job_name, report.logger_name),
        "gauge",
        report.last_step,
        time,
        "s",
        f"median |step time - ideal| over the last {DEVIATION_STEPS} steps",
    )
