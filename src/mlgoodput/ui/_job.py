"""One job as the pages see it: its calculator (the numbers) and the series drawn beside them.

The calculator reads the store through a tee, so one incremental read feeds both the
accounting and the series: a live page costs what was recorded since its last refresh.
Every number shown (goodput, each badput bucket, steps, hosts) is the calculator's report,
the same one `mlgoodput report --json` prints; the series here only place it in time.
"""

from __future__ import annotations

import itertools
import json
import math
import operator
import threading
import time
from array import array
from bisect import bisect_left, bisect_right, insort
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from mlgoodput.accounting import GoodputCalculator, GoodputReport, StepNums
from mlgoodput.events import EventBatch, Kind
from mlgoodput.store import Columns, JobInfo, PagedStore, ReadResult, StateStore, Store
from mlgoodput.ui._reduce import Blocks

_STEP = int(Kind.STEP_START)
_STEP_MASK = bytes(1 if i == _STEP else 0 for i in range(256))
_OTHER_MASK = bytes(0 if i == _STEP else 1 for i in range(256))
NO_STEP = -(2**63)
STRAGGLER_MAX_STEPS = 1_000_000  # step starts of all hosts together, above which no straggler analysis

# timeline phases: start kind -> (end kind, phase)
_PAIRS: dict[int, tuple[int, str]] = {
    Kind.ACCEL_INIT_START: (Kind.ACCEL_INIT_END, "init"),
    Kind.TRAINING_PREP_START: (Kind.TRAINING_PREP_END, "prep"),
    Kind.DATA_LOADING_START: (Kind.DATA_LOADING_END, "data"),
    Kind.CKPT_SAVE_START: (Kind.CKPT_SAVE_END, "ckpt_save"),
    Kind.CKPT_RESTORE_START: (Kind.CKPT_RESTORE_END, "ckpt_restore"),
    Kind.CUSTOM_START: (Kind.CUSTOM_END, "custom"),
    Kind.ELASTIC_WAIT_START: (Kind.ELASTIC_WAIT_END, "elastic_wait"),
    Kind.ELASTIC_REINIT_START: (Kind.ELASTIC_REINIT_END, "elastic_reinit"),
}
_END_KINDS = {e for e, _ in _PAIRS.values()}
_SPECIAL = {Kind.COMPILE, Kind.SLICE_COUNTS}
_DURATIONS: dict[int, str] = {
    Kind.CKPT_SAVE: "ckpt_save",
    Kind.CKPT_RESTORE: "ckpt_restore",
    Kind.COMPILE: "compile",
}

Rec = tuple[int, float, int | None, float | None, str | None, dict[str, Any] | None]  # kind, time, step, value, name, attrs


class _Tee:
    """A store that hands every forward read of one stream to `sink` as it passes through.

    It offers the store's saved accounting state to the calculator (a store that keeps none
    just has none): when the calculator starts from a saved state, its first forward read
    begins past the start, and `seed` is called first so the series start from that state."""

    def __init__(self, store: Store, namespace: str, job: str, sink: Callable[[ReadResult], None],
                 seed: Callable[[], None]) -> None:
        self._store = store
        self._ns = namespace
        self._job = job
        self._sink = sink
        self._seed = seed
        self._cursor = 0
        self.url = store.url

    def _forward(self, namespace: str, job: str, cursor: int) -> bool:
        """Whether a read from `cursor` is the calculator's next forward read of the stream."""
        if namespace != self._ns or job != self._job:
            return False
        if self._cursor == 0 and cursor > 0:  # the calculator restored its saved state
            self._seed()
            self._cursor = cursor
        return cursor == self._cursor

    def append(self, namespace: str, job: str, batch: EventBatch) -> None:
        self._store.append(namespace, job, batch)

    def read(self, namespace: str, job: str, cursor: int = 0) -> ReadResult:
        res = self._store.read(namespace, job, cursor)
        if self._forward(namespace, job, cursor):
            self._sink(res)  # the calculator's forward read; a re-read from 0 (`at=`) is not
            self._cursor = res.cursor
        return res

    def jobs(self) -> list[JobInfo]:
        return self._store.jobs()

    def close(self) -> None:
        pass  # the server owns the store

    # the saved accounting state (store/_state.py), when the store keeps one
    def save_state(self, namespace: str, job: str, pieces: Iterable[bytes]) -> None:
        if isinstance(self._store, StateStore):
            self._store.save_state(namespace, job, pieces)

    def load_state(self, namespace: str, job: str) -> Iterator[bytes] | None:
        return self._store.load_state(namespace, job) if isinstance(self._store, StateStore) else None

    def stream_position(self, namespace: str, job: str, cursor: int) -> tuple[int, int]:
        if not isinstance(self._store, StateStore):
            raise OSError("the store keeps no saved state")
        return self._store.stream_position(namespace, job, cursor)


