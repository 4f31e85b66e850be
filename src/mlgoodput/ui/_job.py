"""One job as the pages see it: its calculator (the numbers) and the series drawn beside them.

The series are read from the calculator's own timeline (the events it holds per host),
followed after each of its incremental reads: a live page costs what was recorded since its
last refresh, and a long job is held once. Every number shown (goodput, each badput bucket,
steps, hosts) is the calculator's report, the same one `mlgoodput report --json` prints; the
series here only place it in time.
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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

from mlgoodput.accounting import (
    Engine,
    GoodputCalculator,
    GoodputReport,
    HostLog,
    StepNums,
    Timeline,
    productive_by_piece,
)
from mlgoodput.events import Kind
from mlgoodput.store import Store
from mlgoodput.ui import _saved
from mlgoodput.ui._lag import Lateness, lateness
from mlgoodput.ui._reduce import FAST_MIN, Blocks, numpy

# a running job with more step starts than this (all hosts) redoes its straggler analysis at
# most every LAG_EVERY_S seconds (the analysis compares every step that two hosts started)
LAG_EVERY_STEPS = 200_000
LAG_EVERY_S = 10.0
# a job with more step starts than this (all hosts) has its straggler analysis computed by the
# server's background worker: the page opens without the lateness columns and asks again
LAG_LATER_STEPS = 1_000_000

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

Rec = tuple[
    int, float, int | None, float | None, str | None, dict[str, Any] | None
]  # kind, time, step, value, name, attrs


class Durations(Sequence[float]):
    """One host's step durations (the gap to the next step start; nan across a restart),
    computed from the accounting's own step starts when asked: a long job is held once."""

    __slots__ = ("_hs",)

    def __init__(self, hs: HostSeries) -> None:
        self._hs = hs

    def __len__(self) -> int:
        return max(0, len(self._hs.times) - 1)

    @overload
    def __getitem__(self, i: int) -> float: ...
    @overload
    def __getitem__(self, i: slice) -> array[float]: ...
    def __getitem__(self, i: int | slice) -> float | array[float]:
        n = len(self)
        if isinstance(i, slice):
            lo, hi, step = i.indices(n)
            got = self._hs.durations(lo, max(lo, hi))
            return got if step == 1 else got[::step]
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("step index out of range")
        return self._hs.durations(i, i + 1)[0]


class HostSeries:
    """One host as the pages see it: the accounting's own record of the host (`log`: step
    starts, step numbers, job starts, other events), followed as it grows, and what the
    pages derive from it (block summaries of the step durations, the other events as tuples,
    the activity pairing). Nothing of the steps is copied."""

    def __init__(self, log: HostLog) -> None:
        self.log = log
        self.durs = Durations(self)
        self.others: list[Rec] = []
        self.other_times: array[float] = array("d")
        self.special: list[Rec] = []  # compile and slice-count records (few)
        self.blocks = Blocks()
        self.pairing: _Pairing | None = None
        self._src = 0  # records of log.others converted
        self._src_last: object = None
        self._version = log.version
        self._js = list(log.job_starts)

    @property
    def times(self) -> array[float]:
        return self.log.times

    @property
    def nums(self) -> StepNums:
        return self.log.nums

    @property
    def job_starts(self) -> list[float]:
        return self.log.job_starts

    def durations(self, lo: int, hi: int) -> array[float]:
        """Durations of steps [lo, hi): start[i+1] - start[i], nan where a restart lies between."""
        t = self.log.times
        np = numpy() if hi - lo >= FAST_MIN else None
        if np is None:
            out = array("d", map(operator.sub, t[lo + 1 : hi + 1], t[lo:hi]))
        else:  # the same subtractions, element by element
            a = np.frombuffer(t, dtype=np.float64)
            out = array("d")
            out.frombytes(np.subtract(a[lo + 1 : hi + 1], a[lo:hi]).tobytes())
        for js in self.log.job_starts:
            i = bisect_left(t, js) - 1
            if lo <= i < hi:
                out[i - lo] = math.nan
        return out

    def sync(self) -> tuple[bool, float]:
        """Follow the log: (whether something changed before its end, so that every figure
        derived so far is redone; the earliest time of a new non-step event, inf if none)."""
        log = self.log
        redo = False
        earliest = math.inf
        if log.version != self._version:  # a late step or restart: the step arrays were rebuilt
            self._version = log.version
            self.blocks = Blocks()
            redo = True
        src = log.others
        k = self._src
        if k > len(src) or (k and src[k - 1] is not self._src_last):  # a late record went in before
            self.others, self.special, self.other_times, self.pairing = [], [], array("d"), None
            k = 0
            redo = True
            earliest = -math.inf
        for r in src[k:]:
            rec: Rec = (r.kind, r.time, r.step, r.value, r.name, None if r.attrs is None else json.loads(r.attrs))
            self.others.append(rec)
            self.other_times.append(r.time)
            if r.kind in _SPECIAL:
                self.special.append(rec)
            if r.kind in (Kind.JOB_START, Kind.JOB_END):
                redo = True
            earliest = min(earliest, r.time)
        self._src = len(src)
        self._src_last = src[-1] if src else None
        if len(log.job_starts) != len(self._js):
            new = set(log.job_starts).difference(self._js)
            self._js = list(log.job_starts)
            done = self.blocks.done  # a new restart among the steps summarized: summarize again
            if done and any(bisect_left(log.times, js) - 1 < done for js in new):
                self.blocks = Blocks()
        self.blocks.extend(log.times, self.durs)
        return redo, earliest


