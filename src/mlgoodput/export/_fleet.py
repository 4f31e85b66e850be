"""Fleet gauges: a fleet report (`FleetReport.to_dict()`) as Samples, with bounded cardinality.

The figures are the report's own, never worked out again from jobs or events: hours become
accelerator-seconds (Prometheus base units; `hours * 3600`), and 0..1 figures are sent as they
are, as `_ratio` gauges. The groups are bounded: the `top_groups` groups with the most
accelerator-hours keep their own series (a group without the label is `none`), and the rest
are summed into one group `other`. `other` carries the figures that add up (hours, jobs, cost)
and its goodput (productive over accelerator hours, the report's definition); the weighted
figures (scheduling and program goodput, MPG, ETTR) need weights the report does not hold, so
`other` has none of them. The whole fleet's figures go out as `fleet/total/...`.

Every sample of one call carries the same `time`: a round. The Prometheus exporter keeps only
the newest round of `fleet/` series per `by` label (`newest_rounds_only`), so a group that left
the top N, or a figure that became unknown, stops being served instead of staying at its last
value. docs/exporting.md ("Fleet gauges") lists the series.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from mlgoodput.export._base import Sample

#: Every fleet sample's name starts with this.
FLEET_PREFIX = "fleet/"
#: The group that sums every group beyond the top N.
OTHER_GROUP = "other"
#: How a group without the grouping label (the report's null key) is labelled.
NO_GROUP = "none"
DEFAULT_TOP_GROUPS = 20

#: (report key in hours, sample name in accelerator-seconds): the figures that add up.
_SECONDS: tuple[tuple[str, str], ...] = (
    ("accelerator_hours", "accelerator_seconds"),
    ("productive_hours", "productive_seconds"),
    ("lost_hours", "lost_seconds"),
    ("queue_hours", "queue_seconds"),
)
#: Report keys of the 0..1 figures, each sent as `<key>_ratio`.
_RATIOS: tuple[str, ...] = ("goodput", "scheduling_goodput", "program_goodput", "ml_productivity_goodput", "ettr")
_WEIGHTED = frozenset(_RATIOS) - {"goodput"}  # what `other` cannot have
_DESC = {
    "accelerator_seconds": "accelerator-seconds inside the range (accelerators x wall time)",
    "productive_seconds": "productive accelerator-seconds inside the range",
    "lost_seconds": "accelerator-seconds inside the range that were not productive (all badput)",
    "queue_seconds": "accelerator-seconds queued before the first start, inside the range",
    "badput/{bucket}_seconds": "accelerator-seconds inside the range lost to one badput bucket",
    "jobs": "jobs with time inside the range",
    "goodput_ratio": "productive over accelerator-seconds (runtime goodput)",
    "scheduling_goodput_ratio": "running over running plus queued accelerator-seconds",
    "program_goodput_ratio": "program goodput (MFU-based), weighted by accelerator-seconds",
    "ml_productivity_goodput_ratio": "ML Productivity Goodput, weighted by accelerator-seconds",
    "ettr_ratio": "effective training time ratio, weighted by accelerator-seconds",
    "cost": "cost of the accelerator-seconds inside the range",
    "lost_cost": "cost of the accelerator-seconds that were not productive",
    "groups": "groups in the report, before the top-N bound",
    "range_seconds": "length of the range the figures cover (it ends at the upload)",
}


def fleet_samples(report: Mapping[str, Any], *, top_groups: int = DEFAULT_TOP_GROUPS, time: float) -> list[Sample]:
    """The gauges of one fleet report (its `to_dict()`), every one stamped with `time`.

    Labels: `by` (the grouping label) on every sample; `group` on the per-group ones;
    `bucket` on badput; `currency` on cost (sent only when the report is priced). Labels are
    plain dicts (the Prometheus exporter looks for fleet rounds among those only)."""
    if isinstance(top_groups, bool) or not isinstance(top_groups, int) or top_groups < 0:
        raise ValueError(f"top_groups must be an integer >= 0, got {top_groups!r}")
    by = str(report["by"])
    buckets: Sequence[str] = report["buckets"]
    currency = report.get("currency")
    out: list[Sample] = []
    base = {"by": by}

    def add(name: str, value: float | None, labels: Mapping[str, str], what: str) -> None:
        if value is None:  # an unknown figure is not sent
            return
        unit = "s" if name.endswith("_seconds") else "1" if name.endswith("_ratio") else ""
        out.append(Sample(name, float(value), dict(labels), unit=unit, time=time, description=_DESC[what]))

    def row(prefix: str, r: Mapping[str, Any], labels: Mapping[str, str], weighted: bool) -> None:
        add(prefix + "jobs", r["jobs"], labels, "jobs")
        for hours, name in _SECONDS:
            add(prefix + name, r[hours] * 3600.0, labels, name)
        bad = r["badput_hours"]
        for b in buckets:
            add(prefix + "badput/{bucket}_seconds", bad[b] * 3600.0, {**labels, "bucket": b}, "badput/{bucket}_seconds")
        for k in _RATIOS:
            if weighted or k not in _WEIGHTED:
                add(f"{prefix}{k}_ratio", r.get(k), labels, f"{k}_ratio")
        cost = r.get("cost")
        if currency is not None and cost is not None:
            money = {**labels, "currency": str(currency)}
            add(prefix + "cost", cost["total"], money, "cost")
            add(prefix + "lost_cost", cost["lost"], money, "lost_cost")

    shown, rest = bounded_groups(report["groups"], top_groups)
    for label, g in shown:
        row(FLEET_PREFIX, g, {**base, "group": label}, True)
    if rest:
        row(FLEET_PREFIX, summed(rest, buckets), {**base, "group": OTHER_GROUP}, False)
    row(FLEET_PREFIX + "total/", report["total"], base, True)
    add(FLEET_PREFIX + "groups", len(report["groups"]), base, "groups")
    add(FLEET_PREFIX + "range_seconds", float(report["until"]) - float(report["since"]), base, "range_seconds")
    return out


def group_label(key: object) -> str:
    """A group's `group` label: its label value, `none` for jobs without the label."""
    return NO_GROUP if key is None else str(key)


