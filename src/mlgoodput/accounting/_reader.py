"""Reading one job's stream from a store into a Timeline, a page at a time, from a cursor.

The calculator's store reader (its one reason to change is how stores are read): it asks the
store for the events stored after its cursor, a page at a time where the store pages (never
the whole job in memory at once), gathers the small pages shippers store every second (one
host's step starts each) into one part per host, and ingests them into the timeline it is
given.
"""

from __future__ import annotations

import bisect
import itertools
import operator
import sys
from array import array
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import cast

from mlgoodput.accounting import _fast
from mlgoodput.accounting._timeline import Timeline
from mlgoodput.events import Kind
from mlgoodput.store import Columns, PagedStore, Store, StoredRow
from mlgoodput.store import decode_chunk as decode


def _outside_read() -> Timeline:
    raise RuntimeError("StoreReader: a timeline is read into only during `read`")


class StoreReader:
    """Reads a job's events stored after `cursor` into a timeline (`read`), and moves the cursor."""

    def __init__(self, store: Store, logger_name: str, job_name: str) -> None:
        self.store = store
        self.logger_name = logger_name
        self.job_name = job_name
        self.paged = isinstance(store, PagedStore)  # a protocol check costs, do it once
        self.cursor = 0
        self._timeline: Callable[[], Timeline] = _outside_read  # the one being read into, during `read`

    def read(self, timeline: Callable[[], Timeline]) -> None:
        """Ingest into `timeline()` every event stored after the cursor, and move the cursor;
        `timeline` is called only when there is something to ingest (a calculator builds its
        engine from a saved state then, not before)."""
        self._timeline = timeline
        try:
            self._read()
        finally:
            self._timeline = _outside_read

    def _read(self) -> None:
        if self.paged:  # a page at a time: never the whole job at once
            # a shipper stores a small page a second per host: consecutive pages that hold only
            # one host's step starts are taken together, one part per host (_StepRun)
            run = _StepRun()
            rows_of = getattr(self.store, "scan_pages", None)
            if callable(rows_of):  # the chunks as stored, a page of rows at a time
                for rows in rows_of(self.logger_name, self.job_name, self.cursor):
                    self._take_rows(run, rows)
            else:
                for cursor, page in cast(PagedStore, self.store).scan(self.logger_name, self.job_name, self.cursor):
                    if run.take(page):
                        run.end = cursor
                        if run.events >= _RUN_EVENTS:
                            self._ingest_run(run)
                        continue
                    self._ingest_run(run)
                    self._ingest_part(cursor, page)
            self._ingest_run(run)
            return
        res = self.store.read(self.logger_name, self.job_name, self.cursor)
        for part in res.parts:
            self._timeline().ingest(part)
        self.cursor = res.cursor

    def _ingest_part(self, cursor: int, part: Columns) -> None:
        """Ingest one page on its own: it ends at `cursor`."""
        self._timeline().ingest(part)
        self.cursor = cursor

    def _take_rows(self, run: _StepRun, rows: Sequence[StoredRow]) -> None:
        """One page of stored rows, as page after page through `run.take`: checked a column
        at a time and gathered per host when every row holds one host's step starts (the
        usual page of a job that only steps), else row by row."""
        got = _step_rows(rows)
        if got is None:
            for row in rows:
                if run.take_row(row):
                    run.end = row[0]
                    if run.events >= _RUN_EVENTS:
                        self._ingest_run(run)
                    continue
                self._ingest_run(run)
                self._ingest_part(row[0], decode(*row[1:]))
            return
        firsts, ns = got
        total = sum(ns)
        if run.events + total < _RUN_EVENTS:  # the usual: no run ends inside this page
            run.add_rows(firsts, rows, total)
            run.end = rows[-1][0]
            return
        # a run ends with the row that brings it to _RUN_EVENTS: where each ends in this page
        before = list(itertools.accumulate(ns, initial=0))  # before[k]: the page's events ahead of row k
        i, m = 0, len(rows)
        while i < m:
            k = bisect.bisect_left(before, _RUN_EVENTS - run.events + before[i], i + 1)
            if k > m:  # the rest of the page joins the run, which goes on
                run.add_rows(firsts[i:], rows[i:], before[m] - before[i])
                run.end = rows[-1][0]
                return
            run.add_rows(firsts[i:k], rows[i:k], before[k] - before[i])
            run.end = rows[k - 1][0]
            self._ingest_run(run)
            i = k

    def _ingest_run(self, run: _StepRun) -> None:
        """Ingest the pages gathered in `run` (one part per host, or page by page for a host
        whose pages do not follow each other in time) and empty it."""
        if not run.pages:
            return
        end = run.end
        timeline = self._timeline()
        if self._ingest_block(run, timeline):
            self.cursor = end
            run.clear()
            return
        for part, steps, by_one in run.parts():
            if steps:  # one host's step starts at strictly increasing times (checked)
                timeline.ingest_steps(part, by_one)
            else:
                timeline.ingest(part)
        self.cursor = end
        run.clear()

    def _ingest_block(self, run: _StepRun, timeline: Timeline) -> bool:
        """What `run.parts()` ingests, when the run holds stored rows of enough hosts, numpy
        helps and every host's step starts increase strictly across its rows: all hosts'
        columns joined once, in the parts' order (each host's rows in stored order), ingested
        with a few C-level calls per host (`Timeline.ingest_step_block`). False, nothing done,
        where that does not apply (then part by part)."""
        groups = list(run.pages.values())
        if len(groups) < _BLOCK_HOSTS or isinstance(groups[0][0], Columns) or _fast.numpy() is None:
            return False
        rows = list(itertools.chain.from_iterable(cast("list[list[StoredRow]]", groups)))
        times = b"".join(map(_TIMES, rows))
        steps = b"".join(map(_STEPS, rows))
        # each host's events: its rows' lengths summed (the lengths were checked on the way in)
        per_row = list(map(len, map(_TIMES, rows)))
        if len(rows) == len(groups):
            sizes = [k >> 3 for k in per_row]
        elif (k := min(per_row) >> 3) == max(per_row) >> 3:  # rows of one size (shippers at a steady rate)
            sizes = [k * len(g) for g in groups]
        else:
            sizes = [
                sum(per_row[a:b]) >> 3 for a, b in itertools.pairwise(itertools.accumulate(map(len, groups), initial=0))
            ]
        got = _fast.step_blocks(times, steps, sizes)
        if got is None or not got[0]:
            return False  # a host's step starts out of order: its rows one by one (run.parts)
        hosts = list(run.pages)
        timeline.ingest_step_block(hosts, sizes, times, steps, got[1:])
        return True


