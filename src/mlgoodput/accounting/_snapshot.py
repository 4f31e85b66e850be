"""The engine's state as bytes, so a new process starts from it and reads only newer events.

A snapshot is a JSON header followed by packed arrays (step times and numbers per host, the
sorted step times behind the ideal, per-host gaps) in pieces of at most `PIECE` bytes, so
neither writing nor reading it ever holds a second copy of the state. The header names the
format, the store, the stream, the store cursor and event count it covers, and a checksum
of every piece: a snapshot that fails any check is not used (the job is read from the start).
"""

from __future__ import annotations

import json
import logging
import math
import zlib
from array import array
from collections.abc import Iterable, Iterator
from typing import Any

from mlgoodput.accounting._engine import Engine
from mlgoodput.accounting._hoststats import HostSteps
from mlgoodput.accounting._model import Derived
from mlgoodput.accounting._sorted import SortedFloats
from mlgoodput.accounting._stepnums import StepNums
from mlgoodput.accounting._timeline import HostLog, Rec
from mlgoodput.store import StateStore

FORMAT = 4
PIECE = 8 << 20
_MAGIC = "mlgoodput-accounting-state"
log = logging.getLogger("mlgoodput")


class SnapshotError(ValueError):
    """A snapshot that is corrupt, from another format, store or stream, or ahead of the store."""


