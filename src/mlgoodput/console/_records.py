"""Wire records to store events: shared by the server and its store-writer process."""

from __future__ import annotations

import operator
from array import array
from typing import Any

import msgspec

from mlgoodput.console import _protocol as P
from mlgoodput.events import Event, Kind
from mlgoodput.store import NO_STEP, ColumnEvents, Columns

_LOG, _USAGE, _MARK = Kind.LOG, Kind.USAGE, Kind.USAGE_CHECKPOINT


def _fast_event_factory() -> Any:
    """Event(kind, time, host, step, value, name, attrs), built through the slot descriptors:
    the same frozen Event, at half the cost of its generated __init__ (the server's hot loop)."""
    new = Event.__new__
    sk, st, sh, ss, sv, sn, sa = (
        Event.__dict__[f].__set__ for f in ("kind", "time", "host", "step", "value", "name", "attrs")
    )

    def make(
        kind: Kind, t: float, host: int, step: int | None, value: float | None, name: str | None, attrs: Any
    ) -> Event:
        e = new(Event)
        sk(e, kind)
        st(e, t)
        sh(e, host)
        ss(e, step)
        sv(e, value)
        sn(e, name)
        sa(e, attrs)
        return e

    return make


event = _fast_event_factory()


def _log_attrs(r: Any) -> dict[str, Any]:
    """A log record's attrs as stored: ANSI and exception text only when there is some."""
    attrs: dict[str, Any] = {"msg": r.msg, "file": r.file, "line": r.line}
    if r.ansi:
        attrs["ansi"] = r.ansi
    if r.exc:
        attrs["exc"] = r.exc
    return attrs


def simple(records: list[Any]) -> bool:
    """True when every record becomes an event without the server's state (no progress)."""
    return P.ProgressRec not in set(map(type, records))


def to_event(r: Any, process: int, hostname: str, pid: int) -> Event | None:
    """The event of one log, usage or checkpoint record (None for others)."""
    if type(r) is P.LogRec:
        e: Event = event(_LOG, r.time, process, None, r.level, r.logger, _log_attrs(r))
        return e
    if type(r) is P.UsageRec:
        ua: dict[str, Any] = {"cpu": r.cpu, "rss": r.rss, "hostname": hostname, "pid": pid}
        if r.gpu_util is not None:
            ua["gpu_util"] = r.gpu_util
        if r.gpu_mem is not None:
            ua["gpu_mem"] = r.gpu_mem
        return Event(_USAGE, r.time, process, None, r.cpu, None, ua)
    if type(r) is P.MarkRec:
        return Event(_MARK, r.time, process, r.step, None, r.name, {"hostname": hostname})
    return None


def log_events(records: list[Any], process: int, hostname: str, pid: int) -> list[Event]:
    """Events of a batch without progress records (a batch of log records only takes
    `log_columns`, the hot path)."""
    return [e for r in records if (e := to_event(r, process, hostname, pid)) is not None]


_json = msgspec.json.Encoder()
_ONLY_LOGS = {P.LogRec}
_ANSI, _EXC = operator.attrgetter("ansi"), operator.attrgetter("exc")


def log_columns(records: list[Any], process: int) -> ColumnEvents | None:
    """The events of a batch of log records only, built as columns with their text columns'
    JSON encoded in C: the same stored chunk as `log_events` gives, at a fraction of the cost
    (the store writer's hot path). None when the batch holds any other record."""
    n = len(records)
    if not n or set(map(type, records)) != _ONLY_LOGS:
        return None
    plain = not any(map(_ANSI, records)) and not any(map(_EXC, records))
    attrs: list[dict[str, Any] | None] = (
        [{"msg": r.msg, "file": r.file, "line": r.line} for r in records] if plain else [_log_attrs(r) for r in records]
    )
    names: list[str | None] = [r.logger for r in records]
    cols = Columns(
        bytearray((_LOG,)) * n,
        array("d", [r.time for r in records]),
        array("i", (process,)) * n,
        array("q", (NO_STEP,)) * n,
        array("d", [r.level for r in records]),
        names,
        attrs,
    )
    return ColumnEvents(cols, _json.encode(names).decode(), _json.encode(attrs).decode())
