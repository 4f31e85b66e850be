"""The engine's state as bytes, so a new process starts from it and reads only newer events.

A snapshot is a JSON header followed by packed arrays (step times and numbers per host, the
sorted step times behind the ideal, per-host gaps, whose statistics the header carries), the
non-step events as JSON columns, what
the last query derived from them (activities, the time partition, the productivity scan: a
new process takes them as saved instead of deriving them again; floats of these JSON
sections packed in one array), in pieces of at most `PIECE` bytes, each
section starting a piece of its own, so neither writing nor reading it ever holds a second
copy of the state. The header names the format, the store, the stream, the store cursor and
event count it covers, where each section lies, the Adler-32 of every piece, and a checksum
of itself.

Reading is lazy (`Saved`): restoring reads the header only. When the saved state was taken
of a job that had ended, the header also carries the whole-job report (its *answer*), so a
query that finds nothing new needs nothing else. The engine is built only when a query needs
it, and then the sorted values (the bulk beside the step times) stay in the store: a bucket
of them is read, and its piece checked, the first time a query uses it. A piece that fails
its check raises `PageError`; the calculator then drops the engine and reads the job again
from the store. A snapshot that fails any other check is not used at all.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import zlib
from array import array
from collections.abc import Iterable, Iterator
from typing import Any, Protocol, runtime_checkable

from mlgoodput.accounting._engine import Engine
from mlgoodput.accounting._facts import FactsCache, Scan, scan
from mlgoodput.accounting._figures import AttemptQueue, CostStats, DisruptionCost, Productivity
from mlgoodput.accounting._hoststats import HostSteps
from mlgoodput.accounting._intervals import Coverage
from mlgoodput.accounting._model import Activities, Derived
from mlgoodput.accounting._report import BadputType, GoodputReport, HostStepStats, SliceEfficiency
from mlgoodput.accounting._sorted import SortedFloats
from mlgoodput.accounting._stepnums import StepNums
from mlgoodput.accounting._timeline import HostLog, Rec
from mlgoodput.store import StateStore

FORMAT = 6
PIECE = 1 << 20  # 1 MiB: what reading one lazily loaded bucket costs at most (twice, across a border)
_MAGIC = "mlgoodput-accounting-state"
_LAZY = ("ordered", "gaps.")  # sections of sorted values, read bucket by bucket
log = logging.getLogger("mlgoodput")


@runtime_checkable
class ByIndex(Protocol):
    """Saved pieces a store hands out by index as well as in order (its SavedPieces)."""

    count: int

    def piece(self, i: int) -> bytes | None: ...


class SnapshotError(ValueError):
    """A snapshot that is corrupt, from another format, store or stream, or ahead of the store."""


class PageError(SnapshotError):
    """A piece read on demand is missing or fails its checksum: the state it belongs to is not
    to be trusted any more (the caller reads the job again from the store)."""


def _lazy(name: str) -> bool:
    return name == "ordered" or (name.startswith("gaps.") and name.count(".") == 1)


def dump(
    engine: Engine,
    *,
    url: str,
    namespace: str,
    job: str,
    cursor: int,
    answer: tuple[float, GoodputReport] | None = None,
) -> Iterator[bytes]:
    """The header piece and the payload pieces of `engine`'s state as of store `cursor`; a
    generator, so the caller writes each piece before the next is made. `answer`: (query time,
    whole-job report) that holds for any later query time while nothing new is stored."""
    tl = engine.timeline
    sections: list[list[Any]] = []
    payload: list[array[Any] | bytes] = []

    def add(name: str, data: array[Any] | bytes) -> None:
        code = data.typecode if isinstance(data, array) else "B"
        sections.append([name, code, len(data)])
        payload.append(data)

    floats = _Floats()  # the float lists of the JSON sections, packed (quick to read back)
    hosts = []
    for h, hlog in tl.hosts.items():  # in the timeline's order (first seen first): restored alike
        add(f"times.{h}", hlog.times)
        for part, arr in zip(("starts", "base", "keys", "packed"), hlog.nums.state(), strict=True):
            add(f"nums.{part}.{h}", arr)
        add(f"others.{h}", _dump_others(hlog.others, floats))
        hosts.append({"host": h, "monotonic": hlog.monotonic, "version": hlog.version, "job_starts": hlog.job_starts})
    d = engine.derived
    derived = None

    def add_sorted(name: str, s: SortedFloats) -> None:
        sizes, sums = s.bucket_sizes()
        add(f"{name}.sizes", sizes)
        add(f"{name}.sums", sums)
        add(f"{name}.maxes", s.maxes())
        add(name, s.values())  # the one lazily read section: last of its group

    if d is not None:
        add("exc.i", array("q", d.exc.keys()))
        add("exc.v", array("d", d.exc.values()))
        add("compile.i", array("q", d.compile.keys()))
        add("compile.v", array("d", d.compile.values()))
        add_sorted("ordered", d.ordered)
        derived = {
            "host": d.host,
            "n": d.n,
            "frontier": d.frontier,
            "compile_total": d.compile_total,
            "open_before": d.open_before,
        }
    steps = []
    for h, hs in sorted(engine.host_steps.items()):
        add_sorted(f"gaps.{h}", hs.diffs)
        st = hs.stats  # (of its n steps: every update that changes n sets them)
        stats = None if st is None or st.host != h else [st.steps, st.median_s, st.p90_s, st.max_s]
        steps.append({"host": h, "n": hs.n, "version": hs.version, "stats": stats})
    add("caches", json.dumps(_dump_caches(engine, floats), separators=(",", ":")).encode())
    add("floats", floats.arr)
    first = 0
    sums: list[int] = []
    for sec, data in zip(sections, payload, strict=True):
        raw = _view(data)
        k = max(1, -(-len(raw) // PIECE))
        sec.append(first)
        first += k
        sums.extend(zlib.adler32(raw[i * PIECE : (i + 1) * PIECE]) for i in range(k))
    head: dict[str, Any] = {
        "magic": _MAGIC,
        "format": FORMAT,
        "url": url,
        "namespace": namespace,
        "job": job,
        "cursor": cursor,
        "events": tl.events,
        "max_time": tl.max_time,
        "alive_every": tl.alive_every,
        "last_alive": tl.last_alive if tl.last_alive > -math.inf else None,
        "sections": sections,
        "hosts": hosts,
        "derived": derived,
        "host_steps": steps,
        "pieces": first,
        "sums": sums,
        "answer": None if answer is None else {"q": answer[0], "report": encode_report(answer[1])},
    }
    body = json.dumps(head, separators=(",", ":"))
    yield body[:-1].encode() + b',"check":' + str(zlib.adler32(body.encode())).encode() + b"}"
    for data in payload:
        raw = _view(data)
        for i in range(max(1, -(-len(raw) // PIECE))):
            yield bytes(raw[i * PIECE : (i + 1) * PIECE])


def _view(data: array[Any] | bytes) -> memoryview:
    return memoryview(data).cast("B")


def header(first: bytes) -> dict[str, Any]:
    """The header piece, checked for magic, format and its own checksum."""
    try:
        h = json.loads(first)
    except (UnicodeDecodeError, ValueError) as e:
        raise SnapshotError(f"unreadable header: {e}") from None
    if not isinstance(h, dict) or h.get("magic") != _MAGIC:
        raise SnapshotError("not an accounting snapshot")
    if h.get("format") != FORMAT:
        raise SnapshotError(f"format {h.get('format')!r}, this version reads {FORMAT}")
    check = h.pop("check", None)
    if check != zlib.adler32(json.dumps(h, separators=(",", ":")).encode()):
        raise SnapshotError("header checksum does not match its contents")
    return h


class Saved:
    """A saved state read as far as its header (checked); the rest is read when needed."""

    def __init__(
        self, head: dict[str, Any], pieces: Iterable[bytes], *, stall_factor: float, behind: bool = False
    ) -> None:
        self.head = head
        self.cursor = int(head["cursor"])
        self.events = int(head["events"])
        self.behind = behind  # the store held newer events when it was restored
        self._answer: GoodputReport | None = None
        self._pieces = pieces
        self._stall_factor = stall_factor
        self.facts: FactsCache | None = None  # the saved scan of the non-step events, once built

    def answer(self, q: float) -> GoodputReport | None:
        """The saved whole-job report, when it holds at query time q (None otherwise)."""
        a = self.head.get("answer")
        if not isinstance(a, dict) or not q >= float(a["q"]):
            return None
        r = self._answer
        if r is None:
            try:
                r = self._answer = decode_report(a["report"])
            except (KeyError, TypeError, ValueError, IndexError) as e:
                raise SnapshotError(f"malformed saved report: {e!r}") from None
        # the report is frozen, its mappings are not: each caller gets its own
        badput = {b: dict(v) if isinstance(v, dict) else v for b, v in r.badput_s.items()}
        return dataclasses.replace(r, badput_s=badput, overlapped_s=dict(r.overlapped_s))

    def engine(self) -> Engine:
        """The engine, with its sorted values left in the store until used (where the store
        reads pieces by index); SnapshotError when a piece read now fails a check."""
        try:
            e, self.facts = _load(self.head, self._pieces, self._stall_factor)
            return e
        except SnapshotError:
            raise
        except (KeyError, TypeError, ValueError, IndexError, OverflowError) as e:
            raise SnapshotError(f"malformed snapshot: {e!r}") from None


def load(head: dict[str, Any], pieces: Iterable[bytes], *, stall_factor: float) -> Engine:
    """An engine rebuilt from a header (see `header`) and the payload pieces that follow it."""
    return Saved(head, pieces, stall_factor=stall_factor).engine()


class _Pages:
    """Payload pieces by index, each checked against the header's Adler-32 when read."""

    def __init__(self, head: dict[str, Any], pieces: Iterable[bytes]) -> None:
        self.sums = [int(s) for s in head["sums"]]
        if len(self.sums) != head["pieces"]:
            raise SnapshotError("snapshot piece checksums do not match its header")
        self.random = pieces if isinstance(pieces, ByIndex) else None
        if self.random is not None and self.random.count != len(self.sums) + 1:
            raise SnapshotError("snapshot pieces do not match its header")
        self._seq: Iterator[bytes] | None = None if self.random is not None else iter(pieces)
        self._read: dict[int, bytes] = {}  # read in order (no random access): kept until used
        self._last: tuple[int, bytes] | None = None  # the latest piece read by index
        self._next = 0

    def get(self, i: int, *, keep: bool = False) -> bytes:
        last = self._last
        if last is not None and last[0] == i:
            return last[1]
        if self.random is not None:
            got = self.random.piece(i + 1)  # piece 0 is the header
        else:
            got = self._read.pop(i, None)
            while got is None and self._seq is not None and self._next <= i:
                p = next(self._seq, None)
                if p is None:
                    self._seq = None
                    break
                if self._next == i:
                    got = p
                else:
                    self._read[self._next] = p
                self._next += 1
        if got is None:
            raise PageError(f"piece {i + 1} of the saved state is missing (a newer save may have replaced it)")
        if not 0 <= i < len(self.sums) or zlib.adler32(got) != self.sums[i]:
            raise PageError(f"piece {i + 1} of the saved state fails its checksum")
        if keep:
            self._last = (i, got)
        return got

    def finish(self) -> None:
        """Read sequentially: every piece must be there, and no more."""
        if self._seq is not None:
            rest = sum(1 for _ in self._seq)
            if self._next + rest != len(self.sums):
                raise SnapshotError("snapshot pieces do not match its header")


