"""Reading a console job back from the store: log entries for `console logs`, usage for the report."""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

from mlgoodput.console._sink import NAMESPACE
from mlgoodput.events import Kind
from mlgoodput.store import Columns, Store


def read_job(store: Store, job: str) -> Columns:
    return store.read(NAMESPACE, job).columns


def clients(cols: Columns) -> dict[int, dict[str, Any]]:
    """Process number -> its pid, hostname and command line, from the CLIENT events."""
    out: dict[int, dict[str, Any]] = {}
    for i in range(len(cols)):
        if cols.kinds[i] == Kind.CLIENT:
            a = cols.attr(i) or {}
            out.setdefault(cols.hosts[i], dict(a))
    return out


def log_entries(store: Store, job: str) -> list[dict[str, Any]]:
    """Every stored log line of `job`, oldest first: time, process, pid, level, logger, message, ..."""
    return log_entries_after(store, job, 0, {})[0]


def log_entries_after(
    store: Store, job: str, cursor: int, procs: dict[int, dict[str, Any]]
) -> tuple[list[dict[str, Any]], int]:
    """The log lines of `job` stored after `cursor`, and the next cursor (for following a job).

    `procs` (process number -> pid, hostname) is extended with the clients read meanwhile.
    """
    res = store.read(NAMESPACE, job, cursor)
    cols = res.columns
    for p, info in clients(cols).items():
        procs.setdefault(p, info)
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
        if a.get("exc"):
            e["exc"] = a["exc"]
        if a.get("ansi"):
            e["ansi"] = a["ansi"]
        rows.append(e)
    rows.sort(key=lambda r: r["time"])  # stable: one process's lines keep their order
    return rows, res.cursor
