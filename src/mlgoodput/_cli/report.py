"""`mlgoodput report` and `mlgoodput jobs`: a job's goodput and badput, and what a store holds."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
from typing import Any

from mlgoodput.accounting import BadputType, GoodputCalculator, GoodputReport
from mlgoodput.store import Store, open_store

RESERVED_PREFIX = "mlgoodput."

_LABELS = {
    BadputType.TPU_INITIALIZATION: "accelerator initialization",
    BadputType.TRAINING_PREP: "training preparation",
    BadputType.PROGRAM_STARTUP: "program startup (compilation)",
    BadputType.DATA_LOADING_SYNC: "data loading (blocking)",
    BadputType.UNPRODUCTIVE_CHECKPOINT_SAVE_TIME: "checkpoint save",
    BadputType.UNPRODUCTIVE_CHECKPOINT_RESTORE_TIME: "checkpoint restore",
    BadputType.WASTED_PROGRESS_FROM_DISRUPTION: "wasted progress (disruption)",
    BadputType.INFRASTRUCTURE_RECOVERY_FROM_DISRUPTION: "infrastructure recovery (disruption)",
    BadputType.CUSTOM_BADPUT_EVENTS: "custom",
    BadputType.ELASTIC_SLICE_DOWN: "elastic: waiting, slice down",
    BadputType.ELASTIC_SCALE_UP: "elastic: waiting, scale up",
    BadputType.ELASTIC_REINITIALIZATION: "elastic: re-initialization",
    BadputType.STALL: "stall (hang, straggler)",
    BadputType.OTHER: "other (idle, teardown, gaps)",
}


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("report", help="goodput and the badput breakdown of a job")
    p.add_argument("--job", required=True, help="the job name (job_name of the recorder)")
    p.add_argument("--logger", help="the logger name (default: the one the store holds for the job)")
    p.add_argument("--store", help="store URL or path (default: $MLGOODPUT_STORE, else the default file)")
    p.add_argument("--at", help="show the job as it was at this time (ISO 8601 or UNIX seconds)")
    p.add_argument("--window", type=float, metavar="SECONDS", help="only the last SECONDS (before --at or now)")
    p.add_argument("--ideal-step-time", type=float, metavar="SECONDS", help="use this ideal step time")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=cmd_report)
    j = sub.add_parser("jobs", help="list the jobs (and other streams) in a store")
    j.add_argument("--store", help="store URL or path")
    j.add_argument("--all", action="store_true", help="include runs, console and JAX streams")
    j.add_argument("--json", action="store_true", help="print JSON instead of a table")
    j.set_defaults(func=cmd_jobs)


def parse_time(text: str, arg: str) -> float:
    """ISO 8601 (naive means local time) or UNIX seconds."""
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise ValueError(f"{arg}: expected ISO 8601 or UNIX seconds, got {text!r}") from None


def loggers_for(store: Store, job: str) -> list[str]:
    """The goodput logger names under which a store holds `job`."""
    return [j.namespace for j in store.jobs() if j.job == job and not j.namespace.startswith(RESERVED_PREFIX)]


def resolve_logger(store: Store, job: str, logger: str | None) -> str:
    if logger:
        return logger
    names = loggers_for(store, job)
    if len(names) == 1:
        return names[0]
    if not names:
        raise LookupError(f"no job named {job!r} in {store.url} (`mlgoodput jobs` lists them)")
    raise LookupError(f"job {job!r} is recorded under several loggers {sorted(names)}: pass --logger")


def cmd_report(args: argparse.Namespace) -> int:
    if args.window is not None and not args.window > 0:
        raise ValueError(f"--window must be a positive number of seconds, got {args.window!r}")
    store = open_store(args.store, "--store")
    logger = resolve_logger(store, args.job, args.logger)
    calc = GoodputCalculator(args.job, logger, store=store)
    at = parse_time(args.at, "--at") if args.at else None
    if args.window is not None:
        q = at if at is not None else time.time()
        r = calc.rolling_windows([args.window], end=q, configured_ideal_step_time=args.ideal_step_time)[
            int(args.window)
        ]
    else:
        r = calc.report(at=at, configured_ideal_step_time=args.ideal_step_time)
    lost = journal_losses(store).get((logger, args.job), 0)
    lag = _stragglers(store, args.job, logger, r)
    if args.json:
        d = r.to_dict()
        if lost:
            d["journal_lost_events"] = lost
        if lag:
            d["stragglers"] = lag.to_dict()
        print(json.dumps(d, indent=2))
    else:
        print_report(r, sys.stdout)
        for line in lag.lines() if lag else []:
            print(line)
        print_losses({(logger, args.job): lost} if lost else {}, sys.stdout)
    return 0


def _stragglers(store: Store, job: str, logger: str, r: GoodputReport) -> Any:
    """Per-rank step times and the rank holding collectives back, for jobs of several hosts."""
    if len(r.hosts) < 2:
        return None
    from mlgoodput.torch._stragglers import StragglerAnalysis

    return StragglerAnalysis(job, logger, store=store).report(r.start, r.end)


def journal_losses(store: Store) -> dict[tuple[str, str], int]:
    """(logger, job) -> events reported lost to damaged journal records (kept by recovery in
    the reserved stream `mlgoodput.lost`); empty when nothing was ever lost."""
    from mlgoodput._journal import LOSS_NAMESPACE

    out: dict[tuple[str, str], int] = {}
    for info in store.jobs():
        if info.namespace != LOSS_NAMESPACE:
            continue
        cols = store.read(LOSS_NAMESPACE, info.job).columns
        for i in range(len(cols)):
            ns = (cols.attr(i) or {}).get("namespace")
            if isinstance(ns, str):
                key = (ns, info.job)
                out[key] = out.get(key, 0) + int(cols.values[i])
    return out


def print_losses(losses: dict[tuple[str, str], int], out: Any) -> None:
    """One warning line per stream that lost events, so a loss is never silent."""
    for (ns, job), n in sorted(losses.items()):
        print(f"warning: {n} events of job {job} (logger {ns}) were lost to damaged journal records"
              " (see the mlgoodput log of the recovering process for the file)", file=out)


def _fmt_time(t: float) -> str:
    return dt.datetime.fromtimestamp(t).astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")


def report_rows(r: GoodputReport) -> list[tuple[str, float, float]]:
    """(label, seconds, % of total) for productive time and every badput bucket."""
    t = r.total_s or 1.0
    rows = [("productive (goodput)", r.productive_s, 100 * r.productive_s / t)]
    order = sorted(r.badput_s, key=lambda b: (b is BadputType.OTHER, b is BadputType.STALL, b.value))
    for b in order:
        v = r.badput_s[b]
        if isinstance(v, dict):
            for name, s in sorted(v.items()):
                rows.append((f"custom: {name}", s, 100 * s / t))
        else:  # every bucket, zeros included, so a reader sees what was looked for
            rows.append((_LABELS.get(b, b.name.lower()), float(v), 100 * float(v) / t))
    return rows


def print_report(r: GoodputReport, out: Any) -> None:
    head = (
        f"Job {r.job_name} (logger {r.logger_name}): {_fmt_time(r.start)} .. {_fmt_time(r.end)}"
        f" ({r.total_s:,.1f} s)"
    )
    facts = [
        ("goodput", f"{r.goodput_pct:.2f} %"),
        ("disruptions", str(r.disruptions)),
        ("last step", "-" if r.last_step is None else str(r.last_step)),
        ("max productive step", "-" if r.max_productive_step is None else str(r.max_productive_step)),
        ("ideal step time", f"{r.ideal_step_time_s:.4g} s"),
        ("overlapped data loading", f"{r.overlapped_s.get(BadputType.DATA_LOADING_ASYNC, 0.0):,.2f} s (not badput)"),
    ]
    if r.slice_efficiency is not None:
        facts.append(
            ("slice efficiency", f"stepping {r.slice_efficiency.stepping:.1f} %, available {r.slice_efficiency.available:.1f} %")
        )
    facts += productivity_facts(r)
    rows = report_rows(r)
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        print(head, file=out)
        for k, v in facts:
            print(f"  {k:<24} {v}", file=out)
        print(f"\n  {'where the time went':<40} {'seconds':>12} {'%':>8}", file=out)
        for label, s, pct in rows:
            print(f"  {label:<40} {s:>12,.2f} {pct:>7.2f}%", file=out)
        return
    console = Console(file=out, highlight=False, soft_wrap=True)
    console.print(f"[bold]{head}[/bold]")
    for k, v in facts:
        console.print(f"  {k:<24} {v}")
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    table.add_column("where the time went")
    table.add_column("seconds", justify="right")
    table.add_column("%", justify="right")
    for label, s, pct in rows:
        style = "green" if label.startswith("productive") else None
        table.add_row(label, f"{s:,.2f}", f"{pct:.2f}", style=style)
    console.print(table)


def productivity_facts(r: GoodputReport) -> list[tuple[str, str]]:
    """MPG and its factors, MFU, ETTR and the reliability figures (docs/accounting.md)."""
    p = r.productivity
    if p is None:
        return []

    def pct(v: float | None, why: str = "") -> str:
        return f"{100 * v:.2f} %" if v is not None else ("unknown" + (f" ({why})" if why else ""))

    def secs(v: float | None, why: str = "") -> str:
        if v is None:
            return "-" + (f" ({why})" if why else "")
        return f"{v:,.1f} s" if abs(v) >= 10 else f"{v:.3g} s"

    def rate(v: float) -> str:
        for scale, unit in ((1e15, "PFLOP/s"), (1e12, "TFLOP/s"), (1e9, "GFLOP/s"), (1e6, "MFLOP/s")):
            if v >= scale:
                return f"{v / scale:,.4g} {unit}"
        return f"{v:,.4g} FLOP/s"

    peak = "unknown (record_peak_flops)" if p.peak_flops_per_s is None else (
        f"{rate(p.peak_flops_per_s)} ({p.peak_source})")
    rows = [
        ("ML productivity goodput", pct(p.ml_productivity_goodput, "needs submit time, FLOPs and peak")),
        ("scheduling goodput", pct(p.scheduling_goodput, "no submit time")
         + ("" if p.queue_s is None else f", queued {p.queue_s:,.1f} s ({p.submit_source})")),
        ("runtime goodput", pct(p.runtime_goodput)),
        ("program goodput", pct(p.program_goodput, "needs step FLOPs and peak")),
        ("MFU", pct(p.mfu, "needs step FLOPs and peak")),
        ("peak FLOP/s", peak),
        ("achieved FLOP/s", "-" if p.achieved_flops_per_s is None else rate(p.achieved_flops_per_s)),
        ("ETTR", pct(p.ettr)),
        ("interruptions", str(p.interruptions)),
        ("MTBI", secs(p.mtbi_s, "no interruptions")),
        ("MTTR", secs(p.mttr_s, "no recovery")),
    ]
    for att in p.attempts[1:]:
        parts = [f"waited {secs(att.waiting_s)} after the interruption"]
        if att.queue_s is not None:
            parts.append(f"queued {secs(att.queue_s)} since its submit ({att.source})")
        rows.append((f"attempt {att.attempt + 1}", ", ".join(parts)))
    if p.checkpoint_save.count:
        rows.append(("checkpoint save", f"{p.checkpoint_save.count} x, mean {secs(p.checkpoint_save.mean_s)},"
                     f" p95 {secs(p.checkpoint_save.p95_s)}"))
    if p.checkpoint_restore.count:
        rows.append(("checkpoint restore", f"{p.checkpoint_restore.count} x, mean {secs(p.checkpoint_restore.mean_s)},"
                     f" p95 {secs(p.checkpoint_restore.p95_s)}"))
    if p.lost_progress_per_interruption_s is not None:
        rows.append(("progress lost / interruption", secs(p.lost_progress_per_interruption_s)))
    return rows


def cmd_jobs(args: argparse.Namespace) -> int:
    store = open_store(args.store, "--store")
    infos = [j for j in store.jobs() if args.all or not j.namespace.startswith(RESERVED_PREFIX)]
    losses = journal_losses(store)
    if args.json:
        print(json.dumps([
            {"job": j.job, "logger": j.namespace, "events": j.events, "first_time": j.first_time, "last_time": j.last_time}
            | ({"journal_lost_events": losses[(j.namespace, j.job)]} if (j.namespace, j.job) in losses else {})
            for j in infos
        ], indent=2))
        return 0
    if not infos:
        print(f"no jobs in {store.url}")
        return 0
    w1 = max(len("job"), *(len(j.job) for j in infos))
    w2 = max(len("logger"), *(len(j.namespace) for j in infos))
    print(f"{'job':<{w1}}  {'logger':<{w2}}  {'events':>9}  {'first event':<23}  last event")
    for j in infos:
        print(f"{j.job:<{w1}}  {j.namespace:<{w2}}  {j.events:>9}  {_fmt_time(j.first_time):<23}  {_fmt_time(j.last_time)}")
    print_losses(losses, sys.stdout)
    return 0