def bounded_groups(
    groups: Iterable[Mapping[str, Any]], top: int
) -> tuple[list[tuple[str, Mapping[str, Any]]], list[Mapping[str, Any]]]:
    """(the groups shown on their own, as (label, row); the rows summed into `other`).

    The `top` groups with the most accelerator-hours (ties by label) are shown; a group whose
    label is `other`, or whose label another shown group already has (a label value `none`
    beside jobs without the label), is summed into `other`, so no two series share labels."""
    ranked = sorted(groups, key=lambda g: (-float(g["accelerator_hours"]), group_label(g["key"])))
    shown: list[tuple[str, Mapping[str, Any]]] = []
    rest: list[Mapping[str, Any]] = []
    used: set[str] = set()
    for g in ranked:
        label = group_label(g["key"])
        if len(shown) < top and label != OTHER_GROUP and label not in used:
            shown.append((label, g))
            used.add(label)
        else:
            rest.append(g)
    return shown, rest


def summed(rows: Sequence[Mapping[str, Any]], buckets: Sequence[str]) -> dict[str, Any]:
    """The group `other`: the figures of `rows` that add up, added; its goodput as the report
    defines it (productive over accelerator hours); no weighted figures."""
    acc = sum(float(r["accelerator_hours"]) for r in rows)
    prod = sum(float(r["productive_hours"]) for r in rows)
    out: dict[str, Any] = {
        "jobs": sum(int(r["jobs"]) for r in rows),
        "accelerator_hours": acc,
        "productive_hours": prod,
        "lost_hours": sum(float(r["lost_hours"]) for r in rows),
        "queue_hours": sum(float(r["queue_hours"]) for r in rows),
        "badput_hours": {b: sum(float(r["badput_hours"][b]) for r in rows) for b in buckets},
        "goodput": prod / acc if acc > 0 else None,
        "cost": None,
    }
    costs = [r.get("cost") for r in rows]
    if costs and all(c is not None for c in costs):
        out["cost"] = {
            "total": sum(float(c["total"]) for c in costs if c is not None),
            "lost": sum(float(c["lost"]) for c in costs if c is not None),
        }
    return out


def newest_rounds_only(values: dict[Any, Sample], exported: Sequence[Sample]) -> None:
    """Drop from `values` (a series key -> its latest sample) the fleet series of older rounds:
    for each `by` label that `exported` (fleet samples just exported) brings, those stamped
    before the newest of them (a group that left the top N, a figure no longer known).

    Keyed by `by`, so two fleet sources of different groupings in one exporter keep each
    other's series. The caller passes only samples with plain-dict labels: the per-job series
    of the goodput monitor (SeriesLabels, thousands an upload) are never fleet ones, and
    looking at their names would cost a quarter of an export at 25,000 samples."""
    newest: dict[str | None, float] = {}
    for s in exported:
        if s.time is not None and s.name.startswith(FLEET_PREFIX):
            by = s.labels.get("by")
            if s.time > newest.get(by, float("-inf")):
                newest[by] = s.time
    if not newest:
        return
    old = [
        k
        for k, s in values.items()
        if s.time is not None
        and s.name.startswith(FLEET_PREFIX)
        and s.labels.get("by") in newest
        and s.time < newest[s.labels.get("by")]
    ]
    for k in old:
        del values[k]