class _PagedTee(_Tee):
    """A tee over a store that pages its reads: the calculator reads the job a page at a time."""

    def scan(self, namespace: str, job: str, cursor: int = 0) -> Iterator[tuple[int, Columns]]:
        assert isinstance(self._store, PagedStore)
        forward = self._forward(namespace, job, cursor)
        for c, part in self._store.scan(namespace, job, cursor):
            if forward:
                self._sink(ReadResult([part], c))
                self._cursor = c
            yield c, part


class _HostOnly:
    """A store that shows one host's events of every stream it reads (for the lead host's
    windowed reports)."""

    def __init__(self, store: Store, host: int) -> None:
        self._store = store
        self._host = host
        self.url = store.url

    def append(self, namespace: str, job: str, batch: EventBatch) -> None:
        self._store.append(namespace, job, batch)

    def read(self, namespace: str, job: str, cursor: int = 0) -> ReadResult:
        res = self._store.read(namespace, job, cursor)
        parts = []
        for c in res.parts:
            hosts = c.hosts
            if hosts.count(self._host) == len(hosts):
                parts.append(c)
                continue
            keep = bytes(1 if h == self._host else 0 for h in hosts)
            if not any(keep):
                continue
            sel = list(itertools.compress(range(len(hosts)), keep))
            parts.append(Columns(
                bytearray(itertools.compress(c.kinds, keep)), array("d", itertools.compress(c.times, keep)),
                array("i", itertools.compress(hosts, keep)), array("q", itertools.compress(c.steps, keep)),
                array("d", itertools.compress(c.values, keep)),
                None if c.names is None else [c.names[i] for i in sel],
                None if c.attrs is None else [c.attrs[i] for i in sel]))
        return ReadResult(parts, res.cursor)

    def jobs(self) -> list[JobInfo]:
        return self._store.jobs()

    def close(self) -> None:
        pass


@dataclass(slots=True)
class HostSeries:
    """One host's step starts (time order) and its other events."""

    times: array[float] = field(default_factory=lambda: array("d"))
    nums: StepNums = field(default_factory=StepNums)  # step numbers, packed as runs (as the accounting keeps them)
    durs: array[float] = field(default_factory=lambda: array("d"))  # start[i+1] - start[i]
    others: list[Rec] = field(default_factory=list)
    sorted_others: bool = True
    blocks: Blocks = field(default_factory=Blocks)
    job_starts: list[float] = field(default_factory=list)
    late: bool = False  # a step arrived before one already held (the owner resets its caches)
    other_times: array[float] = field(default_factory=lambda: array("d"))  # times of `others`, once sorted
    pairing: _Pairing | None = None
    special: list[Rec] = field(default_factory=list)  # compile and slice-count records (few)

    def add_steps(self, times: list[float], nums: list[int]) -> None:
        if not times:
            return
        strict = all(map(operator.lt, times[:-1], times[1:]))
        if (not self.times or times[0] > self.times[-1]) and (strict or times == sorted(times)):
            if not strict and len(set(times)) != len(times):  # a step recorded twice: kept once,
                pairs = sorted(set(zip(times, nums, strict=True)))  # as the accounting keeps it
                times, nums = [p[0] for p in pairs], [p[1] for p in pairs]
            self.times.extend(times)
            self.nums.extend(nums)
        else:  # late or out-of-order: merge and rebuild the derived arrays
            self.late = True
            pairs = sorted(set(zip(self.times, self.nums, strict=True)) | set(zip(times, nums, strict=True)))
            self.times = array("d", (p[0] for p in pairs))
            self.nums = StepNums(p[1] for p in pairs)
            self.durs = array("d")
            self.blocks = Blocks()

    def refresh_durations(self) -> None:
        """Durations of new steps (nan across a restart), then their block summaries."""
        n = len(self.times)
        k = len(self.durs)
        if k >= n - 1:
            return
        t = self.times
        new = array("d", map(operator.sub, t[k + 1 : n], t[k : n - 1]))
        for js in self.job_starts:  # a restart between two steps is not a step
            i = bisect_left(t, js) - 1
            if k <= i < n - 1:
                new[i - k] = math.nan
        self.durs.extend(new)
        self.blocks.extend(self.times, self.durs)


