"""The usage report: CPU and memory of every process over time, stacked per host, with the
checkpoints as vertical lines. Drawn with matplotlib into a PNG, or an HTML page holding an SVG."""

from __future__ import annotations

import io
import os
from collections import defaultdict
from typing import Any

from mlgoodput.console._replay import clients, read_job
from mlgoodput.events import Kind
from mlgoodput.store import Store


def usage_series(
    store: Store, job: str
) -> tuple[dict[str, dict[int, list[tuple[float, float, int]]]], list[tuple[float, str, int | None]]]:
    """{hostname: {process: [(time, cpu %, rss bytes)]}} and the checkpoints [(time, name, step)]."""
    cols = read_job(store, job)
    procs = clients(cols)
    series: dict[str, dict[int, list[tuple[float, float, int]]]] = defaultdict(lambda: defaultdict(list))
    marks: list[tuple[float, str, int | None]] = []
    for i in range(len(cols)):
        k = cols.kinds[i]
        if k == Kind.USAGE:
            a = cols.attr(i) or {}
            host = str(a.get("hostname") or procs.get(cols.hosts[i], {}).get("hostname") or "?")
            series[host][cols.hosts[i]].append((cols.times[i], float(a.get("cpu", 0.0)), int(a.get("rss", 0))))
        elif k == Kind.USAGE_CHECKPOINT:
            s = cols.steps[i]
            marks.append((cols.times[i], cols.name(i) or "", None if s < 0 else s))
    return series, sorted(marks)


def write_usage_report(store: Store, job: str, out: str) -> int:
    """Write the report to `out` (.png or .html); returns the number of samples drawn."""
    ext = os.path.splitext(out)[1].lower()
    if ext not in (".png", ".html", ".htm"):
        raise ValueError(f"out must end in .png or .html, got {out!r}")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError("the usage report needs matplotlib: pip install 'mlgoodput[console]'") from None
    series, marks = usage_series(store, job)
    n = sum(len(v) for h in series.values() for v in h.values())
    if n == 0:
        raise LookupError(
            f"console job {job!r} has no usage samples (enable them with Usage.enable() or session(usage=True))"
        )
    hosts = sorted(series)
    t0 = min(t for h in series.values() for v in h.values() for t, _, _ in v)
    fig, axes = plt.subplots(2 * len(hosts), 1, figsize=(11, 3.2 * 2 * len(hosts)), sharex=True, squeeze=False)
    for hi, host in enumerate(hosts):
        procs = sorted(series[host])
        # a common time grid: each process's value held until its next sample
        grid = sorted({round(t - t0, 3) for p in procs for t, _, _ in series[host][p]})
        cpu_rows, mem_rows = [], []
        for p in procs:
            pts = series[host][p]
            j, cpu, mem = 0, [], []
            for g in grid:
                while j + 1 < len(pts) and pts[j + 1][0] - t0 <= g + 1e-9:
                    j += 1
                alive = pts[0][0] - t0 <= g + 1e-9 and g <= pts[-1][0] - t0 + 1e-9
                cpu.append(pts[j][1] if alive else 0.0)
                mem.append(pts[j][2] / 2**20 if alive else 0.0)
            cpu_rows.append(cpu)
            mem_rows.append(mem)
        labels = [f"#{p}" for p in procs]
        ax_c, ax_m = axes[2 * hi][0], axes[2 * hi + 1][0]
        ax_c.stackplot(grid, cpu_rows, labels=labels, step="post")
        ax_c.set_ylabel("CPU %")
        ax_c.set_title(f"{host}: CPU, stacked by process")
        ax_m.stackplot(grid, mem_rows, labels=labels, step="post")
        ax_m.set_ylabel("RSS MiB")
        ax_m.set_title(f"{host}: resident memory, stacked by process")
        for ax in (ax_c, ax_m):
            for t, _name, _step in marks:
                ax.axvline(t - t0, color="k", linestyle="--", linewidth=0.8, alpha=0.6)
            ax.legend(loc="upper left", fontsize="small", ncol=min(8, len(labels)))
    top = axes[0][0]
    for t, name, step in marks:
        top.annotate(
            f"{name}{'' if step is None else f' {step}'}",
            (t - t0, 1.0),
            xycoords=("data", "axes fraction"),
            rotation=90,
            fontsize="x-small",
            va="top",
            ha="right",
        )
    axes[-1][0].set_xlabel("seconds since the first sample")
    fig.suptitle(f"mlgoodput console usage: job {job}")
    fig.tight_layout()
    if ext == ".png":
        fig.savefig(out, dpi=100)
    else:
        buf = io.StringIO()
        fig.savefig(buf, format="svg")
        _write_html(out, job, buf.getvalue(), n, marks)
    plt.close(fig)
    return n


def _write_html(out: str, job: str, svg: str, n: int, marks: list[Any]) -> None:
    import html

    svg = svg[svg.find("<svg") :]
    rows = "".join(
        f"<tr><td>{html.escape(name)}</td><td>{'' if step is None else step}</td><td>{t:.3f}</td></tr>"
        for t, name, step in marks
    )
    with open(out, "w", encoding="utf-8") as f:
        f.write(
            "<!doctype html><html><head><meta charset='utf-8'>"
            f"<title>mlgoodput usage: {html.escape(job)}</title></head><body>"
            f"<h1>Usage of console job {html.escape(job)}</h1><p>{n} samples.</p>{svg}"
            f"<h2>Checkpoints</h2><table><tr><th>name</th><th>step</th><th>time</th></tr>{rows}</table>"
            "</body></html>"
        )
