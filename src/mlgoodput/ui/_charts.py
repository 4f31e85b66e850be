"""What the job page draws, reduced to screen resolution: the attempt timeline, step times
and goodput over time. Numbers come from the job's calculator; this only lays them out."""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from typing import Any

from mlgoodput.accounting import Segment
from mlgoodput.ui._job import HostSeries, JobView
from mlgoodput.ui._reduce import BLOCK

MAX_STALLS = 400
MAX_HOST_LANES = 16  # beyond this, the timeline shows the lead host and the worst stragglers


def partition(view: JobView) -> tuple[Segment, ...]:
    """The job's partition in time as of the page's report (the accounting's own, computed
    once per report from what that report read): the timeline is the table beside it."""
    r = view.report()

    def make() -> tuple[Segment, ...]:
        with view.lock:  # no read in between: the report's events, at the report's time
            rep = view.report()
            q = rep.end if rep.status == "running" else max(view.now(), view.calc.timeline.max_time)
            return view.calc.partition(at=q, read=False)

    return view.cached(("partition",), make, r.end)  # type: ignore[no-any-return]


def _stalls(view: JobView, hs: HostSeries) -> list[tuple[float, float, int, float]]:
    """(step start, step seconds, step, stall seconds) of the lead host's steps that hold the
    report's STALL: the partition's stall segments, placed on their steps."""
    out: dict[int, tuple[float, float, int, float]] = {}
    times = hs.times
    for sg in partition(view):
        if sg.bucket != "stall":
            continue
        i = bisect_right(times, sg.start) - 1
        if i < 0:
            continue
        prev = out.get(i)
        d = hs.durs[i] if i < len(hs.durs) else sg.end - times[i]
        out[i] = (
            times[i],
            d if d == d else sg.end - times[i],
            int(hs.nums[i]),
            sg.seconds + (prev[3] if prev else 0.0),
        )
    return [out[i] for i in sorted(out)]


def timeline(view: JobView, width: int) -> dict[str, Any]:
    """The report's partition laid out in time (GoodputCalculator.partition): one lane per
    attempt, coloured by bucket, and one lane per host showing when it stepped."""
    r = view.report()
    return view.cached(("timeline", width), lambda: _timeline(view, width), r.end)  # type: ignore[no-any-return]


def _timeline(view: JobView, width: int) -> dict[str, Any]:
    r = view.report()
    atts = view.attempts()
    if view.lead() is None or not atts:
        return {"start": r.start, "end": r.end, "lanes": []}
    segs = partition(view)
    t0 = atts[0]["start"]
    t1 = max(r.end, segs[-1].end if segs else r.end)
    px = max(t1 - t0, 1e-9) / max(width, 1)
    lanes = []
    bounds = [a["start"] for a in atts[1:]] + [math.inf]
    k = 0
    for a, stop in zip(atts, bounds, strict=True):
        mine: list[tuple[float, float, str]] = []
        while k < len(segs) and segs[k].start < stop:
            sg = segs[k]
            if sg.end > stop:  # split at the next attempt's start (never, by the rules: kept safe)
                mine.append((sg.start, stop, sg.bucket))
                segs = (*segs[:k], Segment(stop, sg.end, sg.bucket), *segs[k + 1 :])
                break
            mine.append((sg.start, sg.end, sg.bucket))
            k += 1
        lanes.append(
            {
                "lane": f"attempt {a['attempt']}",
                "kind": "attempt",
                "attempt": a["attempt"],
                "segments": drawn(mine, px),
            }
        )
    hidden = 0
    if len(view.hosts) > 1:
        lead = view.lead()
        shown = sorted(view.hosts)
        if len(shown) > MAX_HOST_LANES:  # the stragglers (most seconds beyond the ideal) and the lead
            lost = {row["host"]: row["lost_s"] for row in view.host_rows(r)}
            top = sorted(shown, key=lambda h: -lost.get(h, 0.0))[: MAX_HOST_LANES - 1]
            shown = sorted(set(top) | ({lead} if lead is not None else set()))
            hidden = len(view.hosts) - len(shown)
        for h in shown:
            hsh = view.hosts[h]
            host_segs = []
            for a in atts:
                i0 = _index(hsh, a["start"])
                i1 = _index(hsh, a["end"]) if a["ended"] != "open" else len(hsh.times)
                if i1 > i0:
                    host_segs.append(
                        {
                            "phase": "host_steps",
                            "start": hsh.times[i0],
                            "end": max(hsh.times[i1 - 1], hsh.times[i0]),
                            "first_step": int(hsh.nums[i0]),
                            "last_step": int(hsh.nums[i1 - 1]),
                        }
                    )
            lanes.append({"lane": f"host {h}", "kind": "host", "host": h, "segments": host_segs})
    return {"start": t0, "end": t1, "lanes": lanes, "hidden_hosts": hidden}


def drawn(segs: list[tuple[float, float, str]], px: float) -> list[dict[str, Any]]:
    """Contiguous (start, end, bucket) segments as a screen of `px` seconds a pixel draws them:
    a segment of a pixel or more as itself; runs of narrower ones as one piece holding each
    bucket's seconds (`mix`, drawn side by side), so every bucket keeps its exact seconds."""
    out: list[dict[str, Any]] = []
    mix: dict[str, float] = {}
    m0 = m1 = 0.0
    n = 0

    def flush() -> None:
        nonlocal mix, n
        if not mix:
            return
        if len(mix) == 1:
            out.append({"bucket": next(iter(mix)), "start": m0, "end": m1, "n": n})
        else:
            out.append({"start": m0, "end": m1, "mix": mix, "n": n})
        mix, n = {}, 0

    for x, y, bucket in segs:
        if y - x >= px:
            flush()
            out.append({"bucket": bucket, "start": x, "end": y})
            continue
        if not mix:
            m0 = x
        mix[bucket] = mix.get(bucket, 0.0) + (y - x)
        m1 = y
        n += 1
        if m1 - m0 >= px:
            flush()
    flush()
    return out


