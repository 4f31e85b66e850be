"""The fleet view: where a whole store's accelerator hours went, by group, day and job. Pure.

A job's fleet *summary* is its whole-job report boiled down to what a fleet needs: its labels and
accelerators, its report's seconds per bucket, the same seconds per UTC hour (from the report's
own partition, so they add up to the report), the interval it queued before its first start,
and its program goodput and ETTR. A fleet query for a range sums the summaries, each job
weighted by its accelerators: the part of a job inside the range is its hours inside it, and an
hour cut by an edge of the range is asked of the job's accounting exactly (`Exact`).
docs/fleet.md defines every figure.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from bisect import bisect_right
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from mlgoodput.accounting._partition import Segment
from mlgoodput.accounting._report import PARTITION_BUCKETS, BadputType, GoodputReport

#: Where a store keeps each job's summary (the state namespace; the key is the job's).
NAMESPACE = "mlgoodput.fleet"
FORMAT = 3
PIECE_S = 3600.0  # a summary's pieces: UTC hours
DAY_S = 86400.0
PRODUCTIVE = "productive"
#: The badput buckets a fleet reports, as a report's JSON names them (custom ones summed in one).
BUCKETS: tuple[str, ...] = tuple(b.name.lower() for b in PARTITION_BUCKETS)
NO_GROUP = None  # the group of a job without the grouping label (JSON null)

#: `Exact(job, lo, hi)`: the job's seconds per bucket in [lo, hi] (its accounting with the
#: summary's ideal step time), for an hour that an edge of the range cuts.
Exact = Callable[["JobSummary", float, float], Mapping[str, float]]


def bucket_of(name: str) -> str:
    """A segment's bucket as the fleet names it: custom ones ("custom_badput_events:NAME") as one."""
    return name.split(":", 1)[0]


def key(logger: str, job: str) -> str:
    """The summary's name in the state namespace (a logger and a job, unambiguously)."""
    return json.dumps([logger, job])


@dataclass(frozen=True, slots=True)
class JobSummary:
    """What a fleet query needs of one job, as of the store cursor it was made at."""

    logger: str
    job: str
    labels: Mapping[str, str]
    accelerators: int | None  # None: not recorded (counted as one)
    accelerator_type: str | None
    status: str
    start: float  # the report's window: the first job start ...
    end: float  # ... to the last job end, or the query time
    ideal_step_time_s: float
    seconds: Mapping[str, float]  # the whole-job report: "productive" and each bucket
    #: (start, end, accelerators then or None, seconds by bucket): the UTC hours of the job's
    #: window, cut where its size changed
    pieces: tuple[tuple[float, float, int | None, Mapping[str, float]], ...]
    queue: tuple[float, float] | None  # [submit, first start] when the submit time is known
    program_goodput: float | None
    ettr: float | None
    cursor: int = 0  # the store cursor and events the summary covers
    events: int = 0
    #: (events, last time) the store's listing gave for the job just before the summary read it:
    #: while the listing says the same, nothing new was stored (no per-job query to know it)
    listed: tuple[int, float] | None = None

    @property
    def weight(self) -> int:
        """The job's accelerators as last recorded (1 when never recorded)."""
        return self.accelerators or 1

    @property
    def one_size(self) -> bool:
        """Whether the job held one number of accelerators all along."""
        return len({n for _, _, n, _ in self.pieces}) <= 1

    def dumps(self) -> bytes:
        d = {
            "format": FORMAT,
            "logger": self.logger,
            "job": self.job,
            "labels": dict(self.labels),
            "accelerators": self.accelerators,
            "accelerator_type": self.accelerator_type,
            "status": self.status,
            "start": self.start,
            "end": self.end,
            "ideal_step_time_s": self.ideal_step_time_s,
            "seconds": dict(self.seconds),
            "pieces": [[a, b, n, dict(s)] for a, b, n, s in self.pieces],
            "queue": None if self.queue is None else list(self.queue),
            "program_goodput": self.program_goodput,
            "ettr": self.ettr,
            "cursor": self.cursor,
            "events": self.events,
            "listed": None if self.listed is None else list(self.listed),
        }
        return json.dumps(d, separators=(",", ":")).encode()

    @classmethod
    def loads(cls, raw: bytes) -> JobSummary | None:
        """A saved summary, or None when it is not one of this format (it is made again)."""
        try:
            d = json.loads(raw)
            if not isinstance(d, dict) or d.get("format") != FORMAT:
                return None
            q = d["queue"]
            seen = d["listed"]
            return cls(
                logger=str(d["logger"]),
                job=str(d["job"]),
                labels={str(k): str(v) for k, v in d["labels"].items()},
                accelerators=None if d["accelerators"] is None else int(d["accelerators"]),
                accelerator_type=None if d["accelerator_type"] is None else str(d["accelerator_type"]),
                status=str(d["status"]),
                start=float(d["start"]),
                end=float(d["end"]),
                ideal_step_time_s=float(d["ideal_step_time_s"]),
                seconds={str(k): float(v) for k, v in d["seconds"].items()},
                pieces=tuple(
                    (float(a), float(b), None if n is None else int(n), {str(k): float(v) for k, v in s.items()})
                    for a, b, n, s in d["pieces"]
                ),
                queue=None if q is None else (float(q[0]), float(q[1])),
                program_goodput=_opt(d["program_goodput"]),
                ettr=_opt(d["ettr"]),
                cursor=int(d["cursor"]),
                events=int(d["events"]),
                listed=None if seen is None else (int(seen[0]), float(seen[1])),
            )
        except (ValueError, TypeError, KeyError, AttributeError, IndexError):
            return None


