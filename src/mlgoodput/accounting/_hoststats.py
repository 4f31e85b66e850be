"""Per-host step statistics (median, p90, max step time), kept incrementally per host.

Each host's step-to-step gaps live in a sorted structure that a query extends with the steps
recorded since the last one, so a query costs the new steps, whatever the number of hosts or
the length of the job. A change that reaches back in time (a late restart, out-of-order
steps) rebuilds that host only. New gaps wait in a small side list of the structure
(_sorted.HostGaps) and are merged a thousand or two at a time: at 256 hosts stepping together,
an update costs each host its new gaps and two searches, not a rewrite of its sorted gaps.
An engine updates its hosts together (`update_all`): their new gaps in one numpy subtraction,
appended to the side lists unsorted, and every median and p90 read in a few numpy passes over
all hosts from what `Together` keeps per host (a part of its sorted gaps around each statistic
and counts of its side values against it); anything else goes host by host as before. The
statistics are the same to the bit either way (tests/accounting/test_hostgaps.py).
"""

from __future__ import annotations

import operator
from array import array
from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import compress, repeat
from typing import Any, TypeVar, cast

from mlgoodput.accounting import _fast
from mlgoodput.accounting._model import median
from mlgoodput.accounting._report import HostStepStats
from mlgoodput.accounting._sorted import HostGaps, SortedFloats
from mlgoodput.accounting._timeline import HostLog


class HostSteps:
    """One host's gaps between consecutive steps of one attempt, extended with new steps only."""

    __slots__ = ("_diffs", "_near", "_raw", "n", "stats", "version")

    def __init__(self) -> None:
        self.n = 0  # steps consumed
        self.version = -1  # the HostLog.version they were consumed at
        self._diffs = HostGaps()
        self._raw: array[float] | None = None  # a first fill's gaps, put in order when first used
        self.stats: HostStepStats | None = None
        # update_all's row for this host: (its Together, the row)
        self._near: _Near = _NO_NEAR

    @property
    def diffs(self) -> HostGaps:
        """The gaps in order. A first fill's statistics come from a selection (_order_stats),
        and its sort waits for the first use (a later update, a save): a cold read of a long
        job does not sort its millions of gaps before they are needed."""
        if self._raw is not None:
            self._diffs.extend(self._raw)  # exactly what the first fill would have done then
            self._raw = None
        return self._diffs

    @diffs.setter
    def diffs(self, value: SortedFloats) -> None:
        self._diffs, self._raw = HostGaps.adopt(value), None

    def update(self, log: HostLog) -> HostStepStats | None:
        if self._grow(log):
            d = self._diffs
            k = len(d)
            self.stats = (
                HostStepStats(log.host, k + 1, d.median(), d.kth(min(k - 1, int(0.9 * k))), d.kth(k - 1)) if k else None
            )
            return self.stats
        return self._update(log)

    def _grow(self, log: HostLog) -> bool:
        """The usual update's growth (steps appended since the last one: what `_update` does in
        that case, without its other cases), the statistics left to the caller; False (nothing
        done) in any other case."""
        n = len(log.times)
        lo = self.n
        if not (n > lo > 1 and log.version == self.version and self._raw is None):
            return False
        self._diffs.extend(_new_gaps(log, lo, n))
        self.n = n
        return True

    def _update(self, log: HostLog) -> HostStepStats | None:
        n = len(log.times)
        quick = None
        if log.version != self.version or n < self.n:
            self.n, self.version, self.diffs, self.stats = 0, log.version, HostGaps(), None
        if n > self.n:
            lo = max(1, self.n)
            if n > lo:
                new = _new_gaps(log, lo, n)
                if not len(self._diffs) and self._raw is None and isinstance(new, array):
                    quick = _order_stats(new)
                if quick is not None and isinstance(new, array):
                    self._raw = new
                else:
                    self.diffs.extend(new)
            self.n = n
            self.stats = None
        if self.stats is None and quick is not None:
            self.stats = HostStepStats(
                host=log.host, steps=quick[0] + 1, median_s=quick[1], p90_s=quick[2], max_s=quick[3]
            )
        elif self.stats is None and len(self.diffs):
            d = self.diffs
            k = len(d)
            self.stats = HostStepStats(
                host=log.host,
                steps=k + 1,
                median_s=d.median(),
                p90_s=d.kth(min(k - 1, int(0.9 * k))),
                max_s=d.kth(k - 1),
            )
        return self.stats


