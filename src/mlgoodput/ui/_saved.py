"""The UI's reduced series of a job, saved in the store beside the accounting's own state.

Summarizing the step durations of a long job into blocks (ui/_reduce.py) is the UI's largest
cost after the accounting's read. The accounting saves its state so that a new process reads
only the events stored since (accounting/_snapshot.py); the UI saves its block summaries the
same way, in the store's state namespace `mlgoodput.ui`, so that a server started again opens
a ten-million-step job from them. A saved series is used only where it still fits the host's
step starts (their count, first and last time covered, and their sum, and the restarts among
them); anything else is summarized again from the steps.
"""

from __future__ import annotations

import json
import os
from array import array
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from mlgoodput import _env
from mlgoodput.accounting import HostLog
from mlgoodput.store import StateStore, Store
from mlgoodput.ui._reduce import Blocks


class HostSeries(Protocol):
    """What is saved of a `_job.HostSeries` (named here, not imported: `_job` imports this module)."""

    blocks: Blocks

    @property
    def times(self) -> array[float]: ...

    @property
    def job_starts(self) -> list[float]: ...


NAMESPACE = "mlgoodput.ui"
FORMAT = 1
MIN_STEPS = 200_000  # below this many summarized steps, summarizing again is cheaper than a save


def enabled() -> bool:
    """Off where the accounting's saved state is off ($MLGOODPUT_SNAPSHOT=0): the UI's series
    are saved and read under the same switch."""
    return os.environ.get(_env.SNAPSHOT, "").strip().lower() not in ("0", "off", "false", "no")


def key(logger: str, job: str) -> str:
    """The saved series' name in the state namespace (a logger and a job, unambiguously)."""
    return json.dumps([logger, job])


@dataclass(slots=True)
class SavedHost:
    """One host's saved block summaries and what they were computed from."""

    blocks: Blocks
    steps: int  # step starts covered (durations summarized + 1)
    samples: list[float]  # covered step starts at SAMPLES even strides, the last one included
    restarts: list[float]  # job starts up to the last covered step start

    def fits(self, log: HostLog) -> bool:
        """Whether the host's step starts begin with those the summaries were computed from
        (a step stored late among them moves every later one: the last covered start too)."""
        t = log.times
        n = self.steps
        return (
            n >= 2
            and len(t) >= n
            and _samples(t, n) == self.samples
            and [js for js in log.job_starts if bisect_left(t, js) - 1 < n - 1] == self.restarts
        )


SAMPLES = 64


def _samples(t: Sequence[float], n: int) -> list[float]:
    return [t[(n - 1) * k // SAMPLES] for k in range(SAMPLES + 1)]


def fingerprint(hosts: Mapping[int, HostSeries]) -> list[list[float]]:
    """What the straggler analysis was computed from: each host's step count and last start."""
    return [[h, len(hs.times), hs.times[-1] if len(hs.times) else 0.0] for h, hs in sorted(hosts.items())]


@dataclass(slots=True)
class Pieces:
    """Settled goodput-over-time pieces of one plan (ui/_charts.py: goodput_series): piece k
    -> (its end, the ideal step time used, productive seconds, total seconds). They hold while
    the lead host's non-step events up to the last piece's end are the same (`others`) and
    its saved step summaries fit."""

    start: float
    width: float
    lead: int
    others: int
    rows: dict[int, tuple[float, float, float, float]]


@dataclass(slots=True)
class Saved:
    hosts: dict[int, SavedHost]
    pieces: Pieces | None


def others_before(log: HostLog, t: float) -> int:
    return bisect_left([r.time for r in log.others], t) if log.others and log.others[-1].time >= t else len(log.others)


def pack(hosts: Mapping[int, HostSeries], pieces: Pieces | None = None) -> list[bytes]:
    """A header piece, then one piece per host with its blocks' arrays end to end; `pieces`:
    settled goodput-over-time pieces. (The straggler analysis is saved with the accounting's
    state: `GoodputCalculator.stragglers`.)"""
    head: list[dict[str, object]] = []
    parts: list[bytes] = []
    for h, hs in sorted(hosts.items()):
        b = hs.blocks
        if b.done < 1:
            continue
        t = hs.times
        n = b.done + 1
        head.append(
            {
                "host": h,
                "steps": n,
                "samples": _samples(t, n),
                "restarts": [js for js in hs.job_starts if bisect_left(t, js) - 1 < n - 1],
                "blocks": len(b.x),
                "tail": b.tail,
            }
        )
        parts.append(b.x.tobytes() + b.n.tobytes() + b.sum.tobytes() + b.lo.tobytes() + b.hi.tobytes())
    extra: dict[str, object] = {}
    if pieces is not None:
        extra["pieces"] = {
            "start": pieces.start,
            "width": pieces.width,
            "lead": pieces.lead,
            "others": pieces.others,
            "rows": [[k, *v] for k, v in sorted(pieces.rows.items())],
        }
    return [json.dumps({"format": FORMAT, "hosts": head, **extra}).encode(), *parts]


def save(store: Store, logger: str, job: str, pieces: list[bytes]) -> bool:
    """Write the pieces (a store that keeps no state keeps nothing); True when written."""
    if not isinstance(store, StateStore) or not enabled():
        return False
    try:
        store.save_state(NAMESPACE, key(logger, job), pieces)
    except Exception:  # a store that fails now: the next growth tries again
        return False
    return True


def load(store: Store, logger: str, job: str) -> Saved | None:
    """The saved series by host and the
    goodput pieces, or None (none saved, or one that fails a check)."""
    if not isinstance(store, StateStore) or not enabled():
        return None
    try:
        got = store.load_state(NAMESPACE, key(logger, job))
        if got is None:
            return None
        it = iter(got)
        head = json.loads(next(it))
        if head.get("format") != FORMAT:
            return None
        out: dict[int, SavedHost] = {}
        for row in head["hosts"]:
            data = next(it)
            nb = int(row["blocks"])
            if len(data) != 5 * 8 * nb:
                return None
            b = Blocks(done=int(row["steps"]) - 1, tail=int(row["tail"]))
            b.x.frombytes(data[: 8 * nb])
            b.n.frombytes(data[8 * nb : 16 * nb])
            b.sum.frombytes(data[16 * nb : 24 * nb])
            b.lo.frombytes(data[24 * nb : 32 * nb])
            b.hi.frombytes(data[32 * nb :])
            out[int(row["host"])] = SavedHost(
                b, int(row["steps"]), [float(x) for x in row["samples"]], [float(x) for x in row["restarts"]]
            )
        pc = None
        g = head.get("pieces")
        if g is not None:
            pc = Pieces(
                float(g["start"]),
                float(g["width"]),
                int(g["lead"]),
                int(g["others"]),
                {int(k): (float(b), float(i), float(p), float(t)) for k, b, i, p, t in g["rows"]},
            )
        return Saved(out, pc)
    except (StopIteration, ValueError, KeyError, TypeError, OSError):
        return None
