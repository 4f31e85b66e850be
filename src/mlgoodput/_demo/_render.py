"""A plain-text goodput report for the demo's terminal, used when the `report` command is absent."""

from __future__ import annotations

from collections.abc import Mapping
from typing import IO, Any


def render_report(report: Any, out: IO[str]) -> None:
    """Write a GoodputReport as an aligned table: goodput first, then every non-zero bucket."""
    total = float(report.total_s)

    def pct(s: float) -> str:
        return f"{100.0 * s / total:6.2f} %" if total > 0 else "     - "

    rows: list[tuple[str, float]] = [("productive (goodput)", float(report.productive_s))]
    for bucket, v in report.badput_s.items():
        name = bucket.name.lower()
        if isinstance(v, Mapping):
            rows += [(f"{name}: {k}", float(s)) for k, s in sorted(v.items()) if s > 0]
        elif v > 0:
            rows.append((name, float(v)))
    width = max(len(n) for n, _ in rows)
    out.write(f"\ngoodput report of job {report.job_name!r} (logger {report.logger_name!r})\n")
    out.write(f"  {'bucket'.ljust(width)}  {'seconds':>9}  {'share':>8}\n")
    for name, s in rows:
        out.write(f"  {name.ljust(width)}  {s:9.2f}  {pct(s)}\n")
    out.write(f"  {'total'.ljust(width)}  {total:9.2f}  {pct(total)}\n")
    for b, v in report.overlapped_s.items():
        if v > 0:
            out.write(f"  (overlapped, not badput: {b.name.lower()} {v:.2f} s)\n")
    out.write(
        f"  disruptions: {report.disruptions}   last step: {report.last_step}"
        f"   max productive step: {report.max_productive_step}"
        f"   ideal step time: {report.ideal_step_time_s:.3f} s\n"
    )
    out.flush()
