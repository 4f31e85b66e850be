"""Columnar batches of events: how stores keep them and how the accounting reads them.

A stored chunk is a handful of packed arrays (kind codes, times, hosts, steps, values)
plus JSON for the sparse text fields. Decoding a million step events is a few array
copies instead of a million row objects, which is what makes a cold query fast.
"""

from __future__ import annotations

import json
import math
from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, overload

from mlgoodput._numpy import numpy
from mlgoodput.events import Event, Kind

NO_STEP = -(2**63)  # a step column's "None"
_NAN = float("nan")
_KIND_CACHE: dict[int, Kind] = {k.value: k for k in Kind}


@dataclass(slots=True)
class Columns:
    """Events as parallel columns; `names` and `attrs` are None when no event has one."""

    kinds: bytearray
    times: array[float]
    hosts: array[int]
    steps: array[int]
    values: array[float]
    names: list[str | None] | None
    attrs: list[dict[str, Any] | None] | None

    @classmethod
    def empty(cls) -> Columns:
        return cls(bytearray(), array("d"), array("i"), array("q"), array("d"), None, None)

    @classmethod
    def from_events(cls, events: Iterable[Event]) -> Columns:
        if isinstance(events, ColumnEvents):  # already columns (a journal's batch): copy them
            return events.columns.slice(0)
        evs = events if isinstance(events, (list, tuple)) else list(events)
        # one pass per column (a comprehension each): faster than appending field by field
        names: list[str | None] = [e.name for e in evs]
        attrs: list[dict[str, Any] | None] = [dict(a) if (a := e.attrs) else None for e in evs]
        return cls(
            bytearray([e.kind for e in evs]),
            array("d", [e.time for e in evs]),
            array("i", [e.host for e in evs]),
            array("q", [NO_STEP if (s := e.step) is None else s for e in evs]),
            array("d", [_NAN if (v := e.value) is None else v for e in evs]),
            names if names.count(None) != len(names) else None,
            attrs if attrs.count(None) != len(attrs) else None,
        )

    def __len__(self) -> int:
        return len(self.kinds)

    def name(self, i: int) -> str | None:
        return None if self.names is None else self.names[i]

    def attr(self, i: int) -> dict[str, Any] | None:
        return None if self.attrs is None else self.attrs[i]

    def event(self, i: int) -> Event:
        s = self.steps[i]
        v = self.values[i]
        a = self.attr(i)
        return Event(
            kind=_KIND_CACHE[self.kinds[i]],
            time=self.times[i],
            host=self.hosts[i],
            step=None if s == NO_STEP else s,
            value=None if math.isnan(v) else v,
            name=self.name(i),
            attrs=a,
        )

    def events(self) -> Iterator[Event]:
        for i in range(len(self.kinds)):
            yield self.event(i)

    def extend(self, other: Columns) -> None:
        n0 = len(self)
        self.kinds += other.kinds
        self.times.extend(other.times)
        self.hosts.extend(other.hosts)
        self.steps.extend(other.steps)
        self.values.extend(other.values)
        if other.names is not None or self.names is not None:
            mine: list[str | None] = self.names if self.names is not None else [None] * n0
            mine.extend(other.names if other.names is not None else [None] * len(other))
            self.names = mine
        if other.attrs is not None or self.attrs is not None:
            mya: list[dict[str, Any] | None] = self.attrs if self.attrs is not None else [None] * n0
            mya.extend(other.attrs if other.attrs is not None else [None] * len(other))
            self.attrs = mya

    def slice(self, start: int, stop: int | None = None) -> Columns:
        s = slice(start, stop)
        return Columns(
            self.kinds[s],
            self.times[s],
            self.hosts[s],
            self.steps[s],
            self.values[s],
            None if self.names is None else self.names[s],
            None if self.attrs is None else self.attrs[s],
        )


@dataclass(frozen=True, slots=True)
class Chunk:
    """The stored form of a Columns: bytes and JSON text, ready for a database row."""

    n: int
    kinds: bytes
    times: bytes
    hosts: bytes
    steps: bytes
    values: bytes
    names: str | None
    attrs: str | None
    t_min: float
    t_max: float


def encode(cols: Columns, names_json: str | None = None, attrs_json: str | None = None) -> Chunk:
    """The stored form of `cols`; `names_json` / `attrs_json`: those columns' JSON, when the
    caller already has it (a writer that encodes them faster itself)."""
    return Chunk(
        n=len(cols),
        kinds=bytes(cols.kinds),
        times=cols.times.tobytes(),
        hosts=cols.hosts.tobytes(),
        steps=cols.steps.tobytes(),
        values=cols.values.tobytes(),
        names=names_json if names_json is not None or cols.names is None else _json(cols.names),
        attrs=attrs_json if attrs_json is not None or cols.attrs is None else _json(cols.attrs),
        **_time_range(cols.times),
    )


def _json(column: list[Any]) -> str:
    return json.dumps(column, separators=(",", ":"))


FAST_MIN = 4096  # values from which numpy (when there) finds a chunk's first and last time


