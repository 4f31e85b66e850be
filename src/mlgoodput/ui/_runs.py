"""The runs pages' data: every run of a store read incrementally (a store cursor per run),
its metrics reduced to the screen's width, and the points stored since a page's last look.

A run's listing row needs only the last value of each metric, so the listing keeps no
points; the runs whose pages are open (at most FULL_RUNS) keep every point in arrays.
"""

from __future__ import annotations

import io
import math
import threading
import time
from array import array
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from mlgoodput.diagnostics import Run
from mlgoodput.store import NO_STEP, Store
from mlgoodput.ui._reduce import minmax_points, numpy

NAMESPACE = "mlgoodput.run"  # the runs' streams (mlgoodput.diagnostics)
FULL_RUNS = 16  # runs whose points are kept (open pages, compared runs), least recently used out
MARKS = 512  # cursors a page may poll after (one per refresh of a run)
MAX_NEW = 4000  # new points of one series in a poll above which the page reloads the run instead


class Series:
    """One metric's points in arrival order: steps (NO_STEP: none), values, times."""

    __slots__ = ("by_step_sorted", "last_step", "steps", "times", "values")

    def __init__(self) -> None:
        self.steps: array[int] = array("q")
        self.values: array[float] = array("d")
        self.times: array[float] = array("d")
        self.by_step_sorted = True  # steps never went back (the usual case): no sort for the step axis
        self.last_step = NO_STEP

    def add(self, step: int | None, value: float, t: float) -> None:
        s = NO_STEP if step is None else step
        if s != NO_STEP:
            if s < self.last_step:
                self.by_step_sorted = False
            self.last_step = s
        self.steps.append(s)
        self.values.append(value)
        self.times.append(t)

    def __len__(self) -> int:
        return len(self.values)

    def step_axis(self, start: int = 0) -> tuple[list[float], list[float]]:
        """(steps, values) of the points from `start` that have a step, ordered by step."""
        idx = [i for i in range(start, len(self.steps)) if self.steps[i] != NO_STEP]
        if not self.by_step_sorted and start == 0:
            idx.sort(key=lambda i: (self.steps[i], self.times[i]))
        return [float(self.steps[i]) for i in idx], [self.values[i] for i in idx]

    def time_axis(self, start: int = 0) -> tuple[list[float], list[float]]:
        return list(self.times[start:]), list(self.values[start:])

    def reduced(self, width: int) -> dict[str, Any]:
        """The series for a chart `width` buckets wide (min and max of each), with its figures."""
        n = len(self)
        np = numpy() if n > 4 * width else None
        if np is not None:
            return self._reduced_fast(np, width)
        out: dict[str, Any] = {"count": n}
        tx, ty = minmax_points(self.times, self.values, width)
        out["time"] = {"x": tx, "y": _finite(ty)}
        sx, sy = self.step_axis()
        if sx:
            rx, ry = minmax_points(sx, sy, width)
            out["step"] = {"x": rx, "y": _finite(ry)}
        vals = [v for v in self.values if not math.isnan(v)]
        out["min"] = min(vals) if vals else None
        out["max"] = max(vals) if vals else None
        return self._last(out)

    def _last(self, out: dict[str, Any]) -> dict[str, Any]:
        n = len(self)
        out["last"] = _num(self.values[-1]) if n else None
        out["last_step"] = None if not n or self.steps[-1] == NO_STEP else self.steps[-1]
        return out

    def _reduced_fast(self, np: Any, width: int) -> dict[str, Any]:
        """`reduced` with numpy: no Python pass over the points."""
        y = np.frombuffer(self.values, dtype=np.float64)
        t = np.frombuffer(self.times, dtype=np.float64)
        st = np.frombuffer(self.steps, dtype=np.int64)
        out: dict[str, Any] = {"count": len(y)}
        tx, ty = _minmax(t, y, width)
        out["time"] = {"x": tx, "y": _finite(ty)}
        has = st != NO_STEP
        if has.any():
            sx, sy = st[has].astype(np.float64), y[has]
            if not self.by_step_sorted:
                order = np.lexsort((t[has], sx))
                sx, sy = sx[order], sy[order]
            rx, ry = _minmax(sx, sy, width)
            out["step"] = {"x": rx, "y": _finite(ry)}
        ok = y[~np.isnan(y)]
        out["min"] = float(ok.min()) if ok.size else None
        out["max"] = float(ok.max()) if ok.size else None
        return self._last(out)

    def since(self, start: int) -> dict[str, Any]:
        """The points from index `start` on, on both axes (unreduced)."""
        out: dict[str, Any] = {"count": len(self)}
        tx, ty = self.time_axis(start)
        out["time"] = {"x": tx, "y": _finite(ty)}
        sx, sy = self.step_axis(start)
        if sx:
            out["step"] = {"x": sx, "y": _finite(sy)}
        out["last"] = _num(self.values[-1]) if len(self) else None
        return out