def dump(engine: Engine, *, url: str, namespace: str, job: str, cursor: int) -> Iterator[bytes]:
    """The header piece, the payload pieces and a trailer (their Adler-32), of `engine`'s state as
    of store `cursor`; a generator, so the caller writes each piece before the next is made."""
    tl = engine.timeline
    sections: list[tuple[str, str, int]] = []
    payload: list[array[Any] | bytes] = []

    def add(name: str, data: array[Any] | bytes) -> None:
        code = data.typecode if isinstance(data, array) else "B"
        sections.append((name, code, len(data)))
        payload.append(data)

    hosts = []
    for h, log in sorted(tl.hosts.items()):
        add(f"times.{h}", log.times)
        for part, arr in zip(("starts", "base", "keys", "packed"), log.nums.state(), strict=True):
            add(f"nums.{part}.{h}", arr)
        others = [[r.kind, r.time, r.step, r.value, r.name, r.attrs] for r in log.others]
        add(f"others.{h}", json.dumps(others, separators=(",", ":")).encode())
        hosts.append({"host": h, "monotonic": log.monotonic, "version": log.version, "job_starts": log.job_starts})
    d = engine._derived
    derived = None
    if d is not None:
        add("ordered", d.ordered.values())
        add("ordered.sizes", d.ordered.bucket_sizes()[0])
        add("ordered.sums", d.ordered.bucket_sizes()[1])
        add("exc.i", array("q", d.exc.keys()))
        add("exc.v", array("d", d.exc.values()))
        add("compile.i", array("q", d.compile.keys()))
        add("compile.v", array("d", d.compile.values()))
        derived = {
            "host": d.host,
            "n": d.n,
            "frontier": d.frontier,
            "compile_total": d.compile_total,
            "open_before": d.open_before,
        }
    steps = []
    for h, hs in sorted(engine._hosts.items()):
        add(f"gaps.{h}", hs.diffs.values())
        add(f"gaps.sizes.{h}", hs.diffs.bucket_sizes()[0])
        add(f"gaps.sums.{h}", hs.diffs.bucket_sizes()[1])
        steps.append({"host": h, "n": hs.n, "version": hs.version})
    counts = [max(1, -(-len(_view(data)) // PIECE)) for data in payload]
    head = {
        "magic": _MAGIC,
        "format": FORMAT,
        "url": url,
        "namespace": namespace,
        "job": job,
        "cursor": cursor,
        "events": tl.events,
        "max_time": tl.max_time,
        "sections": sections,
        "hosts": hosts,
        "derived": derived,
        "host_steps": steps,
        "pieces": sum(counts),
    }
    yield json.dumps(head, separators=(",", ":")).encode()
    check = 1
    for data, k in zip(payload, counts, strict=True):
        raw = _view(data)
        for i in range(k):
            piece = bytes(raw[i * PIECE : (i + 1) * PIECE])
            check = zlib.adler32(piece, check)
            yield piece
    yield json.dumps({"adler32": check}).encode()


def _view(data: array[Any] | bytes) -> memoryview:
    return memoryview(data).cast("B")


def header(first: bytes) -> dict[str, Any]:
    """The header piece, checked for magic and format."""
    try:
        h = json.loads(first)
    except (UnicodeDecodeError, ValueError) as e:
        raise SnapshotError(f"unreadable header: {e}") from None
    if not isinstance(h, dict) or h.get("magic") != _MAGIC:
        raise SnapshotError("not an accounting snapshot")
    if h.get("format") != FORMAT:
        raise SnapshotError(f"format {h.get('format')!r}, this version reads {FORMAT}")
    return h


def load(head: dict[str, Any], pieces: Iterable[bytes], *, stall_factor: float) -> Engine:
    """An engine rebuilt from a header (see `header`) and the payload pieces that follow it."""
    try:
        return _load(head, iter(pieces), stall_factor)
    except SnapshotError:
        raise
    except (KeyError, TypeError, ValueError, IndexError, OverflowError) as e:
        raise SnapshotError(f"malformed snapshot: {e!r}") from None


def _load(h: dict[str, Any], it: Iterator[bytes], stall_factor: float) -> Engine:
    check = 1
    count = 0
    out: dict[str, array[Any] | bytes] = {}
    for name, code, n in h["sections"]:
        size = n * (1 if code == "B" else array(code).itemsize)
        buf: array[Any] | bytearray = bytearray() if code == "B" else array(code)
        got = 0
        while True:  # every section has at least one piece (an empty one if it is empty)
            piece = next(it, None)
            if piece is None:
                raise SnapshotError(f"snapshot ends inside section {name!r}")
            count += 1
            check = zlib.adler32(piece, check)
            if isinstance(buf, bytearray):
                buf += piece
            else:
                buf.frombytes(piece)
            got += len(piece)
            if got >= size:
                break
        if got != size:
            raise SnapshotError(f"section {name!r} has {got} bytes, expected {size}")
        out[name] = bytes(buf) if isinstance(buf, bytearray) else buf
    trailer = next(it, None)
    if trailer is None or next(it, None) is not None or count != h["pieces"]:
        raise SnapshotError("snapshot pieces do not match its header")
    if json.loads(trailer).get("adler32") != check:
        raise SnapshotError("snapshot checksum does not match its contents")
    e = Engine(stall_factor=stall_factor)
    tl = e.timeline
    for meta in h["hosts"]:
        host = int(meta["host"])
        log = HostLog(host)
        log.times = _arr(out[f"times.{host}"], "d")
        parts = [_arr(out[f"nums.{part}.{host}"], "q") for part in ("starts", "base", "keys", "packed")]
        log.nums = StepNums.from_state(len(log.times), *parts)
        raw = out[f"others.{host}"]
        assert isinstance(raw, bytes)
        log.others = [Rec(int(k), float(t), s, v, nm, at) for k, t, s, v, nm, at in json.loads(raw)]
        log._seen = set(log.others)
        log.job_starts = [float(t) for t in meta["job_starts"]]
        log.monotonic = bool(meta["monotonic"])
        log.version = int(meta["version"])
        tl.hosts[host] = log
    tl.events = int(h["events"])
    tl.max_time = float(h["max_time"])
    tl.earliest_change = math.inf
    dm = h["derived"]
    if dm is not None:
        e._derived = Derived(
            host=int(dm["host"]),
            n=int(dm["n"]),
            frontier=float(dm["frontier"]),
            exc=dict(zip(_arr(out["exc.i"], "q"), _arr(out["exc.v"], "d"), strict=True)),
            compile=dict(zip(_arr(out["compile.i"], "q"), _arr(out["compile.v"], "d"), strict=True)),
            ordered=SortedFloats.from_sorted(  # popped: the packed copy goes once the buckets exist
                _arr(out.pop("ordered"), "d"), _arr(out["ordered.sizes"], "q"), _arr(out["ordered.sums"], "d")
            ),
            compile_total=float(dm["compile_total"]),
            open_before=bool(dm["open_before"]),
        )
        if e._derived.host not in tl.hosts or e._derived.n > len(tl.hosts[e._derived.host].times):
            raise SnapshotError("derived state reaches beyond the steps it was derived from")
    for meta in h["host_steps"]:
        hs = HostSteps()
        hs.n, hs.version = int(meta["n"]), int(meta["version"])
        host = int(meta["host"])
        hs.diffs = SortedFloats.from_sorted(
            _arr(out.pop(f"gaps.{host}"), "d"),
            _arr(out[f"gaps.sizes.{host}"], "q"),
            _arr(out[f"gaps.sums.{host}"], "d"),
        )
        e._hosts[host] = hs
    return e


def _arr(data: array[Any] | bytes, code: str) -> array[Any]:
    if not isinstance(data, array) or data.typecode != code:
        raise SnapshotError(f"expected an array of {code!r}")
    return data


def restore(store: object, namespace: str, job: str, *, stall_factor: float) -> tuple[Engine, int] | None:
    """(engine, cursor) from the state saved in `store` for the stream, or None when there is
    none or it fails a check (then the caller reads the job from the start)."""
    if not isinstance(store, StateStore):
        return None
    try:
        pieces = store.load_state(namespace, job)
        if pieces is None:
            return None
        it = iter(pieces)
        first = next(it, None)
        if first is None:
            raise SnapshotError("no header")
        h = header(first)
        if (h.get("url"), h.get("namespace"), h.get("job")) != (getattr(store, "url", None), namespace, job):
            raise SnapshotError(f"saved for {h.get('url')!r} {h.get('namespace')!r}/{h.get('job')!r}")
        cursor = int(h["cursor"])
        head, upto = store.stream_position(namespace, job, cursor)
        if cursor > head:
            raise SnapshotError(f"cursor {cursor} is beyond the store's latest chunk {head}")
        if upto != h["events"]:
            raise SnapshotError(f"covers {h['events']} events, the store holds {upto} up to its cursor")
        return load(h, it, stall_factor=stall_factor), cursor
    except SnapshotError as e:
        log.info("mlgoodput: not using the saved accounting state of %s/%s (%s); reading the job", namespace, job, e)
    except (OSError, KeyError, TypeError, ValueError) as e:
        log.info("mlgoodput: cannot read the saved accounting state of %s/%s (%s)", namespace, job, e)
    return None


def save(store: object, engine: Engine, namespace: str, job: str, cursor: int) -> bool:
    """Save `engine` (as of `cursor`) into `store` when it can keep state; never raises for the
    store's sake (a read-only or busy store just keeps no state)."""
    if not isinstance(store, StateStore):
        return False
    try:
        store.save_state(
            namespace, job, dump(engine, url=getattr(store, "url", ""), namespace=namespace, job=job, cursor=cursor)
        )
    except OSError as e:
        log.info("mlgoodput: cannot save the accounting state of %s/%s (%s)", namespace, job, e)
        return False
    return True
