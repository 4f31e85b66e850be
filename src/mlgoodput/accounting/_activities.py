"""The lead host's activities (its claimed intervals by bucket), extended with what came since.

`Engine._activities` derives them from every non-step event of the host; a query after new
events would pay for the whole job again. `ActivityBuilder` keeps what it derived, where it
got to in the host's events and attempts, and takes only the new events: a closed pair or a
duration is one interval added near the end of its bucket's `IntervalSet`, and an activity
still open (or a duration past the query time) is laid over the sets for one query only. The
result equals `_activities`'s to the bit (a union is the same set however it is built).

What reaches back (an event put before the last one held, an attempt that changed, the lead
host's events replaced) sends it back to the start of the earliest attempt it touches, never
further, and `fallbacks` counts those.
"""

from __future__ import annotations

import json
import math
from array import array
from bisect import bisect_left, bisect_right, insort

from mlgoodput.accounting._intervals import IntervalSet
from mlgoodput.accounting._model import DURATIONS, ELASTIC, END_KINDS, PAIRS, Activities, Attempt, B
from mlgoodput.accounting._timeline import OPEN_ENDED, HostLog, Rec
from mlgoodput.events import Kind

INF = math.inf
_OpenKey = tuple[int, str | None]  # (the end kind that closes it, the name it must carry)