def _index(hs: HostSeries, t: float) -> int:
    return bisect_left(hs.times, t)


def steps(view: JobView, width: int, host: int | None = None) -> dict[str, Any]:
    """Step durations of one host (default: the lead) as mean/min/max per pixel bucket, and
    the lead host's steps that hold the report's stall as points."""
    r = view.report()
    h = view.lead() if host is None else host
    key = ("steps", width, h)

    def make() -> dict[str, Any]:
        if h is None or h not in view.hosts:
            return {"x": [], "mean": [], "min": [], "max": [], "stalls": [], "ideal_s": r.ideal_step_time_s}
        hs = view.hosts[h]
        xs, mean, lo, hi = _series(hs, max(10, width))
        ideal = r.ideal_step_time_s
        st = _stalls(view, hs) if h == view.lead() else []  # the partition follows the lead host
        if len(st) > MAX_STALLS:  # the longest
            st = sorted(sorted(st, key=lambda x: -x[3])[:MAX_STALLS])
        steps_at = [int(hs.nums[min(i, len(hs.nums) - 1)]) for i in _block_first(hs, xs)]
        return {
            "host": h,
            "x": xs,
            "mean": mean,
            "min": lo,
            "max": hi,
            "step": steps_at,
            "stalls": [{"time": t, "seconds": d, "step": n, "stall_s": x} for t, d, n, x in st],
            "ideal_s": ideal,
            "points": len(hs.durs),
        }

    return view.cached(key, make, r.end)  # type: ignore[no-any-return]


def _series(
    hs: HostSeries, width: int
) -> tuple[list[float], list[float | None], list[float | None], list[float | None]]:
    """(x, mean, min, max): raw durations when they fit the width, per-bucket summaries of the
    raw values while that is cheap, else merged block summaries."""
    n = len(hs.durs)
    times, durs = hs.times, hs.durs
    if n <= 2 * width:
        ys = [None if math.isnan(d) else d for d in durs]
        return list(times[:n]), ys, [None] * n, [None] * n
    if n // BLOCK >= width:
        return hs.blocks.reduce(width)
    per = math.ceil(n / width)
    xs: list[float] = []
    mean: list[float | None] = []
    lo: list[float | None] = []
    hi: list[float | None] = []
    for i in range(0, n, per):
        chunk = [d for d in durs[i : i + per] if not math.isnan(d)]
        xs.append(times[i])
        mean.append(sum(chunk) / len(chunk) if chunk else None)
        lo.append(min(chunk) if chunk else None)
        hi.append(max(chunk) if chunk else None)
    return xs, mean, lo, hi


def _block_first(hs: HostSeries, xs: list[float]) -> list[int]:
    return [bisect_left(hs.times, x) for x in xs]


_NICE = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400)


def piece_width(total_s: float, max_pieces: int) -> float:
    """A round piece width (seconds) that cuts `total_s` into at most `max_pieces` pieces."""
    for w in _NICE:
        if total_s / w <= max_pieces:
            return float(w)
    return float(math.ceil(total_s / max_pieces / 86400) * 86400)


def goodput_series(view: JobView, max_points: int, window_s: float | None, wait_s: float = 0.5) -> dict[str, Any]:
    """Goodput over time: the job cut into round pieces, each piece's productive seconds the
    accounting's (`productive_by_piece`: what a windowed report of the piece says, from one
    pass over the steps; with the job's ideal step time, so that the last cumulative point is
    the headline figure). Cumulative goodput at t is the sum over
    the pieces before t; the rolling one sums the pieces of the last `window_s` (rounded to
    whole pieces). Pieces are computed by a background thread and kept, so a live page
    computes only the newest; this waits up to `wait_s` for them, then returns what there
    is (`complete` false: ask again)."""
    r = view.report()
    if r.total_s <= 0:
        return {"x": [], "cumulative": [], "rolling": [], "window_s": window_s, "piece_s": None, "complete": True}
    t0, t1 = r.start, r.end
    width = piece_width(t1 - t0, max(4, max_points))
    n = max(1, math.ceil((t1 - t0) / width))
    plan = (t0, t1, width, n, r.ideal_step_time_s)
    done = view.pieces_for(plan, wait_s)
    pieces = view.pieces.get((t0, width), {})
    xs: list[float] = []
    cum: list[float | None] = []
    roll: list[float | None] = []
    wk = max(1, round((window_s or width) / width))
    prod: list[float] = []
    tot: list[float] = []
    for k in range(n):
        pc = pieces.get(k)
        if pc is None:
            break
        prod.append(pc[3])
        tot.append(pc[4])
        xs.append(pc[0])
        cp, ct = sum(prod), sum(tot)
        cum.append(100.0 * cp / ct if ct > 0 else None)
        rp, rt = sum(prod[-wk:]), sum(tot[-wk:])
        roll.append(100.0 * rp / rt if rt > 0 else None)
    return {
        "x": xs,
        "cumulative": cum,
        "rolling": roll if window_s else [],
        "window_s": wk * width if window_s else None,
        "piece_s": width,
        "complete": done,
    }
