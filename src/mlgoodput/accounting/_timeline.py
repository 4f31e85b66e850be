"""The events of one job, kept per host in the shapes the engine needs; built incrementally.

Step starts (the bulk of any job) live in two packed arrays per host; every other event
(a few per checkpoint, evaluation or restart) is a small tuple. Ingesting a batch costs
array copies for the steps and a short loop over the rest.
"""

from __future__ import annotations

import itertools
import json
import math
import operator
from array import array
from bisect import bisect_left, bisect_right, insort
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import cast

from mlgoodput import _env
from mlgoodput.accounting import _fast
from mlgoodput.accounting._stepnums import RunExtender, StepNums
from mlgoodput.events import Kind
from mlgoodput.store import NO_STEP, Columns

_STEP = int(Kind.STEP_START)
_ALIVE = int(Kind.ALIVE)
_STEP_MASK = bytes(1 if i == _STEP else 0 for i in range(256))
_OTHER_MASK = bytes(0 if i in (_STEP, _ALIVE) else 1 for i in range(256))  # signs of life: only their time
_ALIVE_MASK = bytes(1 if i == _ALIVE else 0 for i in range(256))


@dataclass(frozen=True, slots=True)
class Rec:
    """A non-step event of one host."""

    kind: int
    time: float
    step: int | None
    value: float | None
    name: str | None
    attrs: str | None  # attrs as canonical JSON (sorted keys), so equal events compare equal


@dataclass(slots=True)
class HostLog:
    """Everything one host recorded."""

    host: int
    times: array[float] = field(default_factory=lambda: array("d"))  # step starts, by time
    nums: StepNums = field(default_factory=StepNums)  # step numbers, as runs
    monotonic: bool = True  # step numbers never decrease along time
    others: list[Rec] = field(default_factory=list)  # sorted by time
    seen: set[Rec] = field(default_factory=set)  # every record kept, to drop exact repeats
    job_starts: list[float] = field(default_factory=list)
    version: int = 0  # bumped when a change reaches back before the last step (not an append)
    #: the times of non-step events put before the last one held (not appended): a reader of
    #: `others` by position takes those from its length of this list on (late events)
    late: list[float] = field(default_factory=list)
    #: the earliest time that changed since the engine last took it (`take_change`)
    changed_from: float = math.inf

    def take_change(self) -> float:
        """The earliest time changed since the last call (inf: nothing), forgotten now."""
        t, self.changed_from = self.changed_from, math.inf
        return t

    def add_steps(
        self,
        times: list[float] | array[float],
        nums: list[int] | array[int],
        strict: bool | None = None,
        by_one: bool | None = None,
    ) -> float:
        """Append step starts; returns the earliest time that changed (inf if none). `strict`:
        whether the times increase strictly, when the caller checked (else checked here);
        `by_one`: whether each number (packed, int64) is one more than the one before, when
        the caller checked (else checked here)."""
        if not times:
            return math.inf
        first = self._add_steps(times, nums, strict, by_one)
        self.changed_from = min(self.changed_from, first)
        return first

    def _add_steps(
        self,
        times: list[float] | array[float],
        nums: list[int] | array[int],
        strict: bool | None,
        by_one: bool | None,
    ) -> float:
        # strictly increasing (the usual case): sorted, and no duplicates (one C-level pass)
        if strict is None:
            strict = _fast.strictly_increasing(times)
        if strict is None:
            strict = all(map(operator.lt, times[:-1], times[1:]))
        ordered = strict or list(times) == sorted(times)
        if ordered and (not self.times or times[0] > self.times[-1]):
            last = self.nums.last()
            # exact duplicates inside one batch are possible only at equal times
            if not strict and len(set(times)) != len(times):  # rare: equal times inside one batch
                pairs = sorted(set(zip(times, nums, strict=True)))
                times = [p[0] for p in pairs]
                nums = [p[1] for p in pairs]
                by_one = None
            self.times.extend(times)
            # True when the batch counts up by one
            if by_one is None or not isinstance(nums, array):
                counted = self.nums.extend(nums)
            else:
                counted = self.nums.extend_checked(nums, by_one)
            if self.monotonic and (
                (last is not None and nums[0] < last) or not (counted or all(map(operator.le, nums[:-1], nums[1:])))
            ):
                self.monotonic = False
            return times[0]
        self.version += 1
        if ordered and self._splice(times, nums):
            return times[0]
        return self._merge(times, nums)

    def _merge(self, times: list[float] | array[float], nums: list[int] | array[int]) -> float:
        """A batch that overlaps the steps held: merged, exact (time, step) pairs once, in order."""
        both = set(zip(self.times, self.nums, strict=True))
        both.update(zip(times, nums, strict=True))
        merged = sorted(both)
        self.times = array("d", (p[0] for p in merged))
        nums_list = [p[1] for p in merged]
        self.nums = StepNums(nums_list)
        self.monotonic = all(map(int.__le__, nums_list[:-1], nums_list[1:]))
        return min(times)

    def _splice(self, times: list[float] | array[float], nums: list[int] | array[int]) -> bool:
        """Put an ordered batch that falls between two steps already held (a late page of an
        earlier part of the job, as recovery or a slow host delivers it) into place: a copy of
        the arrays, no sort. False, nothing done, when it overlaps what is held or holds equal
        times (then the caller merges)."""
        lt = self.times
        i = bisect_left(lt, times[0])
        if i != bisect_right(lt, times[-1]) or len(set(times)) != len(times):
            return False
        t = times if isinstance(times, array) and times.typecode == "d" else array("d", times)
        a = nums if isinstance(nums, array) and nums.typecode == "q" else array("q", nums)
        if self.monotonic:
            ok = all(map(operator.le, a[:-1], a[1:]))
            if ok and i > 0:
                ok = self.nums[i - 1] <= a[0]
            if ok and i < len(lt):
                ok = a[-1] <= self.nums[i]
            self.monotonic = ok
        lt[i:i] = t
        self.nums.insert(i, a)
        return True

    def add_other(self, rec: Rec) -> float:
        if rec in self.seen:
            return math.inf
        self.seen.add(rec)
        if not self.others or rec.time >= self.others[-1].time:
            self.others.append(rec)
        else:
            insort(self.others, rec, key=lambda r: r.time)
            self.late.append(rec.time)
        self.changed_from = min(self.changed_from, rec.time)
        if rec.kind == Kind.JOB_START:
            insort(self.job_starts, rec.time)
            if self.times and rec.time <= self.times[-1]:
                self.version += 1  # a restart between steps already seen
        return rec.time


