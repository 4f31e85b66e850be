"""Goodput over time for the job page: the job cut into pieces, each piece's productive
seconds the accounting's (`productive_by_piece`), computed on a background worker (the
package's one pattern, `mlgoodput._worker`) and kept, so that a live page computes only the
newest pieces and a request never waits longer than it asks to.

A computation that fails is not hidden: the job view counts it, logs it once and shows it
(`JobView.errors()`, in the API's JSON) until a later computation succeeds; the next request
tries again, and a failure while a page asked for a newer plan goes on to that plan."""

from __future__ import annotations

import threading
from typing import Any, Protocol

from mlgoodput._worker import BackgroundWorker
from mlgoodput.accounting import GoodputCalculator, productive_by_piece
from mlgoodput.ui import _saved
from mlgoodput.ui._series import HostSeries

__all__ = ["Piece", "PieceWorker", "Pieces", "Plan", "shared_worker"]

#: what a page asked for: (start, end, piece width, number of pieces, ideal step time)
Plan = tuple[float, float, float, int, float]
#: one piece: (end, ideal step time, events read when computed, productive seconds, seconds,
#: settled when computed, the view's generation then)
Piece = tuple[float, float, int, float, float, bool, int]


class PieceView(Protocol):
    """What the pieces need of their job view (`ui._job.JobView`)."""

    lock: Any
    calc: GoodputCalculator
    events: int
    gen: int
    hosts: dict[int, HostSeries]

    def lead(self) -> int | None: ...
    def settled(self, b: float, since_events: int, gen: int) -> bool: ...
    def settled_until(self) -> float: ...
    def keep(self) -> bool: ...
    def keep_due(self) -> bool: ...
    def failed(self, kind: str, e: BaseException) -> None: ...
    def succeeded(self, kind: str) -> None: ...


class PieceWorker(BackgroundWorker):
    """Computes the pieces that pages asked for, one job after another (a job asked for
    twice in a round is computed once)."""

    def __init__(self, name: str = "mlgoodput-ui-pieces") -> None:
        super().__init__(name, interval_s=60.0)  # woken by submit; the interval only idles

    def _handle(self, items: list[Any]) -> None:
        seen: set[int] = set()
        for p in items:
            if id(p) not in seen:
                seen.add(id(p))
                p.compute()


_shared: PieceWorker | None = None
_shared_lock = threading.Lock()


def shared_worker() -> PieceWorker:
    """The process's piece worker for job views made without one (the UI server's API passes
    its own, closed with it)."""
    global _shared
    with _shared_lock:
        if _shared is None or _shared.closed:
            _shared = PieceWorker()
        return _shared


