"""In-process aggregation of metric events (`jax.monitoring` callbacks, torch.compile times):
the listeners and their totals.

A listener runs synchronously on the thread that compiles, so it does as little as it can:
a dict lookup of its series (callback kind, event name, keyword labels) and an append of
the value to that series' short pending list, folded into cumulative totals (count, sum,
min, max, last, histogram) by the reader or once a few thousand are pending. Nothing
leaves the process per event, so a burst of any size loses nothing: the exporter later
reads the totals, and a lost export is replaced by the next one.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mlgoodput._worker import at_fork_in_child
from mlgoodput.export import Sample

# Callback kinds: the four listener types of jax.monitoring.
EVENT = "event"
DURATION = "duration"
SCALAR = "scalar"
SPAN = "span"

#: Histogram buckets are powers of two: bucket i holds values in [2**(i-1+LOW), 2**(i+LOW)),
#: the first one also everything smaller (zero and negatives), the last everything larger.
LOW_EXP = -20  # 2**-20 s is about a microsecond
HIGH_EXP = 21  # 2**21 s is about 24 days
N_BUCKETS = HIGH_EXP - LOW_EXP + 1

#: Scalars that JAX records with a timestamp (the start of a compile phase) as the value:
#: aggregating those would be meaningless, so they are not aggregated (the time-span and
#: duration callbacks carry the same facts).
TIMESTAMP_SCALAR_PREFIX = "/jax/core/compile/"

# index of each field in a series' mutable state list
_COUNT, _SUM, _MIN, _MAX, _LAST, _BUCKETS, _LABELS, _PENDING = range(8)

Labels = tuple[tuple[str, Any], ...]


@dataclass(frozen=True, slots=True)
class SeriesSnapshot:
    """Cumulative totals of one series at one instant."""

    kind: str
    event: str
    labels: Labels
    count: int
    sum: float
    min: float
    max: float
    last: float
    buckets: tuple[int, ...]  # per-bucket (not cumulative) counts, N_BUCKETS long


def bucket_upper_bound(i: int) -> float:
    """The exclusive upper bound of histogram bucket i (inf for the last one)."""
    return math.inf if i >= N_BUCKETS - 1 else 2.0 ** (i + LOW_EXP)


class Aggregator:
    """Cumulative per-series totals, fed by the four listener callables it builds.

    The hot path only appends the value to its series' pending list (`list.append` is
    atomic, so concurrent listeners need no lock); pending values are folded into the
    totals, under the lock, by whoever reads the totals, and by a listener once a series
    has `fold_at` of them, which bounds the memory a burst can take.
    """

    def __init__(self, fold_at: int = 4096) -> None:
        if isinstance(fold_at, bool) or not isinstance(fold_at, int) or fold_at < 1:
            raise ValueError(f"fold_at must be a positive integer, got {fold_at!r}")
        self._lock = threading.Lock()
        self._fold_at = fold_at
        # A series' state: [count, sum, min, max, last, buckets, labels, pending]. Per
        # callback kind, series without labels sit in `_plain[kind][event]`, those with
        # labels in `_labeled[kind][event][value]` (one label) or `[...][(values...)]`
        # (several): the cheapest lookups on the hot path.
        kinds = (EVENT, DURATION, SCALAR, SPAN)
        self._plain: dict[str, dict[Any, list[Any]]] = {k: {} for k in kinds}
        self._labeled: dict[str, dict[str, dict[Any, list[Any]]]] = {k: {} for k in kinds}
        self.errors = 0  # callbacks that met an unexpected input and were ignored
        self.on_event, self.on_duration, self.on_scalar, self.on_span = self._build()
        # a child forked while another thread held the lock would wait on it forever
        at_fork_in_child(self._new_lock_in_child)

    def _new_lock_in_child(self) -> None:
        self._lock = threading.Lock()

    def _build(
        self,
    ) -> tuple[Callable[..., None], Callable[..., None], Callable[..., None], Callable[..., None]]:
        # Everything a listener touches is a local of these closures: no attribute or
        # global lookups on the hot path. A value is checked (`+ 0.0` raises for anything
        # that is not a number) before it is appended, so a fold never meets a bad one.
        plain, labeled = self._plain, self._labeled
        event_p, duration_p, scalar_p, span_p = (plain[k] for k in (EVENT, DURATION, SCALAR, SPAN))
        event_l, duration_l, scalar_l, span_l = (labeled[k] for k in (EVENT, DURATION, SCALAR, SPAN))
        fold_at = self._fold_at
        fold = self._fold_locked
        agg = self
        EVENT_, DURATION_, SCALAR_, SPAN_ = EVENT, DURATION, SCALAR, SPAN

        def new_series(kind: str, event: str, kw: dict[str, Any]) -> list[Any]:
            with agg._lock:  # off the hot path: only when a series is new
                if kw:
                    lk = next(iter(kw.values())) if len(kw) == 1 else tuple(kw.values())
                    d = labeled[kind].setdefault(event, {})
                else:
                    lk, d = event, plain[kind]
                s = d.get(lk)
                if s is None:
                    nan = math.nan
                    s = d[lk] = [0, 0.0, nan, nan, nan, [0] * N_BUCKETS, tuple(kw.items()), []]
            return s

        def on_event(event: str, **kw: Any) -> None:
            try:
                if kw:
                    t = event_l.get(event)
                    if len(kw) == 1:
                        (lk,) = kw.values()
                    else:
                        lk = tuple(kw.values())
                    s = None if t is None else t.get(lk)
                else:
                    s = event_p.get(event)
                if s is None:
                    s = new_series(EVENT_, event, kw)
                pending = s[_PENDING]
                pending.append(None)
                if len(pending) >= fold_at:
                    fold(s)
            except Exception:
                agg.errors += 1

        def on_duration(event: str, duration_secs: float, **kw: Any) -> None:
            try:
                v = duration_secs + 0.0
                if kw:
                    t = duration_l.get(event)
                    if len(kw) == 1:
                        (lk,) = kw.values()
                    else:
                        lk = tuple(kw.values())
                    s = None if t is None else t.get(lk)
                else:
                    s = duration_p.get(event)
                if s is None:
                    s = new_series(DURATION_, event, kw)
                pending = s[_PENDING]
                pending.append(v)
                if len(pending) >= fold_at:
                    fold(s)
            except Exception:
                agg.errors += 1

        def on_scalar(event: str, value: float, **kw: Any) -> None:
            try:
                if event.startswith(TIMESTAMP_SCALAR_PREFIX):
                    return
                v = value + 0.0
                if kw:
                    t = scalar_l.get(event)
                    if len(kw) == 1:
                        (lk,) = kw.values()
                    else:
                        lk = tuple(kw.values())
                    s = None if t is None else t.get(lk)
                else:
                    s = scalar_p.get(event)
                if s is None:
                    s = new_series(SCALAR_, event, kw)
                pending = s[_PENDING]
                pending.append(v)
                if len(pending) >= fold_at:
                    fold(s)
            except Exception:
                agg.errors += 1

        def on_span(event: str, start_time: float, end_time: float, **kw: Any) -> None:
            try:
                v = end_time - start_time + 0.0
                if kw:
                    t = span_l.get(event)
                    if len(kw) == 1:
                        (lk,) = kw.values()
                    else:
                        lk = tuple(kw.values())
                    s = None if t is None else t.get(lk)
                else:
                    s = span_p.get(event)
                if s is None:
                    s = new_series(SPAN_, event, kw)
                pending = s[_PENDING]
                pending.append(v)
                if len(pending) >= fold_at:
                    fold(s)
            except Exception:
                agg.errors += 1

        return on_event, on_duration, on_scalar, on_span

    def _fold_locked(self, s: list[Any]) -> None:
        with self._lock:
            _fold(s)

    def _series(self) -> list[tuple[str, str, list[Any]]]:
        items = [(kind, ev, s) for kind, d in self._plain.items() for ev, s in d.items()]
        items += [(kind, ev, s) for kind, d in self._labeled.items() for ev, t in d.items() for s in t.values()]
        return items

    def snapshot(self) -> list[SeriesSnapshot]:
        """Every series' cumulative totals (pending values folded in first, under the lock)."""
        with self._lock:
            items = []
            for kind, ev, s in self._series():
                _fold(s)
                if not s[_COUNT]:
                    continue  # created by a listener that has not appended its value yet
                items.append((kind, ev, s[:_BUCKETS], tuple(s[_BUCKETS]), s[_LABELS]))
        out = []
        for kind, event, s, buckets, labels in items:
            out.append(
                SeriesSnapshot(
                    kind=kind,
                    event=event,
                    labels=labels,
                    count=int(s[_COUNT]),
                    sum=float(s[_SUM]),
                    min=float(s[_MIN]),
                    max=float(s[_MAX]),
                    last=float(s[_LAST]),
                    buckets=() if kind == EVENT else buckets,
                )
            )
        out.sort(key=lambda x: (x.event, x.kind, repr(x.labels)))
        return out

    def total_count(self) -> int:
        """The number of callbacks aggregated so far, all series together."""
        return sum(sn.count for sn in self.snapshot())

    def reset(self) -> None:
        with self._lock:
            for d in self._plain.values():
                d.clear()
            for t in self._labeled.values():
                t.clear()


