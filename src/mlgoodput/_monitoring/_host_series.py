"""Which hosts' series an upload carries, so a job of thousands of hosts costs the uploader
(and every backend) about what a job of a few hundred does (docs/exporting.md, "Per-host
series of large jobs").

Each host has six per-host series: its step time median, p90 and max (`hosts/...`) and, as a
rank of the straggler analysis, held-back seconds, median step time and mean lag
(`stragglers/...`). A job of up to `ALL_HOSTS_UP_TO` hosts exports all of them every upload,
as it always did. Above that, an upload carries the series of a host only when one of its six
values changed since they last went out, or when they last went out `REFRESH_UPLOADS` uploads
ago (so a backend that drops a series without points, like Cloud Monitoring's charts, keeps
it); and of at most `HOSTS_PER_UPLOAD` such hosts, the straggler and the ranks holding the
others back most first, then those waiting longest. The first upload (every host) and the
final one (every change) have no such bound, so each backend starts with every host's value
and ends with its last. Every value that goes out is the current one: a host's series get
fewer points, never other values.
"""

from __future__ import annotations

import heapq
import itertools
import math
import operator
from collections.abc import Sequence
from typing import Any

from mlgoodput._numpy import numpy
from mlgoodput.accounting import HostStepStats, RankColumns, RankStepStats, StatColumns

#: Jobs of up to this many hosts export every host's series every upload.
ALL_HOSTS_UP_TO = 256
#: Above that, an upload carries the series of at most this many hosts (first and final: no bound).
HOSTS_PER_UPLOAD = 256
#: A host whose values did not change is sent again after this many uploads.
REFRESH_UPLOADS = 30
#: The ranks that held the others back most (and the straggler) go out first when they changed.
FIRST_RANKS = 8

_HELD = operator.attrgetter("held_back_s")
_NUMPY_FROM = 1024  # hosts from which `_Family.changed` compares in numpy (when it is installed)
_NEVER = math.nan  # the value "last sent" of a series never sent: unequal to any value


class _Family:
    """The values last sent of one family's three series per host, by position in the list
    the calculator gives (its order stays while no host comes or goes): a comparison with the
    new values is a few passes in C, not a Python loop over the hosts."""

    def __init__(self, key: str, fields: tuple[str, str, str]) -> None:
        self._key = operator.attrgetter(key)
        self._fields = [operator.attrgetter(f) for f in fields]
        self.keys: list[int] = []  # the host of each position
        self.pos: dict[int, int] = {}  # host -> its position
        self._sent: list[list[float]] = [[], [], []]  # per field: the value last sent, by position
        self._sent_np: list[Any] | None = None  # the same as numpy arrays, kept beside (None: made again)

    def changed(self, rows: Sequence[Any], columns: Sequence[Sequence[Any]] | None = None) -> set[int]:
        """The hosts whose values differ from those last sent (or were never sent); `columns`:
        the rows' keys and three values as columns (lists or numpy arrays), when the caller
        has them (else read here)."""
        keys = list(map(self._key, rows)) if columns is None else list(columns[0])
        if keys != self.keys:  # hosts came or went: the values last sent, moved to their places
            old = dict(zip(self.keys, zip(*self._sent, strict=True), strict=True))
            none = (_NEVER, _NEVER, _NEVER)
            moved = [old.get(k, none) for k in keys]
            self._sent = [list(col) for col in zip(*moved, strict=True)] if moved else [[], [], []]
            self._sent_np = None
            self.keys = keys
            self.pos = {k: i for i, k in enumerate(keys)}
        np = numpy() if len(keys) >= _NUMPY_FROM else None
        if np is not None:  # the comparisons of thousands of hosts in numpy (the same IEEE `!=`)
            try:
                if columns is None:
                    new = [np.fromiter(map(get, rows), np.float64, len(keys)) for get in self._fields]
                else:
                    new = [np.array(col, dtype=np.float64) for col in columns[1:]]
                if self._sent_np is None:
                    self._sent_np = [np.array(sent, dtype=np.float64) for sent in self._sent]
            except (TypeError, ValueError):  # a value that is no float: the loop below
                self._sent_np = None
            else:
                differs = [a != sent for a, sent in zip(new, self._sent_np, strict=True)]
                return set(itertools.compress(keys, (differs[0] | differs[1] | differs[2]).tolist()))
        # a host whose any of the three values differs: the three comparisons or-ed a column at a time
        a, b, c = (map(operator.ne, map(get, rows), sent) for get, sent in zip(self._fields, self._sent, strict=True))
        return set(itertools.compress(keys, map(operator.or_, map(operator.or_, a, b), c)))

    def mark(self, rows: Sequence[Any], hosts: set[int]) -> list[Any]:
        """Note the values of `hosts` as sent, and return their rows in the order of `rows`
        (those `changed` was given)."""
        where = sorted(i for i in map(self.pos.get, hosts) if i is not None)
        kept = self._sent_np
        for j, (get, sent) in enumerate(zip(self._fields, self._sent, strict=True)):
            for i in where:
                sent[i] = get(rows[i])
            if kept is not None:
                try:
                    kept[j][where] = [sent[i] for i in where]
                except (TypeError, ValueError):  # (a value that is no float: made again if ever needed)
                    kept = self._sent_np = None
        return [rows[i] for i in where]