def _ones(mask: bytes) -> Iterator[int]:
    """The positions of the 1 bytes of mask (a C-level search from one to the next: a page of
    step starts with a few other events costs those few, not an int object per event)."""
    i = mask.find(1)
    while i >= 0:
        yield i
        i = mask.find(1, i + 1)


class Timeline:
    """All hosts' events of one job; `earliest_change` says how far back the last ingest reached."""

    def __init__(self) -> None:
        self.hosts: dict[int, HostLog] = {}
        self.earliest_change = math.inf
        self.max_time = -math.inf
        self.alive_every = 0.0  # the longest period of signs of life a writer promised; 0: none did
        self.last_alive = -math.inf  # the latest sign of life (kept apart: it is no event of the job)
        self.events = 0
        self.other_events = 0  # events other than step starts and signs of life taken so far
        # ingests that could change a host's log otherwise than by appending steps after its
        # last one (`_append_block`): while it stays, no host came, no log's version or job
        # starts changed, and each log's step starts only grew at the end
        self.reshapes = 0
        self._lead: tuple[int, float, int | None] | None = None  # (reshapes, bound, lead): lead_host's cache
        # the hosts of the last block of steps appended (ingest_step_block), the reshapes then,
        # their logs and step-start arrays
        self._block: tuple[list[int], int, list[HostLog], list[array[float]], list[StepNums]] = ([], -1, [], [], [])
        self._runs = RunExtender()  # the block's step numbers, extended (the same promise)

    def host(self, h: int) -> HostLog:
        log = self.hosts.get(h)
        if log is None:
            log = self.hosts[h] = HostLog(h)
        return log

    def ingest(self, cols: Columns) -> None:
        n = len(cols)
        if n == 0:
            return
        try:
            self._ingest(cols, n)
        finally:
            # counted once the hosts' logs hold the events: a reader outside the lock (the UI's
            # view of the attempts) that keys what it keeps on the count never keeps a state
            # older than its count
            self.events += n

    def _ingest(self, cols: Columns, n: int) -> None:
        kinds = bytes(cols.kinds)
        top = _fast.maximum(cols.times)
        if top is None:
            top = max(cols.times)
        if _ALIVE in kinds:
            alive_top = self._signs_of_life(cols, kinds)
            if kinds.count(_ALIVE) == n:
                return
            if top <= alive_top:  # the batch's latest is a sign of life (rare): the rest's latest
                top = max(t for t, k in zip(cols.times, kinds, strict=True) if k != _ALIVE)
        self.reshapes += 1
        self.max_time = max(self.max_time, top)
        step_mask = kinds.translate(_STEP_MASK)
        hosts = cols.hosts
        # every value the first's: compared as bytes (count() would make an int object a value)
        single_host = hosts.tobytes() == array(hosts.typecode, hosts[:1]).tobytes() * n
        earliest = math.inf
        n_steps = step_mask.count(1)
        # the other events first: a job start that comes with later steps in one batch is no
        # restart between steps already seen (HostLog.add_other)
        others = range(0) if n_steps == n else _ones(kinds.translate(_OTHER_MASK))
        for i in others:
            step = cols.steps[i]
            value = cols.values[i]
            attrs = cols.attr(i)
            rec = Rec(
                kind=cols.kinds[i],
                time=cols.times[i],
                step=None if step == NO_STEP else step,
                value=None if math.isnan(value) else value,
                name=cols.name(i),
                attrs=None if attrs is None else json.dumps(attrs, sort_keys=True),
            )
            earliest = min(earliest, self.host(hosts[i]).add_other(rec))
            self.other_events += 1
        if single_host and n_steps == n:  # only step starts: no copy through Python objects
            earliest = min(earliest, self.host(hosts[0]).add_steps(cols.times, cols.steps))
        elif single_host:
            log = self.host(hosts[0])
            st = _fast.select(cols.times, step_mask) or array("d", itertools.compress(cols.times, step_mask))
            sn = _fast.select(cols.steps, step_mask) or array("q", itertools.compress(cols.steps, step_mask))
            earliest = min(earliest, log.add_steps(st, sn))
        else:
            per: dict[int, tuple[list[float], list[int]]] = {}
            for i in itertools.compress(range(n), step_mask):
                t, s = per.setdefault(hosts[i], ([], []))
                t.append(cols.times[i])
                s.append(cols.steps[i])
            for h, (t, s) in per.items():
                order = sorted(range(len(t)), key=t.__getitem__)
                earliest = min(earliest, self.host(h).add_steps([t[i] for i in order], [s[i] for i in order]))
        self.earliest_change = min(self.earliest_change, earliest)

    def ingest_steps(self, cols: Columns, by_one: bool | None = None) -> None:
        """`ingest` for a part known to hold only step starts of one host, no names or
        attributes, at strictly increasing times (the caller checked): what `ingest` does with
        it, without checking it again (the calculator's runs of a host's small pages).
        `by_one`: whether its step numbers count up by one, when the caller checked."""
        n = len(cols)
        if n == 0:
            return
        times = cols.times
        self.reshapes += 1
        self.max_time = max(self.max_time, times[-1])  # increasing: the last is the largest
        earliest = min(math.inf, self.host(cols.hosts[0]).add_steps(times, cols.steps, True, by_one))
        self.earliest_change = min(self.earliest_change, earliest)
        self.events += n  # last (see `ingest`)

    def ingest_step_block(
        self,
        hosts: list[int],
        sizes: list[int],
        times: bytes,
        steps: bytes,
        heads: tuple[list[float], list[float], list[int], list[bool]],
    ) -> None:
        """`ingest_steps` for several hosts' parts at once, one after the other in `times` and
        `steps` (packed doubles and int64; `sizes` events each, none empty; each host's times
        increasing strictly, the caller checked): `heads` holds each part's first time, last
        time and first number, and whether its numbers count up by one from a first of 0 or
        more. A part that counts up by one after its host's last step (the usual) is appended
        without a Python object per event; any other as `ingest_steps` does it."""
        first_t, last_t, first_s, counted = heads
        tv, sv = memoryview(times), memoryview(steps)
        kept = self._block
        if kept[1] == self.reshapes and kept[0] == hosts:
            # the last block's hosts, with only steps appended since: their logs and step-start
            # arrays (grown in place), none empty
            hls, lts, nums = kept[2], kept[3], kept[4]
        else:
            logs = self.hosts
            got = list(map(logs.get, hosts))
            if any(map(operator.is_, got, itertools.repeat(None))):
                got = [
                    log if log is not None else logs.setdefault(h, HostLog(h))
                    for h, log in zip(hosts, got, strict=True)
                ]
            hls = cast("list[HostLog]", got)
            lts = list(map(_TIMES, hls))
            if not all(lts):
                lts = []  # (not kept: a host without steps yet)
            nums = list(map(_NUMS, hls))
        if lts and all(counted) and all(map(operator.gt, first_t, map(_LAST, lts))):
            self._block = (hosts, self.reshapes, hls, lts, nums)
            self._append_block(hls, lts, nums, sizes, tv, heads)  # the usual: every part appends
            return
        self.reshapes += 1
        earliest = list(first_t)  # each part's earliest change: its first time, when appended
        at = 0
        for i, (log, n, t0, s0, by_one) in enumerate(zip(hls, sizes, first_t, first_s, counted, strict=True)):
            b = at + 8 * n
            lt = log.times
            if by_one and (not lt or t0 > lt[-1]):  # what add_steps does with it, in short
                lt.frombytes(tv[at:b])
                log.changed_from = min(log.changed_from, t0)
                last = log.nums.extend_run(s0, n)
                if last is not None and s0 < last and log.monotonic:
                    log.monotonic = False
            else:
                t, s = array("d"), array("q")
                t.frombytes(tv[at:b])
                s.frombytes(sv[at:b])
                earliest[i] = log.add_steps(t, s, True, by_one)
            at = b
        # what ingest_steps does part after part with these (max and min pick as a fold does)
        self.max_time = max(self.max_time, *last_t)
        self.earliest_change = min(self.earliest_change, *[min(math.inf, e) for e in earliest])
        self.events += at >> 3  # last (see `ingest`)

    def _append_block(
        self,
        hls: list[HostLog],
        lts: list[array[float]],
        nums: list[StepNums],
        sizes: list[int],
        tv: memoryview,
        heads: tuple[list[float], list[float], list[int], list[bool]],
    ) -> None:
        """`ingest_step_block` when every part counts up by one after its host's last step:
        what its loop does part by part, a column at a time (`map` over the hosts' objects,
        C-level loops: thousands of hosts, one step each, every upload)."""
        first_t, last_t, first_s, _ = heads
        ends = list(itertools.accumulate(map(operator.mul, sizes, itertools.repeat(8))))
        _each(map(array.frombytes, lts, map(tv.__getitem__, map(slice, [0, *ends[:-1]], ends))))
        _each(map(setattr, hls, itertools.repeat("changed_from"), map(min, map(_CHANGED, hls), first_t)))
        lasts, on = self._runs.extend(nums, first_s, sizes)
        if on:  # (every part continues its host's last run: numbered above its last step)
            back = []
        elif lasts.count(None):
            back = [last is not None and s0 < last for s0, last in zip(first_s, lasts, strict=True)]
        else:
            back = list(map(operator.lt, first_s, cast("list[int]", lasts)))
        if any(back):  # a part numbered below its host's last step: no longer monotonic
            for log in itertools.compress(hls, back):
                log.monotonic = False
        self.max_time = max(self.max_time, *last_t)
        self.earliest_change = min(self.earliest_change, *first_t)
        self.events += ends[-1] >> 3 if ends else 0  # last (see `ingest`)

    def _signs_of_life(self, cols: Columns, kinds: bytes) -> float:
        """Take the batch's signs of life; the latest of their times."""
        latest = -math.inf
        for i in _ones(kinds.translate(_ALIVE_MASK)):
            v = cols.values[i]
            if v == v and v > self.alive_every:  # not NaN
                self.alive_every = float(v)
            latest = max(latest, cols.times[i])
        self.last_alive = max(self.last_alive, latest)
        return latest

    def died_at(self, q: float) -> float | None:
        """When the job's writers were last heard of, if by `q` they have all been silent past
        the dead limit and they had promised signs of life; else None (alive, or unknown: a
        stream without signs of life, like the seed's, is never judged dead)."""
        heard = max(self.max_time, self.last_alive)
        if self.alive_every <= 0 or q < heard:
            return None
        if q - heard > _env.dead_after_s(self.alive_every):
            return heard
        return None

    def lead_host(self, q: float) -> int | None:
        """The lowest process index that recorded a job_start at or before q (kept while only
        steps are appended, which change no job start and bring no host, and q is past every
        host's first job_start: a query that finds nothing else new)."""
        c = self._lead
        if c is not None and c[0] == self.reshapes and q >= c[1]:
            return c[2]
        # (a column at a time: thousands of hosts, asked again after every read)
        js: list[list[float]] = list(map(_JS, self.hosts.values()))
        if not all(js):  # hosts without a job start are no candidates
            keep = list(map(bool, js))
            hosts, js = list(itertools.compress(self.hosts, keep)), list(itertools.compress(js, keep))
        else:
            hosts = list(self.hosts)
        firsts: list[float] = list(map(_FIRST, js))
        # (a fold of max from -inf, as `max` of pairs gives it: a NaN first time is passed over)
        latest_first = max(itertools.chain((-math.inf,), firsts))
        best = min(itertools.compress(hosts, map(operator.le, firsts, itertools.repeat(q))), default=None)
        if q >= latest_first:
            self._lead = (self.reshapes, latest_first, best)
        return best