def _load(h: dict[str, Any], pieces: Iterable[bytes], stall_factor: float) -> tuple[Engine, FactsCache | None]:
    pages = _Pages(h, pieces)
    where: dict[str, tuple[str, int, int]] = {}
    total = 0
    for name, code, n, first in h["sections"]:
        size = n * (1 if code == "B" else array(code).itemsize)
        k = max(1, -(-size // PIECE))
        if first != total:
            raise SnapshotError(f"section {name!r} starts at piece {first}, expected {total}")
        total += k
        where[name] = (code, n, first)
    if total != len(pages.sums):
        raise SnapshotError("snapshot pieces do not match its header")
    out: dict[str, array[Any] | bytes] = {}
    for name, (code, n, first) in where.items():
        if _lazy(name) and pages.random is not None:
            continue
        size = n * (1 if code == "B" else array(code).itemsize)
        buf: array[Any] | bytearray = bytearray() if code == "B" else array(code)
        for i in range(first, first + max(1, -(-size // PIECE))):
            piece = pages.get(i)
            if isinstance(buf, bytearray):
                buf += piece
            else:
                buf.frombytes(piece)
        if len(buf) != n:
            raise SnapshotError(f"section {name!r} has {len(buf)} values, expected {n}")
        out[name] = bytes(buf) if isinstance(buf, bytearray) else buf
    pages.finish()

    def sorted_floats(name: str) -> SortedFloats:
        sizes, sums, maxes = (_arr(out[f"{name}.{p}"], c) for p, c in (("sizes", "q"), ("sums", "d"), ("maxes", "d")))
        code, n, first = where[name]
        if code != "d" or sum(sizes) != n:
            raise SnapshotError(f"section {name!r} does not match its buckets")
        if name in out:  # read in order already
            return SortedFloats.from_sorted(_arr(out.pop(name), "d"), sizes, sums)

        def fetch(offset: int, count: int) -> array[float]:
            lo, hi = (first * PIECE + 8 * offset), (first * PIECE + 8 * (offset + count))
            got = array("d")
            for i in range(lo // PIECE, -(-hi // PIECE)):
                piece = pages.get(i, keep=True)
                a, b = max(lo, i * PIECE) - i * PIECE, min(hi, (i + 1) * PIECE) - i * PIECE
                got.frombytes(piece[a:b])
            return got

        return SortedFloats.from_pages(sizes, sums, maxes, fetch)

    floats = _FloatsIn(_arr(out["floats"], "d").tolist())
    e = Engine(stall_factor=stall_factor)
    tl = e.timeline
    for meta in h["hosts"]:
        host = int(meta["host"])
        hlog = HostLog(host)
        hlog.times = _arr(out[f"times.{host}"], "d")
        parts = [_arr(out[f"nums.{part}.{host}"], "q") for part in ("starts", "base", "keys", "packed")]
        hlog.nums = StepNums.from_state(len(hlog.times), *parts)
        raw = out[f"others.{host}"]
        assert isinstance(raw, bytes)
        hlog.others = _load_others(raw, floats)
        hlog.seen = set(hlog.others)
        hlog.job_starts = [float(t) for t in meta["job_starts"]]
        hlog.monotonic = bool(meta["monotonic"])
        hlog.version = int(meta["version"])
        tl.hosts[host] = hlog
    tl.events = int(h["events"])
    tl.max_time = float(h["max_time"])
    tl.alive_every = float(h.get("alive_every", 0.0))
    tl.last_alive = -math.inf if h.get("last_alive") is None else float(h["last_alive"])
    tl.earliest_change = math.inf
    dm = h["derived"]
    if dm is not None:
        e.derived = Derived(
            host=int(dm["host"]),
            n=int(dm["n"]),
            frontier=float(dm["frontier"]),
            exc=dict(zip(_arr(out["exc.i"], "q"), _arr(out["exc.v"], "d"), strict=True)),
            compile=dict(zip(_arr(out["compile.i"], "q"), _arr(out["compile.v"], "d"), strict=True)),
            ordered=sorted_floats("ordered"),
            compile_total=float(dm["compile_total"]),
            open_before=bool(dm["open_before"]),
        )
        if e.derived.host not in tl.hosts or e.derived.n > len(tl.hosts[e.derived.host].times):
            raise SnapshotError("derived state reaches beyond the steps it was derived from")
    for meta in h["host_steps"]:
        hs = HostSteps()
        hs.n, hs.version = int(meta["n"]), int(meta["version"])
        host = int(meta["host"])
        hs.diffs = sorted_floats(f"gaps.{host}")
        st = meta.get("stats")  # (states saved before they were kept: worked out when asked)
        if st is not None:
            # a query that finds nothing new answers them as saved: no bucket of gaps is read
            steps_n, med, p90, top = st
            hs.stats = HostStepStats(host, int(steps_n), float(med), float(p90), float(top))
        e.host_steps[host] = hs
    raw = out["caches"]
    assert isinstance(raw, bytes)
    facts = _load_caches(e, json.loads(raw), floats)
    return e, facts


def _arr(data: array[Any] | bytes, code: str) -> array[Any]:
    if not isinstance(data, array) or data.typecode != code:
        raise SnapshotError(f"expected an array of {code!r}")
    return data


# -- the non-step events, and what the last query derived from them -----------------------
class _Floats:
    """Float lists of the JSON sections, packed into one array; JSON holds [offset, count]."""

    def __init__(self) -> None:
        self.arr: array[float] = array("d")

    def put(self, xs: Iterable[float]) -> list[int]:
        at = len(self.arr)
        self.arr.extend(xs)
        return [at, len(self.arr) - at]


class _FloatsIn:
    def __init__(self, values: list[float]) -> None:
        self.values = values

    def get(self, ref: list[int]) -> list[float]:
        at, n = ref
        if not (isinstance(at, int) and isinstance(n, int) and at >= 0 and n >= 0 and at + n <= len(self.values)):
            raise SnapshotError(f"float list {ref!r} outside the saved floats")
        return self.values[at : at + n]


def _dump_others(others: list[Rec], floats: _Floats) -> bytes:
    """A host's non-step events as JSON columns (one list a field: quick to read back)."""
    cols: dict[str, Any] = {f: [getattr(r, f) for r in others] for f in ("kind", "step", "value", "name", "attrs")}
    cols["time"] = floats.put(r.time for r in others)
    return json.dumps(cols, separators=(",", ":")).encode()


def _load_others(raw: bytes, floats: _FloatsIn) -> list[Rec]:
    c = json.loads(raw)
    cols = [c["kind"], floats.get(c["time"]), *(c[f] for f in ("step", "value", "name", "attrs"))]
    if len({len(v) for v in cols}) > 1:
        raise SnapshotError("malformed non-step events")
    return list(map(Rec, *cols))


class _Unsaved(Exception):
    """A cached value this format does not save (the cache is then left out)."""


def _key(k: object) -> list[str]:
    """A bucket key (a BadputType, "dl", "compile" or ("custom", NAME)) as JSON."""
    if isinstance(k, BadputType):
        return ["b", k.name]
    if isinstance(k, str):
        return ["s", k]
    if isinstance(k, tuple) and len(k) == 2 and k[0] == "custom" and isinstance(k[1], str):
        return ["c", k[1]]
    raise _Unsaved(repr(k))


def _unkey(k: list[str]) -> object:
    tag, v = k
    if tag == "b":
        return BadputType[v]
    if tag == "s":
        return v
    if tag == "c":
        return ("custom", v)
    raise SnapshotError(f"unknown bucket key {k!r}")


def _flat(pairs: Iterable[tuple[float, float]]) -> list[float]:
    return [x for p in pairs for x in p]


def _pairs(flat: list[float]) -> list[tuple[float, float]]:
    it = iter(flat)
    return list(zip(it, it, strict=True))


def _coverage(c: Coverage, floats: _Floats) -> list[list[int]]:
    return [floats.put(c.starts), floats.put(c.ends), floats.put(c.prefix)]


def _uncoverage(d: list[list[int]], floats: _FloatsIn) -> Coverage:
    starts, ends, prefix = (floats.get(x) for x in d)
    if not len(starts) == len(ends) == len(prefix) - 1:
        raise SnapshotError("malformed coverage")
    c = Coverage([])
    c.starts, c.ends, c.prefix = starts, ends, prefix
    return c


def _dump_caches(engine: Engine, floats: _Floats) -> dict[str, Any]:
    """What the engine's last query derived from the non-step events (activities, job ends,
    the time partition) and the productivity scan of them, keyed by host instead of object
    identity: a new process reuses them exactly as this one would, instead of deriving them
    again. A cache that does not describe the current events is left out."""
    tl = engine.timeline
    out: dict[str, Any] = {}
    host_of = {id(v): h for h, v in tl.hosts.items()}
    c: Any = engine.activities_cache  # (key, horizon, activities): see Engine.activities
    try:
        if c is not None:
            (ident, n, ended, last), horizon, acts = c
            h = host_of.get(ident)
            if h is not None and n == len(tl.hosts[h].others):
                out["acts"] = {
                    "host": h,
                    "n": n,
                    "ended": [list(a) for a in ended],
                    "last": list(last),
                    "horizon": horizon,
                    "buckets": [[_key(k), floats.put(_flat(v))] for k, v in acts.buckets.items()],
                    "restore_step": list(acts.restore_step.items()),
                    "restores": [[k, t, st] for k, (t, st) in acts.first_restores.items()],
                    "claims": _coverage(acts.claims, floats),
                    "compile": _coverage(acts.compile, floats),
                    "open": acts.open_starts,
                    "slices": acts.slices,
                }
                pc: Any = engine.partition_cache
                if pc is not None and pc[4] is acts:
                    (a, infra, su_head, su_last), phor, res, overlapped, _, tail = pc
                    out["part"] = {
                        "a": a,
                        "infra": _flat(infra),
                        "su": _flat(su_head),
                        "su_last": su_last,
                        "horizon": phor,
                        "res": [[_key(k), v] for k, v in res.items()],
                        "overlapped": overlapped,
                        "tail": list(tail),
                    }
    except _Unsaved:
        out.pop("acts", None)
        out.pop("part", None)
    je = engine.job_ends_cache
    if je is not None and id(je[0]) in host_of and je[1] == len(je[0].others):
        out["je"] = {"host": host_of[id(je[0])], "n": je[1], "times": je[2]}
    sc = scan(tl, tl.max_time)  # what every query at or after the latest event reuses
    out["facts"] = {
        "hosts": [[h, len(v.others), len(v.job_starts)] for h, v in tl.hosts.items()],
        "scan": [
            [list(x) for x in sc.flops],
            [list(x) for x in sc.peaks],
            [list(x) for x in sc.submits],
            sc.lead,
            list(sc.job_starts),
            list(sc.job_ends),
            list(sc.step_ends.items()),
            [list(x) for x in sc.saves],
            [list(x) for x in sc.save_steps],
            [list(x) for x in sc.restores],
            list(sc.restored.items()),
        ],
    }
    return out


def _load_caches(e: Engine, c: dict[str, Any], floats: _FloatsIn) -> FactsCache | None:
    """Prime `e`'s caches from `_dump_caches`'s output; returns the productivity scan cache."""
    tl = e.timeline
    a = c.get("acts")
    if a is not None:
        log = tl.hosts[int(a["host"])]
        if int(a["n"]) != len(log.others):
            raise SnapshotError("saved activities do not match the events")
        acts = Activities()
        acts.buckets = {_unkey(k): _pairs(floats.get(v)) for k, v in a["buckets"]}
        acts.restore_step = {int(k): int(v) for k, v in a["restore_step"]}
        acts.first_restores = {int(k): (t, int(st)) for k, t, st in a["restores"]}
        acts.claims = _uncoverage(a["claims"], floats)
        acts.compile = _uncoverage(a["compile"], floats)
        acts.open_starts = a["open"]
        acts.slices = [tuple(x) for x in a["slices"]]
        key = (id(log), len(log.others), tuple(tuple(x) for x in a["ended"]), tuple(a["last"]))
        e.activities_cache = (key, float(a["horizon"]), acts)
        p = c.get("part")
        if p is not None:
            su = _pairs(p["su"])
            pkey = (p["a"], tuple(_pairs(p["infra"])), tuple(su), p["su_last"])
            res = {_unkey(k): v for k, v in p["res"]}
            e.partition_cache = (pkey, float(p["horizon"]), res, p["overlapped"], acts, tuple(p["tail"]))
    je = c.get("je")
    if je is not None:
        log = tl.hosts[int(je["host"])]
        if int(je["n"]) != len(log.others):
            raise SnapshotError("saved job ends do not match the events")
        e.job_ends_cache = (log, len(log.others), je["times"])
    f = c.get("facts")
    if f is None:
        return None
    order = [int(x[0]) for x in f["hosts"]]
    if len(order) == len(tl.hosts) and set(order) == set(tl.hosts) and order != list(tl.hosts):
        # a state saved before the header kept the timeline's order (its hosts sorted): the
        # scan lists them in the timeline's order, the one a read from the store gives
        tl.hosts = {h: tl.hosts[h] for h in order}
    if [[h, len(v.others), len(v.job_starts)] for h, v in tl.hosts.items()] != f["hosts"]:
        raise SnapshotError("saved productivity scan does not match the events")
    fl, pk, sub, lead, js, jend, se, sv, svs, rs, rd = f["scan"]
    fc = FactsCache()
    fc.scan = Scan(
        tuple(map(tuple, fl)),
        tuple(map(tuple, pk)),
        tuple(map(tuple, sub)),
        lead,
        tuple(js),
        tuple(jend),
        {int(k): v for k, v in se},
        tuple(map(tuple, sv)),
        tuple(map(tuple, svs)),
        tuple(map(tuple, rs)),
        {int(k): int(v) for k, v in rd},
    )
    fc.key = tuple((h, id(v.others), len(v.others), len(v.job_starts)) for h, v in tl.hosts.items())
    return fc


# -- the saved whole-job report ---------------------------------------------------------
def encode_report(r: GoodputReport) -> dict[str, Any]:
    """`r` as JSON-ready data that `decode_report` turns back into an equal report."""
    return {
        "job_name": r.job_name,
        "logger_name": r.logger_name,
        "start": r.start,
        "end": r.end,
        "total_s": r.total_s,
        "productive_s": r.productive_s,
        "badput_s": [[b.name, dict(v) if isinstance(v, dict) else v] for b, v in r.badput_s.items()],
        "overlapped_s": [[b.name, v] for b, v in r.overlapped_s.items()],
        "disruptions": r.disruptions,
        "last_step": r.last_step,
        "max_productive_step": r.max_productive_step,
        "ideal_step_time_s": r.ideal_step_time_s,
        "slice_efficiency": None if r.slice_efficiency is None else r.slice_efficiency.to_dict(),
        "hosts": [h.to_dict() for h in r.hosts],
        "productivity": None if r.productivity is None else r.productivity.to_dict(),
        "status": r.status,
        "stops": [list(x) for x in r.stops],
    }


def decode_report(d: dict[str, Any]) -> GoodputReport:
    p = d["productivity"]
    prod = None
    if p is not None:
        kw = {f.name: p[f.name] for f in dataclasses.fields(Productivity) if f.name in p}
        kw["checkpoint_save"] = CostStats(**kw["checkpoint_save"])
        kw["checkpoint_restore"] = CostStats(**kw["checkpoint_restore"])
        kw["attempts"] = tuple(AttemptQueue(**a) for a in kw["attempts"])
        kw["recoveries_s"] = tuple(kw["recoveries_s"])
        kw["notes"] = tuple(kw.get("notes", ()))
        kw["disruptions"] = tuple(DisruptionCost(**x) for x in kw.get("disruptions", ()))
        prod = Productivity(**kw)
    se = d["slice_efficiency"]
    return GoodputReport(
        job_name=d["job_name"],
        logger_name=d["logger_name"],
        start=d["start"],
        end=d["end"],
        total_s=d["total_s"],
        productive_s=d["productive_s"],
        badput_s={BadputType[k]: v for k, v in d["badput_s"]},
        overlapped_s={BadputType[k]: v for k, v in d["overlapped_s"]},
        disruptions=d["disruptions"],
        last_step=d["last_step"],
        max_productive_step=d["max_productive_step"],
        ideal_step_time_s=d["ideal_step_time_s"],
        slice_efficiency=None if se is None else SliceEfficiency(**se),
        hosts=tuple(HostStepStats(**hs) for hs in d["hosts"]),
        productivity=prod,
        status=d.get("status", "finished"),  # older saved answers: only ended jobs had one
        stops=tuple((float(x[0]), float(x[1])) for x in d.get("stops", ())),
    )


def round_trips(r: GoodputReport) -> bool:
    """Whether `r` comes back equal, and in the same order, from its saved form."""
    enc = encode_report(r)
    try:
        back = decode_report(json.loads(json.dumps(enc)))
    except (KeyError, TypeError, ValueError) as e:
        log.debug("mlgoodput: a report that cannot be saved (%r)", e)
        return False
    return back == r and back.to_dict() == r.to_dict() and encode_report(back) == enc


# -- the store ------------------------------------------------------------------------------
def restore(store: object, namespace: str, job: str, *, stall_factor: float) -> Saved | None:
    """The state saved in `store` for the stream, read as far as its header, or None when
    there is none or it fails a check (then the caller reads the job from the start)."""
    if not isinstance(store, StateStore):
        return None
    try:
        pieces = store.load_state(namespace, job)
        if pieces is None:
            return None
        if isinstance(pieces, ByIndex):
            first = pieces.piece(0)
            rest: Iterable[bytes] = pieces
        else:
            it = iter(pieces)
            first, rest = next(it, None), it
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
        return Saved(h, rest, stall_factor=stall_factor, behind=head > cursor)
    except SnapshotError as e:
        log.warning(
            "mlgoodput: the saved accounting state of %s/%s is damaged or does not match the store (%s);"
            " reading the job from the store instead (the answer is the same, the first read slower)",
            namespace,
            job,
            e,
        )
    except (OSError, KeyError, TypeError, ValueError) as e:
        log.info("mlgoodput: cannot read the saved accounting state of %s/%s (%s)", namespace, job, e)
    return None


def save(
    store: object,
    engine: Engine,
    namespace: str,
    job: str,
    cursor: int,
    answer: tuple[float, GoodputReport] | None = None,
) -> bool:
    """Save `engine` (as of `cursor`) into `store` when it can keep state; never raises for the
    store's sake (a read-only or busy store just keeps no state). PageError (the engine's own
    saved state turned out damaged while it was read for this save) is the caller's."""
    if not isinstance(store, StateStore):
        return False
    pieces = dump(engine, url=getattr(store, "url", ""), namespace=namespace, job=job, cursor=cursor, answer=answer)
    try:
        store.save_state(namespace, job, pieces)
    except OSError as e:
        log.info("mlgoodput: cannot save the accounting state of %s/%s (%s)", namespace, job, e)
        return False
    return True