class HostSeries:
    """What went out for each host, and the choice of the hosts an upload carries."""

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self.uploads = 0  # uploads that chose (jobs above ALL_HOSTS_UP_TO hosts)
        self._hosts = _Family("host", ("median_s", "p90_s", "max_s"))
        self._ranks = _Family("rank", ("held_back_s", "median_step_s", "mean_lag_s"))
        self._at: dict[int, int] = {}  # host -> the upload that last sent its series
        self._sent_in: dict[int, list[int]] = {}  # upload -> the hosts it sent (for the refresh)
        self._overdue: set[int] = set()  # due a refresh and not sent yet (the bound left them out)

    def pick(
        self,
        hosts: Sequence[HostStepStats],
        ranks: Sequence[RankStepStats],
        straggler: int | None = None,
        *,
        final: bool = False,
        columns: tuple[StatColumns | None, RankColumns | None] = (None, None),
    ) -> tuple[Sequence[HostStepStats], Sequence[RankStepStats]]:
        """The hosts' statistics and the ranks whose series this upload carries (in the order
        given); all of them for a job of up to ALL_HOSTS_UP_TO hosts. `columns`: the same
        rows as the calculator's columns, where it has them (`columns_of`)."""
        if len(hosts) <= ALL_HOSTS_UP_TO and len(ranks) <= ALL_HOSTS_UP_TO:
            if self.uploads:  # a job that shrank: the next large upload starts over
                self._reset()
            return hosts, ranks
        self.uploads += 1
        now = self.uploads
        hc, rc = columns
        h_cols = None if hc is None or hc.rows is not hosts else (hc.hosts, *(hc.arrays or (hc.median, hc.p90, hc.max)))
        r_cols = None if rc is None or rc.rows is not ranks else (rc.ranks, rc.held_back, rc.median, rc.mean_lag)
        due = self._hosts.changed(hosts, h_cols) | self._ranks.changed(ranks, r_cols)
        at = self._at
        overdue = self._overdue
        for h in self._sent_in.pop(now - REFRESH_UPLOADS, ()):
            if at.get(h) == now - REFRESH_UPLOADS:
                overdue.add(h)  # unchanged for REFRESH_UPLOADS uploads: sent again
        due |= overdue  # a refresh the bound put off stays due until it goes out
        if not (final or now == 1) and len(due) > HOSTS_PER_UPLOAD:
            first = [straggler] if straggler is not None else []
            first += [r.rank for r in heapq.nlargest(FIRST_RANKS, ranks, key=_HELD) if r.held_back_s > 0]
            chosen = {h for h in first if h in due}
            # longest waiting first: the few needed of the order (last sent, host), not a sort
            # of every due host (thousands an upload)
            waiting = zip(map(at.get, due, itertools.repeat(0)), due, strict=True)
            for _, h in heapq.nsmallest(HOSTS_PER_UPLOAD, waiting):
                if len(chosen) >= HOSTS_PER_UPLOAD:
                    break
                chosen.add(h)
            due = chosen
        if len(due) >= len(hosts) and len(due) >= len(ranks) and due.issuperset(self._hosts.pos):
            every = due.issuperset(self._ranks.pos)
        else:
            every = False
        got_hosts = self._hosts.mark(hosts, due)
        got_ranks = self._ranks.mark(ranks, due)
        for h in due:
            at[h] = now
        overdue -= due
        self._sent_in[now] = list(due)
        if len(at) > 2 * max(len(hosts), len(ranks)) + 1_000:  # hosts that left the job: forgotten
            for h in [h for h in at if h not in self._hosts.pos and h not in self._ranks.pos]:
                del at[h]
                overdue.discard(h)
        return (hosts, ranks) if every else (got_hosts, got_ranks)
