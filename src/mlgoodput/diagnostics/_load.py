"""Reading runs back from the store: `load_run` and the listing behind `mlgoodput runs`."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

from mlgoodput import _env
from mlgoodput.diagnostics._sink import NAMESPACE
from mlgoodput.events import Kind
from mlgoodput.store import NO_STEP, Columns, Store, open_store

Point = tuple[int | None, float, float]  # (step or None, value, UNIX time)
_METRIC, _SYSTEM_METRIC, _ALIVE = int(Kind.METRIC), int(Kind.SYSTEM_METRIC), int(Kind.ALIVE)


#: a run's word for itself: running, finished, failed, crashed (no end and no sign of life
#: for the dead limit), stale (no end, silent, and recorded before runs kept signs of life)
STATUSES = ("running", "finished", "failed", "crashed", "stale")


@dataclass(slots=True)
class Run:
    """A run as stored: configs, metric series, system metrics and profile sessions.

    `add` folds more of the run's events in (the UI reads a live run a piece at a time).
    """

    name: str
    run_group: str | None = None
    configs: dict[str, Any] = field(default_factory=dict)
    software: dict[str, Any] = field(default_factory=dict)
    system: dict[int, dict[str, Any]] = field(default_factory=dict)  # per process index
    info: dict[str, Any] = field(default_factory=dict)  # the first RUN_START's description
    starts: list[dict[str, Any]] = field(default_factory=list)  # one per process start
    ends: list[dict[str, Any]] = field(default_factory=list)  # one per process end: time, host, phase
    provenance: dict[str, Any] = field(default_factory=dict)  # the first start's (git, command, user...)
    metrics: dict[str, list[Point]] = field(default_factory=dict)
    system_metrics: dict[str, list[Point]] = field(default_factory=dict)
    profiles: list[dict[str, Any]] = field(default_factory=list)
    labels: dict[str, dict[str, str]] = field(default_factory=dict)  # latest labels per metric
    entries: list[dict[str, Any]] = field(default_factory=list)  # string/dict values of metrics.record
    first_time: float | None = None
    last_time: float | None = None  # of any event, signs of life included
    alive_s: float | None = None  # the writers' sign-of-life period (None: an older run)
    metric_values: int = 0
    _sessions: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON: what `mlgoodput runs show NAME --json` prints."""
        return {
            "name": self.name,
            "run_group": self.run_group,
            "configs": self.configs,
            "software": self.software,
            "system": {str(k): v for k, v in sorted(self.system.items())},
            "info": self.info,
            "provenance": self.provenance,
            "starts": self.starts,
            "ends": self.ends,
            "metrics": {k: [list(p) for p in v] for k, v in self.metrics.items()},
            "system_metrics": {k: [list(p) for p in v] for k, v in self.system_metrics.items()},
            "profiles": self.profiles,
            "labels": self.labels,
            "entries": self.entries,
        }

    # -- status ---------------------------------------------------------------------------
    def status(self, now: float) -> str:
        """One of STATUSES at UNIX time `now`: finished (or failed) once every process that
        started has ended; else running while its writers show signs of life."""
        last_start: dict[int, float] = {}
        for s in self.starts:
            last_start[s["host"]] = max(last_start.get(s["host"], s["time"]), s["time"])
        ended: dict[int, dict[str, Any]] = {}
        for e in self.ends:
            if e["host"] in last_start and e["time"] >= last_start[e["host"]]:
                ended[e["host"]] = e
        if last_start and len(ended) == len(last_start):
            return "failed" if any(e["phase"] == "FAILED" for e in ended.values()) else "finished"
        silent = now - (self.last_time if self.last_time is not None else now)
        if self.alive_s is None:
            return "running" if silent <= _env.DEAD_AFTER_S else "stale"
        return "running" if silent <= _env.dead_after_s(self.alive_s) else "crashed"

    def end_time(self) -> float | None:
        """When the run ended (its last process end), None while it has not."""
        return max((e["time"] for e in self.ends), default=None)

    def duration_s(self, now: float) -> float | None:
        """From the first start to the end, to the last event (crashed), or to `now` (running)."""
        if self.first_time is None:
            return None
        st = self.status(now)
        if st in ("finished", "failed"):
            stop = self.end_time()
        elif st == "running":
            stop = now
        else:
            stop = self.last_time
        return None if stop is None else max(0.0, stop - (self.starts[0]["time"] if self.starts else self.first_time))

    # -- reading ---------------------------------------------------------------------------
    def _point(self, system: bool, name: str, step: int | None, value: float, t: float) -> None:
        (self.system_metrics if system else self.metrics).setdefault(name, []).append((step, value, t))

    def add(self, cols: Columns) -> None:
        """Fold the events of `cols` (the run's stream, in storage order) into the run."""
        n = len(cols)
        if not n:
            return
        times = cols.times
        t_lo, t_hi = min(times), max(times)
        self.first_time = t_lo if self.first_time is None else min(self.first_time, t_lo)
        self.last_time = t_hi if self.last_time is None else max(self.last_time, t_hi)
        kinds = cols.kinds
        steps, values, hosts = cols.steps, cols.values, cols.hosts
        names = cols.names
        point = self._point
        for i in range(n):
            k = kinds[i]
            if k in (_METRIC, _SYSTEM_METRIC):
                s = steps[i]
                name = (names[i] if names is not None else None) or "?"
                point(k == _SYSTEM_METRIC, name, None if s == NO_STEP else s, values[i], times[i])
                if k == _METRIC:
                    self.metric_values += 1
                    if cols.attrs is not None:
                        lab = (cols.attrs[i] or {}).get("labels")
                        if lab:
                            self.labels[name] = lab
            elif k == _ALIVE:
                continue
            else:
                self._other(cols, i, k, times[i], hosts[i])
        self.profiles = sorted(self._sessions.values(), key=lambda p: p["start"])

    def _other(self, cols: Columns, i: int, k: int, t: float, host: int) -> None:
        if k == Kind.LOG:
            a = cols.attr(i) or {}
            if "namespace" in a:
                self.entries.append(
                    {
                        "time": t,
                        "host": host,
                        "namespace": a.get("namespace"),
                        "step": a.get("step"),
                        "body": a.get("body"),
                        "labels": a.get("labels") or {},
                    }
                )
        elif k == Kind.RUN_START:
            a = cols.attr(i) or {}
            if not self.info:
                self.info = {
                    x: a.get(x) for x in ("base_name", "project", "region", "environment", "workload_id", "profile_dir")
                }
                self.run_group = a.get("run_group")
                self.provenance = a.get("provenance") or {}
            if isinstance(a.get("alive_s"), (int, float)):
                self.alive_s = float(a["alive_s"])
            self.configs.update(a.get("configs") or {})
            self.software = a.get("software") or self.software
            self.system[host] = a.get("system") or {}
            self.starts.append(
                {"time": t, "host": host, "on_demand": a.get("on_demand"), "pid": (a.get("system") or {}).get("pid")}
            )
        elif k == Kind.RUN_CONFIG:
            a = cols.attr(i) or {}
            self.configs.update(a.get("configs") or {})
            if a.get("run_phase"):
                self.ends.append({"time": t, "host": host, "phase": a["run_phase"]})
        elif k == Kind.PROFILE_START or k == Kind.PROFILE_STOP:
            self._profile(cols, i, k, t, host)

    def _profile(self, cols: Columns, i: int, k: int, t: float, host: int) -> None:
        a = cols.attr(i) or {}
        sid = a.get("session") or cols.name(i) or "?"
        p = self._sessions.get(sid)
        if p is None:
            p = self._sessions[sid] = {
                "session": sid,
                "path": a.get("path"),
                "trigger": a.get("trigger"),
                "start": t,
                "stop": None,
                "hosts": [],
                "files": [],
                "local_paths": [],
                "duration_s": None,
                "complete": False,
                "open": 0,
            }
        if k == Kind.PROFILE_START:
            p["start"] = min(p["start"], t)
            p["open"] += 1
            if host not in p["hosts"]:
                p["hosts"].append(host)
                p["hosts"].sort()
        else:
            p["open"] -= 1
            p["stop"] = t if p["stop"] is None else max(p["stop"], t)
            p["files"].extend(a.get("files") or [])
            if isinstance(a.get("local_path"), str) and a["local_path"] not in p["local_paths"]:
                p["local_paths"].append(a["local_path"])  # a remote run's trace, waiting for its upload
            v = cols.values[i]
            if not math.isnan(v):
                p["duration_s"] = v if p["duration_s"] is None else max(p["duration_s"], v)
        p["complete"] = p["open"] <= 0

    def summary(self, now: float) -> dict[str, Any]:
        """A row of `mlgoodput runs` and the runs page: status, duration, last metric values,
        configs and where it came from."""
        git = self.provenance.get("git") or {}
        return {
            "name": self.name,
            "run_group": self.run_group,
            "status": self.status(now),
            "first_time": self.first_time,
            "last_time": self.last_time,
            "end_time": self.end_time(),
            "duration_s": self.duration_s(now),
            "processes": len({s["host"] for s in self.starts}),
            "metric_values": self.metric_values,
            "profile_starts": sum(len(p["hosts"]) for p in self.profiles),
            "last": {k: _last(v) for k, v in sorted(self.metrics.items())},
            "configs": self.configs,
            "framework": self.software.get("framework"),
            "git_commit": git.get("commit"),
            "git_dirty": git.get("dirty"),
            "user": self.provenance.get("user"),
            "host": self.provenance.get("host"),
        }


def _last(pts: list[Point]) -> dict[str, Any]:
    """The last value of a series (by step when it has steps) and its step."""
    s, v, t = pts[-1]
    return {"value": None if math.isnan(v) else v, "step": s, "time": t}


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
    run = Run(full)
    for part in st.read(NAMESPACE, full).parts:
        run.add(part)
    return run


def list_runs(store: Any = None, now: float | None = None) -> list[dict[str, Any]]:
    """One summary per run in the store (`Run.summary`), oldest first; events: how many."""
    st = open_store(store)
    t = time.time() if now is None else now
    out = []
    for j in st.jobs():
        if j.namespace != NAMESPACE:
            continue
        run = Run(j.job)
        for part in st.read(NAMESPACE, j.job).parts:
            run.add(part)
        row = run.summary(t)
        row["events"] = j.events
        out.append(row)
    return sorted(out, key=lambda r: r["first_time"] or 0.0)