def _time_range(times: array[float]) -> dict[str, float]:
    """t_min and t_max: `min(times)` and `max(times)`, by numpy for a long column (the same
    values: without NaN, doubles that compare equal are the same bits but for 0.0 and -0.0,
    and a NaN or a zero leaves it to min() and max())."""
    if not times:
        return {"t_min": 0.0, "t_max": 0.0}
    if len(times) >= FAST_MIN and (np := numpy()) is not None:
        a = np.frombuffer(times, dtype=np.float64)
        lo, hi = float(a.min()), float(a.max())
        if lo == lo and hi == hi and lo != 0.0 and hi != 0.0:
            return {"t_min": lo, "t_max": hi}
    return {"t_min": min(times), "t_max": max(times)}


class ColumnEvents(Sequence[Event]):
    """Events held as columns: a `Sequence[Event]` that makes each `Event` only when asked.

    A journal ships its records this way (decoded straight into columns), so a store that
    keeps columns (`Columns.from_events`, `encode_batch`) never builds a Python object per
    event, and any other consumer still sees plain events. `names_json` / `attrs_json`, when
    given, are the JSON of those whole columns (the console's store writer encodes them in C);
    a store writes them as they are, and a slice falls back to encoding its own.
    """

    __slots__ = ("attrs_json", "columns", "names_json")

    def __init__(self, columns: Columns, names_json: str | None = None, attrs_json: str | None = None) -> None:
        self.columns = columns
        self.names_json = names_json if columns.names is not None else None
        self.attrs_json = attrs_json if columns.attrs is not None else None

    @classmethod
    def join(cls, parts: Sequence[ColumnEvents]) -> ColumnEvents:
        """One run of several (a writer's consecutive runs merged into one append); the JSON
        of a column is kept where every part has it."""
        if len(parts) == 1:
            return parts[0]
        cols = concat([p.columns for p in parts])
        return cls(cols, _join_json([p.names_json for p in parts]), _join_json([p.attrs_json for p in parts]))

    def __len__(self) -> int:
        return len(self.columns)

    @overload
    def __getitem__(self, i: int) -> Event: ...

    @overload
    def __getitem__(self, i: slice) -> ColumnEvents: ...

    def __getitem__(self, i: int | slice) -> Event | ColumnEvents:
        if isinstance(i, slice):
            start, stop, step = i.indices(len(self))
            if step == 1:
                return ColumnEvents(self.columns.slice(start, max(start, stop)))
            return ColumnEvents(Columns.from_events(self.columns.event(k) for k in range(start, stop, step)))
        n = len(self)
        k = i + n if i < 0 else i
        if not 0 <= k < n:
            raise IndexError("ColumnEvents index out of range")
        return self.columns.event(k)

    def __iter__(self) -> Iterator[Event]:
        return self.columns.events()

    def __repr__(self) -> str:
        return f"ColumnEvents({len(self)} events)"


def encode_batch(events: Sequence[Event], max_events: int) -> list[Chunk]:
    """Events as stored chunks of at most `max_events` each (done before a store takes its lock)."""
    if isinstance(events, ColumnEvents) and len(events) <= max_events:  # no copy: encoding only reads it
        return [encode(events.columns, events.names_json, events.attrs_json)] if len(events) else []
    # columns already (a journal's batch): sliced where they lie, no whole copy first
    cols = events.columns if isinstance(events, ColumnEvents) else Columns.from_events(events)
    if len(cols) <= max_events:
        return [encode(cols)] if len(cols) else []
    return [encode(cols.slice(i, i + max_events)) for i in range(0, len(cols), max_events)]


def _join_json(texts: list[str | None]) -> str | None:
    """The JSON arrays `texts` as one array (None if any is None)."""
    if any(t is None for t in texts):
        return None
    inner = [t[1:-1] for t in texts if t is not None and t != "[]"]
    return "[" + ",".join(inner) + "]"


#: A chunk as a store keeps it: kinds, times, hosts, steps, values (packed), names, attrs (JSON)
RawChunk = tuple[bytes, bytes, bytes, bytes, bytes, str | None, str | None]
#: A stored chunk with its cursor in front: (cursor, kinds, times, hosts, steps, values, names, attrs)
StoredRow = tuple[int, bytes, bytes, bytes, bytes, bytes, str | None, str | None]


def decode(
    kinds: bytes,
    times: bytes,
    hosts: bytes,
    steps: bytes,
    values: bytes,
    names: str | None,
    attrs: str | None,
) -> Columns:
    t = array("d")
    t.frombytes(times)
    h = array("i")
    h.frombytes(hosts)
    s = array("q")
    s.frombytes(steps)
    v = array("d")
    v.frombytes(values)
    return Columns(
        bytearray(kinds),
        t,
        h,
        s,
        v,
        None if names is None else json.loads(names),
        None if attrs is None else json.loads(attrs),
    )


def concat(parts: Sequence[Columns]) -> Columns:
    out = Columns.empty()
    for p in parts:
        out.extend(p)
    return out
