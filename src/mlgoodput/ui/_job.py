"""One job as the pages see it: its calculator (the numbers) and the series drawn beside them.

The series are read from the calculator's own timeline (the events it holds per host),
followed after each of its incremental reads: a live page costs what was recorded since its
last refresh, and a long job is held once. Every number shown (goodput, each badput bucket,
steps, hosts) is the calculator's report, the same one `mlgoodput report --json` prints; the
series here only place it in time.
"""

from __future__ import annotations

import itertools
import logging
import math
import threading
import time
from bisect import bisect_left
from collections.abc import Callable
from typing import Any

from mlgoodput._once import Once
from mlgoodput.accounting import Engine, GoodputCalculator, GoodputReport, StragglerReport, Timeline
from mlgoodput.events import Kind
from mlgoodput.store import Store
from mlgoodput.ui import _saved
from mlgoodput.ui._pairing import Pairing
from mlgoodput.ui._pieces import Piece, Pieces, PieceWorker, Plan, shared_worker
from mlgoodput.ui._series import HostSeries, quantiles

__all__ = ["HostSeries", "JobView"]

log = logging.getLogger("mlgoodput.ui")

# a running job with more step starts than this (all hosts) redoes its straggler analysis at
# most every LAG_EVERY_S seconds (the analysis compares every step that two hosts started)
LAG_EVERY_STEPS = 200_000
LAG_EVERY_S = 10.0
# a job with more step starts than this (all hosts) has its straggler analysis computed by the
# server's background worker: the page opens without the lateness columns and asks again
LAG_LATER_STEPS = 1_000_000


class JobView:
    """The pages' view of one goodput job (a logger's stream in the store)."""

    def __init__(
        self,
        store: Store,
        job: str,
        logger: str,
        *,
        clock: Callable[[], float] = time.time,
        piece_worker: PieceWorker | None = None,
    ) -> None:
        """`piece_worker` computes goodput over time in the background (default: the
        process's shared one, `ui._pieces.shared_worker()`)."""
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
        self._changes: list[tuple[int, float]] = []  # (events after an ingest, its earliest non-step time)
        self.gen = 0  # bumped by a restart, a job end or a late step: every cached figure is redone
        self._store = store
        self._finished = False
        # goodput over time, computed on the piece worker
        self.goodput_pieces = Pieces(self, piece_worker if piece_worker is not None else shared_worker())
        self._errors = Once()  # failures of background work, per kind (goodput, save, read, stragglers)
        self._last_error: dict[str, str] = {}
        self._failing: set[str] = set()  # kinds whose latest attempt failed
        self._timeline: Timeline | None = None
        self._saved: dict[int, _saved.SavedHost] | None = None  # the UI's saved series, until used
        self._lag: tuple[object, StragglerReport] | None = None  # the straggler analysis, with its key
        self._lag_at = -math.inf  # when it was computed (time.monotonic)
        self.lag_wanted = False  # a page asked for an analysis left to the background (lag_now)
        self.asked_at = -math.inf  # when a request last asked for the job (time.monotonic)
        self._saved_pieces: _saved.Pieces | None = None  # saved goodput pieces, until used
        self._pieces_saved: Plan | None = None  # the plan last saved
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
            self.goodput_pieces.adopt(self._saved_pieces, tl.events, self._fit_steps.get(self._saved_pieces.lead, 0))
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
                pieces = self.goodput_pieces.to_save()
                data = _saved.pack(self.hosts, pieces)
                self._pieces_saved = self.goodput_pieces.done if pieces is not None else None
                self._saved_steps = done
            return _saved.save(self._store, self.logger, self.job, data) or state

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
        # a finished job's goodput pieces, not saved yet (a live job's are saved with its
        # series' growth; the straggler analysis is saved with the accounting's state)
        return self._finished and (
            self.goodput_pieces.done is not None and self._pieces_saved != self.goodput_pieces.done
        )

    # -- goodput over time: pieces computed in the background --------------------------------
    @property
    def pieces(self) -> dict[tuple[float, float], dict[int, Piece]]:
        """Goodput-over-time pieces: (start, width) -> index -> (end, ideal, events seen,
        productive_s, total_s, settled when computed, generation)."""
        return self.goodput_pieces.rows

    def pieces_for(self, plan: Plan, wait_s: float) -> bool:
        """Have the pieces of `plan` (start, end, width, count, ideal) computed; True when all
        are there (after waiting up to `wait_s` for the piece worker)."""
        return self.goodput_pieces.want(plan, wait_s)

    # -- failures of background work: counted, logged once, shown ---------------------------
    def failed(self, kind: str, e: BaseException) -> None:
        """Background work of `kind` (goodput, save, read, stragglers) failed: counted, logged
        once per kind, and kept for `errors()` (the pages show it: a bug is not an empty chart)."""
        self._last_error[kind] = f"{type(e).__name__}: {e}"
        self._failing.add(kind)
        self._errors.warning(log, kind, "mlgoodput ui: job %s: %s failed: %s (logged once)", self.job, kind, e)

    def succeeded(self, kind: str) -> None:
        """Background work of `kind` succeeded: an earlier failure of it is past (still counted
        in `errors()`, no longer shown as current)."""
        self._failing.discard(kind)

    def errors(self) -> dict[str, dict[str, Any]]:
        """Failures of background work so far, per kind: {"count": n, "last": "Type: message",
        "current": whether the latest attempt of that kind failed}. Pages show the current ones."""
        return {
            str(k): {"count": n, "last": self._last_error.get(str(k)), "current": str(k) in self._failing}
            for k, n in self._errors.counts().items()
        }

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

    def cached(self, slot: Any, make: Callable[[], Any], version: Any = None) -> Any:
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
        out: list[dict[str, Any]] = self.cached(("attempts",), self._attempts, self.status() == "crashed")
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
        out: dict[str, Any] = self.cached(("detail",), lambda: self._detail(r), (r.end, self._lag_at))
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
        hosts = self.host_rows(r)
        lag = self._stragglers(r, now=self._steps() <= LAG_LATER_STEPS)
        if lag is not None:  # who starts steps late, and what it cost the others (docs/torch.md)
            for row in hosts:
                x = lag.rank(row["host"])
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

    def _stragglers(self, r: GoodputReport, *, now: bool = True) -> StragglerReport | None:
        """The accounting's straggler analysis (`GoodputCalculator.stragglers`) of the step
        starts the calculator holds (no second read of the store; kept up to date there, and
        saved with its state). With `now` false, an analysis that is not at hand is left to
        `lag_now` (None until then; `lag_wanted`)."""
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
        lag = self.calc.stragglers(r.start, r.end, read=False)
        self._lag = (key, lag)
        self._lag_at = time.monotonic()
        self.lag_wanted = False
        return lag

    def lag_now(self) -> None:
        """Compute the straggler analysis a page asked for (`lag_wanted`), off the page's path."""
        if self.lag_wanted:
            self._stragglers(self.report())

    def host_rows(self, r: GoodputReport) -> list[dict[str, Any]]:
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
                st = quantiles(hs.durs[:])
            row.update({k: v for k, v in (st or {}).items() if k not in ("host", "steps")})
            rows.append(row)
        return rows

    def _pairs(self, hs: HostSeries) -> list[dict[str, Any]]:
        """Activities of one host as (phase, start, end), sorted by start (ui/_pairing.py),
        kept for the view's generation: new records are paired as they come."""
        pc = hs.pairing
        if pc is None or pc.gen != self.gen or pc.done > len(hs.others):
            pc = hs.pairing = Pairing(self.gen)
        return pc.activities(hs.others, hs.job_starts, self.max_time)
