"""CPU of the monitor's straggler analysis per upload (issue 12: 256 hosts, < 20 ms per upload);
with --verdict-runs, how often real torchrun jobs get a straggler named (issue 26).

Ranks step together into a SQLite store; before each upload every rank adds `--per` steps.
A GoodputCalculator reads them and the analysis is asked of it as the monitor's uploader
does (`GoodputCalculator.stragglers(start, None, read=False)`: kept up to date, it takes the
new steps). We time, in CPU of this process, that part of each upload, and the same analysis
made from nothing each time (a fresh `HostStragglers`): what the incremental matcher saves.
The calculator's own work is not counted.

    PYTHONPATH=src python bench/bench_stragglers.py [--hosts 256] [--per 100] [--rounds 30]

The verdict (docs/torch.md, "Stragglers"): `--verdict-runs N` runs N two-rank torchrun jobs
(gloo, CPU; `--verdict-steps` steps of about 0.1 s, a checkpoint every 5) with no rank slowed,
and N with rank 1 loading a random 30 % of its batches 20 % of a step late (seed i for job i);
then both again with a noisy input pipeline on every rank (each batch 10 ms late on average);
and counts the jobs in which a straggler was named, and which rank. `--save FILE` keeps every
job's step starts; `--replay FILE` puts them through the analysis importable now (another
checkout's, by PYTHONPATH) without running anything, so two rules are compared on the same runs.

    PYTHONPATH=src python bench/bench_stragglers.py --verdict-runs 20 [--save runs.json]
    PYTHONPATH=/old/checkout/src python bench/bench_stragglers.py --replay runs.json
"""

from __future__ import annotations

import argparse
import collections
import gc
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from mlgoodput.accounting import GoodputCalculator
from mlgoodput.accounting._stragglers import HostStragglers
from mlgoodput.events import Event, EventBatch, Kind
from mlgoodput.store import open_store


def run(hosts: int, per: int, rounds: int) -> dict[str, float]:
    d = tempfile.mkdtemp(prefix="bench-stragglers-")
    store = f"sqlite://{d}/s.db"
    try:
        st = open_store(store)
        st.append("goodput", "j", EventBatch(1, 0, [Event(Kind.JOB_START, 990.0, h) for h in range(hosts)]))
        seq = dict.fromkeys(range(hosts), 0)
        at = {"step": 0, "t": 1000.0}

        def steps() -> None:
            step, t = at["step"], at["t"]
            for h in range(hosts):
                jitter = [1e-4 * h + 1e-5 * ((k * 7 + h) % 3) for k in range(per)]
                evs = [Event(Kind.STEP_START, t + (k + 1) * 0.1 + jitter[k], h, step=step + k) for k in range(per)]
                st.append("goodput", "j", EventBatch(100 + h, seq[h], evs))
                seq[h] += per
            at["step"], at["t"] = step + per, t + per * 0.1

        for _ in range(5):
            steps()
        calc = GoodputCalculator("j", "goodput", store=store, snapshot=False)
        r = calc.report()
        calc.stragglers(r.start, None, read=False)
        gc.collect()
        gc.freeze()
        kept, fresh = [], []
        for _ in range(rounds):
            steps()
            r = calc.report()  # the calculator's own work (not counted)
            t0 = time.process_time()
            got = calc.stragglers(r.start, None, read=False)  # as the monitor asks, each upload
            kept.append(time.process_time() - t0)
            tl = calc.timeline
            stats = {s.host: s for s in r.hosts}  # (the accounting's host statistics, as the calculator's)
            t0 = time.process_time()
            again = HostStragglers().report(tl.hosts, stats, r.start, None)  # the same, from nothing
            fresh.append(time.process_time() - t0)
            assert again == got
        gc.unfreeze()
        st.close()
        return {
            "kept_ms": 1000 * statistics.median(kept),
            "fresh_ms": 1000 * statistics.median(fresh),
            "fresh_last_ms": 1000 * fresh[-1],
            "steps": at["step"],
        }
    finally:
        shutil.rmtree(d, ignore_errors=True)


_SLOW = ["--slow-rank", "1", "--slow-s", "0.02", "--slow-share", "0.3"]  # 20 % of a 0.1 s step
_NOISY = ["--jitter-s", "0.01"]  # every rank's batches 10 ms late on average (exponential)
SCENARIOS = {
    "no rank slowed": [],
    "rank 1 slowed 20 % on 30 % of steps": _SLOW,
    "no rank slowed, noisy input on every rank": _NOISY,
    "rank 1 slowed 20 % on 30 % of steps, noisy input on every rank": _SLOW + _NOISY,
}