_TIMES, _NUMS, _CHANGED, _JS = (operator.attrgetter(a) for a in ("times", "nums", "changed_from", "job_starts"))
_FIRST, _LAST = operator.itemgetter(0), operator.itemgetter(-1)


def _each(calls: Iterator[object]) -> None:
    """Run a lazy `map` of calls for their effects (a C-level loop: no Python step an item)."""
    deque(calls, maxlen=0)


#: How an attempt without an end of its own ends: its steps at that instant belong to it.
OPEN_ENDED = frozenset({"running", "died"})


def last_attempt_end(tl: Timeline, start: float, q: float) -> tuple[float, str]:
    """The end of the last attempt when nothing ended it: the query time while its writers
    live, else the last time any of them was heard of (never before the attempt began)."""
    d = tl.died_at(q)
    if d is None:
        return q, "running"
    return max(d, start), "died"


#: An attempt's bounds: (start, end, how it ended, its first step's index, past its last's).
Span = tuple[float, float, str, int, int]


def attempt_spans(
    tl: Timeline, starts: Sequence[float], ends: Sequence[float], times: Sequence[float], q: float
) -> list[Span]:
    """The attempts of the lead host as of q, from its job starts (sorted, each once) and job
    ends (sorted), both up to q: each ends at its first job end before the next start, else
    at the next start (a restart), else as `last_attempt_end` says; its steps are those of
    `times` (the host's step starts) from its start to its end (included when open-ended)."""
    out: list[Span] = []
    for k, s in enumerate(starts):
        nxt = starts[k + 1] if k + 1 < len(starts) else math.inf
        j = bisect_left(ends, s)
        if j < len(ends) and ends[j] < nxt:
            end, how = ends[j], "job_end"
        elif nxt < math.inf:
            end, how = nxt, "restart"
        else:
            end, how = last_attempt_end(tl, s, q)
        i0 = bisect_left(times, s)
        i1 = bisect_right(times, end) if how in OPEN_ENDED else bisect_left(times, end)
        out.append((s, end, how, i0, max(i0, i1)))
    return out


def last_span(tl: Timeline, times: Sequence[float], start: float, i0: int, q: float) -> Span:
    """The last attempt's bounds at q when nothing ended it and nothing came in since they
    were found (its start and first step's index then): only its end moves."""
    end, how = last_attempt_end(tl, start, q)
    return start, end, how, i0, max(i0, bisect_right(times, end))


def status_word(tl: Timeline, ended_by: str, q: float) -> str:
    """The job's status at `q` from how its last attempt ended: finished (a job end), crashed
    (its writers went silent: `died_at`), running, or stale (silent past the dead limit, but
    its writers send no signs of life, so the accounting cannot tell a hang from a death)."""
    if ended_by == "job_end":
        return "finished"
    if ended_by == "died":
        return "crashed"
    if tl.alive_every <= 0 and q - tl.max_time > _env.dead_after_s(0.0):
        return "stale"
    return "running"
