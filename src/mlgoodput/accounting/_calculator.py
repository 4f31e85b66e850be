"""GoodputCalculator: the seed-compatible query API over a store, incremental across calls."""

from __future__ import annotations

import datetime as _dt
import logging
import math
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from mlgoodput import _env
from mlgoodput._journal import Journal
from mlgoodput._once import Once
from mlgoodput._recovery import recover_changed_journals
from mlgoodput.accounting import _snapshot
from mlgoodput.accounting._engine import Engine
from mlgoodput.accounting._facts import FactsCache, facts_from_timeline
from mlgoodput.accounting._hoststats import StatColumns
from mlgoodput.accounting._partition import Segment, partition
from mlgoodput.accounting._productivity import productivity
from mlgoodput.accounting._reader import StoreReader
from mlgoodput.accounting._report import BadputType, GoodputReport, GoodputType, HostStepStats, with_productivity
from mlgoodput.accounting._seed_steps import SeedSteps
from mlgoodput.accounting._stragglers import HostStragglers, RankColumns, RankStepStats, StragglerReport
from mlgoodput.accounting._timeline import Timeline
from mlgoodput.store import Columns, Store, open_store

TimeArg = _dt.datetime | float | int | None
T = TypeVar("T")
SNAPSHOT_EVERY = 100_000  # events of growth between two saves of the accounting state

log = logging.getLogger("mlgoodput")

#: How long a query waits for this process's own recorders to ship what they recorded.
LIVE_FLUSH_TIMEOUT_S = 5.0


def when(value: TimeArg, arg: str) -> float | None:
    """A time argument as UNIX seconds (None stays None); TypeError naming `arg` otherwise."""
    if value is None:
        return None
    if isinstance(value, _dt.datetime):
        return value.timestamp()
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    raise TypeError(f"{arg} must be a datetime, UNIX seconds or None, got {value!r}")


