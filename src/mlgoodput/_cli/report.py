"""`mlgoodput report` and `mlgoodput jobs`: a job's goodput and badput, and what a store holds."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import sys
from typing import TYPE_CHECKING, Any

from mlgoodput._cli._common import CLIError, open_read_store, rich_console
from mlgoodput._format import duration, flops_rate, goodput_level, timestamp

if TYPE_CHECKING:
    from mlgoodput.accounting import GoodputCalculator, GoodputReport, StragglerReport
    from mlgoodput.store import Store

RESERVED_PREFIX = "mlgoodput."

#: A job with no job-end event whose last event is older than this is shown as stopped.

# BadputType names -> the words a person reads (keys are names so this module imports nothing heavy)
BUCKET_WORDS = {
    "TPU_INITIALIZATION": "accelerator initialization",
    "TRAINING_PREP": "training preparation",
    "PROGRAM_STARTUP": "program startup (compilation)",
    "DATA_LOADING_SYNC": "data loading (blocking)",
    "UNPRODUCTIVE_CHECKPOINT_SAVE_TIME": "checkpoint save",
    "UNPRODUCTIVE_CHECKPOINT_RESTORE_TIME": "checkpoint restore",
    "WASTED_PROGRESS_FROM_DISRUPTION": "wasted progress (disruption)",
    "INFRASTRUCTURE_RECOVERY_FROM_DISRUPTION": "infrastructure recovery (disruption)",
    "CUSTOM_BADPUT_EVENTS": "custom",
    "ELASTIC_SLICE_DOWN": "elastic: waiting, slice down",
    "ELASTIC_SCALE_UP": "elastic: waiting, scale up",
    "ELASTIC_REINITIALIZATION": "elastic: re-initialization",
    "STALL": "stall (hang, straggler)",
    "OTHER": "other (idle, teardown, gaps)",
}
_ELASTIC = ("ELASTIC_SLICE_DOWN", "ELASTIC_SCALE_UP", "ELASTIC_REINITIALIZATION")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("report", help="goodput and the badput breakdown of a job")
    p.add_argument("--job", required=True, help="the job name (job_name of the recorder)")
    p.add_argument("--logger", help="the logger name (default: the one the store holds for the job)")
    p.add_argument("--store", help="store URL or path (default: $MLGOODPUT_STORE, else the default file)")
    p.add_argument("--at", help="show the job as it was at this time (ISO 8601 or UNIX seconds)")
    p.add_argument(
        "--window",
        type=float,
        metavar="SECONDS",
        help="only the last SECONDS (before --at, else before now or the job's end)",
    )
    p.add_argument("--ideal-step-time", type=float, metavar="SECONDS", help="use this ideal step time")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=cmd_report)
    j = sub.add_parser("jobs", help="list the jobs (and other streams) in a store")
    j.add_argument("--store", help="store URL or path")
    j.add_argument("--all", action="store_true", help="include runs, console and JAX streams")
    j.add_argument("--json", action="store_true", help="print JSON instead of a table")
    j.set_defaults(func=cmd_jobs)


def parse_time(text: str, arg: str) -> float:
    """ISO 8601 (naive means local time) or UNIX seconds, within the years datetime can show."""
    try:
        t = float(text)
    except ValueError:
        try:
            t = dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
        except (ValueError, OverflowError, OSError):
            raise ValueError(f"{arg}: expected ISO 8601 or UNIX seconds, got {text!r}") from None
    try:
        dt.datetime.fromtimestamp(t)
    except (ValueError, OverflowError, OSError):
        raise ValueError(
            f"{arg}: {text!r} is not a time this machine can show (UNIX seconds from 0 to about 2.5e11)"
        ) from None
    return t


def loggers_for(store: Store, job: str) -> list[str]:
    """The goodput logger names under which a store holds `job`."""
    return [j.namespace for j in store.jobs() if j.job == job and not j.namespace.startswith(RESERVED_PREFIX)]


def loggers_for_quietly(store: Store, job: str) -> list[str]:
    """`loggers_for`, or [] when the store cannot list its jobs now."""
    try:
        return loggers_for(store, job)
    except OSError:
        return []


def resolve_logger(store: Store, job: str, logger: str | None) -> str:
    """`logger` if the store holds the job under it, else the one logger it holds the job under."""
    if logger:
        return logger  # checked by the caller once it has read (a listing may lag behind reads)
    names = loggers_for(store, job)
    if len(names) == 1:
        return names[0]
    if not names:
        raise LookupError(f"no job named {job!r} in {store.url} (`mlgoodput jobs` lists them)")
    raise LookupError(f"job {job!r} is recorded under several loggers {sorted(names)}: pass --logger")


def _check_seconds(v: float | None, arg: str) -> None:
    if v is not None and not (math.isfinite(v) and v > 0):
        raise ValueError(f"{arg} must be a positive, finite number of seconds, got {v!r}")


def cmd_report(args: argparse.Namespace) -> int:
    from mlgoodput.accounting import GoodputCalculator

    _check_seconds(args.window, "--window")
    _check_seconds(args.ideal_step_time, "--ideal-step-time")
    at = parse_time(args.at, "--at") if args.at else None
    store = open_read_store(args.store)  # ships what killed processes left in journals first
    try:
        try:
            logger = resolve_logger(store, args.job, args.logger)
        except LookupError:  # no events of it, but its events may all have been lost: say so first
            print_losses({k: n for k, n in journal_losses(store).items() if k[1] == args.job}, sys.stdout)
            raise
        calc = GoodputCalculator(args.job, logger, store=store)
        if args.window is not None:
            # without --at the window ends now, or at the job's end for a job that has ended
            q = at if at is not None else calc.report().end
            r = calc.rolling_windows([args.window], end=q, configured_ideal_step_time=args.ideal_step_time)[
                int(args.window)
            ]
        else:
            r = calc.report(at=at, configured_ideal_step_time=args.ideal_step_time)
        names = loggers_for_quietly(store, args.job) if not r.total_s > 0 and args.logger else []
        lost = journal_losses(store).get((logger, args.job), 0)
        lag = _stragglers(calc, r) if r.total_s > 0 else None
    finally:
        store.close()
    if not r.total_s > 0:
        if lost:  # even with nothing to show, a loss is said
            print_losses({(logger, args.job): lost}, sys.stdout)
        if args.logger and args.logger not in names:
            also = f"; it holds job {args.job!r} under {sorted(names)}" if names else ""
            raise LookupError(
                f"no job named {args.job!r} under logger {args.logger!r} in {store.url}{also}"
                " (`mlgoodput jobs` lists them)"
            )
        raise CLIError(
            f"no data in this window: job {args.job!r} has no recorded time in {timestamp(r.start)} .. {timestamp(r.end)}"
        )
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


def _stragglers(calc: GoodputCalculator, r: GoodputReport) -> StragglerReport | None:
    """Per-rank step times and the rank holding collectives back, for jobs of several hosts:
    the calculator's analysis of the events the report was made of (no second read)."""
    if len(r.hosts) < 2:
        return None
    return calc.stragglers(r.start, r.end, read=False)


