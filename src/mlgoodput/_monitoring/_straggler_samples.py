"""Straggler samples for jobs of several hosts (docs/torch.md, "Stragglers"; docs/exporting.md)."""

from __future__ import annotations

from typing import Any

from mlgoodput.accounting import GoodputReport
from mlgoodput.export import Sample


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
