"""What the job page draws, reduced to screen resolution: the attempt timeline, step times
and goodput over time. Numbers come from the job's calculator; this only lays them out."""

from __future__ import annotations

import math
from bisect import bisect_left
from typing import Any

from mlgoodput.ui._job import HostSeries, JobView
from mlgoodput.ui._reduce import BLOCK

STALL_FACTOR = 3.0  # the accounting's default: a step longer than 3x the ideal is a stall
MAX_STALLS = 400
MAX_HOST_LANES = 16  # beyond this, the timeline shows the lead host and the worst stragglers


def _stalls(hs: HostSeries, threshold: float, i0: int, i1: int) -> list[tuple[float, float, int]]:
    """(start, seconds, step) of the steps in [i0, i1) longer than `threshold`; only blocks
    whose max exceeds it are scanned."""
    out: list[tuple[float, float, int]] = []
    if threshold <= 0:
        return out
    b = hs.blocks
    nd = len(hs.durs)
    for k in range(i0 // BLOCK, min(len(b.hi), (i1 + BLOCK - 1) // BLOCK)):
        if not b.hi[k] > threshold:
            continue
        lo, hi = max(i0, k * BLOCK), min(i1, (k + 1) * BLOCK, nd)
        for i, d in enumerate(hs.durations(lo, hi), lo):
            if d > threshold:
                out.append((hs.times[i], d, int(hs.nums[i])))
    return out


def _merge(segs: list[dict[str, Any]], min_gap: float) -> list[dict[str, Any]]:
    """Segments of one phase and name closer than a pixel become one (with a count `n`).
    The input is not changed (it may be the view's own list)."""
    if len(segs) < 2:
        return [dict(x) for x in segs]
    segs = sorted(segs, key=_start)
    out: list[dict[str, Any]] = []
    cur: dict[str, Any] = dict(segs[0])
    end = cur["end"]
    n = 1
    for x in segs[1:]:
        st = x["start"]
        if st - end <= min_gap:
            e = x["end"]
            if e > end:
                end = e
            n += 1
            continue
        if n > 1:
            cur["n"] = n
            cur.pop("step", None)
        cur["end"] = end
        out.append(cur)
        cur = dict(x)
        end = cur["end"]
        n = 1
    if n > 1:
        cur["n"] = n
        cur.pop("step", None)
    cur["end"] = end
    out.append(cur)
    return out


def _start(seg: dict[str, Any]) -> float:
    return float(seg["start"])


def timeline(view: JobView, width: int) -> dict[str, Any]:
    """One lane per attempt (the lead host's phases) and one per host (steps and stalls)."""
    r = view.report()
    return view._cached(("timeline", width), lambda: _timeline(view, width), r.end)  # type: ignore[no-any-return]


def _timeline(view: JobView, width: int) -> dict[str, Any]:
    r = view.report()
    atts = view.attempts()
    lead = view.lead()
    if lead is None or not atts:
        return {"start": r.start, "end": r.end, "lanes": []}
    t0, t1 = atts[0]["start"], max(r.end, view.max_time)
    px = max(t1 - t0, 1e-9) / max(width, 1)
    ideal = r.ideal_step_time_s
    threshold = STALL_FACTOR * ideal if ideal > 0 else math.inf
    hs = view.hosts[lead]
    pairs = view._pairs(hs)  # sorted by start
    starts = [p["start"] for p in pairs]
    lanes = []
    for a in atts:
        s, e = a["start"], a["end"]
        segs: list[dict[str, Any]] = []
        i0 = _index(hs, s)
        i1 = _index(hs, e) if a["ended"] != "open" else len(hs.times)
        if i1 > i0:
            first_end = hs.times[i0 + 1] if i1 > i0 + 1 else a["last_event"]
            segs.append(
                {
                    "phase": "compile",
                    "start": hs.times[i0],
                    "end": first_end,
                    "step": int(hs.nums[i0]),
                    "label": "first step (compilation)",
                }
            )
            if i1 > i0 + 1:
                stop = a["last_event"] if a["ended"] != "finished" else min(e, _after(hs, hs.times[i1 - 1], e))
                segs.append(
                    {
                        "phase": "steps",
                        "start": hs.times[i0 + 1],
                        "end": max(stop, hs.times[i1 - 1]),
                        "first_step": int(hs.nums[i0 + 1]),
                        "last_step": int(hs.nums[i1 - 1]),
                    }
                )
        lo_p = bisect_left(starts, s)
        hi_p = len(pairs) if a["ended"] == "open" else bisect_left(starts, e)
        segs.extend(pairs[lo_p:hi_p])  # _reduce_lane copies what it keeps
        for st, d, step in _stalls(hs, threshold, i0 + 1, max(i0 + 1, i1 - 1))[:MAX_STALLS]:
            segs.append({"phase": "stall", "start": st, "end": st + d, "step": step})
        if a["ended"] == "restarted":
            segs.append({"phase": "recovery", "start": a["last_event"], "end": e, "label": "crash and recovery"})
        lanes.append(
            {
                "lane": f"attempt {a['attempt']}",
                "kind": "attempt",
                "attempt": a["attempt"],
                "segments": _reduce_lane(segs, px),
            }
        )
    hidden = 0
    if len(view.hosts) > 1:
        shown = sorted(view.hosts)
        if len(shown) > MAX_HOST_LANES:  # the stragglers (most seconds beyond the ideal) and the lead
            lost = {row["host"]: row["lost_s"] for row in view._host_rows(r)}
            top = sorted(shown, key=lambda h: -lost.get(h, 0.0))[: MAX_HOST_LANES - 1]
            shown = sorted(set(top) | {lead})
            hidden = len(view.hosts) - len(shown)
        for h in shown:
            hsh = view.hosts[h]
            segs = []
            for a in atts:
                i0 = _index(hsh, a["start"])
                i1 = _index(hsh, a["end"]) if a["ended"] != "open" else len(hsh.times)
                if i1 > i0:
                    segs.append(
                        {
                            "phase": "steps",
                            "start": hsh.times[i0],
                            "end": hsh.times[i1 - 1],
                            "first_step": int(hsh.nums[i0]),
                            "last_step": int(hsh.nums[i1 - 1]),
                        }
                    )
                for st, d, step in _stalls(hsh, threshold, i0, max(i0, i1 - 1))[:MAX_STALLS]:
                    segs.append({"phase": "stall", "start": st, "end": st + d, "step": step})
            lanes.append({"lane": f"host {h}", "kind": "host", "host": h, "segments": _reduce_lane(segs, px)})
    return {"start": t0, "end": t1, "lanes": lanes, "hidden_hosts": hidden}


def _index(hs: HostSeries, t: float) -> int:
    return bisect_left(hs.times, t)


def _after(hs: HostSeries, t: float, limit: float) -> float:
    """The first non-step event after t (where the last step of a finished attempt ended)."""
    for rec in hs.others:
        if t < rec[1] <= limit:
            return rec[1]
    return limit


def _reduce_lane(segs: list[dict[str, Any]], px: float) -> list[dict[str, Any]]:
    by: dict[tuple[str, str | None], list[dict[str, Any]]] = {}
    for s in segs:
        by.setdefault((s["phase"], s.get("name")), []).append(s)
    out: list[dict[str, Any]] = []
    for k in sorted(by, key=lambda k: (k[0] != "steps", k[0], k[1] or "")):
        out.extend(_merge(by[k], px))
    return out


def steps(view: JobView, width: int, host: int | None = None) -> dict[str, Any]:
    """Step durations of one host (default: the lead) as mean/min/max per pixel bucket, and
    the stalls (steps longer than 3x the ideal) as points."""
    r = view.report()
    h = view.lead() if host is None else host
    key = ("steps", width, h)

    def make() -> dict[str, Any]:
        if h is None or h not in view.hosts:
            return {"x": [], "mean": [], "min": [], "max": [], "stalls": [], "ideal_s": r.ideal_step_time_s}
        hs = view.hosts[h]
        xs, mean, lo, hi = _series(hs, max(10, width))
        ideal = r.ideal_step_time_s
        firsts = {hs.times[i] for i in (bisect_left(hs.times, js) for js in hs.job_starts) if i < len(hs.times)}
        st = [
            x
            for x in _stalls(hs, STALL_FACTOR * ideal if ideal > 0 else math.inf, 0, len(hs.durs))
            if x[0] not in firsts
        ]  # an attempt's first step is its compilation, not a stall
        st.sort(key=lambda s: -s[1])
        st = sorted(st[:MAX_STALLS])
        steps_at = [int(hs.nums[min(i, len(hs.nums) - 1)]) for i in _block_first(hs, xs)]
        return {
            "host": h,
            "x": xs,
            "mean": mean,
            "min": lo,
            "max": hi,
            "step": steps_at,
            "stalls": [{"time": t, "seconds": d, "step": s} for t, d, s in st],
            "ideal_s": ideal,
            "points": len(hs.durs),
            "stall_factor": STALL_FACTOR,
        }

    return view._cached(key, make, r.end)  # type: ignore[no-any-return]


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
