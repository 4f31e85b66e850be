"""Reading a console job back from the store: log entries for `console logs`, usage for the report."""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from mlgoodput.console._sink import NAMESPACE
from mlgoodput.events import Kind
from mlgoodput.store import Columns, Store

#: The CLIENT event a server writes when it starts serving a job: where a new run begins.
SERVE = "serve"


def read_job(store: Store, job: str) -> Columns:
    return store.read(NAMESPACE, job).columns


def clients(cols: Columns) -> dict[int, dict[str, Any]]:
    """Process number -> its pid, hostname and command line, from the CLIENT events."""
    out: dict[int, dict[str, Any]] = {}
    for i in range(len(cols)):
        if cols.kinds[i] == Kind.CLIENT and cols.name(i) != SERVE:
            a = cols.attr(i) or {}
            out.setdefault(cols.hosts[i], dict(a))
    return out


def log_entries(store: Store, job: str) -> list[dict[str, Any]]:
    """Every stored log line of `job`, oldest first: time, process, pid, level, logger, message, ..."""
    return log_entries_after(store, job, 0, {})[0]


def log_entries_after(store: Store, job: str, cursor: int, state: dict[str, Any]) -> tuple[list[dict[str, Any]], int]:
    """The log lines of `job` stored after `cursor`, and the next cursor (for following a job).

    `state` carries what earlier reads learned (process numbers -> pid and hostname, the
    run count); pass the same dict each time. Each entry has `run`: 1 for the first serving
    of the job name, 2 for the next, ... (a job name used again is a new run).
    """
    res = store.read(NAMESPACE, job, cursor)
    cols = res.columns
    procs: dict[int, dict[str, Any]] = state.setdefault("procs", {})
    for p, info in clients(cols).items():
        procs.setdefault(p, info)
    run = int(state.get("run", 0))
    runs: list[tuple[float, int]] = []  # (time a run began, its number), in storage order
    for i in range(len(cols)):
        if cols.kinds[i] == Kind.CLIENT and cols.name(i) == SERVE:
            run += 1
            runs.append((cols.times[i], run))
    state["run"] = run
    first_run = int(state.get("first_run", 0))
    rows: list[dict[str, Any]] = []
    for i in range(len(cols)):
        if cols.kinds[i] != Kind.LOG:
            continue
        a = cols.attr(i) or {}
        levelno = int(cols.values[i])
        p = cols.hosts[i]
        info = procs.get(p, {})
        t = cols.times[i]
        e: dict[str, Any] = {
            "time": t,
            "iso_time": dt.datetime.fromtimestamp(t, dt.UTC).isoformat(timespec="milliseconds"),
            "process": p,
            "pid": info.get("pid"),
            "hostname": info.get("hostname"),
            "level": logging.getLevelName(levelno),
            "levelno": levelno,
            "logger": cols.name(i),
            "message": a.get("msg", ""),
            "file": a.get("file", ""),
            "line": a.get("line", 0),
        }
        e["run"] = _run_at(t, runs, first_run)
        if a.get("exc"):
            e["exc"] = a["exc"]
        if a.get("ansi"):
            e["ansi"] = a["ansi"]
        rows.append(e)
    rows.sort(key=lambda r: r["time"])  # stable: one process's lines keep their order
    if runs:
        state["first_run"] = runs[-1][1]
    elif rows and not first_run:
        state["first_run"] = 1
    return rows, res.cursor


def _run_at(t: float, runs: list[tuple[float, int]], before: int) -> int:
    """The run a line at time `t` belongs to: the last run that began at or before it."""
    n = before or 1
    for start, k in runs:
        if start <= t:
            n = k
    return n