class GoodputCalculator:
    """Computes Goodput and the Badput breakdown of one job from its recorded events.

    A calculator keeps what it has read: asking again reads only the events stored since
    (its own cursor), and the engine extends its derived state for them. With `snapshot`
    (default: on unless $MLGOODPUT_SNAPSHOT=0) it also saves that state into the store as the
    job grows, and a new calculator starts from it, reading only the events stored after it;
    a saved state that fails a check (format, store, cursor, digest) is ignored. With
    `save_later=True` a query only marks a save due, and `save_state()` makes it (a server
    answers first and saves from its background worker). `save_growth`: the growth, as a share
    of the events the last save covered, that makes a query save again (a save writes the
    whole state: a long-lived reader such as the monitor saves after the job doubled, 1.0).
    """

    def __init__(
        self,
        job_name: str,
        logger_name: str,
        cloud_logger: Any = None,
        using_pathways: bool = False,
        max_logs_retention_period: _dt.timedelta | None = None,
        gcs_path: str | None = None,
        cache_dir: str = "/tmp",
        *,
        store: Any = None,
        stall_factor: float = 3.0,
        clock: Callable[[], float] = time.time,
        snapshot: bool | None = None,
        save_later: bool = False,
        save_growth: float = 0.1,
    ) -> None:
        if not isinstance(job_name, str) or not job_name:
            raise ValueError(f"job_name must be a non-empty string, got {job_name!r}")
        if not isinstance(logger_name, str) or not logger_name:
            raise ValueError(f"logger_name must be a non-empty string, got {logger_name!r}")
        max_logs_retention_period = retention_period(max_logs_retention_period)
        for arg, v in (("gcs_path", gcs_path), ("cache_dir", cache_dir)):
            if v is not None and not isinstance(v, (str, os.PathLike)):
                raise TypeError(f"{arg} must be a path string or None, got {v!r}")
        if cloud_logger is not None and store is not None:
            raise ValueError(
                f"pass either cloud_logger or store, not both (got cloud_logger={cloud_logger!r}, store={store!r})"
            )
        self.job_name = job_name
        self.logger_name = logger_name
        self.using_pathways = using_pathways  # accepted for compatibility; no effect here
        # The seed keeps a local/GCS cache of its computed state; ours is the store plus an
        # in-memory cursor, so these are kept for introspection only (docs/compatibility.md).
        self.max_logs_retention_period = max_logs_retention_period
        self.gcs_path = gcs_path
        self.cache_dir = cache_dir
        if cloud_logger is not None:
            from mlgoodput._recorder import store_from_cloud_logger

            store = store_from_cloud_logger(cloud_logger, logger_name)
        self._store: Store = open_store(store)
        # the store's URL, looked up once (every query's journal check and live-journal match use it)
        self._url_attr: object = getattr(self._store, "url", None)
        self._url = self._url_attr if isinstance(self._url_attr, str) else None
        self._reader = StoreReader(self._store, logger_name, job_name)  # the job's events, from a cursor
        self._clock = clock
        self._notes_said = Once()  # which report notes were logged (each once)
        self._stall_factor = stall_factor
        self._eng = Engine(stall_factor=stall_factor)
        # a saved state read as far as its header: the engine is built from it when first used
        self._pending: _snapshot.Saved | None = None
        self._facts = FactsCache()  # the last scan of the non-step events, for productivity
        self._lock = threading.Lock()
        self._seed = SeedSteps()  # the seed's step times, kept between calls
        # saved state (accounting/_snapshot.py): None = off, else the growth in events that
        # triggers a save; `_saved` = the events the saved state covers
        self._save_every = snapshot_policy(snapshot)
        if (
            isinstance(save_growth, bool)
            or not isinstance(save_growth, (int, float))
            or not (math.isfinite(save_growth) and save_growth > 0)
        ):
            raise ValueError(f"save_growth must be a positive, finite share of the saved events, got {save_growth!r}")
        self._save_growth = float(save_growth)
        if not isinstance(save_later, bool):
            raise TypeError(f"save_later must be True or False, got {save_later!r}")
        # save_later: a query leaves its save to `save_state` (a server's background worker),
        # as (the whole-job answer, the events read then); None when no save is due
        self._save_later = save_later
        self._due: tuple[tuple[float, GoodputReport] | None, int] | None = None
        self._saved = 0
        self._tried = -1  # the events count at which a save with the answer was last considered
        self._restored = False
        # the straggler analysis of the engine's host logs (`stragglers`), for that timeline,
        # and the (cursor, window) whose answer was saved last
        self._lag: tuple[Timeline, HostStragglers] | None = None
        self._lag_saved: tuple[int, list[float | None]] | None = None
        self._lag_last: tuple[int, list[float | None], StragglerReport] | None = None  # (cursor, window, answer)

    @property
    def store(self) -> Store:
        return self._store

    @property
    def _cursor(self) -> int:
        return self._reader.cursor

    @_cursor.setter
    def _cursor(self, value: int) -> None:
        self._reader.cursor = value

    @property
    def cursor(self) -> int:
        """How far into the job's stream this calculator has read (the store's cursor after
        the last event read): another reader of the same stream compares its own with it."""
        return self._cursor

    @property
    def _engine(self) -> Engine:
        """The engine; built from the saved state on first use (SnapshotError when that fails)."""
        p = self._pending
        if p is not None:
            try:
                eng = p.engine()
            except _snapshot.SnapshotError:
                self._pending = None
                raise
            self._eng = eng
            if p.facts is not None:  # the saved scan of the non-step events: no pass over them
                self._facts = p.facts
            self._pending = None  # last: `timeline` without the lock sees the engine built
        return self._eng

    @_engine.setter
    def _engine(self, engine: Engine) -> None:
        self._pending = None
        self._eng = engine

    @property
    def timeline(self) -> Timeline:
        """The events read so far, per host (the engine's own; read it, never change it). It is
        replaced when the calculator starts from a saved state, and grows with each query; a
        saved state found damaged when it is built is dropped and the job read from the store."""
        if self._pending is None:
            return self._eng.timeline
        # the engine is built from the saved state now: under the lock, as a query builds it
        # (a piece that fails its check drops the state, and the job is read from the store)
        return self._guarded(lambda: self._engine.timeline)

    def _drop_saved(self, e: Exception) -> None:
        """Forget the saved state (a piece of it failed a check when read, or a newer save
        replaced it meanwhile) and read the job again from the store now: whoever asked (a
        page following `timeline`, a save after a query) sees the whole job, never an empty one."""
        log.warning(
            "mlgoodput: the saved accounting state of %s/%s is damaged or was replaced (%s);"
            " reading the job from the store",
            self.logger_name,
            self.job_name,
            e,
        )
        self._engine = Engine(stall_factor=self._stall_factor)
        self._cursor = 0
        self._saved = 0
        self._restored = True
        self._facts = FactsCache()
        self._seed = SeedSteps()
        self._lag = self._lag_last = None
        self._reader.read(lambda: self._eng.timeline)

    def _guarded(self, fn: Callable[[], T]) -> T:
        """fn() under the lock; once more from the store when the saved state fails a check."""
        with self._lock:
            try:
                return fn()
            except _snapshot.SnapshotError as e:
                self._drop_saved(e)
                return fn()

    def _refresh(self) -> None:
        try:  # what killed processes left behind
            recover_changed_journals(self._store, self._url)
        except OSError:
            pass  # a journal we cannot read now is read by a later query
        url = self._url_attr
        for j in Journal.live(self.job_name):  # read what this process recorded (as the seed)
            if j.namespace == self.logger_name and j.url == url:
                j.flush(LIVE_FLUSH_TIMEOUT_S)
        if not self._restored:
            self._restored = True
            if self._save_every is not None and self._cursor == 0:
                got = _snapshot.restore(self._store, self.logger_name, self.job_name, stall_factor=self._stall_factor)
                if got is not None:
                    self._pending, self._cursor, self._saved = got, got.cursor, got.events
                    if got.behind:  # newer events to read: the engine is needed, build it first
                        self._eng = self._engine
        self._reader.read(lambda: self._engine.timeline)  # (the engine is built when needed)

    def _keep(self, answer: tuple[float, GoodputReport] | None = None) -> None:
        """After a query: save the engine's state now, or mark it due for `save_state`."""
        if self._save_later:
            self._due = (answer, self._eng.timeline.events)
        else:
            self._save(answer)

    @property
    def state_due(self) -> bool:
        """With `save_later=True`: a query ran since the last `save_state` (a save may be due)."""
        return self._due is not None

    def save_state(self) -> bool:
        """With `save_later=True`: save the accounting state now if the queries since the last
        call made a save due (the same rule as an immediate save); True when saved. A long
        job's first save writes some hundred megabytes: a server answers first, saves after."""
        with self._lock:
            due, self._due = self._due, None
            if due is None or self._pending is not None:
                return False
            answer, events = due
            if events != self._eng.timeline.events:
                answer = None  # read more since: that answer no longer covers the job
            before = self._saved
            self._save(answer)
            return self._saved != before

    def _save(self, answer: tuple[float, GoodputReport] | None = None) -> None:
        """Save the engine's state when the job grew enough since the last save (after a query,
        so what it derived is saved too). `answer`: the whole-job report just made and its
        query time, saved with the state when it holds for any later query time."""
        every = self._save_every
        if every is None or self._pending is not None:  # nothing read since the saved state
            return
        n = self._engine.timeline.events
        try:
            if n - self._saved < (every if every == 1 else max(every, int(self._saved * self._save_growth))):
                # too little growth to save again, unless the job has ended since the last save:
                # then once, with the answer, so later processes need nothing but the header
                if answer is None or self._tried == n or self._saved == 0:
                    return
                self._tried = n
                if not self._settled(*answer):
                    return
            elif answer is not None:
                self._tried = n
                if not self._settled(*answer):
                    answer = None
            _snapshot.save(self._store, self._engine, self.logger_name, self.job_name, self._cursor, answer)
        except _snapshot.SnapshotError as e:  # a piece of the state restored earlier, read only now
            self._drop_saved(e)
            return
        self._saved = n  # also after a failed save: try again only once the job grew again
        last = self._lag_last
        if last is not None and last[0] == self._cursor:  # the straggler analysis of these events
            self._save_stragglers(last[2], last[1])

    def _settled(self, q: float, r: GoodputReport) -> bool:
        """Whether the whole-job report `r` made at `q` holds for any later query time while
        nothing new comes in: the job has ended, and a query far later gives the same report
        (then a new process answers from the saved state alone)."""
        e = self._engine
        lead = e.timeline.lead_host(q)
        if lead is None or e.attempts(e.timeline.hosts[lead], q)[-1].ended_by != "job_end":
            return False
        later = q + 1e6
        again = _with_productivity(e, e.report(self.job_name, self.logger_name, later), later, None)
        return again == r and _snapshot.round_trips(r)

    # -- ours ----------------------------------------------------------------------------
    def report(
        self,
        start: TimeArg = None,
        end: TimeArg = None,
        *,
        configured_ideal_step_time: float | None = None,
        at: TimeArg = None,
    ) -> GoodputReport:
        """The report for the window [start, end] (default: the whole job) as of `at` (default: now).

        `at` in the past gives the job as it looked then: later events are ignored and the
        step running at `at` counts up to `at`.
        """
        a = when(start, "start")
        b = when(end, "end")
        q_at = when(at, "at")
        ideal = _check_ideal(configured_ideal_step_time)
        return self._guarded(lambda: self._report(a, b, q_at, ideal))

    def _report(self, a: float | None, b: float | None, q_at: float | None, ideal: float | None) -> GoodputReport:
        self._refresh()
        whole = a is None and b is None and ideal is None
        p = self._pending
        if p is not None and whole:  # nothing new since the saved state: its answer, if it holds
            r0 = p.answer(max(self._clock(), float(p.head["max_time"])) if q_at is None else q_at)
            if r0 is not None:
                return r0
        engine, q = self._engine_at(q_at)
        r = _with_productivity(
            engine,
            engine.report(self.job_name, self.logger_name, q, a, b, ideal),
            q,
            a,
            self._facts if engine is self._engine else None,
        )
        if engine is self._engine:
            self._keep((q, r) if whole else None)
        self._say_notes(r)
        return r

    def partition(
        self,
        start: TimeArg = None,
        end: TimeArg = None,
        *,
        configured_ideal_step_time: float | None = None,
        at: TimeArg = None,
        read: bool = True,
    ) -> tuple[Segment, ...]:
        """Where each second of `report(start, end, ...)` lies: sorted, disjoint segments of one
        bucket each, covering the window; their seconds per bucket are the report's. With
        `read=False` nothing new is read: the events of the last query, as of `at` (a page lays
        out exactly the report it shows); only a saved state found damaged is read again from
        the store."""
        a = when(start, "start")
        b = when(end, "end")
        q_at = when(at, "at")
        ideal = _check_ideal(configured_ideal_step_time)

        def segments() -> tuple[Segment, ...]:
            if not read:
                engine = self._engine
                q = max(self._clock(), engine.timeline.max_time) if q_at is None else q_at
                return tuple(partition(engine, q, a, b, ideal))
            self._refresh()
            return tuple(partition(*self._engine_at(q_at), a, b, ideal))

        return self._guarded(segments)

    def stragglers(self, start: TimeArg = None, end: TimeArg = None, *, read: bool = True) -> StragglerReport:
        """The straggler analysis of the steps started in [start, end] (default: all): each
        rank's step times, who held the collectives back, and the straggler verdict
        (docs/torch.md, "Stragglers"; a rank is a host of this job). Worked out from the step
        starts this calculator has read, kept up to date: asking again costs the steps read
        since. `read=False`: of the events of the last query, without reading the store (a
        report and its stragglers describe one state of the job); as in
        `get_signed_step_deviation`, a calculator that has read nothing yet reads first (and
        a saved state found damaged is read again from the store). With the saved state on,
        a job's analysis is saved with the accounting's and answered from it while nothing
        new was stored."""
        a = when(start, "start")
        b = when(end, "end")

        def run() -> StragglerReport:
            if read or self._cursor == 0:
                self._refresh()
            window = [a, b]
            last = self._lag_last
            if last is not None and last[0] == self._cursor and last[1] == window:  # nothing read since
                return last[2]
            rep = self._saved_stragglers(window) if self._lag is None else None
            if rep is None:
                e = self._engine
                tl = e.timeline
                if self._lag is None or self._lag[0] is not tl:
                    self._lag = (tl, HostStragglers())
                # the accounting's host statistics, worked out only when the window holds every step
                rep = self._lag[1].report(
                    tl.hosts, lambda: e.host_stat_columns(tl.max_time), a, b, token=(tl, tl.reshapes)
                )
                self._save_stragglers(rep, window)
            self._lag_last = (self._cursor, window, rep)
            return rep

        return self._guarded(run)

    def columns_of(
        self, hosts: Sequence[HostStepStats], ranks: Sequence[RankStepStats] | None
    ) -> tuple[StatColumns | None, RankColumns | None]:
        """The columns beside a report's host rows and a straggler analysis's rank rows, when
        they are this calculator's latest and were made together (None where not): the
        monitor's choice of hosts compares these lists, not the rows taken apart again."""
        e = self._eng if self._pending is None else None
        got = None if e is None else e.stat_columns(hosts)
        lag = self._lag
        rc = None if lag is None or ranks is None else lag[1].columns
        return got, (rc if rc is not None and rc.rows is ranks else None)

    def _saved_stragglers(self, window: list[float | None]) -> StragglerReport | None:
        """The straggler analysis saved at this calculator's cursor and events for the same
        steps, if any (asked before this calculator keeps an analysis of its own)."""
        from mlgoodput.accounting import _stragglers
        from mlgoodput.store import StateStore

        st = self._store
        if self._save_every is None or not isinstance(st, StateStore):
            return None
        try:
            pieces = st.load_state(_stragglers.STATE_NAMESPACE, _stragglers.state_key(self.logger_name, self.job_name))
        except OSError as e:
            log.info("mlgoodput: cannot read the saved straggler analysis of %s (%s)", self.job_name, e)
            return None
        events = self._saved if self._pending is not None else self._eng.timeline.events
        return _stragglers.from_saved(pieces, getattr(st, "url", None), self._cursor, events, window)

    def _save_stragglers(self, rep: StragglerReport, window: list[float | None]) -> None:
        """Save the analysis beside the accounting's saved state when that state was saved at
        exactly these events (both describe one state of the job) and the job is long enough
        for a recomputation to cost."""
        from mlgoodput.accounting import _stragglers
        from mlgoodput.store import StateStore

        every, st, tl = self._save_every, self._store, self._eng.timeline
        if every is None or not isinstance(st, StateStore) or self._saved != tl.events or not rep.ranks:
            return
        if self._lag_saved == (self._cursor, window):
            return
        steps = sum(len(h.times) for h in tl.hosts.values())
        if steps < min(every, _stragglers.SAVE_FROM):  # small jobs: cheap again
            return
        lo = min((h.times[0] for h in tl.hosts.values() if len(h.times)), default=math.inf)
        hi = max((h.times[-1] for h in tl.hosts.values() if len(h.times)), default=-math.inf)
        url = getattr(st, "url", None)
        doc = _stragglers.saved_doc(rep, url, self._cursor, tl.events, (lo, hi), list(window))
        try:
            st.save_state(_stragglers.STATE_NAMESPACE, _stragglers.state_key(self.logger_name, self.job_name), [doc])
        except OSError as e:
            log.info("mlgoodput: cannot save the straggler analysis of %s (%s)", self.job_name, e)
            return
        self._lag_saved = (self._cursor, window)

    def productive_by_piece(self, edges: Sequence[float], configured_ideal_step_time: float) -> list[float]:
        """Productive seconds of each piece [edges[k], edges[k+1]] of the job as read by the
        last query (no read of the store, but for a saved state found damaged, read again),
        with the given ideal step time: what
        `report(edges[k], edges[k + 1], configured_ideal_step_time=...)` says of each, in one
        pass over the steps (accounting/_overtime.py: goodput over time)."""
        from mlgoodput.accounting._overtime import by_piece

        def run() -> list[float]:
            engine = self._engine
            q = max(self._clock(), engine.timeline.max_time)
            return by_piece(engine, q, edges, float(configured_ideal_step_time))

        # under the lock (a saved state found damaged now is dropped, as a query drops it)
        return self._guarded(run)

    def _say_notes(self, r: GoodputReport) -> None:
        """Log each of the report's notes (a figure unknown, the host ahead of the device) once."""
        p = r.productivity
        if p is None or not p.notes:
            return
        for note in p.notes:  # keyed by which note: its figures change from query to query
            self._notes_said.warning(log, note[:12], "mlgoodput: job %r: %s", self.job_name, note)

    def _engine_at(self, q_at: float | None) -> tuple[Engine, float]:
        """The engine and query time of a query as of `q_at` (default: now, or the latest event
        when that is later); a time before the latest event read gets the job as it was then."""
        if q_at is not None and q_at < self._engine.timeline.max_time:
            return self._engine_as_of(q_at), q_at
        engine = self._engine
        return engine, max(self._clock(), engine.timeline.max_time) if q_at is None else q_at

    def _engine_as_of(self, q: float) -> Engine:
        res = self._store.read(self.logger_name, self.job_name, 0)
        e = Engine(stall_factor=self._stall_factor)
        for cols in res.parts:
            keep = [i for i in range(len(cols)) if cols.times[i] <= q]
            if len(keep) == len(cols):
                e.timeline.ingest(cols)
            elif keep:
                e.timeline.ingest(Columns.from_events(cols.event(i) for i in keep))
        return e

    def rolling_windows(
        self,
        windows_s: Iterable[float],
        end: TimeArg = None,
        *,
        configured_ideal_step_time: float | None = None,
    ) -> dict[int, GoodputReport]:
        """Reports for the windows [end - w, end] (end: now), keyed by window seconds."""
        ws = list(windows_s)
        for w in ws:
            if isinstance(w, bool) or not isinstance(w, (int, float)) or not w > 0:
                raise ValueError(f"windows_s must hold positive numbers of seconds, got {w!r}")
        q_at = when(end, "end")
        ideal = _check_ideal(configured_ideal_step_time)

        def windows() -> dict[int, GoodputReport]:
            self._refresh()
            q = q_at if q_at is not None else max(self._clock(), self._engine.timeline.max_time)
            engine = self._engine if q >= self._engine.timeline.max_time else self._engine_as_of(q)
            out = {
                int(w): _with_productivity(
                    engine,
                    engine.report(self.job_name, self.logger_name, q, q - w, q, ideal),
                    q,
                    q - w,
                    self._facts if engine is self._engine else None,
                )
                for w in ws
            }
            if engine is self._engine:
                self._keep()
            return out

        return self._guarded(windows)

    # -- seed API ------------------------------------------------------------------------
    def get_job_goodput(
        self, include_badput_breakdown: bool = False, configured_ideal_step_time: float | None = None
    ) -> tuple[float, dict[BadputType, Any], int]:
        """(goodput %, badput breakdown in % (empty unless asked), last productive step), as the seed.

        The latest step started is `report().last_step`. Like the seed, a job with no recorded
        time (an unknown job, a wrong logger name) raises `ValueError` instead of reading 0 %."""
        r = self.report(configured_ideal_step_time=configured_ideal_step_time)
        if r.total_s <= 0.0:  # as the seed: no job time is an error, never a silent 0 %
            raise ValueError(
                f"no recorded time for job {r.job_name!r} (logger {r.logger_name!r}): goodput cannot be"
                " calculated; check job_name, logger_name and the store"
            )
        breakdown = _breakdown(r) if include_badput_breakdown else {}
        return r.goodput_pct, breakdown, _productive_step(r)

    def get_job_goodput_interval(
        self, interval_start: TimeArg, interval_end: TimeArg
    ) -> tuple[float, dict[BadputType, Any], int, float, int]:
        """(goodput %, badput breakdown %, last productive step, total seconds, disruptions) in a window."""
        a = when(interval_start, "interval_start")
        b = when(interval_end, "interval_end")
        if a is None or b is None:
            raise ValueError(f"interval_start and interval_end are required, got {interval_start!r}, {interval_end!r}")
        if b <= a:
            raise ValueError(f"interval_end must be after interval_start, got {interval_start!r} .. {interval_end!r}")
        r = self.report(a, b)
        return (r.goodput_pct, _breakdown(r), _productive_step(r, window=True), r.total_s, r.disruptions)

    def get_job_goodput_with_exclusions(
        self,
        exclusion_intervals: Sequence[tuple[TimeArg, TimeArg]],
        include_badput_breakdown: bool = False,
        configured_ideal_step_time: float | None = None,
    ) -> tuple[float, dict[BadputType, Any], int, float]:
        """(goodput %, badput breakdown %, last productive step, excluded seconds) of the whole job
        with the time inside `exclusion_intervals` ((start, end) pairs) taken out of every bucket.

        Intervals with end <= start are skipped with a log line; overlapping ones are merged."""
        ideal = _check_ideal(configured_ideal_step_time)
        spans = _normalize_intervals(exclusion_intervals)
        whole = self.report(configured_ideal_step_time=ideal)
        kept: list[GoodputReport] = []
        cursor = whole.start
        excluded = 0.0
        for s0, s1 in spans:
            lo, hi = max(s0, whole.start), min(s1, whole.end)
            if hi <= lo:
                continue
            if lo > cursor:
                kept.append(self.report(cursor, lo, configured_ideal_step_time=ideal))
            excluded += hi - lo
            cursor = max(cursor, hi)
        if not spans or excluded == 0.0:
            kept = [whole]
        elif cursor < whole.end:
            kept.append(self.report(cursor, whole.end, configured_ideal_step_time=ideal))
        total = sum(r.total_s for r in kept)
        if total <= 0:
            return 0.0, {}, _productive_step(whole), excluded
        productive = sum(r.productive_s for r in kept)
        breakdown: dict[BadputType, Any] = {}
        if include_badput_breakdown:
            for r in kept:
                for bucket, v in list(r.badput_s.items()) + list(r.overlapped_s.items()):
                    if isinstance(v, Mapping):
                        d = breakdown.setdefault(bucket, {})
                        for name, secs in v.items():
                            d[name] = d.get(name, 0.0) + 100.0 * secs / total
                    else:
                        breakdown[bucket] = breakdown.get(bucket, 0.0) + 100.0 * v / total
        return 100.0 * productive / total, breakdown, _productive_step(whole), excluded

    def get_step_deviation(self, configured_ideal_step_time: float | None = None) -> dict[int, float]:
        """The seed's step deviation: step number -> |step time - ideal step time| for every step
        followed by the next step number, where the ideal is `configured_ideal_step_time` or the
        seed's trimmed mean (steps of 1 s or more, those above median + 3 MAD left out).

        Raises ValueError when there are no step times (as the seed). Signed deviations of net
        step times against our median ideal: `get_signed_step_deviation`."""
        ideal_arg = _check_ideal(configured_ideal_step_time)
        times = self._seed_step_times()
        if not times:
            raise ValueError(f"job {self.job_name!r}: no step times available to compute a step deviation")
        ideal = ideal_arg if ideal_arg is not None else self._seed_ideal(times)
        if not ideal:
            raise ValueError(f"job {self.job_name!r}: no ideal step time available (every step is under 1 s)")
        return {step: abs(t - ideal) for step, t in times.items()}

    def get_signed_step_deviation(
        self, configured_ideal_step_time: float | None = None, *, last_n: int | None = None, read: bool = True
    ) -> dict[int, float]:
        """Step number -> net step time minus the ideal step time (spec: Steps), for steps with a
        known end; `last_n` keeps only the latest steps (and costs only that much). `read=False`:
        of the events the last query read, without reading the store again (the monitor, having
        just made a report, gets the deviation of the same events); as in `stragglers`, a
        calculator that has read nothing yet reads first."""
        ideal = _check_ideal(configured_ideal_step_time)
        if last_n is not None and (isinstance(last_n, bool) or not isinstance(last_n, int) or last_n < 1):
            raise ValueError(f"last_n must be a positive integer or None, got {last_n!r}")
        return self._guarded(lambda: self._signed_deviation(ideal, last_n, read or self._cursor == 0))

    def _signed_deviation(self, ideal: float | None, last_n: int | None, refresh: bool) -> dict[int, float]:
        """`get_signed_step_deviation`'s answer (under the lock); without `refresh`, of the events
        read so far (the monitor: the deviation of the same read as the report just made)."""
        if refresh:
            self._refresh()
        engine = self._engine
        q = max(self._clock(), engine.timeline.max_time)
        out = engine.step_deviation(q, ideal, last_n)
        self._keep()
        return out

    def get_job_goodput_details(self) -> dict[str, Any]:
        """The seed's WorkloadMetricDetails of the whole job: productive and badput seconds,
        max productive step, elapsed seconds, disruptions, step deviations and ideal step time."""
        r = self.report()
        badput: dict[BadputType, Any] = {b: (dict(v) if isinstance(v, Mapping) else v) for b, v in r.badput_s.items()}
        badput.update(r.overlapped_s)
        times = self._seed_step_times()
        ideal = self._seed_ideal(times) if times else None
        deviation = {step: abs(t - ideal) for step, t in times.items()} if ideal else {}
        return {
            "goodput_time": {GoodputType.TOTAL: r.productive_s},
            "badput_time": badput,
            "max_productive_step": _productive_step(r),
            "total_elapsed_time": r.total_s,
            "disruption_count": r.disruptions,
            "step_time_deviation": deviation,
            "ideal_step_time": float(ideal or 0.0),
            "total_excluded_time": 0.0,
        }

    def get_interval_metric_details(self, interval_start: TimeArg, interval_end: TimeArg) -> dict[str, Any]:
        """The seed's IntervalWorkloadMetricDetails: goodput and badput % in the window and its size
        in whole seconds (empty dicts, with a log line, when the window cannot be computed)."""
        a = when(interval_start, "interval_start")
        b = when(interval_end, "interval_end")
        size = int(b - a) if a is not None and b is not None else 0
        try:
            goodput, breakdown, *_ = self.get_job_goodput_interval(interval_start, interval_end)
        except ValueError as e:
            log.warning("get_interval_metric_details(%r, %r): %s", interval_start, interval_end, e)
            return {"interval_goodput": {}, "interval_badput": {}, "interval_size": size}
        return {
            "interval_goodput": {GoodputType.TOTAL: goodput},
            "interval_badput": breakdown,
            "interval_size": size,
        }

    def sync_to_gcs(self) -> None:
        """The seed copies its local cache to GCS here; our state lives in the store, so there is
        nothing to copy (a no-op kept so seed code runs)."""

    def _seed_step_times(self) -> dict[int, float]:
        """The seed's step times (accounting/_seed_steps.py), of the events read now."""

        def run() -> dict[int, float]:
            self._refresh()
            tl = self._engine.timeline
            return self._seed.of(tl, max(self._clock(), tl.max_time))

        return self._guarded(run)

    def _seed_ideal(self, step_times: dict[int, float]) -> float | None:
        """The seed's ideal step time of `step_times`, computed once per new set of steps."""
        return self._seed.ideal(step_times)