def _fold(s: list[Any]) -> None:
    """Move a series' pending values into its totals (the caller holds the lock)."""
    pending = s[_PENDING]
    n = len(pending)
    if not n:
        return
    chunk = pending[:n]
    del pending[:n]  # values appended meanwhile stay, after the first n
    s[_COUNT] += n
    if chunk[0] is None:  # an event series: only the count
        return
    s[_SUM] += math.fsum(chunk) if n > 1 else chunk[0]
    lo, hi = min(chunk), max(chunk)
    s[_MIN] = lo if not s[_MIN] <= lo else s[_MIN]  # `not <=` also replaces the initial nan
    s[_MAX] = hi if not s[_MAX] >= hi else s[_MAX]
    s[_LAST] = chunk[-1]
    b = s[_BUCKETS]
    top = N_BUCKETS - 1
    scale = 2.0**-LOW_EXP
    for v in chunk:
        i = int(v * scale).bit_length() if v > 0.0 else 0
        b[i if i < top else top] += 1


def metric_name(event: str, kind: str) -> str:
    """The canonical sample name of a series: the event path without its leading slash.

    Durations and time spans describe the same phases in recent JAX (both are recorded
    for every compile): a span is exported only when no duration of the same event and
    labels exists, and then with a `_span` suffix so the two never collide.
    """
    name = event.strip("/") or "unnamed"
    return name + "_span" if kind == SPAN else name


