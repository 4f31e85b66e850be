"""`mlgoodput runs` (list the ML runs of a store: status, duration, ...) and `mlgoodput runs
show NAME [--json]` (one run: status, provenance, configs, metrics, profiles)."""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Sequence
from typing import Any

from mlgoodput._format import duration, timestamp


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("runs", help="list ML runs, or show one (configs, metrics, profiles)")
    p.add_argument("--store", default=None, help="store URL or path (default: $MLGOODPUT_STORE)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_list)
    sub = p.add_subparsers(dest="runs_command", metavar="show")
    s = sub.add_parser("show", help="configs, metric summaries and profile sessions of a run")
    s.add_argument("name", help="run name (or a unique prefix, such as the name given to machinelearning_run)")
    s.add_argument("--store", default=argparse.SUPPRESS, help="store URL or path")
    s.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print JSON")
    s.set_defaults(func=_show)


def _when(t: float | None) -> str:
    return timestamp(t)


def _list(args: argparse.Namespace) -> int:
    from mlgoodput._cli._common import open_read_store
    from mlgoodput.diagnostics import list_runs

    store = open_read_store(args.store)
    try:
        runs = list_runs(store)
    finally:
        store.close()
    url = store.url
    if args.json:
        print(json.dumps(runs, indent=2))
        return 0
    if not runs:
        print(f"no runs in {url}")
        return 0
    rows = [("RUN", "STATUS", "GROUP", "STARTED", "DURATION", "LAST EVENT", "PROCS", "METRICS", "PROFILES")]
    for r in runs:
        rows.append(
            (
                r["name"],
                r["status"],
                r["run_group"] or "-",
                _when(r["first_time"]),
                _secs(r["duration_s"]),
                _when(r["last_time"]),
                str(r["processes"]),
                str(r["metric_values"]),
                str(r["profile_starts"]),
            )
        )
    _table(rows)
    return 0


def _show(args: argparse.Namespace) -> int:
    from mlgoodput._cli._common import open_read_store
    from mlgoodput.diagnostics import load_run

    store = open_read_store(args.store)
    try:
        run = load_run(args.name, store=store)
    finally:
        store.close()
    if getattr(args, "json", False):
        print(json.dumps(run.to_dict(), indent=2, allow_nan=True))
        return 0
    now = time.time()
    print(f"run {run.name}" + (f"  (group {run.run_group})" if run.run_group else ""))
    print(f"  status: {run.status(now)}; duration: {_secs(run.duration_s(now))}")
    for k in ("project", "region", "environment", "workload_id", "profile_dir"):
        if run.info.get(k):
            print(f"  {k}: {run.info[k]}")
    hosts = sorted({s["host"] for s in run.starts})
    print(
        f"  started: {_when(run.starts[0]['time']) if run.starts else '-'}; processes: {len(hosts)};"
        f" starts: {len(run.starts)}"
    )
    pv = run.provenance
    git = pv.get("git") or {}
    if git.get("commit"):
        print(f"  git: {git['commit'][:12]}{' (dirty)' if git.get('dirty') else ''} in {git.get('root')}")
    for k in ("command", "user", "host", "python"):
        if pv.get(k):
            print(f"  {k}: {pv[k]}")
    sw = run.software
    if sw:
        print(
            f"  software: {sw.get('framework') or '-'} {sw.get('framework_version') or ''}"
            f" python {sw.get('python_version')}; XLA_FLAGS={sw.get('xla_flags') or '(none)'}"
        )
    if run.system:
        s0 = run.system[min(run.system)]
        print(
            f"  system: {s0.get('hostname')}; devices: {s0.get('device_count', '-')} x"
            f" {s0.get('device_kind', '-')}; process count: {s0.get('process_count', len(hosts))}"
        )
    print("configs:")
    flat = _flatten(run.configs)
    if not flat:
        print("  (none)")
    for k, v in flat:
        print(f"  {k} = {json.dumps(v)}")
    for title, series in (("metrics", run.metrics), ("system metrics", run.system_metrics)):
        print(f"{title}:")
        if not series:
            print("  (none)")
            continue
        rows = [("NAME", "COUNT", "LAST", "MIN", "MEAN", "MAX", "LAST STEP")]
        for name in sorted(series):
            pts = series[name]
            vals = [p[1] for p in pts if not math.isnan(p[1])]
            steps = [p[0] for p in pts if p[0] is not None]
            rows.append(
                (
                    name,
                    str(len(pts)),
                    _num(pts[-1][1]),
                    _num(min(vals) if vals else None),
                    _num(sum(vals) / len(vals) if vals else None),
                    _num(max(vals) if vals else None),
                    str(steps[-1]) if steps else "-",
                )
            )
        _table(rows, indent=2)
    print("profiles:")
    if not run.profiles:
        print("  (none)")
    else:
        rows = [("SESSION", "TRIGGER", "STARTED", "DURATION", "HOSTS", "FILES", "PATH")]
        for p in run.profiles:
            rows.append(
                (
                    p["session"],
                    p["trigger"] or "-",
                    _when(p["start"]),
                    duration(p["duration_s"]) if p["complete"] else "running",
                    ",".join(map(str, p["hosts"])),
                    str(len(p["files"])),
                    p["path"] or "-",
                )
            )
        _table(rows, indent=2)
    return 0


def _secs(v: float | None) -> str:
    """A duration as the pages show it: "4.27 s", "12 min 05 s", "27 h 48 min" (mlgoodput._format)."""
    return duration(v)


def _num(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:.6g}"


def _flatten(d: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for k in sorted(d):
        v = d[k]
        if isinstance(v, dict) and v:
            out.extend(_flatten(v, f"{prefix}{k}."))
        else:
            out.append((f"{prefix}{k}", v))
    return out


def _table(rows: Sequence[Sequence[str]], indent: int = 0) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print(" " * indent + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