class ActivityBuilder:
    """One host's activity intervals, kept across queries and extended with new events."""

    def __init__(self) -> None:
        self.fallbacks = 0  # times it went back to an attempt's start (or the job's)
        #: the earliest time where the kept intervals changed since the caller last took it
        self.changed_from = INF
        self._clear(None)

    def _clear(self, log: HostLog | None) -> None:
        self.log = log
        self.late_seen = 0 if log is None else len(log.late)
        self.pos = 0  # events of log.others taken
        self.frontier = -INF  # the time of the last event taken
        self.sets: dict[object, IntervalSet] = {}
        self.born: dict[object, float] = {}  # bucket -> the time of the event that made it
        self.claims = IntervalSet()
        self.atts: list[tuple[float, float, str]] = []  # attempts as taken (the last one maybe open)
        self.closed = 0  # attempts before this index are closed: their open activities ended
        self.opens: dict[_OpenKey, list[tuple[float, object]]] = {}  # the open attempt's
        self.last_end: dict[_OpenKey, float] = {}
        self.open_done: list[tuple[float, int]] = []  # (start, attempt) of activities left open in closed attempts
        self.slices: list[tuple[float, float, float, float]] = []
        self.restore_step: dict[int, int] = {}
        self.first_restores: dict[int, tuple[float, int]] = {}
        self._laid: list[IntervalSet] = []  # the sets holding an overlay now
        self._prev = -INF  # the frontier when this update began

    def take_change(self) -> float:
        t, self.changed_from = self.changed_from, INF
        return t

    # -- the update ------------------------------------------------------------------------
    def update(self, log: HostLog, atts: list[Attempt]) -> Activities | None:
        """The activities of `log` for attempts `atts`; None when they cannot be kept (the last
        attempt is open and ends at or before the latest event: the caller derives them anew)."""
        last = atts[-1]
        if last.ended_by in OPEN_ENDED and log.others and last.end <= log.others[-1].time:
            return None
        for s in self._laid:
            s.settle()
        self._laid = []
        if log is not self.log:
            if self.log is not None:  # another host leads, or its events were replaced
                self.fallbacks += 1
                self.changed_from = -INF
            self._clear(log)
        self._prev = self.frontier  # what the last query saw: open activities reached past it
        redo = INF
        if len(log.late) > self.late_seen:
            redo = min(log.late[self.late_seen :])
            self.late_seen = len(log.late)
        redo = min(redo, self._compare(atts))
        if redo < INF:
            self._back_to(redo, atts)
        self._take(log, atts)
        return self._view(atts)

    def _compare(self, atts: list[Attempt]) -> float:
        """The earliest time from which the attempts as taken differ from `atts` (inf: none);
        an open attempt that has ended since, after every event taken, is kept (`_take`
        closes it after taking its new events)."""
        mine = self.atts
        for k, (s, e, how) in enumerate(mine):
            if k >= len(atts):
                return s
            a = atts[k]
            if a.start != s:
                return min(s, a.start)
            if k < self.closed:
                if (a.end, a.ended_by) != (e, how):
                    return s
                continue
            # the open attempt (the last one taken)
            if a.ended_by in OPEN_ENDED and k == len(atts) - 1:
                mine[k] = (s, a.end, a.ended_by)
                continue
            if a.ended_by in OPEN_ENDED or a.end <= self.frontier:
                return s  # (an event at or after its new end was taken as its own)
            mine[k] = (s, a.end, a.ended_by)  # closed once its new events are taken (`_take`)
        return INF

    def _back_to(self, t: float, atts: list[Attempt]) -> None:
        """Forget what was derived from the attempt holding t on (or from t, before the first)."""
        self.fallbacks += 1
        starts = [a[0] for a in self.atts]
        k = max(0, bisect_right(starts, t) - 1)
        cut = min(t, starts[k]) if starts else t
        # attempts before k stay as taken only while `atts` agrees on them
        while k > 0 and (k > len(atts) or (atts[k - 1].start, atts[k - 1].end) != self.atts[k - 1][:2]):
            k -= 1
            cut = min(cut, starts[k])
        for key in [key for key, born in self.born.items() if born >= cut]:
            del self.born[key], self.sets[key]
        for s in self.sets.values():
            s.truncate(cut)
        self.claims.truncate(cut)
        del self.slices[bisect_left(self.slices, (cut,)) :]
        for d in (self.restore_step, self.first_restores):
            for j in [j for j in d if j >= k]:
                del d[j]
        self.open_done = [x for x in self.open_done if x[1] < k]
        del self.atts[k:]
        self.closed = min(self.closed, k)
        self.opens, self.last_end = {}, {}
        assert self.log is not None
        self.pos = bisect_left(self.log.others, cut, key=lambda r: r.time)
        self.frontier = self.log.others[self.pos - 1].time if self.pos else -INF
        self.changed_from = min(self.changed_from, cut)

    def _close(self, k: int, end: float) -> None:
        """Attempt k ended at `end`: its open activities end there, and nothing of it lasts past it."""
        for opens in self.opens.values():
            for t, key in opens:
                self._add(key, t, end, t if t >= self._prev else end)  # (laid up to the query time before)
                self.open_done.append((t, k))
        self.opens, self.last_end = {}, {}
        for st in self.sets.values():
            if st.ends and st.ends[-1] > end:
                st.truncate(end)
                self.changed_from = min(self.changed_from, end)
        if self.claims.ends and self.claims.ends[-1] > end:
            self.claims.truncate(end)
        self.closed = k + 1

    def _add(self, key: object, s: float, e: float, changed: float | None = None) -> None:
        if not e > s:
            return
        self.sets[key].add(s, e)
        if key not in ("dl", "compile"):
            self.claims.add(s, e)
        self.changed_from = min(self.changed_from, s if changed is None else changed)

    def _bucket(self, key: object, t: float) -> None:
        if key not in self.sets:
            self.sets[key] = IntervalSet()
            self.born[key] = t

    def _take(self, log: HostLog, atts: list[Attempt]) -> None:
        others = log.others
        starts_at = [a.start for a in atts]
        for i in range(self.pos, len(others)):
            r = others[i]
            k = bisect_right(starts_at, r.time) - 1
            if k < 0:
                continue
            att = atts[k]
            if r.time > att.end or (r.time == att.end and r.kind not in END_KINDS):
                continue
            while len(self.atts) <= k:  # the next attempt: the one before is over
                j = len(self.atts)
                if j > 0 and self.closed < j:
                    self._close(j - 1, atts[j - 1].end)
                a = atts[j]
                self.atts.append((a.start, a.end, a.ended_by))
            if k < len(self.atts) - 1:  # (an event of an earlier attempt: cannot come in order)
                raise AssertionError("an event of a closed attempt taken in order")
            self._one(r, k, att.end if att.ended_by not in OPEN_ENDED else INF)
            self.frontier = r.time
        self.pos = len(others)
        # attempts with no event of their own are taken too, so the next update compares them
        while len(self.atts) < len(atts):
            j = len(self.atts)
            if j > 0 and self.closed < j:
                self._close(j - 1, atts[j - 1].end)
            a = atts[j]
            self.atts.append((a.start, a.end, a.ended_by))
        k = len(self.atts) - 1
        if k >= 0 and self.closed <= k and atts[k].ended_by not in OPEN_ENDED:
            self._close(k, atts[k].end)

    def _one(self, r: Rec, k: int, end: float) -> None:
        """Take event r of attempt k (`end`: the attempt's end, inf while it is open)."""
        kind = r.kind
        if kind in END_KINDS:
            ek: _OpenKey = (kind, r.name)
            for s, key in self.opens.pop(ek, ()):
                self._add(key, s, r.time, s if s >= self._prev else r.time)
            self.last_end[ek] = r.time
        if kind in PAIRS:
            end_kind, key = PAIRS[kind]
            name = r.name if key in ("custom", "elastic") else None
            if key == "custom":
                key = ("custom", (r.name or "unknown").upper())
            elif key == "elastic":
                key = ELASTIC.get(r.name or "", B.ELASTIC_SLICE_DOWN)
            self._bucket(key, r.time)
            ok: _OpenKey = (end_kind, name)
            if self.last_end.get(ok) != r.time:  # (an end at the same instant closes it at once)
                self.opens.setdefault(ok, []).append((r.time, key))
            if kind == Kind.CKPT_RESTORE_START and r.step is not None:
                self._note_restore(k, r)
        elif kind in DURATIONS and r.value is not None:
            key = DURATIONS[kind]
            self._bucket(key, r.time)
            self._add(key, r.time, min(r.time + r.value, end))
            if kind == Kind.CKPT_RESTORE and r.step is not None:
                self._note_restore(k, r)
        elif kind == Kind.SLICE_COUNTS and r.attrs is not None:
            d = json.loads(r.attrs)
            try:
                insort(self.slices, (r.time, float(d["active"]), float(d["total"]), float(d["available"])))
            except (KeyError, TypeError, ValueError):
                pass

    def _note_restore(self, k: int, r: Rec) -> None:
        cand = (r.time, int(r.step or 0))
        if k not in self.first_restores or cand < self.first_restores[k]:
            self.first_restores[k] = cand
            self.restore_step[k] = cand[1]

    # -- what a query sees -------------------------------------------------------------------
    def _view(self, atts: list[Attempt]) -> Activities:
        acts = Activities()
        acts.buckets = {key: s.items for key, s in self.sets.items()}
        acts.restore_step = self.restore_step
        acts.first_restores = self.first_restores
        acts.claims = self.claims
        compile_set = self.sets.get("compile")
        acts.compile = compile_set if compile_set is not None else IntervalSet()
        acts.open_starts = [s for s, _ in self.open_done]
        acts.slices = self.slices
        last = atts[-1]
        if self.closed < len(self.atts) and last.ended_by in OPEN_ENDED:
            end = last.end
            extra: dict[object, list[tuple[float, float]]] = {}
            for opens in self.opens.values():
                for s, key in opens:
                    acts.open_starts.append(s)
                    extra.setdefault(key, []).append((s, end))
            claim_extra = sorted(x for key, xs in extra.items() if key not in ("dl", "compile") for x in xs)
            for key, st in self.sets.items():
                xs = sorted(extra.get(key, ()))
                if xs or (st.ends and st.ends[-1] > end):
                    st.overlay(xs, end)
                    self._laid.append(st)
            if claim_extra or (self.claims.ends and self.claims.ends[-1] > end):
                self.claims.overlay(claim_extra, end)
                self._laid.append(self.claims)
        return acts


