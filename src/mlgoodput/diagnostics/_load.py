"""Reading runs back from the store: `load_run` and the listing behind `mlgoodput runs`."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from mlgoodput.diagnostics._sink import NAMESPACE
from mlgoodput.events import Kind
from mlgoodput.store import NO_STEP, Store, open_store

Point = tuple[int | None, float, float]  # (step or None, value, UNIX time)


@dataclass(slots=True)
class Run:
    """A run as stored: configs, metric series, system metrics and profile sessions."""

    name: str
    run_group: str | None = None
    configs: dict[str, Any] = field(default_factory=dict)
    software: dict[str, Any] = field(default_factory=dict)
    system: dict[int, dict[str, Any]] = field(default_factory=dict)  # per process index
    info: dict[str, Any] = field(default_factory=dict)  # the first RUN_START's description
    starts: list[dict[str, Any]] = field(default_factory=list)  # one per process start
    metrics: dict[str, list[Point]] = field(default_factory=dict)
    system_metrics: dict[str, list[Point]] = field(default_factory=dict)
    profiles: list[dict[str, Any]] = field(default_factory=list)
    labels: dict[str, dict[str, str]] = field(default_factory=dict)  # latest labels per metric
    entries: list[dict[str, Any]] = field(default_factory=list)  # string/dict values of metrics.record

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON: what `mlgoodput runs show NAME --json` prints."""
        return {
            "name": self.name,
            "run_group": self.run_group,
            "configs": self.configs,
            "software": self.software,
            "system": {str(k): v for k, v in sorted(self.system.items())},
            "starts": self.starts,
            "metrics": {k: [list(p) for p in v] for k, v in self.metrics.items()},
            "system_metrics": {k: [list(p) for p in v] for k, v in self.system_metrics.items()},
            "profiles": self.profiles,
            "labels": self.labels,
            "entries": self.entries,
        }


def resolve_run_name(st: Store, name: str) -> str:
    """An exact run name, or a unique prefix of one (the name given to machinelearning_run)."""
    names = [j.job for j in st.jobs() if j.namespace == NAMESPACE]
    if name in names:
        return name
    matches = [n for n in names if n.startswith(name + "-") or n.startswith(name)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise LookupError(f"no run named {name!r} in store {st.url}")
    raise LookupError(f"{name!r} matches several runs: {', '.join(sorted(matches))}")


def load_run(name: str, store: Any = None) -> Run:
    """Load a run (by full name or unique prefix) from the store (default: $MLGOODPUT_STORE)."""
    st = open_store(store)
    full = resolve_run_name(st, name)
    cols = st.read(NAMESPACE, full).columns
    run = Run(full)
    sessions: dict[str, dict[str, Any]] = {}
    for i in range(len(cols)):
        k = cols.kinds[i]
        t = cols.times[i]
        if k == Kind.METRIC or k == Kind.SYSTEM_METRIC:
            s = cols.steps[i]
            v = cols.values[i]
            n = cols.name(i) or "?"
            series = (run.metrics if k == Kind.METRIC else run.system_metrics).setdefault(n, [])
            series.append((None if s == NO_STEP else s, v, t))
            if k == Kind.METRIC:
                lab = (cols.attr(i) or {}).get("labels")
                if lab:
                    run.labels[n] = lab
        elif k == Kind.LOG:
            a = cols.attr(i) or {}
            if "namespace" in a:
                run.entries.append(
                    {
                        "time": t,
                        "host": cols.hosts[i],
                        "namespace": a.get("namespace"),
                        "step": a.get("step"),
                        "body": a.get("body"),
                        "labels": a.get("labels") or {},
                    }
                )
        elif k == Kind.RUN_START:
            a = cols.attr(i) or {}
            host = cols.hosts[i]
            if not run.info:
                run.info = {
                    x: a.get(x) for x in ("base_name", "project", "region", "environment", "workload_id", "profile_dir")
                }
                run.run_group = a.get("run_group")
            run.configs.update(a.get("configs") or {})
            run.software = a.get("software") or run.software
            run.system[host] = a.get("system") or {}
            run.starts.append(
                {"time": t, "host": host, "on_demand": a.get("on_demand"), "pid": (a.get("system") or {}).get("pid")}
            )
        elif k == Kind.RUN_CONFIG:
            run.configs.update((cols.attr(i) or {}).get("configs") or {})
        elif k == Kind.PROFILE_START or k == Kind.PROFILE_STOP:
            a = cols.attr(i) or {}
            sid = a.get("session") or cols.name(i) or "?"
            p = sessions.setdefault(
                sid,
                {
                    "session": sid,
                    "path": a.get("path"),
                    "trigger": a.get("trigger"),
                    "start": t,
                    "stop": None,
                    "hosts": [],
                    "files": [],
                    "local_paths": [],
                    "duration_s": None,
                    "_open": 0,
                },
            )
            host = cols.hosts[i]
            if k == Kind.PROFILE_START:
                p["start"] = min(p["start"], t)
                p["_open"] += 1
                if host not in p["hosts"]:
                    p["hosts"].append(host)
            else:
                p["_open"] -= 1
                p["stop"] = t if p["stop"] is None else max(p["stop"], t)
                p["files"].extend(a.get("files") or [])
                if isinstance(a.get("local_path"), str) and a["local_path"] not in p["local_paths"]:
                    p["local_paths"].append(a["local_path"])  # a remote run's trace, waiting for its upload
                v = cols.values[i]
                if not math.isnan(v):
                    p["duration_s"] = v if p["duration_s"] is None else max(p["duration_s"], v)
    for p in sessions.values():
        p["hosts"].sort()
        p["complete"] = p.pop("_open") <= 0
    run.profiles = sorted(sessions.values(), key=lambda p: p["start"])
    return run


def list_runs(store: Any = None) -> list[dict[str, Any]]:
    """One summary per run in the store: name, group, first/last time, events, processes."""
    st = open_store(store)
    out = []
    for j in st.jobs():
        if j.namespace != NAMESPACE:
            continue
        cols = st.read(NAMESPACE, j.job).columns
        group = None
        hosts: set[int] = set()
        metrics = profiles = 0
        for i in range(len(cols)):
            k = cols.kinds[i]
            if k == Kind.RUN_START:
                hosts.add(cols.hosts[i])
                if group is None:
                    group = (cols.attr(i) or {}).get("run_group")
            elif k == Kind.METRIC:
                metrics += 1
            elif k == Kind.PROFILE_START:
                profiles += 1
        out.append(
            {
                "name": j.job,
                "run_group": group,
                "first_time": j.first_time,
                "last_time": j.last_time,
                "events": j.events,
                "processes": len(hosts),
                "metric_values": metrics,
                "profile_starts": profiles,
            }
        )
    return sorted(out, key=lambda r: r["first_time"])