_STEP = int(Kind.STEP_START)
_RUN_EVENTS = 1 << 16  # events gathered at most before a run is ingested
_BLOCK_HOSTS = 8  # hosts in a run from which its stored rows are ingested as one block
_RUN_PAGE = 4096  # a page of this many events or more is ingested on its own (nothing to gain)


class _StepRun:
    """Consecutive small pages that each hold only step starts of one host, gathered per host.

    Ingesting a host's pages as one part gives exactly what ingesting them one by one gives
    when its step starts increase strictly across them (then each page would only append);
    otherwise that host's pages are ingested one by one. Hosts keep the order in which they
    first appear, and every other page is ingested in its place (the run is emptied first).

    Pages come decoded (Columns, from a store's `scan`) or as stored (rows of a store's
    `scan_pages`): those are checked on their bytes and a host's columns decoded once,
    joined."""

    __slots__ = ("end", "events", "pages")

    def __init__(self) -> None:
        self.pages: defaultdict[int, list[Columns] | list[StoredRow]] = defaultdict(list)
        self.events = 0
        self.end = 0

    def take(self, part: Columns) -> bool:
        """Gather `part` if it holds only step starts of one host (and no names or attributes)."""
        kinds, hosts = part.kinds, part.hosts
        n = len(kinds)
        if not n or n >= _RUN_PAGE or part.names is not None or part.attrs is not None:
            return False
        h = hosts[0]
        if kinds.count(_STEP) != n or hosts.count(h) != n:
            return False
        got = self.pages.get(h)
        if got is None:
            self.pages[h] = [part]
        else:
            got.append(part)  # type: ignore[arg-type]
        self.events += n
        return True

    def take_row(self, row: StoredRow) -> bool:
        """`take` for a stored row (checked on its bytes, as `_step_rows` checks a page)."""
        _, kinds, times, hosts, steps, values, names, attrs = row
        n = len(kinds)
        if not n or n >= _RUN_PAGE or names is not None or attrs is not None:
            return False
        if len(times) != 8 * n or len(steps) != 8 * n or len(values) != 8 * n or len(hosts) != _HOST_BYTES * n:
            return False  # not what it should be: decoded and ingested on its own
        first = hosts[:_HOST_BYTES]
        if kinds.count(_STEP) != n or hosts != first * n:
            return False
        h = int.from_bytes(first, sys.byteorder, signed=True)  # as array("i") reads it
        got = self.pages.get(h)
        if got is None:
            self.pages[h] = [row]
        else:
            got.append(row)  # type: ignore[arg-type]
        self.events += n
        return True

    def add_rows(self, hosts: Iterable[int], rows: Iterable[StoredRow], events: int) -> None:
        """Gather stored rows already checked (`_step_rows`): each with its host."""
        pages = cast("defaultdict[int, list[StoredRow]]", self.pages)
        deque(map(list.append, map(pages.__getitem__, hosts), rows), maxlen=0)  # no Python step a row
        self.events += events

    def parts(self) -> Iterator[tuple[Columns, bool, bool | None]]:
        """Each part to ingest, whether it is one host's step starts at strictly increasing
        times (Timeline.ingest_steps), and whether its step numbers count up by one in int64
        (None: not checked here)."""
        groups = list(self.pages.values())
        if groups and not isinstance(groups[0][0], Columns):  # stored rows (a run holds one sort)
            yield from _joined(cast("list[list[StoredRow]]", groups))
            return
        for pages in cast("list[list[Columns]]", groups):
            first = pages[0]
            if len(pages) == 1:
                yield first, False, None
                continue
            t, s, v = array("d"), array("q"), array("d")
            for p in pages:
                t.extend(p.times)
                s.extend(p.steps)
                v.extend(p.values)
            if _increasing(t):
                n = len(t)
                yield Columns(bytearray((_STEP,)) * n, t, array("i", first.hosts[:1]) * n, s, v, None, None), True, None
            else:
                for p in pages:
                    yield p, False, None

    def clear(self) -> None:
        self.pages = defaultdict(list)
        self.events = 0