def torchrun_job(steps: int, extra: list[str]) -> dict[str, Any]:
    """One two-rank torchrun job: every rank's job starts and (time, step) starts, as stored."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "torch"))
    from torch_helpers import torchrun  # (the torch tests' launcher: c10d on 127.0.0.1)

    d = tempfile.mkdtemp(prefix="bench-verdict-")
    try:
        store = f"sqlite://{d}/g.db"
        (Path(d) / "ck").mkdir()
        args = ["--store", store, "--job", "j", "--ckpt-dir", f"{d}/ck", "--steps", str(steps), *extra]
        p = torchrun(args, max_restarts=0, timeout_s=600)
        if p.returncode != 0:
            raise RuntimeError(p.stderr[-3000:])
        js: dict[int, list[float]] = collections.defaultdict(list)
        starts: dict[int, list[tuple[float, int]]] = collections.defaultdict(list)
        st = open_store(store)
        for c in st.read("goodput", "j", 0).parts:
            for k, t, h, n in zip(c.kinds, c.times, c.hosts, c.steps, strict=True):
                if k == int(Kind.STEP_START):
                    starts[h].append((t, n))
                elif k == int(Kind.JOB_START):
                    js[h].append(t)
        st.close()
        return {"job_starts": js, "steps": starts}
    finally:
        shutil.rmtree(d, ignore_errors=True)


def verdicts(jobs: dict[str, list[dict[str, Any]]]) -> list[tuple[str, int, collections.Counter[str]]]:
    """Per scenario: jobs, and how many named each rank (or none), by the analysis importable now."""
    from mlgoodput.torch import analyze_stragglers

    out = []
    for name, runs in jobs.items():
        named: collections.Counter[str] = collections.Counter()
        for j in runs:
            js = {int(h): v for h, v in j["job_starts"].items()}
            steps = {int(h): [(t, n) for t, n in v] for h, v in j["steps"].items()}
            s = analyze_stragglers(js, steps).straggler
            named["none" if s is None else f"rank {s}"] += 1
        out.append((name, len(runs), named))
    return out


def print_verdicts(rows: list[tuple[str, int, collections.Counter[str]]], title: str) -> None:
    print(f"\n{title}\n")
    print("| runs | scenario | straggler named | which rank |")
    print("|------|----------|-----------------|------------|")
    for name, n, named in rows:
        which = ", ".join(f"{k}: {v}" for k, v in sorted(named.items()) if k != "none") or "-"
        print(f"| {n} | {name} | {n - named['none']} of {n} | {which} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=256)
    ap.add_argument("--per", type=int, default=100, help="new steps per host per upload")
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--verdict-runs", type=int, default=0, help="torchrun jobs per scenario (0: none)")
    ap.add_argument("--verdict-steps", type=int, default=60)
    ap.add_argument("--scenarios", default=None, help="which scenarios, by index (0,1,...; default: all)")
    ap.add_argument("--save", type=Path, default=None, help="keep the jobs' step starts here (JSON)")
    ap.add_argument("--replay", type=Path, default=None, help="judge saved jobs only, with the analysis importable now")
    args, _ = ap.parse_known_args()
    if args.replay is not None:
        print_verdicts(
            verdicts(json.loads(args.replay.read_text())), f"straggler verdicts of the jobs in {args.replay}"
        )
        return
    if args.verdict_runs:
        jobs = {
            name: [torchrun_job(args.verdict_steps, [*extra, "--slow-seed", str(i)]) for i in range(args.verdict_runs)]
            for k, (name, extra) in enumerate(SCENARIOS.items())
            if args.scenarios is None or str(k) in args.scenarios.split(",")
        }
        if args.save is not None:
            args.save.write_text(json.dumps(jobs))
        print_verdicts(
            verdicts(jobs),
            f"straggler verdicts of real two-rank torchrun jobs ({args.verdict_steps} steps of about 0.1 s each)",
        )
        return
    r = run(args.hosts, args.per, args.rounds)
    print(
        f"\nstraggler analysis per upload, {args.hosts} hosts x {args.per} new steps, median of {args.rounds}"
        f" (CPU of this process; {r['steps']} steps per host at the end)\n"
    )
    print("| kept up to date (the monitor's) | made from nothing each upload | from nothing, last upload | target |")
    print("|---------------------------------|-------------------------------|---------------------------|--------|")
    print(f"| {r['kept_ms']:>28.2f} ms | {r['fresh_ms']:>26.2f} ms | {r['fresh_last_ms']:>22.2f} ms | < 20 ms |")


if __name__ == "__main__":
    main()
