"""The JSON API behind the pages: one object per store that keeps a view per job (its
calculator and series) and answers `/api/...` paths with plain dicts."""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote

from mlgoodput._recovery import LOSS_NAMESPACE
from mlgoodput._worker import BackgroundWorker
from mlgoodput.store import Store
from mlgoodput.ui import _charts
from mlgoodput.ui._console import NAMESPACE as CONSOLE_NS
from mlgoodput.ui._console import ConsoleView
from mlgoodput.ui._fleet import FleetView, parse_query
from mlgoodput.ui._job import JobView
from mlgoodput.ui._pieces import PieceWorker
from mlgoodput.ui._reduce import minmax_points, numpy
from mlgoodput.ui._runs import RunIndex

RESERVED_PREFIX = "mlgoodput."
RUNS_NS = "mlgoodput.run"
#: what `machinelearning_run` appends to a run's name: a workload id's hash, or a time and a random part
RUN_SUFFIX = re.compile(r"-(?:[0-9a-f]{8}|[0-9]{8}-[0-9]{6}-[0-9a-f]{4})$")

#: report keys -> the label the pages show (the `report` command's wording)
BUCKET_LABELS = {
    "tpu_initialization": "accelerator initialization",
    "training_prep": "training preparation",
    "program_startup": "program startup (compilation)",
    "data_loading_sync": "data loading (blocking)",
    "unproductive_checkpoint_save_time": "checkpoint save",
    "unproductive_checkpoint_restore_time": "checkpoint restore",
    "wasted_progress_from_disruption": "wasted progress (disruption)",
    "infrastructure_recovery_from_disruption": "infrastructure recovery (disruption)",
    "custom_badput_events": "custom",
    "elastic_slice_down": "elastic: waiting, slice down",
    "elastic_scale_up": "elastic: waiting, scale up",
    "elastic_reinitialization": "elastic: re-initialization",
    "stall": "stall (hang, straggler)",
    "other": "other (idle, teardown, gaps)",
}