def _quantiles(durs: array[float]) -> dict[str, float] | None:
    xs = sorted(d for d in durs if not math.isnan(d))
    if not xs:
        return None
    n = len(xs)
    med = xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2
    return {"median_s": med, "p90_s": xs[min(n - 1, int(0.9 * n))], "max_s": xs[-1]}


class JobView:
    """The pages' view of one goodput job (a logger's stream in the store)."""

    def __init__(
        self,
        store: Store,
        job: str,
        logger: str,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.job = job
        self.logger = logger
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
        self._timeline: Timeline | None = None
        self._saved: dict[int, _saved.SavedHost] | None = None  # the UI's saved series, until used
        self._lag: tuple[object, Lateness] | None = None  # the straggler analysis, with its key
        self._lag_saved: object = None  # the key of the analysis last saved
        self._lag_at = -math.inf  # when it was computed (time.monotonic)
        self.lag_wanted = False  # a page asked for an analysis left to the background (lag_now)
        self.asked_at = -math.inf  # when a request last asked for the job (time.monotonic)
        self._saved_pieces: _saved.Pieces | None = None  # saved goodput pieces, until used
        self._pieces_saved: tuple[float, float, float, int, float] | None = None  # the plan last saved
        self._fit_steps: dict[int, int] = {}  # host -> its step starts the saved series fit
        self._saved_steps = 0  # steps summarized when the UI's series were last saved (or found)
        self._saving = threading.Lock()
        self.calc = GoodputCalculator(job, logger, store=store, clock=clock, save_later=True)
        self._attempts_of = Engine()  # for its attempts of the calculator's timeline (holds no events)

    # -- following the calculator's timeline ------------------------------------------------
    def _follow(self) -> None:
        """Bring the series up to the calculator's timeline (after its read): only what is new
        is looked at. A timeline the calculator replaced (its saved state restored) starts the
        series again, from the UI's own saved series when they match it."""
        tl = self.calc.timeline
        redo = False
        if tl is not self._timeline:
            self._timeline = tl
            self.hosts = {}
            redo = True
            if self._saved is None:
                got = _saved.load(self._store, self.logger, self.job)
                self._saved = {} if got is None else got.hosts
                if got is not None and got.lag is not None:
                    self._lag = got.lag
                    self._lag_saved = got.lag[0]
                self._saved_pieces = None if got is None else got.pieces
        earliest = math.inf
        for h, log in tl.hosts.items():
            hs = self.hosts.get(h)
            if hs is None or hs.log is not log:
                hs = self.hosts[h] = HostSeries(log)
                saved = (self._saved or {}).pop(h, None)
                if saved is not None and saved.fits(log):
                    hs.blocks = saved.blocks
                    self._saved_steps += saved.blocks.done
                    self._fit_steps[h] = saved.steps
                redo = True
            r, e = hs.sync()
            redo = redo or r
            earliest = min(earliest, e)
        if redo:
            self.gen += 1
        if self._saved_pieces is not None:
            self._adopt_pieces(self._saved_pieces, tl.events)
            self._saved_pieces = None
        if tl.events != self.events or redo:
            self._changes.append((tl.events, -math.inf if redo else earliest))
            if len(self._changes) > 1000:
                self._changes = self._changes[-500:]
                self.gen += 1  # older entries are gone: be safe
        self.events = tl.events
        self.max_time = tl.max_time

    def keep(self) -> bool:
        """Save what a server started again opens the job from: the accounting's state, when
        the calculator has one due (made with `save_later=True`: its saves wait for this call), and the
        series' block summaries (state namespace `mlgoodput.ui`) when they grew enough since
        the last save. True when something was saved. One save at a time: a call returns after
        the save in progress (so that what was due is in the store when it returns)."""
        with self._saving:
            state = self.calc.save_state()
            with self.lock:
                if not self._series_due():
                    return state
                done = sum(hs.blocks.done for hs in self.hosts.values())
                pieces = self._pieces_to_save()
                data = _saved.pack(self.hosts, self._lag, pieces)
                self._pieces_saved = self._pieces_done if pieces is not None else None
                self._saved_steps = done
                self._lag_saved = None if self._lag is None else self._lag[0]
            return _saved.save(self._store, self.logger, self.job, data) or state

    def _adopt_pieces(self, pc: _saved.Pieces, events: int) -> None:
        """Saved goodput pieces, where the lead host's steps and other events before their end
        are those they were computed from."""
        hs = self.hosts.get(pc.lead)
        if hs is None or pc.lead != self.lead() or not pc.rows:
            return
        last = max(b for b, *_ in pc.rows.values())
        covered = self._fit_steps.get(pc.lead, 0)  # steps the saved summaries were found to fit
        if covered < 2 or hs.times[min(covered, len(hs.times)) - 1] < last:
            return  # pieces reach beyond the steps known unchanged
        if _saved.others_before(hs.log, last) != pc.others:
            return
        got = self.pieces.setdefault((pc.start, pc.width), {})
        for k, (b, ideal, prod, total) in pc.rows.items():
            got.setdefault(k, (b, ideal, events, prod, total, True, self.gen))

    def _pieces_to_save(self) -> _saved.Pieces | None:
        plan = self._pieces_done or self._plan
        lead = self.lead()
        if plan is None or lead is None:
            return None
        t0, _, width, _, _ = plan
        rows = {
            k: (p[0], p[1], p[3], p[4])
            for k, p in self.pieces.get((t0, width), {}).items()
            if p[5] and self.settled(p[0], p[2], p[6])
        }
        if not rows:
            return None
        last = max(b for b, *_ in rows.values())
        return _saved.Pieces(t0, width, lead, _saved.others_before(self.hosts[lead].log, last), rows)

    def keep_due(self) -> bool:
        """Whether `keep` has something to save: the accounting's state or the series."""
        return self.calc.state_due or self._series_due()

    def _series_due(self) -> bool:
        """Whether the series grew enough since they were last saved (or found saved)."""
        done = sum(hs.blocks.done for hs in self.hosts.values())
        if done < _saved.MIN_STEPS or not _saved.enabled():
            return False
        if done - self._saved_steps >= max(_saved.MIN_STEPS, self._saved_steps // 10):
            return True
        # a finished job's straggler analysis or goodput pieces, not saved yet (a live job's
        # analysis changes with every step, and its pieces are saved with its series' growth)
        return self._finished and (
            (self._lag is not None and self._lag[0] != self._lag_saved)
            or (self._pieces_done is not None and self._pieces_saved != self._pieces_done)
        )

    # -- goodput over time: pieces computed in the background --------------------------------
    def pieces_for(self, plan: tuple[float, float, float, int, float], wait_s: float) -> bool:
        """Have the pieces of `plan` (start, end, width, count, ideal) computed; True when all
        are there (after waiting up to `wait_s` for the background thread)."""
        with self._piece_lock:
            self._plan = plan
            if self._piece_thread is None or not self._piece_thread.is_alive():
                self._piece_thread = threading.Thread(
                    target=self._compute_pieces, name="mlgoodput-ui-pieces", daemon=True
                )
                self._piece_thread.start()
        deadline = time.monotonic() + wait_s
        while True:
            if self._pieces_done == plan:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)

    def _fresh(self, have: tuple[float, float, int, float, float, bool, int] | None, b: float, ideal: float) -> bool:
        return (
            have is not None
            and have[0] == b
            and abs(have[1] - ideal) <= 0.01 * ideal
            and have[5]
            and self.settled(b, have[2], have[6])
        )

    def _compute_pieces(self) -> None:
        while True:
            plan = self._plan
            if plan is None:
                return
            t0, t1, width, n, ideal = plan
            pieces = self.pieces.setdefault((t0, width), {})
            stale = [k for k in range(n) if not self._fresh(pieces.get(k), min(t1, t0 + (k + 1) * width), ideal)]
            if stale:  # from the first stale piece to the last, in one pass over their steps
                lo, hi = stale[0], stale[-1] + 1
                edges = [t0 + k * width for k in range(lo, hi)] + [min(t1, t0 + hi * width)]
                try:
                    with self.lock:  # the calculator as the page's last report left it
                        prod = productive_by_piece(self.calc, edges, ideal)
                        settled = self.settled_until()
                        for k, (a, b, p) in enumerate(zip(edges, edges[1:], prod, strict=False), lo):
                            pieces[k] = (b, ideal, self.events, p, b - a, b <= settled, self.gen)
                except Exception:  # the store failed now: the next request retries
                    return
            with self._piece_lock:
                last = self._plan == plan
                if last:
                    self._pieces_done = plan
                    self._piece_thread = None
            if last:
                try:
                    self.keep()  # a finished job's pieces, saved for the next server start
                except Exception:  # the store failed now: a later growth saves again
                    pass
                return

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

    # -- queries ---------------------------------------------------------------------------
    def refresh(self) -> GoodputReport:
        """The calculator's report now (reads only what is new), cached while nothing arrives."""
        with self.lock:
            r = self.calc.report()
            self._follow()
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
            self._finished = r.status == "finished"
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
        out: list[dict[str, Any]] = self._cached(("attempts",), self._attempts, self.status() == "crashed")
        return out

    def _attempts(self) -> list[dict[str, Any]]:
        lead = self.lead()
        if lead is None:
            return []
        hs = self.hosts[lead]
        # the accounting's own attempts (the engine's rule: its job starts, how each ended and
        # its steps), as of the latest event: a running attempt ends there; one whose writers
        # went silent ends at their last sign of life (the report's "crashed")
        how = {"job_end": "finished", "restart": "restarted", "running": "open", "died": "crashed"}
        self._attempts_of.timeline = self.calc.timeline  # read only: its signs of life
        q = max(self._clock(), self.max_time) if self.status() == "crashed" else self.max_time
        out = []
        for k, a in enumerate(self._attempts_of.attempts(hs.log, q)):
            i0, i1 = a.i0, a.i1
            last_evt = hs.times[i1 - 1] if i1 > i0 else a.start
            # the attempt's last sign of life, for a crash marker: its latest other event
            o = hs.other_times
            j = len(o) if a.ended_by == "running" else bisect_left(o, a.end)
            if j > 0 and o[j - 1] >= a.start:
                last_evt = max(last_evt, o[j - 1])
            out.append(
                {
                    "attempt": k + 1,
                    "start": a.start,
                    "end": a.end,
                    "ended": how[a.ended_by],
                    "first_step": int(hs.nums[i0]) if i1 > i0 else None,
                    "last_step": int(hs.nums[i1 - 1]) if i1 > i0 else None,
                    "steps": i1 - i0,
                    "last_event": last_evt,
                }
            )
        return out

    def now(self) -> float:
        """The view's clock (the calculator's too)."""
        return self._clock()

    def status(self) -> str:
        """The accounting's word for the job (finished, running, crashed, stale or empty): the
        same the report, `mlgoodput jobs` and the monitor say."""
        return self.report().status

    def summary(self) -> dict[str, Any]:
        """A row of the jobs page."""
        r = self.report()
        atts = self.attempts()
        return {
            "job": self.job,
            "logger": self.logger,
            "status": self.status(),
            "start": atts[0]["start"] if atts else None,
            "end": r.end,
            "wall_s": r.total_s,
            "goodput_pct": r.goodput_pct,
            "last_step": r.last_step,
            "attempts": len(atts),
            "hosts": len(self.hosts),
            "events": self.events,
            "disruptions": r.disruptions,
            "last_event": self.max_time if self.events else None,
        }

    # -- the job page ----------------------------------------------------------------------
    def detail(self) -> dict[str, Any]:
        r = self.report()
        out: dict[str, Any] = self._cached(("detail",), lambda: self._detail(r), (r.end, self._lag_at))
        return out

    def _detail(self, r: GoodputReport) -> dict[str, Any]:
        lead = self.lead()
        checkpoints: list[dict[str, Any]] = []
        compiles: list[dict[str, Any]] = []
        slices: list[dict[str, Any]] = []
        if lead is not None:
            for seg in self._pairs(self.hosts[lead]):
                if seg["phase"] in ("ckpt_save", "ckpt_restore"):
                    checkpoints.append(
                        {
                            "kind": "save" if seg["phase"] == "ckpt_save" else "restore",
                            "start": seg["start"],
                            "end": seg["end"],
                            "seconds": seg["end"] - seg["start"],
                            "step": seg.get("step"),
                        }
                    )
            for rec in self.hosts[lead].special:
                if rec[0] == Kind.SLICE_COUNTS and rec[5]:
                    a = rec[5]
                    slices.append(
                        {
                            "time": rec[1],
                            "active": a.get("active"),
                            "total": a.get("total"),
                            "available": a.get("available"),
                        }
                    )
        for h, hs in sorted(self.hosts.items()):
            for rec in hs.special:
                if rec[0] == Kind.COMPILE:
                    compiles.append({"time": rec[1], "host": h, "name": rec[4], "seconds": rec[3]})
        compiles.sort(key=lambda c: c["time"])
        compiles = compiles[-500:]
        atts = self.attempts()
        # the accounting's own figures for each disruption (docs/accounting.md, "Recovery: two
        # figures"): the page shows them, it does not derive its own
        costs = {c.attempt: c for c in (r.productivity.disruptions if r.productivity is not None else ())}
        disruptions = []
        for a, b in itertools.pairwise(atts):
            c = costs.get(b["attempt"] - 1)
            if c is None:
                continue
            disruptions.append(
                {
                    "attempt": a["attempt"],
                    "crashed_at": c.work_stopped_at,
                    "restarted_at": c.restarted_at,
                    "recovered_at": c.recovered_at,
                    "recovery_s": c.down_s,
                    "to_recover_s": c.to_recover_s,
                    "last_step": a["last_step"],
                    "resumed_step": b["first_step"],
                }
            )
        hosts = self._host_rows(r)
        lag = self._stragglers(r, now=self._steps() <= LAG_LATER_STEPS)
        if lag is not None:  # who starts steps late, and what it cost the others (docs/torch.md)
            for row in hosts:
                x = lag.hosts.get(row["host"])
                if x is not None:
                    row.update(late_s=x.mean_lag_s, held_back_s=x.held_back_s, last_steps=x.last_steps)
        return {
            "job": self.job,
            "logger": self.logger,
            "status": self.status(),
            "report": r.to_dict(),
            "attempts": atts,
            "disruptions": disruptions,
            "checkpoints": checkpoints[-300:],
            "checkpoints_total": len(checkpoints),
            "compiles": compiles,
            "slices": slices,
            "hosts": hosts,
            "events": self.events,
            "straggler": None
            if lag is None or lag.straggler is None
            else {"host": lag.straggler, "cost_s": lag.straggler_cost_s},
            # the verdict's evidence, straggler or not (docs/torch.md, "Stragglers")
            "straggler_verdict": None if lag is None else {**lag.verdict.to_dict(), "text": lag.verdict.text()},
            "lag_pending": lag is None and self.lag_wanted,  # computed in the background: ask again
        }

    def _steps(self) -> int:
        return sum(len(hs.times) for hs in self.hosts.values())

    def _stragglers(self, r: GoodputReport, *, now: bool = True) -> Lateness | None:
        """The straggler analysis (as mlgoodput.torch's) of the hosts' step starts the
        calculator holds (no second read of the store); ui/_lag.py compares only the steps
        that two hosts or more started, so a long job's page stays fast. With `now` false, an
        analysis that is not at hand is left to `lag_now` (None until then; `lag_wanted`)."""
        if len(self.hosts) < 2:
            return None
        key = [_saved.fingerprint(self.hosts), r.start, r.end]
        if self._lag is not None and self._lag[0] == key:  # none new (also: found saved)
            return self._lag[1]
        if (
            self._lag is not None
            and self._steps() > LAG_EVERY_STEPS
            and not self._finished
            and time.monotonic() - self._lag_at < LAG_EVERY_S
        ):
            return self._lag[1]  # a long live job: the analysis of a few seconds ago
        if not now:
            self.lag_wanted = True
            return self._lag[1] if self._lag is not None else None  # the last one, while it is redone
        medians = {h.host: h.median_s for h in r.hosts}
        lag = lateness({h: hs.log for h, hs in self.hosts.items()}, medians, r.start, r.end)
        self._lag = (key, lag)
        self._lag_at = time.monotonic()
        self.lag_wanted = False
        return lag

    def lag_now(self) -> None:
        """Compute the straggler analysis a page asked for (`lag_wanted`), off the page's path."""
        if self.lag_wanted:
            self._stragglers(self.report())

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
                st = _quantiles(hs.durs[:])
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