#: update_all's row of a host: (its Together, the row)
_Near = tuple["Together | None", int]
_NO_NEAR: _Near = (None, -1)


@dataclass(frozen=True, slots=True)
class StatColumns:
    """Every host's statistics as `update_columns` worked them out, as columns in host order
    beside the rows made of them: the straggler analysis and the monitor's choice of hosts
    read these lists instead of taking the rows apart again (thousands of hosts an upload)."""

    rows: Sequence[HostStepStats]
    hosts: list[int]
    steps: list[int]
    median: list[float]
    p90: list[float]
    max: list[float]
    arrays: tuple[Any, Any, Any] | None = None  # median, p90, max as numpy arrays, where made so


_TOGETHER = 16  # hosts from which `update_all` updates them in a few numpy passes
_HALF = 96  # half the width of a part of a host's buckets kept around a statistic
_MID = 128  # side values strictly inside a kept part's range, kept per host and statistic
_GROW = 4  # side lists updated together hold up to this many times HostGaps.limit()


class Together:
    """What `update_all` keeps between updates, row r for one host (HostSteps._near), and for
    each of two statistics (s = 0: the median, 1: the p90): a copy of the host's buckets'
    values main[off:off + wl] around where the statistic was (`win`), how far the runs of
    values equal to its first and last reach (`lt`, `le`: main[lt:off] == first and
    main[off + wl:le] == last, so main below lt is below first, from le on above last), and
    of the side list: how many values are below first (`below`), equal to first (`eq1`),
    equal to last (`eq2`, when last != first), and those in between, in order (`mid`, `nmid`
    of them); `fe`, `ls`: the buckets' values up to first, below last. Row r's largest side
    value is `fl[0, r, 2]`. Only a cache: a row not matching its host's structure now (merged,
    extended elsewhere) is filled again. What a row describes is kept by row too: the
    structure (`gaps_of`), its stamp and its side values ever added then (`stamp`, `added`; a
    stamp of -1: fill the row again), its side list's limit for merging (`lim`), its buckets'
    count and largest value (`merged`, `top`) and its side list's length less its values ever
    added (`base`), all unchanged while the stamp is (values only join the side list, counted
    in `added`); and the hosts of the last update with their rows, for the next one."""

    # columns of `ints`
    OFF, WL, LT, LE, BELOW, EQ1, EQ2, NMID, FE, LS = range(10)

    def __init__(self) -> None:
        self.cap = 0
        self.used = 0
        self.win: Any = None  # (2, cap, 2 * _HALF) doubles
        self.ints: Any = None  # (2, cap, 10) int64
        self.fl: Any = None  # (2, cap, 3) doubles: first, last (and the side's largest)
        self.mid: Any = None  # (2, cap, _MID) doubles, +inf after the nmid in order
        self.columns: StatColumns | None = None  # the last update's, when it updated every host together
        self.gaps_of: list[HostGaps | None] = []
        self.stamp: Any = None  # (cap,) int64, like `added`, `lim`, `base` and `merged`
        self.merged: Any = None
        self.added: Any = None
        self.lim: Any = None
        self.base: Any = None
        self.top: Any = None  # (cap,) doubles
        self._last: tuple[list[HostSteps], list[HostGaps], Any] = ([], [], None)  # hosts, structures, rows
        # the hosts of the last update, their steps taken then, and whether each one's last job
        # start was before its last step (update_columns, `appended`)
        self.prev: tuple[list[HostSteps] | None, Any, bool] = (None, None, False)
        self.hosts_of: tuple[list[HostLog] | None, list[int]] = (None, [])  # a list of logs, their hosts

    def row(self, np: Any) -> int:
        if self.used == self.cap:
            cap = max(64, 2 * self.cap)
            grown = (
                np.zeros((2, cap, 2 * _HALF)),
                np.zeros((2, cap, 10), dtype=np.int64),
                np.zeros((2, cap, 3)),
                np.full((2, cap, _MID), np.inf),
            )
            kept = (
                np.full(cap, -1, dtype=np.int64),
                np.zeros(cap, dtype=np.int64),
                np.zeros(cap, dtype=np.int64),
                np.zeros(cap, dtype=np.int64),
                np.zeros(cap, dtype=np.int64),
                np.zeros(cap),
            )
            if self.cap:
                for new, old in zip(grown, (self.win, self.ints, self.fl, self.mid), strict=True):
                    new[:, : self.cap] = old
                olds = (self.stamp, self.added, self.lim, self.base, self.merged, self.top)
                for new, old in zip(kept, olds, strict=True):
                    new[: self.cap] = old
            self.win, self.ints, self.fl, self.mid = grown
            self.stamp, self.added, self.lim, self.base, self.merged, self.top = kept
            self.cap = cap
        self.gaps_of.append(None)
        self.used += 1
        return self.used - 1

    def rows_of(self, np: Any, hss: list[HostSteps], gs: list[HostGaps]) -> tuple[Any, bool]:
        """Each host's row (a new one for a host without one here), and whether each row was
        last filled from the structure the host holds now (else: look at `gaps_of`)."""
        last_hss, last_gs, rows = self._last
        if len(last_hss) != len(hss) or not all(map(operator.is_, hss, last_hss)):
            got: list[int] = []
            for hs in hss:  # (hosts came or went, or were made again: a Python step a host, once)
                near = hs._near
                if near[0] is not self:
                    near = hs._near = (self, self.row(np))
                got.append(near[1])
            rows = np.array(got, dtype=np.int64)
        same = len(last_gs) == len(gs) and all(map(operator.is_, gs, last_gs))
        self._last = (hss, gs, rows)
        return rows, same

    def fill(self, np: Any, r: int, g: HostGaps, at: tuple[int, int]) -> bool:
        """Row r from g around the buckets' indices `at`; False (the row unusable) where too
        many side values lie inside a part's range."""
        m = g.merged
        aside = g.side_values()
        side = np.frombuffer(aside, dtype=np.float64) if aside else None
        for s in (0, 1):
            a = max(0, min(at[s] - _HALF, m - 2 * _HALF))
            part = g.part(a, min(m, a + 2 * _HALF))
            wl = len(part)
            first, last = part[0], part[-1]
            self.win[s, r, :wl] = np.frombuffer(part, dtype=np.float64)
            fe, ls = g.rank(first, True), g.rank(last, False)
            if side is None:  # (just merged: the usual case)
                self.ints[s, r] = (a, wl, g.rank(first, False), g.rank(last, True), 0, 0, 0, 0, fe, ls)
                self.fl[s, r, :2] = (first, last)
                self.mid[s, r] = np.inf  # (`_classify` sorts whole rows)
                continue
            inner = side[(side > first) & (side < last)]
            if len(inner) > _MID:
                return False
            self.ints[s, r] = (
                a,
                wl,
                g.rank(first, False),
                g.rank(last, True),
                int(np.count_nonzero(side < first)),
                int(np.count_nonzero(side == first)),
                int(np.count_nonzero(side == last)) if last != first else 0,
                len(inner),
                fe,
                ls,
            )
            self.fl[s, r, :2] = (first, last)
            self.mid[s, r, : len(inner)] = np.sort(inner)
            self.mid[s, r, len(inner) :] = np.inf
        self.fl[0, r, 2] = -np.inf if side is None else side.max()
        return True


