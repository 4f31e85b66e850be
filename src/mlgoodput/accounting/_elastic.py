"""ElasticGoodputCalculator: the seed's elastic calculator, whose extras are slice efficiencies.

Elastic badput (slice down, scale up, re-initialization) is part of every report already;
this class adds the seed's `stepping_slice_efficiency` / `available_slice_efficiency`
(fractions, 0..1) to the detail dictionaries when slice counts were recorded.
"""

from __future__ import annotations

from typing import Any

from mlgoodput.accounting._calculator import GoodputCalculator, TimeArg, when
from mlgoodput.accounting._report import GoodputReport


def _add_efficiency(out: dict[str, Any], r: GoodputReport) -> dict[str, Any]:
    if r.slice_efficiency is not None:
        out["stepping_slice_efficiency"] = r.slice_efficiency.stepping / 100.0
        out["available_slice_efficiency"] = r.slice_efficiency.available / 100.0
    return out


class ElasticGoodputCalculator(GoodputCalculator):
    """A GoodputCalculator whose detail dictionaries carry the slice efficiencies."""

    def get_job_goodput_details(self) -> dict[str, Any]:
        return _add_efficiency(super().get_job_goodput_details(), self.report())

    def get_interval_metric_details(self, interval_start: TimeArg, interval_end: TimeArg) -> dict[str, Any]:
        out = super().get_interval_metric_details(interval_start, interval_end)
        a, b = when(interval_start, "interval_start"), when(interval_end, "interval_end")
        if a is not None and b is not None and b > a:
            _add_efficiency(out, self.report(a, b))
        return out