class Pieces:
    """The goodput-over-time pieces of one job view: `rows[(start, width)][k]` is piece k of
    a cut that starts at `start` into pieces `width` seconds wide."""

    def __init__(self, view: PieceView, worker: PieceWorker) -> None:
        self._view = view
        self._worker = worker
        self.rows: dict[tuple[float, float], dict[int, Piece]] = {}
        self.plan: Plan | None = None  # the latest plan asked for
        self.done: Plan | None = None  # the latest plan computed whole
        self._cond = threading.Condition()
        self._queued = False  # handed to the worker and not computed yet
        self._failed: Plan | None = None  # the plan whose computation failed last

    def want(self, plan: Plan, wait_s: float) -> bool:
        """Have the pieces of `plan` computed (again: what changed since is redone); True when
        all are there, after waiting up to `wait_s` for the worker."""
        with self._cond:
            self.plan = plan
            submit = not self._queued
            if submit:
                self._queued = True
                self._failed = None
        if submit and not self._worker.submit(self):  # a worker closed with its server
            with self._cond:
                self._queued = False
                return self.done == plan
        with self._cond:
            self._cond.wait_for(lambda: self.done == plan or self._failed == plan, timeout=max(0.0, wait_s))
            return self.done == plan

    def compute(self) -> None:
        """On the worker: compute the stale pieces of the latest plan until no newer plan came
        meanwhile (a failed plan too); then save what a server started again opens the job
        from, when a save is due. Never raises: a failure is handed to the view (counted,
        logged once, shown until the same kind succeeds)."""
        while True:
            with self._cond:
                plan = self.plan
                if plan is None:
                    self._queued = False
                    return
            try:
                self._compute(plan)
            except Exception as e:
                with self._cond:
                    newer = self.plan != plan  # a page asked for another plan meanwhile: try it
                    if not newer:
                        self._queued = False
                        self._failed = plan
                        self._cond.notify_all()
                self._view.failed("goodput", e)
                if newer:
                    continue
                return
            self._view.succeeded("goodput")
            with self._cond:
                last = self.plan == plan
                if last:
                    self.done = plan
                    self._queued = False
                    self._cond.notify_all()
            if last:
                # saved for the next server start only when something is due (a finished job's
                # pieces, grown series, the accounting's state): a save can be large, and this
                # worker computes every job's pieces
                try:
                    if self._view.keep_due():
                        self._view.keep()
                        self._view.succeeded("save")
                except Exception as e:
                    self._view.failed("save", e)
                return

    def _compute(self, plan: Plan) -> None:
        v = self._view
        t0, t1, width, n, ideal = plan
        pieces = self.rows.setdefault((t0, width), {})
        stale = [k for k in range(n) if not self._fresh(pieces.get(k), min(t1, t0 + (k + 1) * width), ideal)]
        if not stale:
            return
        lo, hi = stale[0], stale[-1] + 1  # from the first stale piece to the last, in one pass over their steps
        edges = [t0 + k * width for k in range(lo, hi)] + [min(t1, t0 + hi * width)]
        with v.lock:  # the calculator as the page's last report left it
            prod = productive_by_piece(v.calc, edges, ideal)
            settled = v.settled_until()
            for k, (a, b, p) in enumerate(zip(edges, edges[1:], prod, strict=False), lo):
                pieces[k] = (b, ideal, v.events, p, b - a, b <= settled, v.gen)

    def _fresh(self, have: Piece | None, b: float, ideal: float) -> bool:
        return (
            have is not None
            and have[0] == b
            and abs(have[1] - ideal) <= 0.01 * ideal
            and have[5]
            and self._view.settled(b, have[2], have[6])
        )

    # -- saved pieces (ui/_saved.py) ---------------------------------------------------------
    def adopt(self, pc: _saved.Pieces, events: int, covered: int) -> None:
        """Take saved pieces, where the lead host's steps and other events before their end are
        those they were computed from (`covered`: the lead's step starts the saved series were
        found to fit)."""
        v = self._view
        hs = v.hosts.get(pc.lead)
        if hs is None or pc.lead != v.lead() or not pc.rows:
            return
        last = max(b for b, *_ in pc.rows.values())
        if covered < 2 or hs.times[min(covered, len(hs.times)) - 1] < last:
            return  # pieces reach beyond the steps known unchanged
        if _saved.others_before(hs.log, last) != pc.others:
            return
        got = self.rows.setdefault((pc.start, pc.width), {})
        for k, (b, ideal, prod, total) in pc.rows.items():
            got.setdefault(k, (b, ideal, events, prod, total, True, v.gen))

    def to_save(self) -> _saved.Pieces | None:
        """The settled pieces of the latest plan, as ui/_saved.py saves them (None: nothing)."""
        v = self._view
        plan = self.done or self.plan
        lead = v.lead()
        if plan is None or lead is None:
            return None
        t0, _, width, _, _ = plan
        rows = {
            k: (p[0], p[1], p[3], p[4])
            for k, p in self.rows.get((t0, width), {}).items()
            if p[5] and v.settled(p[0], p[2], p[6])
        }
        if not rows:
            return None
        last = max(b for b, *_ in rows.values())
        return _saved.Pieces(t0, width, lead, _saved.others_before(v.hosts[lead].log, last), rows)