def journal_losses(store: Store) -> dict[tuple[str, str], int]:
    """(logger, job) -> events reported lost (kept in the reserved stream `mlgoodput.lost`)."""
    from mlgoodput._recovery import stored_losses

    return stored_losses(store)


def print_losses(losses: dict[tuple[str, str], int], out: Any) -> None:
    """One warning line per stream that lost events, so a loss is never silent."""
    for (ns, job), n in sorted(losses.items()):
        if ns == CONSOLE_NAMESPACE:
            print(
                f"warning: {n} log records of console job {job} were lost (dropped by a client whose buffer"
                " was full, or damaged journal records; the server's warnings say which)",
                file=out,
            )
            continue
        print(
            f"warning: {n} events of job {job} (logger {ns}) were lost to damaged journal records"
            " (see the mlgoodput log of the recovering process for the file)",
            file=out,
        )


CONSOLE_NAMESPACE = "mlgoodput.console"  # the live console's stream (console/_sink.NAMESPACE)


#: rich styles of the goodput levels (mlgoodput._format.goodput_level; the UI's colours)
_LEVEL_STYLE = {"good": "green", "fair": "dark_orange", "poor": "red", "none": ""}


def _is_elastic(r: GoodputReport) -> bool:
    return r.slice_efficiency is not None or any(r.badput_total_s(b) > 0 for b in r.badput_s if b.name in _ELASTIC)