def _opt(v: object) -> float | None:
    return None if v is None else float(v)  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class LabelRecord:
    """One JOB_LABELS event: when, the labels, the accelerators and their kind."""

    time: float
    labels: Mapping[str, str]
    accelerators: int | None
    accelerator_type: str | None


def merged_labels(
    records: Iterable[LabelRecord],
) -> tuple[dict[str, str], int | None, str | None]:
    """The job's labels, accelerators and kind: its label records in time order, a later value
    replacing an earlier one (a restart that grew the job says so)."""
    labels: dict[str, str] = {}
    n: int | None = None
    kind: str | None = None
    for r in sorted(records, key=lambda r: r.time):
        labels.update(r.labels)
        n = r.accelerators if r.accelerators is not None else n
        kind = r.accelerator_type if r.accelerator_type is not None else kind
    return labels, n, kind


_PEAK_TABLE = re.compile(r"table:(.+) x(\d+) \S+")


def from_peak_source(source: str) -> tuple[int, str] | None:
    """(devices, their kind) from a peak found in the table ("table:<kind> x<count> <dtype>",
    mlgoodput.flops), which counted the job's devices; None for any other source."""
    m = _PEAK_TABLE.fullmatch(source)
    return None if m is None or int(m.group(2)) <= 0 else (int(m.group(2)), m.group(1))


def summarize(
    report: GoodputReport,
    segments: Sequence[Segment],
    records: Iterable[LabelRecord],
    *,
    peak_sources: Sequence[str] = (),
    cursor: int = 0,
    events: int = 0,
    listed: tuple[int, float] | None = None,
) -> JobSummary:
    """A job's summary from its whole-job report and that report's partition (`segments`, made
    with the report's ideal step time, so their seconds are the report's). Without a recorded
    count of accelerators, the latest peak found in the table (`peak_sources`, in time order) gives it."""
    labels, n, kind = merged_labels(records)
    found = next((g for g in map(from_peak_source, reversed(peak_sources)) if g is not None), None)
    sizes = _sizes(records)
    if n is None and found is not None:
        n, kind = found[0], kind if kind is not None else found[1]
        sizes = [(report.start, found[0])]
    seconds = {PRODUCTIVE: report.productive_s} | {b: 0.0 for b in BUCKETS}
    for bucket, v in report.badput_s.items():
        if bucket is BadputType.DATA_LOADING_ASYNC:
            continue
        name = bucket.name.lower()
        seconds[name] = float(sum(v.values())) if isinstance(v, Mapping) else float(v)
    # the pieces' edges: UTC hours, and where the job's size changed
    edges = sorted({*_hours(report.start, report.end), *(t for t, _ in sizes[1:] if report.start < t < report.end)})
    pieces: dict[float, dict[str, float]] = {}
    for seg in segments:
        b = bucket_of(seg.bucket)
        k = max(0, bisect_right(edges, seg.start) - 1)
        x = seg.start
        while x < seg.end:
            y = min(seg.end, edges[k + 1]) if k + 1 < len(edges) else seg.end
            got = pieces.setdefault(edges[k], {})
            got[b] = got.get(b, 0.0) + (y - x)
            x, k = y, k + 1
    bounds = [*edges, report.end]
    laid = tuple(
        (max(a, report.start), min(bounds[i + 1], report.end), _size_at(sizes, a), pieces[a])
        for i, a in enumerate(edges)
        if a in pieces
    )
    p = report.productivity
    queue = None
    if p is not None and p.submit_time is not None and p.queue_s is not None:
        queue = (p.submit_time, p.submit_time + p.queue_s)  # a queue of 0 s still says it was known
    return JobSummary(
        logger=report.logger_name,
        job=report.job_name,
        labels=labels,
        accelerators=n,
        accelerator_type=kind,
        status=report.status,
        start=report.start,
        end=report.end,
        ideal_step_time_s=report.ideal_step_time_s,
        seconds=seconds,
        pieces=laid,
        queue=queue,
        program_goodput=None if p is None else p.program_goodput,
        ettr=None if p is None else p.ettr,
        cursor=cursor,
        events=events,
        listed=listed,
    )