def to_samples(
    snap: list[SeriesSnapshot],
    base_labels: dict[str, str],
    *,
    now: float | None = None,
    histograms: bool = True,
) -> list[Sample]:
    """The exported form of a snapshot: counters for counts and sums, gauges for min/max/last,
    cumulative `bucket` counters with an `le` label for the histogram."""
    out: list[Sample] = []
    counts: dict[str, int] = {}
    durations = {(s.event, s.labels) for s in snap if s.kind == DURATION}
    for s in snap:
        if s.kind == SPAN and (s.event, s.labels) in durations:
            continue  # the same phase JAX also reported as a duration: export it once
        labels = dict(base_labels)
        for k, v in s.labels:
            labels[str(k)] = str(v)
        name = metric_name(s.event, s.kind)
        if s.kind == EVENT:
            out.append(
                Sample(name, float(s.count), labels, "counter", time=now, description=f"jax.monitoring event {s.event}")
            )
            if not s.labels:
                counts[s.event] = s.count
            continue
        unit = "s" if s.kind in (DURATION, SPAN) else ""
        out.append(Sample(name + "/count", float(s.count), labels, "counter", time=now, unit=""))
        out.append(Sample(name + "/sum", s.sum, labels, "counter", time=now, unit=unit))
        out.append(Sample(name + "/min", s.min, labels, "gauge", time=now, unit=unit))
        out.append(Sample(name + "/max", s.max, labels, "gauge", time=now, unit=unit))
        out.append(Sample(name + "/last", s.last, labels, "gauge", time=now, unit=unit))
        if histograms and s.buckets:
            nz = [i for i, c in enumerate(s.buckets) if c]
            cum = 0
            for i in range(nz[0], nz[-1] + 1):
                cum += s.buckets[i]
                ub = bucket_upper_bound(i)
                if math.isinf(ub):
                    break
                out.append(
                    Sample(name + "/bucket", float(cum), {**labels, "le": repr(ub)}, "counter", time=now, unit=unit)
                )
            out.append(
                Sample(name + "/bucket", float(s.count), {**labels, "le": "+Inf"}, "counter", time=now, unit=unit)
            )
    req = counts.get("/jax/compilation_cache/compile_requests_use_cache")
    if req is not None:
        hits = counts.get("/jax/compilation_cache/cache_hits", 0)
        out.append(
            Sample(
                "jax/compilation_cache/cache_misses_derived",
                float(max(0, req - hits)),
                dict(base_labels),
                "counter",
                time=now,
                description="compile requests that used the cache minus cache hits",
            )
        )
    return out