def report_rows(r: GoodputReport) -> list[tuple[str, float, float]]:
    """(label, seconds, % of total) for productive time and every badput bucket.

    Every bucket is listed, zeros included, so a reader sees what was looked for; the
    elastic buckets only for a job that is elastic.
    """
    t = r.total_s or 1.0
    elastic = _is_elastic(r)
    rows = [("productive (goodput)", r.productive_s, 100 * r.productive_s / t)]
    order = sorted(r.badput_s, key=lambda b: (b.name == "OTHER", b.name == "STALL", b.value))
    for b in order:
        if b.name in _ELASTIC and not elastic:
            continue
        v = r.badput_s[b]
        if isinstance(v, dict):
            for name, s in sorted(v.items()):
                rows.append((f"custom: {name}", s, 100 * s / t))
        else:
            rows.append((BUCKET_WORDS.get(b.name, b.name.lower()), float(v), 100 * float(v) / t))
    return rows


def print_report(r: GoodputReport, out: Any) -> None:
    overlapped = sum(v for b, v in r.overlapped_s.items() if b.name == "DATA_LOADING_ASYNC")
    head = (
        f"Job {r.job_name} (logger {r.logger_name}): {timestamp(r.start)} .. {timestamp(r.end)} ({duration(r.total_s)})"
    )
    facts = [
        ("goodput", f"{r.goodput_pct:.2f} %"),
        ("status", r.status),
        ("disruptions", str(r.disruptions)),
        ("last step", "-" if r.last_step is None else str(r.last_step)),
        ("max productive step", "-" if r.max_productive_step is None else str(r.max_productive_step)),
        ("ideal step time", duration(r.ideal_step_time_s)),
        ("overlapped data loading", f"{duration(overlapped)} (not badput)"),
    ]
    if r.slice_efficiency is not None:
        facts.append(
            (
                "slice efficiency",
                f"stepping {r.slice_efficiency.stepping:.1f} %, available {r.slice_efficiency.available:.1f} %",
            )
        )
    facts += productivity_facts(r)
    facts += [("note", n) for n in (r.productivity.notes if r.productivity is not None else ())]
    rows = report_rows(r)
    hosts = [
        (
            str(h.host),
            str(h.steps),
            duration(h.median_s),
            duration(h.p90_s),
            duration(h.max_s),
            _straggler(h.median_s, r),
        )
        for h in r.hosts
    ]
    host_head = ("host", "steps", "median", "p90", "max", "vs. fastest median")
    try:
        from rich.table import Table
    except ImportError:
        print(head, file=out)
        for k, v in facts:
            print(f"  {k:<24} {v}", file=out)
        print(f"\n  {'where the time went':<40} {'seconds':>12} {'%':>8}", file=out)
        for label, s, pct in rows:
            print(f"  {label:<40} {s:>12,.2f} {pct:>7.2f}%", file=out)
        if hosts:
            print("\n  step times by host (stragglers)", file=out)
            for row in [host_head, *hosts]:
                print("  " + "  ".join(c.rjust(10) for c in row), file=out)
        return
    console = rich_console(file=out, highlight=False, soft_wrap=True)
    console.print(head, markup=False, style="bold")
    level = _LEVEL_STYLE[goodput_level(r.goodput_pct)]
    for k, v in facts:
        console.print(f"  {k:<24} {v}", markup=False, style=level if k == "goodput" else None)
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    table.add_column("where the time went")
    table.add_column("seconds", justify="right")
    table.add_column("%", justify="right")
    for label, s, pct in rows:
        style = "green" if label.startswith("productive") else None
        table.add_row(label, f"{s:,.2f}", f"{pct:.2f}", style=style)
    console.print(table)
    if hosts:
        ht = Table(
            title="step times by host (stragglers)",
            title_justify="left",
            show_header=True,
            header_style="bold",
            box=None,
            pad_edge=False,
        )
        for i, h in enumerate(host_head):
            ht.add_column(h, justify="left" if i == 0 else "right")
        for row in hosts:
            ht.add_row(*row)
        console.print()
        console.print(ht)


