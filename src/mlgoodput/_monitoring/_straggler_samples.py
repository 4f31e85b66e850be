"""Straggler samples for jobs of several hosts (docs/torch.md, "Stragglers"; docs/exporting.md)."""

from __future__ import annotations

from collections.abc import Sequence

from mlgoodput._monitoring._samples import job_labels
from mlgoodput.accounting import GoodputReport, RankStepStats, StragglerReport
from mlgoodput.export import Sample, SeriesLabels, new_sample

_RANKS: dict[tuple[str, str], dict[int, SeriesLabels]] = {}  # (job, logger) -> rank -> its shared labels


def straggler_samples(
    report: GoodputReport,
    lag: StragglerReport,
    *,
    time: float | None = None,
    ranks: Sequence[RankStepStats] | None = None,
) -> list[Sample]:
    """Per rank: seconds it held the others back, median step time, mean lag; and the job's
    straggler rank (-1: none) and what it cost (`lag`: the calculator's analysis). `ranks`:
    the ranks whose series go out (default: all of `lag`; the source passes those an upload
    of a large job carries, `_host_series`)."""
    job, logger = report.job_name, report.logger_name
    base = job_labels(job, logger)
    step = report.last_step
    out = [
        new_sample(
            "stragglers/straggler_rank",
            float(-1 if lag.straggler is None else lag.straggler),
            base,
            "gauge",
            step,
            time,
            "",
            "the rank holding collectives back (-1: none)",
        ),
        new_sample(
            "stragglers/straggler_cost_seconds",
            lag.straggler_cost_s,
            base,
            "gauge",
            step,
            time,
            "s",
            "seconds the straggler held the other ranks back",
        ),
    ]
    known = _RANKS.get((job, logger))
    if known is None or len(known) > 100_000:
        if len(_RANKS) >= 1_000:
            _RANKS.clear()
        known = _RANKS[(job, logger)] = {}
    add = out.append
    for r in lag.ranks if ranks is None else ranks:
        labels = known.get(r.rank)
        if labels is None:
            labels = known[r.rank] = job_labels(job, logger, "rank", str(r.rank))
        add(new_sample("stragglers/held_back_seconds", r.held_back_s, labels, "gauge", step, time, "s", ""))
        add(new_sample("stragglers/median_step_seconds", r.median_step_s, labels, "gauge", step, time, "s", ""))
        add(new_sample("stragglers/mean_lag_seconds", r.mean_lag_s, labels, "gauge", step, time, "s", ""))
    return out
