"""Productivity figures as Samples (docs/exporting.md): only those that are known."""

from __future__ import annotations

from collections.abc import Callable

from mlgoodput.accounting import GoodputReport
from mlgoodput.export import Sample

#: sample name -> (Productivity attribute, factor, unit, description)
PRODUCTIVITY_SAMPLES: tuple[tuple[str, str, float, str, str], ...] = (
    (
        "productivity/ml_productivity_goodput_pct",
        "ml_productivity_goodput",
        100.0,
        "%",
        "ML Productivity Goodput: scheduling x runtime x program goodput",
    ),
    (
        "productivity/scheduling_goodput_pct",
        "scheduling_goodput",
        100.0,
        "%",
        "share of the time since submission that the job held its machines",
    ),
    (
        "productivity/program_goodput_pct",
        "program_goodput",
        100.0,
        "%",
        "achieved FLOP/s during productive time over peak FLOP/s",
    ),
    ("productivity/mfu_pct", "mfu", 100.0, "%", "model FLOPs utilization of the time in steps"),
    (
        "productivity/achieved_flops_per_second",
        "achieved_flops_per_s",
        1.0,
        "FLOP/s",
        "model FLOPs of kept steps per productive second",
    ),
    ("productivity/peak_flops_per_second", "peak_flops_per_s", 1.0, "FLOP/s", "peak FLOP/s of the job's devices"),
    ("productivity/ettr_pct", "ettr", 100.0, "%", "effective training time ratio"),
    ("productivity/interruptions", "interruptions", 1.0, "", "interruptions (restarts) of the job"),
    ("productivity/mtbi_seconds", "mtbi_s", 1.0, "s", "mean time between interruptions"),
    ("productivity/mttr_seconds", "mttr_s", 1.0, "s", "mean time from an interruption to productive steps"),
)


def productivity_samples(report: GoodputReport, s: Callable[..., Sample]) -> list[Sample]:
    """Samples for the known productivity figures of `report`, built with the caller's `s`."""
    p = report.productivity
    if p is None:
        return []
    out = []
    for name, attr, factor, unit, desc in PRODUCTIVITY_SAMPLES:
        v = getattr(p, attr)
        if v is not None:
            out.append(s(name, factor * float(v), unit, desc=desc))
    if p.checkpoint_save.mean_s is not None:
        out.append(s("productivity/checkpoint_save_mean_seconds", p.checkpoint_save.mean_s, "s"))
        out.append(s("productivity/checkpoint_save_p95_seconds", p.checkpoint_save.p95_s, "s"))
    if p.checkpoint_restore.mean_s is not None:
        out.append(s("productivity/checkpoint_restore_mean_seconds", p.checkpoint_restore.mean_s, "s"))
    return out