def _productive_step(r: GoodputReport, window: bool = False) -> int:
    """The seed's third tuple element: the last productive step (0 when there is none); in a
    window, no later than the latest step started in it."""
    m = r.max_productive_step
    if m is None:
        return 0
    if window and r.last_step is not None:
        return min(int(m), int(r.last_step))
    return int(m)


def _normalize_intervals(intervals: Sequence[tuple[TimeArg, TimeArg]]) -> list[tuple[float, float]]:
    """Sorted, merged (start, end) UNIX seconds; pairs with end <= start are skipped (logged)."""
    if isinstance(intervals, (str, bytes)) or not isinstance(intervals, Sequence):
        raise TypeError(f"exclusion_intervals must be a list of (start, end) pairs, got {intervals!r}")
    spans: list[tuple[float, float]] = []
    for pair in intervals:
        try:
            s0, s1 = pair
        except (TypeError, ValueError):
            raise TypeError(f"exclusion_intervals must hold (start, end) pairs, got {pair!r}") from None
        a = when(s0, "exclusion_intervals start")
        b = when(s1, "exclusion_intervals end")
        if a is None or b is None or b <= a:
            log.warning("exclusion interval %r .. %r skipped: its end is not after its start", s0, s1)
            continue
        spans.append((a, b))
    spans.sort()
    merged: list[tuple[float, float]] = []
    for a, b in spans:
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged


def retention_period(value: object) -> _dt.timedelta | None:
    """The seed's `max_logs_retention_period`: a timedelta, or seconds (as its README passes)."""
    if value is None or isinstance(value, _dt.timedelta):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0:
        return _dt.timedelta(seconds=value)
    raise TypeError(f"max_logs_retention_period must be a datetime.timedelta, seconds or None, got {value!r}")


def _with_productivity(
    engine: Engine, r: GoodputReport, q: float, start: float | None, cache: FactsCache | None = None
) -> GoodputReport:
    """The report with its productivity figures (docs/accounting.md, "Productivity")."""
    facts = facts_from_timeline(engine.timeline, q, cache)
    if facts.empty:
        return r
    return with_productivity(r, productivity(facts, r, start))


def snapshot_policy(snapshot: bool | None) -> int | None:
    """None (no saved state) or the growth in events that triggers a save (see _env.SNAPSHOT)."""
    if snapshot is not None and not isinstance(snapshot, bool):
        raise TypeError(f"snapshot must be True, False or None, got {snapshot!r}")
    env = os.environ.get(_env.SNAPSHOT, "").strip().lower()
    if snapshot is False or (snapshot is None and env in ("0", "off", "false", "no")):
        return None
    return 1 if env == "always" else SNAPSHOT_EVERY


def _check_ideal(v: float | None) -> float | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not (math.isfinite(v) and v >= 0):
        raise ValueError(f"configured_ideal_step_time must be a non-negative number of seconds, got {v!r}")
    return float(v)


def _breakdown(r: GoodputReport) -> dict[BadputType, Any]:
    out: dict[BadputType, Any] = dict(r.badput_pct)
    t = r.total_s
    for b, v in r.overlapped_s.items():
        out[b] = 100.0 * v / t if t > 0 else 0.0
    custom = out.get(BadputType.CUSTOM_BADPUT_EVENTS)
    if isinstance(custom, Mapping):
        out[BadputType.CUSTOM_BADPUT_EVENTS] = dict(custom)
    return out