def _quantiles(durs: array[float]) -> dict[str, float] | None:
    xs = sorted(d for d in durs if not math.isnan(d))
    if not xs:
        return None
    n = len(xs)
    med = xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2
    return {"median_s": med, "p90_s": xs[min(n - 1, int(0.9 * n))], "max_s": xs[-1]}


class JobView:
    """The pages' view of one goodput job (a logger's stream in the store)."""

    def __init__(self, store: Store, job: str, logger: str, *, stale_after_s: float = 120.0,
                 clock: Callable[[], float] = time.time) -> None:
        self.job = job
        self.logger = logger
        self.stale_after_s = stale_after_s
        self._clock = clock
        self.hosts: dict[int, HostSeries] = {}
        self.events = 0
        self.max_time = -math.inf
        self.lock = threading.RLock()
        self._report: GoodputReport | None = None
        self._report_time = 0.0
        self._cache: dict[Any, tuple[tuple[int, Any], Any]] = {}
        # goodput-over-time pieces: (start, width) -> index ->
        # (end, ideal, events seen, productive_s, total_s, settled when computed, generation)
        self.pieces: dict[tuple[float, float], dict[int, tuple[float, float, int, float, float, bool, int]]] = {}
        self._changes: list[tuple[int, float]] = []  # (events after an ingest, its earliest non-step time)
        self.gen = 0  # bumped by a restart, a job end or a late step: every cached figure is redone
        self._store = store
        self._finished = False
        self._piece_lock = threading.Lock()
        self._piece_thread: threading.Thread | None = None
        self._plan: tuple[float, float, float, int, float] | None = None
        self._pieces_done: tuple[float, float, float, int, float] | None = None
        self._lead_calc: tuple[int, GoodputCalculator] | None = None
        tee = (_PagedTee if isinstance(store, PagedStore) else _Tee)(store, logger, job, self._ingest, self._seed)
        self.calc = GoodputCalculator(job, logger, store=tee, clock=clock)

    # -- ingest (called from inside the calculator's read) ---------------------------------
    def _ingest(self, res: ReadResult) -> None:
        for cols in res.parts:
            self._ingest_cols(cols)

    def _seed(self) -> None:
        """Start the series from the calculator's restored state (its saved state: the events
        the store held when it was saved), before the events stored since arrive."""
        tl = self.calc._engine.timeline
        self.hosts = {}
        for h, log in sorted(tl.hosts.items()):
            hs = self._host(h)
            hs.times = array("d", log.times)
            hs.nums = StepNums.from_state(len(log.nums), *log.nums.state())  # a copy (runs, not numbers)
            for r in log.others:
                rec: Rec = (r.kind, r.time, r.step, r.value, r.name, None if r.attrs is None else json.loads(r.attrs))
                hs.others.append(rec)
                if r.kind in _SPECIAL:
                    hs.special.append(rec)
            hs.job_starts = list(log.job_starts)
        self.events = tl.events
        self.max_time = tl.max_time
        self._changes.append((self.events, -math.inf))
        self.gen += 1

    def _host(self, h: int) -> HostSeries:
        s = self.hosts.get(h)
        if s is None:
            s = self.hosts[h] = HostSeries()
        return s

    # -- goodput over time: pieces computed in the background --------------------------------
    def pieces_for(self, plan: tuple[float, float, float, int, float], wait_s: float) -> bool:
        """Have the pieces of `plan` (start, end, width, count, ideal) computed; True when all
        are there (after waiting up to `wait_s` for the background thread)."""
        with self._piece_lock:
            self._plan = plan
            if self._piece_thread is None or not self._piece_thread.is_alive():
                self._piece_thread = threading.Thread(target=self._compute_pieces, name="mlgoodput-ui-pieces",
                                                      daemon=True)
                self._piece_thread.start()
        deadline = time.monotonic() + wait_s
        while True:
            if self._pieces_done == plan:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)

    def _fresh(self, have: tuple[float, float, int, float, float, bool, int] | None, b: float, ideal: float) -> bool:
        return (have is not None and have[0] == b and abs(have[1] - ideal) <= 0.01 * ideal
                and have[5] and self.settled(b, have[2], have[6]))

    def _compute_pieces(self) -> None:
        while True:
            plan = self._plan
            if plan is None:
                return
            t0, t1, width, n, ideal = plan
            pieces = self.pieces.setdefault((t0, width), {})
            for k in range(n):
                if self._plan != plan:
                    break  # a newer request: start over with it
                a, b = t0 + k * width, min(t1, t0 + (k + 1) * width)
                if self._fresh(pieces.get(k), b, ideal):
                    continue
                t = time.perf_counter()
                try:
                    rep = self._series_calc().report(a, b, configured_ideal_step_time=ideal)
                except Exception:  # the store failed now: the next request retries
                    return
                # half the time at most: requests for the pages go first (the GIL is shared)
                time.sleep(min(0.5, time.perf_counter() - t))
                with self.lock:
                    pieces[k] = (b, ideal, self.events, rep.productive_s, rep.total_s,
                                 b <= self.settled_until(), self.gen)
            else:
                with self._piece_lock:
                    self._pieces_done = plan
                    if self._plan == plan:
                        self._piece_thread = None
                        return

    def _series_calc(self) -> GoodputCalculator:
        """The calculator for windowed reports. With several hosts, one that reads only the
        lead host: the partition is the lead host's (spec: Hosts), and it skips the per-host
        statistics that every report of the full job recomputes."""
        lead = self.lead()
        if len(self.hosts) <= 1 or lead is None:
            return self.calc
        if self._lead_calc is None or self._lead_calc[0] != lead:
            st = _HostOnly(self._store, lead)
            self._lead_calc = (lead, GoodputCalculator(self.job, self.logger, store=st, clock=self._clock))
        return self._lead_calc[1]

    def settled(self, b: float, since_events: int, gen: int) -> bool:
        """Whether a figure about time before `b`, computed when `since_events` events had been
        read (in generation `gen`), still holds: no restart or late step since, and no new
        non-step event before `b`."""
        if gen != self.gen:
            return False
        for count, earliest in reversed(self._changes):
            if count <= since_events:
                break
            if earliest < b:
                return False
        return True

    def settled_until(self) -> float:
        """Before this time, only a restart or a late event can change the lead host's steps."""
        lead = self.lead()
        if lead is None or len(self.hosts[lead].times) < 2:
            return -math.inf
        return self.hosts[lead].times[-2]

    def _ingest_cols(self, cols: Columns) -> None:
        n = len(cols)
        if not n:
            return
        self.events += n
        self.max_time = max(self.max_time, max(cols.times))
        kinds = bytes(cols.kinds)
        smask = kinds.translate(_STEP_MASK)
        hosts = cols.hosts
        n_steps = smask.count(1)
        if n_steps and hosts.count(hosts[0]) == n:
            self._host(hosts[0]).add_steps(
                list(itertools.compress(cols.times, smask)), list(itertools.compress(cols.steps, smask))
            )
        elif n_steps:
            per: dict[int, tuple[list[float], list[int]]] = {}
            for i in itertools.compress(range(n), smask):
                t, s = per.setdefault(hosts[i], ([], []))
                t.append(cols.times[i])
                s.append(cols.steps[i])
            for h, (t, s) in per.items():
                order = sorted(range(len(t)), key=t.__getitem__)
                self._host(h).add_steps([t[i] for i in order], [s[i] for i in order])
        for hs in self.hosts.values():
            if hs.late:
                hs.late = False
                self.gen += 1
        if n_steps == n:
            return
        earliest = math.inf
        for i in itertools.compress(range(n), kinds.translate(_OTHER_MASK)):
            hs = self._host(hosts[i])
            st = cols.steps[i]
            v = cols.values[i]
            rec: Rec = (cols.kinds[i], cols.times[i], None if st == NO_STEP else st,
                        None if math.isnan(v) else v, cols.name(i), cols.attr(i))
            if hs.others and rec[1] < hs.others[-1][1]:
                hs.sorted_others = False
            hs.others.append(rec)
            if rec[0] in _SPECIAL:
                hs.special.append(rec)
            earliest = min(earliest, rec[1])
            if rec[0] == Kind.JOB_START:
                hs.job_starts.append(rec[1])
                hs.job_starts.sort()
                hs.durs = array("d")  # a restart changes which gaps are steps
                hs.blocks = Blocks()
            if rec[0] in (Kind.JOB_START, Kind.JOB_END):
                self.gen += 1
        self._changes.append((self.events, earliest))
        if len(self._changes) > 1000:
            self._changes = self._changes[-500:]
            self.gen += 1  # older entries are gone: be safe

    # -- queries ---------------------------------------------------------------------------
    def refresh(self) -> GoodputReport:
        """The calculator's report now (reads only what is new), cached while nothing arrives."""
        with self.lock:
            r = self.calc.report()
            for hs in self.hosts.values():
                if not hs.sorted_others:
                    hs.others.sort(key=lambda r: r[1])
                    hs.sorted_others = True
                    hs.other_times = array("d")
                    hs.pairing = None
                if len(hs.other_times) < len(hs.others):
                    hs.other_times.extend(r[1] for r in hs.others[len(hs.other_times) :])
                hs.refresh_durations()
            self._report = r
            self._report_time = self._clock()
            return r

    def report(self, max_age_s: float = 1.0) -> GoodputReport:
        """The latest report: recomputed when older than `max_age_s`, except for a finished job
        whose store holds nothing new (its report cannot change)."""
        with self.lock:
            r = self._report
            if r is not None:
                if self._clock() - self._report_time <= max_age_s:
                    return r
                if self._finished and self._stored_events() == self.events:
                    self._report_time = self._clock()
                    return r
            r = self.refresh()
            self._finished = self.status() == "finished"
            return r

    def _stored_events(self) -> int:
        for j in self._store.jobs():
            if j.namespace == self.logger and j.job == self.job:
                return j.events
        return -1

    def _cached(self, slot: Any, make: Callable[[], Any], version: Any = None) -> Any:
        """`make()`, kept in `slot` while neither the events read nor `version` change.
        One value per slot, and a bounded number of slots (widths differ between screens)."""
        stamp = (self.events, version)
        hit = self._cache.get(slot)
        if hit is not None and hit[0] == stamp:
            return hit[1]
        val = make()
        self._cache.pop(slot, None)
        self._cache[slot] = (stamp, val)
        while len(self._cache) > 64:
            del self._cache[next(iter(self._cache))]
        return val

    def lead(self) -> int | None:
        leads = [h for h, s in self.hosts.items() if s.job_starts]
        return min(leads) if leads else None

    def attempts(self) -> list[dict[str, Any]]:
        """The lead host's attempts: start, end, how it ended, first and last step."""
        out: list[dict[str, Any]] = self._cached(("attempts",), self._attempts)
        return out

    def _attempts(self) -> list[dict[str, Any]]:
        lead = self.lead()
        if lead is None:
            return []
        hs = self.hosts[lead]
        ends = sorted(r[1] for r in hs.others if r[0] == Kind.JOB_END)
        last_seen = self.max_time
        out = []
        js = hs.job_starts
        for k, s in enumerate(js):
            nxt = js[k + 1] if k + 1 < len(js) else math.inf
            j = bisect_left(ends, s)
            if j < len(ends) and ends[j] < nxt:
                end, how = ends[j], "finished"
            elif nxt < math.inf:
                end, how = nxt, "restarted"
            else:
                end, how = last_seen, "open"
            i0 = bisect_left(hs.times, s)
            i1 = bisect_left(hs.times, end) if how != "open" else len(hs.times)
            last_evt = hs.times[i1 - 1] if i1 > i0 else s
            # the attempt's last sign of life, for a crash marker: its latest other event
            o = hs.other_times
            j = len(o) if how == "open" else bisect_left(o, end)
            if j > 0 and o[j - 1] >= s:
                last_evt = max(last_evt, o[j - 1])
            out.append({
                "attempt": k + 1, "start": s, "end": end, "ended": how,
                "first_step": int(hs.nums[i0]) if i1 > i0 else None,
                "last_step": int(hs.nums[i1 - 1]) if i1 > i0 else None,
                "steps": i1 - i0, "last_event": last_evt,
            })
        return out

    def status(self) -> str:
        """finished (the last attempt recorded its end), running, stale or crashed (silent)."""
        atts = self.attempts()
        if not atts:
            return "empty"
        if atts[-1]["ended"] == "finished":
            return "finished"
        silent = self._clock() - self.max_time
        if silent <= self.stale_after_s:
            return "running"
        return "stale" if silent <= 10 * self.stale_after_s else "crashed"

    def summary(self) -> dict[str, Any]:
        """A row of the jobs page."""
        r = self.report()
        atts = self.attempts()
        return {
            "job": self.job, "logger": self.logger, "status": self.status(),
            "start": atts[0]["start"] if atts else None, "end": r.end,
            "wall_s": r.total_s, "goodput_pct": r.goodput_pct, "last_step": r.last_step,
            "attempts": len(atts), "hosts": len(self.hosts), "events": self.events,
            "disruptions": r.disruptions, "last_event": self.max_time if self.events else None,
        }

    # -- the job page ----------------------------------------------------------------------
    def detail(self) -> dict[str, Any]:
        r = self.report()
        out: dict[str, Any] = self._cached(("detail",), lambda: self._detail(r), r.end)
        return out

    def _detail(self, r: GoodputReport) -> dict[str, Any]:
        lead = self.lead()
        checkpoints: list[dict[str, Any]] = []
        compiles: list[dict[str, Any]] = []
        slices: list[dict[str, Any]] = []
        if lead is not None:
            for seg in self._pairs(self.hosts[lead]):
                if seg["phase"] in ("ckpt_save", "ckpt_restore"):
                    checkpoints.append({"kind": "save" if seg["phase"] == "ckpt_save" else "restore",
                                        "start": seg["start"], "end": seg["end"], "seconds": seg["end"] - seg["start"],
                                        "step": seg.get("step")})
            for rec in self.hosts[lead].special:
                if rec[0] == Kind.SLICE_COUNTS and rec[5]:
                    a = rec[5]
                    slices.append({"time": rec[1], "active": a.get("active"), "total": a.get("total"),
                                   "available": a.get("available")})
        for h, hs in sorted(self.hosts.items()):
            for rec in hs.special:
                if rec[0] == Kind.COMPILE:
                    compiles.append({"time": rec[1], "host": h, "name": rec[4], "seconds": rec[3]})
        compiles.sort(key=lambda c: c["time"])
        compiles = compiles[-500:]
        atts = self.attempts()
        disruptions = [
            {"attempt": a["attempt"], "crashed_at": a["last_event"], "restarted_at": b["start"],
             "recovery_s": b["start"] - a["last_event"], "last_step": a["last_step"],
             "resumed_step": b["first_step"]}
            for a, b in itertools.pairwise(atts) if a["ended"] == "restarted"
        ]
        hosts = self._host_rows(r)
        lag = self._stragglers(r)
        if lag is not None:  # who starts steps late, and what it cost the others (docs/torch.md)
            by_rank = {x.rank: x for x in lag.ranks}
            for row in hosts:
                x = by_rank.get(row["host"])
                if x is not None:
                    row.update(late_s=x.mean_lag_s, held_back_s=x.held_back_s, last_steps=x.last_steps)
        return {
            "job": self.job, "logger": self.logger, "status": self.status(),
            "report": r.to_dict(), "attempts": atts, "disruptions": disruptions,
            "checkpoints": checkpoints[-300:], "checkpoints_total": len(checkpoints), "compiles": compiles, "slices": slices,
            "hosts": hosts, "events": self.events,
            "straggler": None if lag is None or lag.straggler is None
            else {"host": lag.straggler, "cost_s": lag.straggler_cost_s},
        }

    def _stragglers(self, r: GoodputReport) -> Any:
        """The straggler analysis (mlgoodput.torch) of the hosts' step starts this view already
        holds (no second read of the store). Its analysis is a full pass in Python over every
        step, redone when the job changes: above STRAGGLER_MAX_STEPS steps in all it is left
        out, so that a long job's page stays fast (the Hosts table then shows no lateness)."""
        if len(self.hosts) < 2 or sum(len(hs.times) for hs in self.hosts.values()) > STRAGGLER_MAX_STEPS:
            return None
        from mlgoodput.torch import analyze_stragglers as analyze

        return analyze({h: list(hs.job_starts) for h, hs in self.hosts.items()},
                       {h: list(zip(hs.times, hs.nums, strict=True)) for h, hs in self.hosts.items()}, r.start, r.end)

    def _host_rows(self, r: GoodputReport) -> list[dict[str, Any]]:
        """The accounting's per-host step statistics plus the seconds each host spent beyond
        the ideal step time (the gaps between its step starts, minus ideal x steps)."""
        stats = {h.host: h.to_dict() for h in r.hosts}
        ideal = r.ideal_step_time_s
        rows = []
        for h, hs in sorted(self.hosts.items()):
            b = hs.blocks
            n = sum(b.n)
            busy = sum(b.sum)
            row: dict[str, Any] = {"host": h, "steps": len(hs.times), "lost_s": max(0.0, busy - n * ideal)}
            st = stats.get(h)
            if st is None and len(hs.durs) <= 2_000_000:  # one host: the accounting lists none
                st = _quantiles(hs.durs)
            row.update({k: v for k, v in (st or {}).items() if k not in ("host", "steps")})
            rows.append(row)
        return rows

    def _pairs(self, hs: HostSeries) -> list[dict[str, Any]]:
        """Activities of one host as (phase, start, end): start/end pairs and durations, sorted
        by start. Kept incrementally: new records are paired as they come; a start waiting for
        its end is looked at again (its end so far: the next restart or the latest event)."""
        pc = hs.pairing
        if pc is None or pc.gen != self.gen or pc.done > len(hs.others):
            pc = hs.pairing = _Pairing(self.gen)
        js = hs.job_starts
        for rec in hs.others[pc.done :]:
            kind = rec[0]
            if kind in _END_KINDS:
                lst = pc.ends.setdefault((kind, rec[4]), [])
                if lst and rec[1] < lst[-1]:
                    insort(lst, rec[1])
                else:
                    lst.append(rec[1])
            elif kind in _PAIRS:
                pc.open.append(rec)
            elif kind in _DURATIONS and rec[3] is not None:
                pc.closed.append(_seg(_DURATIONS[kind], rec, rec[1] + rec[3]))
        pc.done = len(hs.others)
        still: list[Rec] = []
        now_open: list[dict[str, Any]] = []
        for rec in pc.open:
            end_kind, phase = _PAIRS[rec[0]]
            cands = pc.ends.get((end_kind, rec[4] if phase in ("custom", "elastic_wait") else None), [])
            j = bisect_left(cands, rec[1])
            k = bisect_right(js, rec[1])
            nxt = js[k] if k < len(js) else math.inf
            if j < len(cands) and cands[j] < nxt:
                pc.closed.append(_seg(phase, rec, cands[j]))
            else:
                still.append(rec)
                now_open.append(_seg(phase, rec, min(nxt, self.max_time)))
        pc.open = still
        pc.closed.sort(key=_start)  # nearly sorted: a linear pass
        return sorted(pc.closed + now_open, key=_start) if now_open else pc.closed

def _seg(phase: str, rec: Rec, end: float) -> dict[str, Any]:
    seg: dict[str, Any] = {"phase": phase, "start": rec[1], "end": end}
    if rec[4]:
        seg["name"] = rec[4]
    if rec[2] is not None:
        seg["step"] = rec[2]
    return seg


@dataclass(slots=True)
class _Pairing:
    """What `JobView._pairs` has worked out for one host so far."""

    gen: int
    done: int = 0  # records of `others` looked at
    ends: dict[tuple[int, str | None], list[float]] = field(default_factory=dict)
    open: list[Rec] = field(default_factory=list)  # starts without their end yet
    closed: list[dict[str, Any]] = field(default_factory=list)


def _start(seg: dict[str, Any]) -> float:
    return float(seg["start"])