def update_all(pairs: list[tuple[HostSteps, HostLog]], tg: Together | None = None) -> list[HostStepStats | None]:
    """`HostSteps.update` of each (HostSteps, log) pair, the same statistics (to the bit). With
    `tg` (kept by the caller from one update to the next), the usual updates (new steps
    appended, values waiting aside) go together: the new gaps of all those hosts in one numpy
    subtraction, appended to their side lists unsorted (HostGaps.append), and their medians
    and p90s read in a few numpy passes over all of them (a search in the kept parts of
    their buckets and side lists: `Together`), not one search per host and statistic.

    Thousands of hosts an upload: what is read from and written to each host's objects goes
    a column at a time (`map` of attribute getters and setters, C-level loops), not through
    a Python loop over the hosts; only hosts off the usual path take one."""
    if tg is None or len(pairs) < _TOGETHER:
        return [hs.update(log) for hs, log in pairs]
    return update_columns(list(map(_FIRST, pairs)), list(map(_SECOND, pairs)), tg)


def update_columns(
    hss: list[HostSteps],
    logs: list[HostLog],
    tg: Together | None,
    times: list[array[float]] | None = None,
    appended: bool = False,
) -> list[HostStepStats | None]:
    """`update_all` of the pairs zip(hss, logs), given as its two columns (an engine reads its
    hosts a column at a time); `times`: the logs' step starts, when the caller has them.
    `appended`: since the last update of these hosts (the same list) with `tg`, their logs
    only had steps appended after each one's last (no version or job start changed): each
    host's steps taken, its version and its restarts are then known, not read again."""
    p = len(hss)
    np: Any = _fast.numpy() if tg is not None and p >= _TOGETHER else None
    if np is None or tg is None:
        return list(map(HostSteps.update, hss, logs))
    i64 = np.int64
    if times is None:
        times = list(map(_TIMES, logs))
    gs: list[HostGaps] = list(map(_GAPS, hss))
    n = np.fromiter(map(len, times), i64, p)
    prev = tg.prev if appended and tg.prev[0] is hss else None
    tg.prev = (None, None, False)
    # (after an update every host has taken all its steps, at its log's version)
    lo = np.fromiter(map(_N, hss), i64, p) if prev is None else prev[1]
    # each host's row of `tg`, and whether it still describes the host's structure (`fresh`:
    # else it is filled again below); a fresh row's structure is as it was when the row was
    # filled (its buckets' count kept, clean, no first fill waiting: the usual path's then)
    R_all, same = tg.rows_of(np, hss, gs)
    added_all = np.fromiter(map(_ADDED, gs), i64, p)
    fresh = (tg.stamp[R_all] == np.fromiter(map(_STAMP, gs), i64, p)) & (tg.added[R_all] == added_all)
    if not same:  # (some hosts' structures were made again since the last update)
        fresh &= np.fromiter(map(operator.is_, map(tg.gaps_of.__getitem__, R_all.tolist()), gs), bool, p)
    merged_all = tg.merged[R_all]  # (unchanged by HostGaps.append below)
    usual = fresh.copy()
    stale = np.flatnonzero(~fresh).tolist()
    if len(stale) > p >> 3:  # (many: a column at a time)
        merged_all = np.fromiter(map(_MERGED, gs), i64, p)
        usual = np.fromiter(map(operator.is_, map(_RAW, hss), repeat(None)), bool, p)
        usual &= np.fromiter(map(operator.is_, map(_CLEAN, gs), repeat(True)), bool, p)
    else:
        for i in stale:
            g = gs[i]
            merged_all[i] = g.merged
            usual[i] = hss[i]._raw is None and g.clean is True
    # the usual update (HostSteps._grow's case, with values that may wait aside), host by host:
    # n > lo > 1, the same version, no first fill waiting, a clean side list, few new values
    ok = (n > lo) & (lo > 1) & ((n - lo) <= (merged_all >> 3)) & usual
    if prev is None:
        ok &= np.fromiter(map(operator.eq, map(_VERSION, logs), map(_VERSION, hss)), bool, p)
    js: list[list[float]] = [] if prev is not None and prev[2] else list(map(_JS, logs))
    if not js:  # (every host's last job start before its last step taken, and none since)
        pass
    elif all(js) and ok.all():  # (the usual: every host on its usual path, each with a job start)
        # no restart after the last step taken (else `_new_gaps` cuts some gaps out)
        before_all = cast("Iterable[float]", map(operator.getitem, times, (lo - 1).tolist()))
        ok &= np.fromiter(map(operator.le, map(_LAST, js), before_all), bool, p)
    elif len(w := np.flatnonzero(np.fromiter(map(bool, js), bool, p) & ok)):  # (else `_new_gaps` cuts gaps out)
        wl = w.tolist()
        last_js = map(_LAST, map(js.__getitem__, wl))
        before: Iterable[float] = map(operator.getitem, map(times.__getitem__, wl), (lo[w] - 1).tolist())
        ok[w] = np.fromiter(map(operator.le, last_js, before), bool, len(wl))
    # for the next update, when only steps are appended until then: every host will have
    # taken its n steps (below), and whether each one's last job start is before its last step
    clear = not js or all(map(operator.le, map(_LAST, filter(None, js)), map(_LAST, compress(times, js))))
    tg.prev = (hss, n, clear)
    out: list[HostStepStats | None] = [None] * p
    for i in np.flatnonzero(~ok).tolist():
        out[i] = hss[i].update(logs[i])
    ci = np.flatnonzero(ok)
    cl: list[int] = ci.tolist()
    h = len(cl)
    if h < _TOGETHER:
        for i in cl:
            out[i] = hss[i].update(logs[i])
        return out
    every = h == p  # (the usual: every host updated together, no columns to pick from)
    c_hs: list[HostSteps] = hss if every else list(map(hss.__getitem__, cl))
    c_g: list[HostGaps] = gs if every else list(map(gs.__getitem__, cl))
    c_logs: list[HostLog] = logs if every else list(map(logs.__getitem__, cl))
    c_n, c_lo = n[ci], lo[ci]
    cnt = c_n - c_lo
    slices = cast(
        "Iterable[array[float]]",
        map(
            operator.getitem,
            times if every else map(times.__getitem__, cl),
            map(slice, (c_lo - 1).tolist(), c_n.tolist()),
        ),
    )
    flat = np.frombuffer(b"".join(slices), dtype=np.float64)
    ends = np.cumsum(cnt + 1)
    with np.errstate(invalid="ignore"):  # (inf - inf: a NaN, looked at below)
        gaps = np.delete(flat[1:] - flat[:-1], ends[:-1] - 1)  # each host's, as _fast.gaps gives them
    if bool((np.isnan(gaps) | ((gaps == 0) & np.signbit(gaps))).any()):
        for i in cl:  # a NaN or a -0.0: their structures' own ways
            out[i] = hss[i].update(logs[i])
        return out
    packed = array("d")
    packed.frombytes(gaps.tobytes())
    starts = ends - cnt - np.arange(1, h + 1)  # each host's first gap in `gaps`
    # each host's row of `tg`: filled again where it does not describe the host's structure now
    R = R_all[ci]
    rl: list[int] = R.tolist()
    added = added_all[ci]
    fail: list[int] = []  # positions in cand whose rows could not be filled
    for x in np.flatnonzero(~fresh[ci]).tolist():  # (before the new values go aside)
        g, r = c_g[x], rl[x]
        merged = g.merged
        if not tg.fill(np, r, g, (merged // 2, int(0.9 * merged))):
            fail.append(x)
        tg.gaps_of[r] = g
        tg.stamp[r], tg.added[r], tg.lim[r] = g.stamp, g.added, _GROW * g.limit()
        tg.base[r], tg.top[r], tg.merged[r] = g.pending() - g.added, g.largest_merged(), merged
    bounds = starts.tolist()
    news = cast(
        "list[array[float]]", list(map(operator.getitem, repeat(packed), map(slice, bounds, (starts + cnt).tolist())))
    )
    _each(map(HostGaps.append, c_g, news))
    _each(map(setattr, c_hs, repeat("n"), c_n.tolist()))
    added += cnt
    tg.added[R] = added  # (what the rows describe now: the values just appended included)
    b = tg.base[R] + added  # each side list's length
    m = merged_all[ci]
    tops = tg.top[R]
    full = np.flatnonzero(b > tg.lim[R]).tolist()  # side lists to merge (past _GROW times their limit)
    _classify(np, tg, R, gaps, starts, cnt)
    n_all = m + b
    half = n_all // 2
    k90 = np.minimum(n_all - 1, (0.9 * n_all).astype(i64))  # as int(0.9 * n): a double, truncated
    val, bad = _search(
        np,
        tg,
        np.concatenate((R, R, R)),
        np.concatenate((half - 1 + (n_all & 1), half, k90)),
        h,
        np.concatenate((m, m, m)),
    )
    lo_v, hi_v, p90 = val[:h], val[h : 2 * h], val[2 * h :]
    med = np.where(n_all & 1, hi_v, (lo_v + hi_v) / 2.0)
    mx = np.maximum(tops, tg.fl[0, R, 2])  # the larger, as kth(n - 1) takes it
    bad = bad[:h] | bad[h : 2 * h] | bad[2 * h :]
    bad[fail] = True
    if tg.hosts_of[0] is c_logs:  # (the same list of logs: their hosts)
        c_hosts = tg.hosts_of[1]
    else:
        c_hosts = list(map(_HOST, c_logs))
        tg.hosts_of = (c_logs, c_hosts)
    kp_l: list[int] = k90.tolist()
    # (the found values are not handed to the structures' memo: the next change empties it
    # anyway, and a statistic asked of a structure finds the same value itself)
    cols = (n_all + 1).tolist(), med.tolist(), p90.tolist(), mx.tolist()
    stats = rows_from_columns(HostStepStats, c_hosts, *cols)
    nl: list[int] = n_all.tolist()
    tg.columns = StatColumns(stats, c_hosts, *cols, arrays=(med, p90, mx)) if every else None
    for x in np.flatnonzero(bad).tolist():  # read one by one; the row filled again around where those searches ended
        g, ni, kp = c_g[x], nl[x], kp_l[x]
        stats[x] = st = HostStepStats(c_hosts[x], ni + 1, g.median(), g.kth(kp), g.kth(ni - 1))
        if tg.columns is not None:
            tg.columns.median[x], tg.columns.p90[x], tg.columns.max[x] = st.median_s, st.p90_s, st.max_s
            med[x], p90[x], mx[x] = st.median_s, st.p90_s, st.max_s
        if not tg.fill(np, rl[x], g, (g.main_index(ni // 2), g.main_index(kp))):
            tg.stamp[rl[x]] = -1  # (the row kept: filled again next time)
    _each(map(setattr, c_hs, repeat("stats"), stats))
    for x in full:
        c_g[x].flush()
    if every:
        return cast("list[HostStepStats | None]", stats)
    for i, st in zip(cl, stats, strict=True):
        out[i] = st
    return out


# a host's objects read a column at a time (update_all)
_FIRST, _SECOND = operator.itemgetter(0), operator.itemgetter(1)
_TIMES, _JS, _HOST, _VERSION = (operator.attrgetter(a) for a in ("times", "job_starts", "host", "version"))
_N, _RAW, _GAPS = (operator.attrgetter(a) for a in ("n", "_raw", "_diffs"))
_MERGED, _CLEAN, _STAMP, _ADDED = (operator.attrgetter(a) for a in ("merged", "clean", "stamp", "added"))
_LAST = operator.itemgetter(-1)


_R = TypeVar("_R")


def rows_from_columns(cls: type[_R], *columns: Sequence[Any]) -> list[_R]:
    """`list(map(cls, *columns))` for a frozen dataclass with slots and nothing more to its
    `__init__` than setting its fields in order (HostStepStats, RankStepStats): the objects
    made bare, then each field set a column at a time through its slot (C-level), which
    gives the same objects as the dataclass's own `__init__` (one `object.__setattr__` a
    field, in Python) at about a third of its cost: thousands of hosts an upload."""
    names = cast("tuple[str, ...]", cls.__slots__)  # type: ignore[attr-defined]
    if len(columns) != len(names):
        raise TypeError(f"{cls.__name__} has {len(names)} fields, got {len(columns)} columns")
    n = len(columns[0]) if columns else 0
    objs: list[_R] = list(map(object.__new__, repeat(cls, n)))
    for name, col in zip(names, columns, strict=True):
        if len(col) != n:
            raise ValueError("columns of different lengths")
        _each(map(getattr(cls, name).__set__, objs, col))
    return objs


def _each(calls: Iterable[object]) -> None:
    """Run a lazy `map` of calls for their effects (a C-level loop: no Python step a host)."""
    deque(calls, maxlen=0)


def _classify(np: Any, tg: Together, R: Any, gaps: Any, starts: Any, cnt: Any) -> None:
    """Count each host's new side values into its row (R: the rows; gaps[starts[x]:][:cnt[x]]
    host x's new values): below, equal to the first or the last, or in between each part's
    range (those into `mid`, in order; past `_MID` of them the row is left to be filled again:
    its count says so)."""
    h = len(R)
    tg.fl[0, R, 2] = np.maximum(tg.fl[0, R, 2], np.maximum.reduceat(gaps, starts))
    i64 = np.int64
    for s in (0, 1):
        ints = tg.ints[s]
        fr, la = tg.fl[s, R, 0], tg.fl[s, R, 1]
        first, last = np.repeat(fr, cnt), np.repeat(la, cnt)
        below_first = gaps < first
        upto_first = gaps <= first
        below_last = gaps < last
        n_below = np.add.reduceat(below_first, starts, dtype=i64)
        ints[R, Together.BELOW] += n_below
        ints[R, Together.EQ1] += np.add.reduceat(upto_first, starts, dtype=i64) - n_below
        n_last = np.add.reduceat(gaps <= last, starts, dtype=i64) - np.add.reduceat(below_last, starts, dtype=i64)
        ints[R, Together.EQ2] += np.where(la != fr, n_last, 0)
        inner = np.flatnonzero(below_last & ~upto_first)  # first < value < last
        if not len(inner):
            continue
        who = np.searchsorted(starts, inner, side="right") - 1  # whose values they are
        vals = gaps[inner]
        k_in = np.bincount(who, minlength=h)
        had = ints[R, Together.NMID]
        at = had[who] + np.arange(len(vals)) - (np.cumsum(k_in) - k_in)[who]
        ok = at < _MID
        tg.mid[s, R[who[ok]], at[ok]] = vals[ok]
        now = had + k_in
        ints[R, Together.NMID] = now  # past _MID: `_search` finds the row unusable
        touched = np.unique(R[who])
        w = min(_MID, int(now.max()))  # (+inf after each row's values: sorted as far as the longest)
        tg.mid[s, touched, :w] = np.sort(tg.mid[s, touched, :w], axis=1)


def _search(np: Any, tg: Together, R: Any, k: Any, h: int, m: Any) -> tuple[Any, Any]:
    """For each row (3h of them: the median's lower and upper k, the p90's k, of host x's
    row R[x]): the k-th of the host's buckets' m values and side list together, from its row
    of `tg`, and whether that could not be told from it (then the value is not to be used).
    The values below the row's part's first (the side list's `below` and the buckets' `lt`)
    come first; from there, HostGaps._find's search for j (the side values among the first
    k + 1) with the buckets' values outside [lt, le) taken as -inf and +inf, and the side
    values from first to last as `eq1` firsts, the `mid`, `eq2` lasts."""
    s = np.repeat(np.array([0, 0, 1]), h)
    ints = tg.ints[s, R]
    off, wl, lt, le, below, eq1, eq2, nmid, fe, ls = ints.T
    first, last = tg.fl[s, R, 0], tg.fl[s, R, 1]
    base_w = (s * tg.cap + R) * (2 * _HALF)
    base_m = (s * tg.cap + R) * _MID
    win = tg.win.reshape(-1)
    mid = tg.mid.reshape(-1)
    kk = k - below
    br = eq1 + nmid + eq2
    bad = (kk < lt) | (kk >= le + br) | (nmid > _MID)
    lo = np.maximum(np.maximum(0, kk + 1 - m), kk - le + 1)
    hi = np.maximum(np.minimum(np.minimum(br, kk + 1), kk - lt + 1), lo)
    # the k-th is first where the values up to first reach past it, last where those below
    # last do not (runs of equal values: no search there)
    at_first = kk < fe + eq1
    at_last = (kk >= ls + eq1 + nmid) & (last != first)
    hi = np.where(at_first | at_last, lo, hi)
    top_w = wl - 1
    eq1_mid = eq1 + nmid

    def main_at(i: Any) -> Any:
        v = win[base_w + np.minimum(np.maximum(i - off, 0), top_w)]
        v = np.where(i < off, first, np.where(i >= off + wl, last, v))
        return np.where(i < lt, -np.inf, np.where(i >= le, np.inf, v))

    def side_at(i: Any) -> Any:
        v = mid[base_m + np.minimum(np.maximum(i - eq1, 0), _MID - 1)]
        return np.where(i < eq1, first, np.where(i >= eq1_mid, last, v))

    steps = int((hi - lo).max()).bit_length() if len(k) else 0
    for _ in range(steps):
        act = lo < hi
        md = (lo + hi) >> 1
        less = side_at(md) < main_at(kk - md)
        lo = np.where(act & less, md + 1, lo)
        hi = np.where(act & ~less, md, hi)
    j = lo
    t = kk - j
    x_main = np.where(t >= 0, main_at(t), -np.inf)
    x_side = np.where(j >= 1, side_at(j - 1), -np.inf)
    got = np.where(at_first, first, np.where(at_last, last, np.maximum(x_main, x_side)))
    return got, bad


def _new_gaps(log: HostLog, lo: int, n: int) -> list[float] | array[float]:
    """The gaps before steps lo..n-1 of the host (1 <= lo < n), those a restart falls in taken out."""
    times = log.times
    new = (
        _fast.gaps(times, lo - 1, n - 1)
        or _fast.short_gaps(times, lo - 1, n - 1)
        or list(map(operator.sub, times[lo:], times[lo - 1 : n - 1]))
    )
    js = log.job_starts
    if js and js[-1] > times[lo - 1]:
        _cut(new, times, js, lo, n)
    return new


def _cut(new: list[float] | array[float], times: array[float], js: list[float], lo: int, n: int) -> None:
    """Take out of `new` (the gaps before steps lo..n-1) those a restart falls in: a restart at
    js falls between steps i-1 and i where i is the first step at or after js."""
    cut = sorted({bisect_left(times, t) for t in js[bisect_right(js, times[lo - 1]) :] if t <= times[-1]}, reverse=True)
    for i in cut:
        if lo <= i < n:
            del new[i - lo]


def _order_stats(gaps: array[float]) -> tuple[int, float, float, float] | None:
    """(count, median, p90, max) of the gaps, as SortedFloats' `median` and `kth` give them, by
    a selection (numpy's partition) instead of a sort; None (the caller sorts) without numpy,
    for a short list, or with a NaN or a zero (where 0.0 and -0.0 could trade places)."""
    k = len(gaps)
    np: Any = _fast.numpy() if k >= _fast.MIN else None
    if np is None:
        return None
    a = np.frombuffer(gaps, dtype=np.float64)
    if np.isnan(a).any() or (a == 0).any():
        return None
    p90 = min(k - 1, int(0.9 * k))
    part = np.partition(a, sorted({k // 2 - 1, k // 2, p90, k - 1}))
    mid = float(part[k // 2])
    median = mid if k % 2 else (float(part[k // 2 - 1]) + mid) / 2.0
    return k, median, float(part[p90]), float(part[k - 1])


def stats_as_of(log: HostLog, q: float) -> HostStepStats | None:
    """The statistics of the steps started by q (a look into the past; a full pass)."""
    times = log.times
    js = log.job_starts
    diffs = []
    for i in range(1, len(times)):
        if times[i] > q:
            break
        if bisect_right(js, times[i]) != bisect_right(js, times[i - 1]):
            continue  # a restart lies between
        diffs.append(times[i] - times[i - 1])
    if not diffs:
        return None
    diffs.sort()
    return HostStepStats(
        host=log.host,
        steps=len(diffs) + 1,
        median_s=median(diffs),
        p90_s=diffs[min(len(diffs) - 1, int(0.9 * len(diffs)))],
        max_s=diffs[-1],
    )