class ApiError(Exception):
    """A request the API refuses: an HTTP status and one line saying why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _int(q: Mapping[str, list[str]], name: str, default: int, lo: int, hi: int) -> int:
    raw = q.get(name, [None])[0]
    if raw is None or raw == "":
        return default
    try:
        v = int(raw)
    except ValueError:
        raise ApiError(400, f"{name} must be an integer, got {raw!r}") from None
    return min(hi, max(lo, v))


def _float(q: Mapping[str, list[str]], name: str) -> float | None:
    raw = q.get(name, [None])[0]
    if raw is None or raw == "":
        return None
    try:
        v = float(raw)
    except ValueError:
        raise ApiError(400, f"{name} must be a number, got {raw!r}") from None
    if not math.isfinite(v) or v <= 0:
        raise ApiError(400, f"{name} must be a positive number, got {raw!r}")
    return v


CLOSE_S = 1.0  # how long closing the API waits for a job read in progress
QUIET_S = 0.5  # background work on a job waits up to this long for its page's requests to stop


class _Warmer(BackgroundWorker):
    """Reads the jobs handed to it in the background (so that pages open on warm views) and
    saves their series; a job whose read fails is read again by the next request."""

    after_fork = "stop"  # the server's work belongs to the server's process

    def __init__(self, api: Api) -> None:
        super().__init__("mlgoodput-ui-warm")
        self._api = api

    def _handle(self, items: list[Any]) -> None:
        for key in items:
            self._api._warm_one(key)


class Api:
    """Views of one store's jobs, runs and console streams, kept across requests."""

    def __init__(self, store: Store, *, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.clock = clock
        self._views: dict[tuple[str, str], JobView] = {}
        self._ready: set[tuple[str, str]] = set()
        self._consoles: dict[str, ConsoleView] = {}
        self._lost: dict[str, tuple[int, int]] = {}  # console job -> (lost stream cursor, records lost)
        self._lock = threading.Lock()
        self._warm = _Warmer(self)
        self._pieces = PieceWorker()  # goodput over time of this API's job views
        self._due: set[tuple[str, str]] = set()  # jobs with background work, for after_request
        self._runs = RunIndex(store, clock=clock)
        self._fleet = FleetView(store, clock=clock)  # one for the server's life: repeat queries are cheap
        numpy()  # loaded with the server (when installed), not by the first long job's page

    def close(self) -> None:
        self._warm.close(CLOSE_S)
        self._pieces.close(CLOSE_S)

    def keep_all(self) -> int:
        """Save every view's series that grew enough since their last save (ui/_saved.py) now,
        instead of waiting for the background thread; returns how many were saved."""
        with self._lock:
            views = list(self._views.values())
        saved = 0
        for v in views:
            try:
                saved += v.keep()
                v.succeeded("save")
            except Exception as e:  # a store that fails now: the next growth tries again
                v.failed("save", e)
        return saved

    def warm_all(self) -> None:
        """Read every job of the store in the background now (a long job's first read is its
        slowest), so that pages open on warm views."""
        try:
            self.jobs()
        except Exception:  # a store that fails now: the pages retry
            pass

    # -- views -----------------------------------------------------------------------------
    def _view(self, logger: str, job: str) -> JobView:
        key = (logger, job)
        with self._lock:
            v = self._views.get(key)
            if v is None:
                v = self._views[key] = JobView(self.store, job, logger, clock=self.clock, piece_worker=self._pieces)
        return v

    def _warm_one(self, key: tuple[str, str]) -> None:
        """Read a job (its first read is its slowest) and save its series when they grew."""
        keep_only = key in self._ready
        v = self._view(*key)
        step = "read"
        try:
            if not keep_only:
                v.report()
                v.succeeded(step)
            self._quiet(v)  # a page is open: its requests go first (the GIL is shared)
            step = "stragglers"
            v.lag_now()  # a long job's straggler analysis, when its page asked for it
            v.succeeded(step)
            step = "save"
            v.keep()  # the UI's series saved for the next server start, when they grew enough
            v.succeeded(step)
        except Exception as e:  # a store that fails now is retried by the next request: counted and shown
            v.failed(step, e)
        self._ready.add(key)

    def prefetch(self, job: str, logger: str | None) -> None:
        """Start reading a job in the background (its page is being loaded: the page's own
        requests for the job then find the read under way); nothing for an unknown name."""
        try:
            names = [j.namespace for j in self._streams() if j.job == job]
        except Exception:  # a store that fails now: the page's requests say so
            return
        if logger is None and len(names) == 1:
            logger = names[0]
        if logger is None or logger not in names or (logger, job) in self._ready:
            return
        self._view(logger, job)
        self._warm.submit((logger, job))

    def _quiet(self, v: JobView) -> None:
        """Wait (at most QUIET_S) until no request has asked for the job for QUIET_S: the
        charts a page is loading are drawn before the job's background work takes the CPU."""
        deadline = time.monotonic() + QUIET_S
        while not self._warm.closed:
            now = time.monotonic()
            wait = min(deadline, v.asked_at + QUIET_S) - now
            if wait <= 0:
                return
            time.sleep(wait)

    def _later(self, key: tuple[str, str]) -> None:
        """Background work for a job (its straggler analysis, saves), started once the response
        that found it due has gone out (`after_request`): the page is not kept waiting by it."""
        with self._lock:
            self._due.add(key)

    def after_request(self) -> None:
        """Hand the background work the last requests found due to the background worker."""
        with self._lock:
            due, self._due = self._due, set()
        for key in sorted(due):
            self._warm.submit(key)

    def _streams(self) -> list[Any]:
        return [j for j in self.store.jobs() if not j.namespace.startswith(RESERVED_PREFIX)]

    def view(self, job: str, logger: str | None) -> JobView:
        """The view of a job (by name; `logger` when the store holds it under several)."""
        names = [j.namespace for j in self._streams() if j.job == job]
        if logger:
            if logger not in names:
                raise ApiError(404, f"no job {job!r} under logger {logger!r}")
        elif len(names) == 1:
            logger = names[0]
        elif not names:
            raise ApiError(404, f"no job named {job!r} in this store")
        else:
            raise ApiError(409, f"job {job!r} is recorded under several loggers {sorted(names)}: add ?logger=")
        v = self._view(logger, job)
        v.asked_at = time.monotonic()
        v.report()
        if v.keep_due():
            self._later((logger, job))  # saved off the request's path
        self._ready.add((logger, job))
        return v

    def links(self, name: str) -> dict[str, str | None]:
        """The pages of one training that the store holds: its goodput job, its ML run (the
        newest run named `name` plus the suffix `machinelearning_run` adds) and its console
        job; `name` may be any of the three. None where the store holds no such page."""
        infos = self.store.jobs()
        runs = {j.job: j.last_time for j in infos if j.namespace == RUNS_NS}
        base = RUN_SUFFIX.sub("", name) if name in runs else name
        jobs = {j.job for j in infos if not j.namespace.startswith(RESERVED_PREFIX)}
        consoles = {j.job for j in infos if j.namespace == CONSOLE_NS}
        mine = [r for r in runs if r == base or (r.startswith(base) and RUN_SUFFIX.fullmatch(r[len(base) :]))]
        run = name if name in runs else max(mine, key=lambda r: (runs[r] or 0, r), default=None)
        job = base if base in jobs else name if name in jobs else None
        console = base if base in consoles else name if name in consoles else None

        def page(kind: str, n: str | None) -> str | None:
            return None if n is None else f"/{kind}/{quote(n, safe='')}"

        return {"job": page("jobs", job), "run": page("runs", run), "console": page("console", console)}

    # -- endpoints -------------------------------------------------------------------------
    def jobs(self) -> dict[str, Any]:
        rows = []
        loading = 0
        for info in self._streams():
            key = (info.namespace, info.job)
            if key in self._ready:
                rows.append(self._view(*key).summary())
            else:
                if key not in self._views:
                    self._view(*key)
                    self._warm.submit(key)
                loading += 1
                rows.append(
                    {
                        "job": info.job,
                        "logger": info.namespace,
                        "status": "loading",
                        "start": info.first_time,
                        "end": info.last_time,
                        "wall_s": None,
                        "goodput_pct": None,
                        "last_step": None,
                        "attempts": None,
                        "hosts": None,
                        "events": info.events,
                        "disruptions": None,
                        "last_event": info.last_time,
                    }
                )
        rows.sort(key=lambda r: -(r["start"] or 0))
        return {"jobs": rows, "loading": loading, "store": self.store.url, "now": self.clock(), "labels": BUCKET_LABELS}

    def job(self, job: str, q: Mapping[str, list[str]]) -> dict[str, Any]:
        v = self.view(job, q.get("logger", [None])[0])
        d = dict(v.detail())
        if d["lag_pending"]:
            self._later((v.logger, v.job))
        d["labels"] = BUCKET_LABELS
        d["now"] = self.clock()
        d["links"] = self.links(job)
        d["errors"] = v.errors()  # background work that failed (the page shows it)
        return d

    def timeline(self, job: str, q: Mapping[str, list[str]]) -> dict[str, Any]:
        v = self.view(job, q.get("logger", [None])[0])
        return {**_charts.timeline(v, _int(q, "width", 1200, 50, 4000)), "labels": BUCKET_LABELS}

    def steps(self, job: str, q: Mapping[str, list[str]]) -> dict[str, Any]:
        v = self.view(job, q.get("logger", [None])[0])
        host = q.get("host", [None])[0]
        h = None if host in (None, "") else _int(q, "host", 0, 0, 1 << 30)
        return _charts.steps(v, _int(q, "width", 1200, 50, 4000), h)

    def goodput(self, job: str, q: Mapping[str, list[str]]) -> dict[str, Any]:
        v = self.view(job, q.get("logger", [None])[0])
        g = _charts.goodput_series(v, _int(q, "points", 200, 4, 2000), _float(q, "window"))
        return {**g, "errors": v.errors()}  # a computation that failed is shown, not an empty chart

    def compare(self, q: Mapping[str, list[str]]) -> dict[str, Any]:
        names = [n for n in q.get("job", []) if n]
        if len(names) > 12:
            raise ApiError(400, f"compare at most 12 jobs, got {len(names)}")
        out = []
        for name in names:
            logger = None
            if "@" in name:  # JOB@LOGGER picks one of several loggers
                name, logger = name.rsplit("@", 1)
            v = self.view(name, logger)
            r = v.report()
            st = _charts.steps(v, 300)
            row = v.summary()
            row["report"] = r.to_dict()
            row["step"] = {"x": st["x"], "mean": st["mean"], "ideal_s": st["ideal_s"]}
            out.append(row)
        return {"jobs": out, "labels": BUCKET_LABELS}

    # -- fleet -----------------------------------------------------------------------------
    def fleet(self, q: Mapping[str, list[str]]) -> dict[str, Any]:
        """The fleet page's report (`mlgoodput fleet --json`'s keys), the bucket words and the time."""
        try:
            query = parse_query(q, self.clock())
        except ValueError as e:
            raise ApiError(400, str(e)) from None
        return {**self._fleet.answer(query), "labels": BUCKET_LABELS, "now": self.clock(), "store": self.store.url}

    # -- runs ------------------------------------------------------------------------------
    def runs(self) -> dict[str, Any]:
        return {"runs": self._runs.listing(), "now": self.clock()}

    def run(self, name: str, q: Mapping[str, list[str]]) -> dict[str, Any]:
        try:
            d = self._runs.detail(name, _int(q, "width", 1000, 50, 4000))
        except LookupError as e:
            raise ApiError(404, str(e)) from None
        d["links"] = self.links(d["name"])
        return d

    def run_points(self, name: str, q: Mapping[str, list[str]]) -> dict[str, Any]:
        """The points a run stored after `?after=CURSOR` (the cursor of an earlier answer)."""
        try:
            return self._runs.points(name, _int(q, "after", 0, 0, 1 << 62))
        except LookupError as e:
            raise ApiError(404, str(e)) from None

    def run_csv(self, name: str, q: Mapping[str, list[str]]) -> tuple[str, bytes]:
        """(file name, CSV) of a run's metric points (`?metric=` names some; all by default)."""
        try:
            return self._runs.csv(name, [m for m in q.get("metric", []) if m])
        except LookupError as e:
            raise ApiError(404, str(e)) from None

    def profile_entry(self, name: str, session: int, index: int) -> tuple[dict[str, Any], object]:
        """A profile session of a run as the store lists it, and its file entry `index`: what
        the server may serve is decided by `ProfileFiles`, never by the store."""
        from mlgoodput.diagnostics import load_run

        try:
            run = load_run(name, store=self.store)
            sess = run.profiles[session] if session >= 0 else None
            if sess is None or index < 0:
                raise IndexError(index)
            return sess, sess["files"][index]
        except (LookupError, IndexError, KeyError, TypeError):
            raise ApiError(404, f"no profile file {session}/{index} in run {name!r}") from None

    # -- console ---------------------------------------------------------------------------
    def consoles(self) -> dict[str, Any]:
        return {
            "consoles": [
                {"job": j.job, "events": j.events, "first_time": j.first_time, "last_time": j.last_time}
                for j in self.store.jobs()
                if j.namespace == CONSOLE_NS
            ]
        }

    def _console(self, job: str) -> ConsoleView:
        if not any(j.namespace == CONSOLE_NS and j.job == job for j in self.store.jobs()):
            raise ApiError(404, f"no console job named {job!r} in this store")
        with self._lock:
            c = self._consoles.get(job)
            if c is None:
                c = self._consoles[job] = ConsoleView(self.store, job)
        return c

    def logs(self, job: str, q: Mapping[str, list[str]]) -> dict[str, Any]:
        c = self._console(job)
        proc = q.get("process", [""])[0]
        out = c.logs(
            after=_int(q, "after", -1, -1, 1 << 62),
            process=None if proc in ("", None) else _int(q, "process", 0, 0, 1 << 30),
            min_level=_int(q, "level", 0, 0, 100),
            text=(q.get("q", [""])[0] or "")[:200],
            limit=_int(q, "limit", 500, 1, 5000),
        )
        out["lost"] = self._console_lost(job)  # records that never arrived
        out["links"] = self.links(job)
        return out

    def _console_lost(self, job: str) -> int:
        """Records of a console job counted lost, read from the lost stream after the last
        poll's cursor (a page polls every few seconds: each poll costs what is new)."""
        with self._lock:
            cursor, n = self._lost.get(job, (0, 0))
        res = self.store.read(LOSS_NAMESPACE, job, cursor)
        cols = res.columns
        for i in range(len(cols)):
            if (cols.attr(i) or {}).get("namespace") == CONSOLE_NS:
                n += int(cols.values[i])
        with self._lock:
            self._lost[job] = (res.cursor, n)
        return n

    def usage(self, job: str, q: Mapping[str, list[str]]) -> dict[str, Any]:
        c = self._console(job)
        c.refresh()
        width = _int(q, "width", 1000, 50, 4000)
        per: dict[int, tuple[list[float], list[float], list[float]]] = {}
        for t, p, cpu, rss in c.usage:
            xs, cs, rs = per.setdefault(p, ([], [], []))
            xs.append(t)
            cs.append(cpu)
            rs.append(rss)
        procs = []
        for p, (xs, cs, rs) in sorted(per.items()):
            cx, cy = minmax_points(xs, cs, width)
            mx, my = minmax_points(xs, rs, width)
            procs.append({"process": p, "cpu": {"x": cx, "y": cy}, "rss": {"x": mx, "y": my}})
        return {"processes": procs, "checkpoints": c.marks[-500:]}