_HOST_BYTES = array("i").itemsize  # a stored host column's bytes per event
_FIRST_HOST = slice(0, _HOST_BYTES)


def _increasing(t: array[float]) -> bool:
    """Whether t[i] < t[i + 1] everywhere."""
    fast = _fast.strictly_increasing(t)
    return fast if fast is not None else all(map(operator.lt, t[:-1], t[1:]))


def _step_rows(rows: Sequence[StoredRow]) -> tuple[list[int], list[int]] | None:
    """(each row's host; each row's events) when every stored row of a page
    passes `_StepRun.take_row`'s checks, else None: the same checks a column at a time."""
    _, kinds, times, hosts, steps, values, names, attrs = zip(*rows, strict=True)
    m = len(kinds)
    if names.count(None) != m or attrs.count(None) != m:
        return None
    ns = list(map(len, kinds))
    lo, hi = min(ns), max(ns)
    if lo == 0 or hi >= _RUN_PAGE or b"".join(kinds).count(_STEP) != sum(ns):
        return None
    if lo == hi:  # rows of one size (shippers at a steady rate): the lengths they must have, as is
        n8, n4 = [8 * lo] * m, [_HOST_BYTES * lo] * m
    else:
        n8 = list(map(operator.mul, ns, itertools.repeat(8)))
        n4 = list(map(operator.mul, ns, itertools.repeat(_HOST_BYTES)))
    if list(map(len, times)) != n8 or list(map(len, steps)) != n8 or list(map(len, values)) != n8:
        return None
    if list(map(len, hosts)) != n4:
        return None
    got = _fast.firsts_of_rows(b"".join(hosts), ns)  # numpy: one pass over the hosts of all rows
    if got is not None:
        return (got[1], ns) if got[0] else None
    heads: list[bytes] = list(map(operator.getitem, hosts, itertools.repeat(_FIRST_HOST)))
    if hosts != tuple(map(operator.mul, heads, ns)):
        return None
    return array("i", b"".join(heads)).tolist(), ns


def _joined(groups: list[list[StoredRow]]) -> Iterator[tuple[Columns, bool, bool | None]]:
    """Each host's stored step rows (a group) as one part, their bytes joined and decoded
    once, when its step starts increase strictly across them (checked for all hosts in one
    pass where numpy helps); else each of its rows decoded on its own. Where numpy helps, also
    whether each part's step numbers count up by one (one pass for all hosts, for the timeline:
    else it checks each part on its own)."""
    times = [rows[0][2] if len(rows) == 1 else b"".join(map(_TIMES, rows)) for rows in groups]
    steps = [rows[0][4] if len(rows) == 1 else b"".join(map(_STEPS, rows)) for rows in groups]
    strict = _fast.increasing_each(times)
    by_one = _fast.by_one_each(steps)
    for i, rows in enumerate(groups):
        t = array("d")
        t.frombytes(times[i])
        if not (_increasing(t) if strict is None else strict[i]):
            for r in rows:
                yield decode(*r[1:]), False, None
            continue
        s, v, h = array("q"), array("d"), array("i")
        s.frombytes(steps[i])
        v.frombytes(rows[0][5] if len(rows) == 1 else b"".join(map(_VALUES, rows)))
        h.frombytes(rows[0][3][:_HOST_BYTES])
        n = len(t)
        kinds = _STEP_KINDS[:n] if n <= len(_STEP_KINDS) else bytearray((_STEP,)) * n
        yield Columns(kinds, t, h * n, s, v, None, None), True, None if by_one is None else by_one[i]


_TIMES, _STEPS, _VALUES = (operator.itemgetter(k) for k in (2, 4, 5))  # a stored row's columns
_STEP_KINDS = bytearray((_STEP,)) * (_RUN_EVENTS + _RUN_PAGE)  # a part's kinds: a slice of it (a copy)