def _minmax(xs: Any, ys: Any, width: int) -> tuple[list[float], list[float]]:
    """`minmax_points` (each bucket's min and max, in order) over numpy arrays: the same
    kind of line without a Python pass over the points."""
    np = numpy()
    n = len(ys)
    if np is None or n <= 2 * width:
        return minmax_points(list(xs), list(ys), width)
    per = -(-n // width)
    rows = -(-n // per)
    pad = np.full(rows * per, np.nan)
    pad[:n] = ys
    grid = pad.reshape(rows, per)
    nan = np.isnan(grid)
    lo = np.where(nan, np.inf, grid).argmin(axis=1)
    hi = np.where(nan, -np.inf, grid).argmax(axis=1)
    base = np.arange(rows) * per
    idx = np.unique(np.concatenate([base + lo, base + hi]))
    idx = idx[idx < n]
    return xs[idx].tolist(), ys[idx].tolist()


def _num(v: float) -> float | None:
    return None if math.isnan(v) or math.isinf(v) else v


def _finite(ys: list[float]) -> list[float | None]:
    return [_num(v) for v in ys]


class LiveRun(Run):
    """A run read a piece at a time from its stream. With `points`, every metric point is
    kept in a Series; without, only the last point of each metric (for the listing)."""

    __slots__ = ("cursor", "keep", "lock", "marks", "seen", "series", "sys_series")

    def __init__(self, name: str, *, points: bool) -> None:
        super().__init__(name)
        self.keep = points
        self.cursor = 0
        self.seen = -1  # the stream's event count at the last refresh (the listing's)
        self.series: dict[str, Series] = {}
        self.sys_series: dict[str, Series] = {}
        self.marks: OrderedDict[int, tuple[dict[str, int], dict[str, int]]] = OrderedDict()
        self.lock = threading.Lock()

    def _point(self, system: bool, name: str, step: int | None, value: float, t: float) -> None:
        if self.keep:
            d = self.sys_series if system else self.series
            s = d.get(name)
            if s is None:
                s = d[name] = Series()
            s.add(step, value, t)
        elif not system:
            self.metrics[name] = [(step, value, t)]  # the listing's last value only

    def refresh(self, store: Store) -> None:
        """Fold in what the store holds after this run's cursor; mark the new cursor."""
        res = store.read(NAMESPACE, self.name, self.cursor)
        for part in res.parts:
            self.add(part)
        if res.cursor != self.cursor or not self.marks:
            self.cursor = res.cursor
            if self.keep:
                self.marks[self.cursor] = (
                    {k: len(v) for k, v in self.series.items()},
                    {k: len(v) for k, v in self.sys_series.items()},
                )
                while len(self.marks) > MARKS:
                    self.marks.popitem(last=False)


def metric_order(names: list[str]) -> list[str]:
    """Metric names as the pages show them: loss first, then the other loss-like ones, then
    the rest alphabetically."""

    def key(n: str) -> tuple[int, str]:
        low = n.lower()
        return (0 if low == "loss" else 1 if "loss" in low else 2, low)

    return sorted(names, key=key)


class RunIndex:
    """The runs of one store, kept across requests (see the module docstring)."""

    def __init__(self, store: Store, *, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.clock = clock
        self._rows: dict[str, LiveRun] = {}
        self._full: OrderedDict[str, LiveRun] = OrderedDict()
        self._lock = threading.Lock()

    def _names(self) -> list[str]:
        return [j.job for j in self.store.jobs() if j.namespace == NAMESPACE]

    def resolve(self, name: str) -> str:
        """The full name of a run, or the unique run that starts with `name` (the name given
        to machinelearning_run); LookupError when none or several do."""
        names = self._names()
        if name in names:
            return name
        matches = [n for n in names if n.startswith(name)]
        if len(matches) == 1:
            return matches[0]
        if not matches:
            raise LookupError(f"no run named {name!r} in store {self.store.url}")
        raise LookupError(f"{name!r} matches several runs: {', '.join(sorted(matches))}")

    def listing(self) -> list[dict[str, Any]]:
        """One summary row per run (Run.summary), newest first, with its metric names."""
        now = self.clock()
        rows = []
        for info in self.store.jobs():
            if info.namespace != NAMESPACE:
                continue
            name = info.job
            with self._lock:
                r = self._rows.get(name)
                if r is None:
                    r = self._rows[name] = LiveRun(name, points=False)
            with r.lock:
                if r.seen != info.events:  # a run that stored nothing new is not read again
                    r.refresh(self.store)
                    r.seen = info.events
                row = r.summary(now)
            row["metrics"] = metric_order(list(row["last"]))
            rows.append(row)
        rows.sort(key=lambda x: -(x["first_time"] or 0.0))
        return rows

    def full(self, name: str) -> LiveRun:
        """The run with every point, refreshed now."""
        full = self.resolve(name)
        with self._lock:
            r = self._full.pop(full, None)
            if r is None:
                r = LiveRun(full, points=True)
            self._full[full] = r
            while len(self._full) > FULL_RUNS:
                self._full.popitem(last=False)
        with r.lock:
            r.refresh(self.store)
        return r

    def detail(self, name: str, width: int) -> dict[str, Any]:
        """A run's page: its description, status and every metric reduced to `width`."""
        r = self.full(name)
        now = self.clock()
        with r.lock:
            d: dict[str, Any] = {
                "name": r.name,
                "run_group": r.run_group,
                "configs": r.configs,
                "software": r.software,
                "system": {str(k): v for k, v in sorted(r.system.items())},
                "info": r.info,
                "provenance": r.provenance,
                "starts": r.starts,
                "ends": r.ends,
                "profiles": [dict(p, index=i) for i, p in enumerate(r.profiles)],
                "labels": r.labels,
                "entries": r.entries[-200:],
                "status": r.status(now),
                "duration_s": r.duration_s(now),
                "first_time": r.first_time,
                "last_time": r.last_time,
                "cursor": r.cursor,
                "now": now,
                "metric_order": metric_order(list(r.series)),
                "metrics": {k: s.reduced(width) for k, s in sorted(r.series.items())},
                "system_metrics": {k: s.reduced(width) for k, s in sorted(r.sys_series.items())},
            }
        return d

    def points(self, name: str, after: int) -> dict[str, Any]:
        """What the run stored after the cursor `after` (one a previous answer gave): the new
        points of each metric, unreduced. `reset` when the page should load the run again (an
        unknown cursor, or more new points than a poll should carry)."""
        r = self.full(name)
        now = self.clock()
        with r.lock:
            out: dict[str, Any] = {
                "cursor": r.cursor,
                "status": r.status(now),
                "duration_s": r.duration_s(now),
                "last_time": r.last_time,
                "now": now,
                "reset": False,
                "metrics": {},
                "system_metrics": {},
            }
            mark = r.marks.get(after)
            if mark is None:
                out["reset"] = True
                return out
            for key, series, seen in (("metrics", r.series, mark[0]), ("system_metrics", r.sys_series, mark[1])):
                for k, s in series.items():
                    start = seen.get(k, 0)
                    if len(s) - start > MAX_NEW:
                        out["reset"] = True
                        out["metrics"], out["system_metrics"] = {}, {}
                        return out
                    if len(s) > start:
                        out[key][k] = s.since(start)
        return out

    def csv(self, name: str, metrics: list[str]) -> tuple[str, bytes]:
        """(file name, CSV text) of every point of the run's metrics (all, or those named):
        metric, step, unix time, value."""
        r = self.full(name)
        buf = io.StringIO()
        buf.write("metric,step,time,value\n")
        with r.lock:
            for k in metric_order(list(r.series)):
                if metrics and k not in metrics:
                    continue
                s = r.series[k]
                q = _csv_text(k)
                for i in range(len(s)):
                    st = s.steps[i]
                    buf.write(f"{q},{'' if st == NO_STEP else st},{s.times[i]:.6f},{s.values[i]!r}\n")
        return f"{r.name}-metrics.csv", buf.getvalue().encode()


def _csv_text(s: str) -> str:
    """A CSV field: quoted when it holds a comma, a quote or a line break; a leading `=`,
    `+`, `-` or `@` gets a quote mark so a spreadsheet does not run it as a formula."""
    if s[:1] in ("=", "+", "-", "@"):
        s = "'" + s
    if any(c in s for c in ',"\n\r'):
        return '"' + s.replace('"', '""') + '"'
    return s