def _sizes(records: Iterable[LabelRecord]) -> list[tuple[float, int]]:
    """(time, accelerators) where the recorded size changed, in time order."""
    out: list[tuple[float, int]] = []
    for r in sorted(records, key=lambda r: r.time):
        if r.accelerators is not None and (not out or out[-1][1] != r.accelerators):
            out.append((r.time, r.accelerators))
    return out


def _size_at(sizes: Sequence[tuple[float, int]], t: float) -> int | None:
    """The size in effect at t: the latest recorded at or before it, else the first recorded
    (a size found just after the start, at the first step, held from the start)."""
    if not sizes:
        return None
    i = bisect_right([x for x, _ in sizes], t) - 1
    return sizes[max(i, 0)][1]


def _hours(a: float, b: float) -> list[float]:
    """The UTC hour starts from the one holding `a` to the last before `b`."""
    h = math.floor(a / PIECE_S) * PIECE_S
    out = [h]
    while out[-1] + PIECE_S < b:
        out.append(out[-1] + PIECE_S)
    return out


# -- a range of the fleet ---------------------------------------------------------------------
@dataclass(slots=True)
class _Sum:
    """Accelerator-seconds per bucket, and the weights of the weighted figures."""

    acc_s: float = 0.0
    by: dict[str, float] = field(default_factory=dict)
    queue_acc_s: float = 0.0
    sched_w: float = 0.0  # accelerator-seconds of jobs whose scheduling goodput is known
    sched_acc_s: float = 0.0  # their accelerator-seconds plus queue
    weighted: dict[str, tuple[float, float]] = field(default_factory=dict)  # figure -> (sum w*f, sum w)
    priced: dict[float, float] = field(default_factory=dict)  # price -> accelerator-seconds at it
    cost_by: dict[str, float] = field(default_factory=dict)
    jobs: int = 0

    def add(self, seconds: Mapping[str, float], w: float, price: float | None) -> None:
        for b, s in seconds.items():
            self.by[b] = self.by.get(b, 0.0) + s * w
            if price is not None:
                self.cost_by[b] = self.cost_by.get(b, 0.0) + s * w * price / 3600.0

    def span(self, wall_s: float, w: float, price: float | None) -> None:
        """Wall seconds of a job (or part) holding `w` accelerators at `price` an hour."""
        self.acc_s += wall_s * w
        if price is not None:
            self.priced[price] = self.priced.get(price, 0.0) + wall_s * w

    def figure(self, name: str, value: float | None, w: float) -> None:
        if value is not None and w > 0:
            a, b = self.weighted.get(name, (0.0, 0.0))
            self.weighted[name] = (a + value * w, b + w)

    def merge(self, other: _Sum) -> None:
        self.acc_s += other.acc_s
        self.add(other.by, 1.0, None)
        for b, c in other.cost_by.items():
            self.cost_by[b] = self.cost_by.get(b, 0.0) + c
        self.queue_acc_s += other.queue_acc_s
        self.sched_w += other.sched_w
        self.sched_acc_s += other.sched_acc_s
        for name, (a, w) in other.weighted.items():
            x, y = self.weighted.get(name, (0.0, 0.0))
            self.weighted[name] = (x + a, y + w)
        for price, a in other.priced.items():
            self.priced[price] = self.priced.get(price, 0.0) + a
        self.jobs += other.jobs

    def to_dict(self, priced: bool) -> dict[str, Any]:
        h = self.acc_s / 3600.0
        prod = self.by.get(PRODUCTIVE, 0.0) / 3600.0
        bad = {b: self.by.get(b, 0.0) / 3600.0 for b in BUCKETS}
        w = self.weighted
        out: dict[str, Any] = {
            "jobs": self.jobs,
            "accelerator_hours": h,
            "productive_hours": prod,
            "badput_hours": bad,
            "lost_hours": h - prod,
            "goodput": prod / h if h > 0 else None,
            "queue_hours": self.queue_acc_s / 3600.0,
            "scheduling_goodput": self.sched_w / self.sched_acc_s if self.sched_acc_s > 0 else None,
            "runtime_goodput": prod / h if h > 0 else None,
            "program_goodput": _mean(w.get("program_goodput")),
            "ml_productivity_goodput": _mean(w.get("ml_productivity_goodput")),
            "ettr": _mean(w.get("ettr")),
            "cost": None,
        }
        if priced:
            total = sum(a * price / 3600.0 for price, a in self.priced.items())
            produced = self.cost_by.get(PRODUCTIVE, 0.0)
            out["cost"] = {
                "total": total,
                "productive": produced,
                "lost": total - produced,
                "badput": {b: self.cost_by.get(b, 0.0) for b in BUCKETS},
                "unpriced_hours": (self.acc_s - sum(self.priced.values())) / 3600.0,
            }
        return out


