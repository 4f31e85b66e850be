"""The fleet of one store: each job's summary kept (in memory and in the store's state), made
again only for a job with something new, and the fleet queries over them (accounting/_fleet.py).

A finished job's summary is read from the store once and then costs one position check per
query, so a fleet of a thousand long jobs answers from a thousand small reads. A running job is
asked of its calculator, which this source keeps between queries (it reads only what is new).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from mlgoodput.accounting._calculator import GoodputCalculator
from mlgoodput.accounting._fleet import (
    NAMESPACE,
    FleetReport,
    JobSummary,
    LabelRecord,
    Prices,
    bucket_of,
    fleet,
    key,
    summarize,
)
from mlgoodput.events import Kind
from mlgoodput.store import StateListing, StateStore, StoreError

log = logging.getLogger("mlgoodput")

RESERVED_PREFIX = "mlgoodput."  # namespaces of runs, console, JAX metrics: not goodput jobs
_SETTLED = ("finished", "crashed", "empty")  # statuses whose report does not move with time
_LABELS = int(Kind.JOB_LABELS)
_PEAK = int(Kind.PEAK_FLOPS)
MAX_PIECES = 4096  # cut hours remembered (two per job that an edge of a live range cuts)


class FleetSource:
    """Fleet queries over the goodput jobs of one store (`report`); thread-safe."""

    def __init__(self, store: Any, *, clock: Callable[[], float] = time.time, save: bool = True) -> None:
        self._store = store
        self._clock = clock
        self._save = save and isinstance(store, StateStore)
        self._lock = threading.Lock()
        self._summaries: dict[tuple[str, str], JobSummary] = {}
        self._calcs: dict[tuple[str, str], GoodputCalculator] = {}
        # what was saved last of each job (cursor, status, listing): saved again only when changed
        self._saved: dict[tuple[str, str], tuple[int, str, tuple[int, float] | None]] = {}
        # jobs with no summary (nothing to account, or their accounting failed), by the listing
        # that said so: not asked again (nor every summary read again) until it changes
        self._none: dict[tuple[str, str], tuple[int, float]] = {}
        # an hour cut by an edge of the range, answered for a job at a cursor: a range that stays
        # put between queries (a live page) asks the job's accounting once, not each time
        self._pieces: dict[tuple[str, str, int, float, float], Mapping[str, float]] = {}
        self._now = clock()
        #: how the last refresh went: jobs whose summary was read from the store, made again, kept
        self.last_counts: dict[str, int] = {}

    def summaries(self, since: float | None = None) -> list[JobSummary]:
        """Every goodput job's summary, up to date (jobs whose last event is before `since` and
        that had settled then are skipped)."""
        with self._lock:
            return self._refresh(since)

    def report(
        self,
        since: float,
        until: float,
        by: str = "team",
        prices: Prices | None = None,
        link: Callable[[JobSummary], str] | None = None,
    ) -> FleetReport:
        """The fleet's figures for [since, until] grouped by label `by` (or "job")."""
        if not until > since:
            raise ValueError(f"until must be after since, got since={since!r}, until={until!r}")
        with self._lock:
            got = self._refresh(since)
            try:
                return fleet(got, since, until, by, self._exact, prices, link)
            finally:  # a settled job's summary is all a later query needs: free its engine
                for s in got:
                    if s.status in _SETTLED:
                        self._calcs.pop((s.logger, s.job), None)

    # -- keeping the summaries -----------------------------------------------------------------
    def _refresh(self, since: float | None) -> list[JobSummary]:
        self._now = self._clock()
        counts = {"kept": 0, "read": 0, "made": 0}
        out: list[JobSummary] = []
        listing = [i for i in self._store.jobs() if not i.namespace.startswith(RESERVED_PREFIX)]
        saved = self._saved_summaries(listing)
        for info in listing:
            ns, job = info.namespace, info.job
            k = (ns, job)
            seen = (int(info.events), float(info.last_time))
            if self._none.get(k) == seen:
                continue
            s = self._summaries.get(k)
            how = "kept"
            if s is None:
                s, how = self._load(ns, job, saved), "read"
            fresh = s is not None and self._fresh(s, seen)
            if fresh and s is not None and since is not None and s.end < since and s.status in _SETTLED:
                self._summaries[k] = s  # settled before the range, nothing new: not in it
                counts[how] += 1
                continue
            if s is None or not fresh or s.status not in _SETTLED:
                try:
                    s, how = self._make(ns, job, seen), "made"
                except Exception as e:  # one job we cannot account is left out and said, not fatal
                    log.warning("mlgoodput: fleet: cannot account job %s/%s: %s", ns, job, e)
                    s = None
                if s is None:
                    self._none[k] = seen
                    self._summaries.pop(k, None)
                    continue
                self._none.pop(k, None)
            self._summaries[k] = s
            counts[how] += 1
            out.append(s)
        self.last_counts = counts
        return out

    def _fresh(self, s: JobSummary, seen: tuple[int, float]) -> bool:
        """Whether nothing was stored for the job since its summary was made: the store's
        listing says what it said then (else, for a summary without it, the stream's position)."""
        if s.listed is not None:
            return s.listed == seen
        try:
            latest, _ = self._store.stream_position(s.logger, s.job, s.cursor)
        except (AttributeError, StoreError, OSError):
            return False
        return int(latest) == s.cursor

    def _saved_summaries(self, listing: list[Any]) -> dict[str, bytes] | None:
        """Every saved summary in one read, when some job's is not in memory and the store can."""
        if not self._save or not isinstance(self._store, StateListing):
            return None
        if all(
            (i.namespace, i.job) in self._summaries
            or self._none.get((i.namespace, i.job)) == (int(i.events), float(i.last_time))
            for i in listing
        ):
            return None
        try:
            return self._store.load_single_states(NAMESPACE)
        except (StoreError, OSError) as e:  # each job's own read then
            log.info("mlgoodput: fleet: cannot read the saved summaries at once: %s", e)
            return None

    def _load(self, ns: str, job: str, saved: dict[str, bytes] | None) -> JobSummary | None:
        """The job's saved summary: from `saved` (all of them, read at once) when given."""
        if not self._save:
            return None
        if saved is not None:
            raw = saved.get(key(ns, job))
        else:
            try:
                pieces = self._store.load_state(NAMESPACE, key(ns, job))
                raw = b"".join(pieces) if pieces is not None else None
            except (StoreError, OSError) as e:
                log.info("mlgoodput: fleet: cannot read the saved summary of %s/%s: %s", ns, job, e)
                return None
        if raw is None:
            return None
        s = JobSummary.loads(raw)
        if s is None or (s.logger, s.job) != (ns, job):
            return None
        self._saved[(ns, job)] = (s.cursor, s.status, s.listed)
        return s

    def _calc(self, ns: str, job: str) -> GoodputCalculator:
        c = self._calcs.get((ns, job))
        if c is None:
            c = GoodputCalculator(job, ns, store=self._store, clock=lambda: self._now)
            self._calcs[(ns, job)] = c
        return c

    def _make(self, ns: str, job: str, seen: tuple[int, float] | None = None) -> JobSummary | None:
        """The job's summary from its calculator (a saved state makes this O(new events))."""
        calc = self._calc(ns, job)
        r = calc.report()
        if r.total_s <= 0 and r.status == "empty":
            self._calcs.pop((ns, job), None)
            return None
        segs = calc.partition(configured_ideal_step_time=r.ideal_step_time_s, read=False)
        tl = calc.timeline
        logs = list(tl.hosts.values())
        s = summarize(
            r, segs, _records(logs), peak_sources=_peaks(logs), cursor=calc.cursor, events=tl.events, listed=seen
        )
        if s.status in _SETTLED:
            self._calcs.pop((ns, job), None)  # settled: the summary is all a later query needs
        # saved once settled (a running job's is made again at each query, and moves with the
        # clock), and again only when the job or the listing it was made after changed
        mark = (s.cursor, s.status, s.listed)
        if self._save and s.status in _SETTLED and self._saved.get((ns, job)) != mark:
            try:
                self._store.save_state(NAMESPACE, key(ns, job), [s.dumps()])
                self._saved[(ns, job)] = mark
            except (StoreError, OSError) as e:  # the next query makes it again
                log.info("mlgoodput: fleet: cannot save the summary of %s/%s: %s", ns, job, e)
        return s

    def _exact(self, s: JobSummary, lo: float, hi: float) -> Mapping[str, float]:
        """The job's seconds by bucket in [lo, hi] (an hour an edge of the range cuts)."""
        memo = (s.logger, s.job, s.cursor, lo, hi)
        settled = s.status in _SETTLED
        if settled and memo in self._pieces:
            return self._pieces[memo]
        calc = self._calc(s.logger, s.job)
        if calc.cursor != s.cursor:
            calc.report()
        out: dict[str, float] = {}
        for seg in calc.partition(lo, hi, configured_ideal_step_time=s.ideal_step_time_s, read=False):
            b = bucket_of(seg.bucket)
            out[b] = out.get(b, 0.0) + seg.seconds
        if settled:
            if len(self._pieces) >= MAX_PIECES:
                self._pieces.clear()
            self._pieces[memo] = out
        return out


def _peaks(logs: Iterable[Any]) -> list[str]:
    """The sources of every recorded peak, in time order (a table's counts the job's devices)."""
    got = sorted((r.time, r.name) for hlog in logs for r in hlog.others if r.kind == _PEAK and r.name)
    return [name for _, name in got]


def _records(logs: Iterable[Any]) -> list[LabelRecord]:
    """The JOB_LABELS events of every host."""
    out: list[LabelRecord] = []
    for hlog in logs:
        for r in hlog.others:
            if r.kind != _LABELS:
                continue
            labels: dict[str, str] = {}
            if r.attrs:
                try:
                    got = json.loads(r.attrs).get("labels") or {}
                    labels = {str(k): str(v) for k, v in got.items()}
                except (ValueError, AttributeError):
                    labels = {}
            n = None if r.value is None or not r.value >= 1 else int(r.value)
            out.append(LabelRecord(r.time, labels, n, r.name))
    return out