class EventIndex:
    """One host's job ends and step ends, kept up to date with its new non-step events (a late
    one sends it back to that event's time, not to the start)."""

    def __init__(self, log: HostLog) -> None:
        self.log = log
        self.pos = 0
        self.late_seen = len(log.late)
        self.job_ends: list[float] = []  # sorted
        self.step_ends: dict[int, list[float]] = {}  # step number -> its step_end times, sorted
        # every step_end's time, sorted, and its step number beside it (packed: a job may
        # record one a step)
        self.step_end_times: array[float] = array("d")
        self.step_end_steps: array[int] = array("q")

    def update(self) -> EventIndex:
        log = self.log
        if len(log.late) > self.late_seen:
            t = min(log.late[self.late_seen :])
            self.late_seen = len(log.late)
            del self.job_ends[bisect_left(self.job_ends, t) :]
            j = bisect_left(self.step_end_times, t)
            for step in set(self.step_end_steps[j:]):
                ends = self.step_ends[step]
                del ends[bisect_left(ends, t) :]
                if not ends:
                    del self.step_ends[step]
            del self.step_end_times[j:], self.step_end_steps[j:]
            self.pos = min(self.pos, bisect_left(log.others, t, key=lambda r: r.time))
        others = log.others
        for i in range(self.pos, len(others)):
            r = others[i]
            if r.kind == Kind.JOB_END:
                insort(self.job_ends, r.time)
            elif r.kind == Kind.STEP_END and r.step is not None:
                insort(self.step_ends.setdefault(r.step, []), r.time)
                j = bisect_right(self.step_end_times, r.time)
                self.step_end_times.insert(j, r.time)
                self.step_end_steps.insert(j, r.step)
        self.pos = len(others)
        return self