def _straggler(median_s: float, r: GoodputReport) -> str:
    fastest = min((h.median_s for h in r.hosts if h.median_s > 0), default=0.0)
    if fastest <= 0:
        return "-"
    return f"{median_s / fastest:.2f}x"


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
        return duration(v)

    peak = (
        "unknown (record_peak_flops)"
        if p.peak_flops_per_s is None
        else (f"{flops_rate(p.peak_flops_per_s)} ({p.peak_source})")
    )
    rows = [
        ("ML productivity goodput", pct(p.ml_productivity_goodput, "needs submit time, FLOPs and peak")),
        (
            "scheduling goodput",
            pct(p.scheduling_goodput, "no submit time")
            + ("" if p.queue_s is None else f", queued {duration(p.queue_s)} ({p.submit_source})"),
        ),
        ("runtime goodput", pct(p.runtime_goodput)),
        ("program goodput", pct(p.program_goodput, "needs step FLOPs and peak")),
        ("MFU", pct(p.mfu, "needs step FLOPs and peak")),
        ("peak FLOP/s", peak),
        ("achieved FLOP/s", flops_rate(p.achieved_flops_per_s)),
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
        rows.append(
            (
                "checkpoint save",
                f"{p.checkpoint_save.count} x, mean {secs(p.checkpoint_save.mean_s)},"
                f" p95 {secs(p.checkpoint_save.p95_s)}",
            )
        )
    if p.checkpoint_restore.count:
        rows.append(
            (
                "checkpoint restore",
                f"{p.checkpoint_restore.count} x, mean {secs(p.checkpoint_restore.mean_s)},"
                f" p95 {secs(p.checkpoint_restore.p95_s)}",
            )
        )
    if p.lost_progress_per_interruption_s is not None:
        rows.append(("progress lost / interruption", secs(p.lost_progress_per_interruption_s)))
    return rows


def cmd_jobs(args: argparse.Namespace) -> int:
    from mlgoodput.accounting import GoodputCalculator

    store = open_read_store(args.store)  # ships what killed processes left in journals first
    try:
        infos = [j for j in store.jobs() if args.all or not j.namespace.startswith(RESERVED_PREFIX)]
        losses = journal_losses(store)
        rows: list[dict[str, Any]] = []
        for j in infos:
            row: dict[str, Any] = {
                "job": j.job,
                "logger": j.namespace,
                "events": j.events,
                "first_time": j.first_time,
                "last_time": j.last_time,
            }
            if not j.namespace.startswith(RESERVED_PREFIX):
                r = GoodputCalculator(j.job, j.namespace, store=store).report()
                row.update(
                    goodput_pct=r.goodput_pct if r.total_s > 0 else None,
                    duration_s=r.total_s,
                    status=r.status,
                )
            if (j.namespace, j.job) in losses:
                row["journal_lost_events"] = losses[(j.namespace, j.job)]
            rows.append(row)
        url = store.url
    finally:
        store.close()
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print(f"no jobs in {url}")
        print_losses(losses, sys.stdout)  # a job whose every event was lost still says so
        return 0
    table: list[tuple[str, ...]] = [("job", "logger", "goodput", "duration", "status", "events", "last event")]
    for row in rows:
        g = row.get("goodput_pct")
        table.append(
            (
                row["job"],
                row["logger"],
                "-" if g is None else f"{g:.2f} %",
                duration(row["duration_s"]) if "duration_s" in row else "-",
                row.get("status", "-"),
                str(row["events"]),
                timestamp(row["last_time"]),
            )
        )
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    right = {2, 3, 5}
    for cells in table:
        print(
            "  ".join(
                c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
            ).rstrip()
        )
    print_losses(losses, sys.stdout)
    return 0
