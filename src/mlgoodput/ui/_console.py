"""A console job (`mlgoodput.console` streams) as the console page sees it: log lines,
progress bars, usage samples and checkpoint markers, read incrementally from the store."""

from __future__ import annotations

import logging
import threading
from typing import Any

from mlgoodput.events import Kind
from mlgoodput.store import Store

NAMESPACE = "mlgoodput.console"  # where the console server stores its records
MAX_LINES = 1000


class ConsoleView:
    """Everything stored for one console job so far; `refresh` reads only what is new."""

    def __init__(self, store: Store, job: str) -> None:
        self.store = store
        self.job = job
        self.cursor = 0
        self.lines: list[dict[str, Any]] = []
        self.bars: dict[str, dict[str, Any]] = {}
        self.usage: list[tuple[float, int, float, float]] = []  # time, process, cpu %, rss bytes
        self.marks: list[dict[str, Any]] = []
        self.procs: dict[int, dict[str, Any]] = {}
        self.lock = threading.Lock()

    def refresh(self) -> None:
        with self.lock:
            res = self.store.read(NAMESPACE, self.job, self.cursor)
            for cols in res.parts:
                for i in range(len(cols)):
                    k = cols.kinds[i]
                    t = cols.times[i]
                    p = cols.hosts[i]
                    if k == Kind.LOG:
                        a = cols.attr(i) or {}
                        levelno = int(cols.values[i])
                        line = {
                            "seq": len(self.lines),
                            "time": t,
                            "process": p,
                            "level": logging.getLevelName(levelno),
                            "levelno": levelno,
                            "logger": cols.name(i) or "",
                            "message": str(a.get("msg", "")),
                        }
                        if a.get("exc"):
                            line["exc"] = str(a["exc"])
                        self.lines.append(line)
                    elif k == Kind.PROGRESS:
                        a = cols.attr(i) or {}
                        bar = cols.name(i) or "?"
                        self.bars[f"{p}/{bar}"] = {
                            "process": p,
                            "bar": bar,
                            "desc": str(a.get("desc") or ""),
                            "total": a.get("total"),
                            "completed": a.get("completed"),
                            "done": bool(a.get("done")),
                            "time": t,
                        }
                    elif k == Kind.USAGE:
                        a = cols.attr(i) or {}
                        self.usage.append((t, p, float(a.get("cpu", 0.0)), float(a.get("rss", 0))))
                    elif k == Kind.USAGE_CHECKPOINT:
                        s = cols.steps[i]
                        self.marks.append({"time": t, "name": cols.name(i) or "", "step": None if s < 0 else s})
                    elif k == Kind.CLIENT:
                        self.procs.setdefault(p, dict(cols.attr(i) or {}))
            self.cursor = res.cursor
            self.lines.sort(key=lambda r: r["time"])
            for n, line in enumerate(self.lines):
                line["seq"] = n

    def logs(
        self, after: int = -1, process: int | None = None, min_level: int = 0, text: str = "", limit: int = MAX_LINES
    ) -> dict[str, Any]:
        """Lines after sequence number `after` that pass the filters (the newest `limit`)."""
        self.refresh()
        needle = text.lower()
        out = [
            ln
            for ln in self.lines[after + 1 :]
            if (process is None or ln["process"] == process)
            and ln["levelno"] >= min_level
            and (not needle or needle in ln["message"].lower() or needle in ln["logger"].lower())
        ]
        return {
            "job": self.job,
            "lines": out[-limit:],
            "next": len(self.lines) - 1,
            "processes": sorted({ln["process"] for ln in self.lines} | set(self.procs)),
            "bars": sorted(self.bars.values(), key=lambda b: (b["process"], b["bar"])),
            "truncated": max(0, len(out) - limit),
        }