def _mean(got: tuple[float, float] | None) -> float | None:
    return None if got is None or got[1] <= 0 else got[0] / got[1]


@dataclass(frozen=True, slots=True)
class Prices:
    """Price of one accelerator-hour: by accelerator kind, else `default`; None: no cost shown."""

    default: float | None = None
    by_type: Mapping[str, float] = field(default_factory=dict)
    currency: str = "USD"

    @property
    def any(self) -> bool:
        return self.default is not None or bool(self.by_type)

    def of(self, kind: str | None) -> float | None:
        if kind is not None and kind in self.by_type:
            return self.by_type[kind]
        return self.default


@dataclass(frozen=True, slots=True)
class FleetReport:
    """A fleet query's answer: totals, groups (most hours lost first), days and jobs (alike)."""

    since: float
    until: float
    by: str
    total: Mapping[str, Any]
    groups: tuple[Mapping[str, Any], ...]
    days: tuple[Mapping[str, Any], ...]
    jobs: tuple[Mapping[str, Any], ...]
    currency: str | None = None
    label_keys: tuple[str, ...] = ()  # every label key of the jobs in the range (what `by` can be)

    def to_dict(self) -> dict[str, Any]:
        return {
            "since": self.since,
            "until": self.until,
            "by": self.by,
            "currency": self.currency,
            "buckets": list(BUCKETS),
            "total": dict(self.total),
            "groups": [dict(g) for g in self.groups],
            "days": [dict(d) for d in self.days],
            "jobs": [dict(j) for j in self.jobs],
            "label_keys": list(self.label_keys),
        }


def parse_utc_time(text: str, name: str) -> float:
    """UNIX seconds, or ISO 8601 (a date, or a date and time; no zone means UTC, the zone of the
    fleet's days), for `mlgoodput fleet` and the fleet page alike; ValueError naming `name`."""
    try:
        t = float(text)
    except ValueError:
        try:
            d = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(
                f"{name} must be an ISO 8601 date or time (UTC unless it names a zone) or UNIX seconds, got {text[:60]!r}"
            ) from None
        if d.tzinfo is None:
            d = d.replace(tzinfo=dt.UTC)
        try:
            t = d.timestamp()
        except (OverflowError, ValueError, OSError):
            raise ValueError(f"{name}: {text[:60]!r} is not a time this machine can show") from None
    if not math.isfinite(t):
        raise ValueError(f"{name} must be a finite time, got {text[:60]!r}")
    try:
        dt.datetime.fromtimestamp(t, dt.UTC)
    except (OverflowError, ValueError, OSError):
        raise ValueError(
            f"{name}: {text[:60]!r} is not a time this machine can show (UNIX seconds from 0 to about 2.5e11)"
        ) from None
    return t


def job_link(s: JobSummary) -> str:
    """The job's page in `mlgoodput ui` (a path: the server's address goes before it)."""
    return f"/jobs/{quote(s.job, safe='')}?logger={quote(s.logger, safe='')}"


def group_of(s: JobSummary, by: str, shared_name: bool = False) -> str | None:
    """The group a job falls in: its label `by`, None without that label; for "job" its name,
    with its logger where jobs of several loggers share the name."""
    if by == "job":
        return f"{s.job} ({s.logger})" if shared_name else s.job
    return s.labels.get(by, NO_GROUP)


def inside(
    s: JobSummary, since: float, until: float, exact: Exact
) -> list[tuple[float, float, float, Mapping[str, float]]]:
    """The job's pieces inside [since, until] as (start, end, accelerators, seconds by bucket);
    a piece cut by an edge of the range is asked of `exact`."""
    lo, hi = max(since, s.start), min(until, s.end)
    if hi <= lo:
        return []
    out: list[tuple[float, float, float, Mapping[str, float]]] = []
    for a, b, n, secs in s.pieces:
        if b <= lo or a >= hi:
            continue
        w = float(n or 1)
        if a >= lo and b <= hi:
            out.append((a, b, w, secs))
        else:
            out.append((max(a, lo), min(b, hi), w, exact(s, max(a, lo), min(b, hi))))
    return out


def fleet(
    summaries: Iterable[JobSummary],
    since: float,
    until: float,
    by: str,
    exact: Exact,
    prices: Prices | None = None,
    link: Callable[[JobSummary], str] | None = None,
) -> FleetReport:
    """Sum the jobs' parts inside [since, until] by group (`by`: a label, or "job"), by UTC day,
    and per job; each hour of a job weighted by the accelerators it held then (docs/fleet.md).
    A job inside the range whole, at one size, counts its report's seconds; the days count its
    hours. A job that only queued in the range counts its queue."""
    prices = prices or Prices()
    priced = prices.any
    summaries = list(summaries)
    loggers: dict[str, set[str]] = {}
    for s in summaries:
        loggers.setdefault(s.job, set()).add(s.logger)
    total = _Sum()
    groups: dict[str | None, _Sum] = {}
    days: dict[float, _Sum] = {}
    jobs: list[dict[str, Any]] = []
    for s in summaries:
        parts = inside(s, since, until, exact)
        queued = 0.0
        if s.queue is not None:  # the queue before the first start, inside the range
            queued = max(0.0, min(until, s.queue[1]) - max(since, s.queue[0]))
        if not parts and not queued > 0:
            continue
        price = prices.of(s.accelerator_type)
        lo, hi = max(since, s.start), min(until, s.end)
        whole = lo == s.start and hi == s.end and s.one_size
        mine = _Sum(jobs=1)
        for a, b, w, secs in parts:
            day = days.setdefault(math.floor(a / DAY_S) * DAY_S, _Sum())
            day.span(b - a, w, price)
            day.add(secs, w, price)
            mine.span(b - a, w, price)
            if not whole:
                mine.add(secs, w, price)
        if whole and parts:
            mine.add(s.seconds, parts[0][2], price)
        acc = mine.acc_s
        if s.queue is not None:
            w0 = float(s.pieces[0][2] or 1) if s.pieces else float(s.weight)
            mine.queue_acc_s = queued * w0
            mine.sched_w = acc
            mine.sched_acc_s = acc + queued * w0
        pg = s.program_goodput
        if acc > 0:
            runtime = mine.by.get(PRODUCTIVE, 0.0) / acc
            sched = None if s.queue is None else acc / mine.sched_acc_s
            mpg = None if sched is None or pg is None else sched * runtime * pg
            mine.figure("program_goodput", pg, acc)
            mine.figure("ml_productivity_goodput", mpg, acc)
            mine.figure("ettr", s.ettr, acc)
        g = group_of(s, by, len(loggers[s.job]) > 1)
        groups.setdefault(g, _Sum()).merge(mine)
        total.merge(mine)
        row = {
            "job": s.job,
            "logger": s.logger,
            "group": g,
            "labels": dict(s.labels),
            "accelerators": s.weight,
            "accelerators_recorded": s.accelerators is not None,
            "accelerator_type": s.accelerator_type,
            "status": s.status,
            "start": lo if parts else None,
            "end": hi if parts else None,
            "job_start": s.start,
            "job_end": s.end,
            "link": None if link is None else link(s),
        } | mine.to_dict(priced)
        jobs.append(row)
    group_rows = [{"key": g} | t.to_dict(priced) for g, t in groups.items()]
    group_rows.sort(key=lambda r: (-r["lost_hours"], "" if r["key"] is None else str(r["key"])))
    jobs.sort(key=lambda r: (-r["lost_hours"], r["job"], r["logger"]))
    day_rows = []
    for d in sorted(days):
        t = days[d].to_dict(priced)
        day_rows.append(
            {
                "day": dt.datetime.fromtimestamp(d, dt.UTC).date().isoformat(),
                "start": max(d, since),
                "end": min(d + DAY_S, until),
                "accelerator_hours": t["accelerator_hours"],
                "productive_hours": t["productive_hours"],
                "badput_hours": t["badput_hours"],
                "lost_hours": t["lost_hours"],
                "goodput": t["goodput"],
                "cost": t["cost"],
            }
        )
    return FleetReport(
        since=since,
        until=until,
        by=by,
        total=total.to_dict(priced),
        groups=tuple(group_rows),
        days=tuple(day_rows),
        jobs=tuple(jobs),
        currency=prices.currency if priced else None,
        label_keys=tuple(sorted({k for j in jobs for k in j["labels"]})),
    )
