"""`mlgoodput monitor`: run a job's GoodputMonitor on its own, away from the training machine; or,
with `--fleet`, export the fleet view's gauges by group (`run_fleet`, docs/exporting.md)."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any


def _windows(text: str) -> list[int]:
    try:
        out = [int(w) for w in text.split(",") if w.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--rolling-windows must be comma-separated seconds, got {text!r}") from None
    if not out or any(w <= 0 for w in out):
        raise argparse.ArgumentTypeError(f"--rolling-windows must be positive seconds, got {text!r}")
    return out


def _positive(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not v > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text!r}")
    return v


def _days(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected days, got {text!r}") from None
    if not (v > 0 and v < float("inf")):
        raise argparse.ArgumentTypeError(f"must be days > 0, got {text!r}")
    return v


def _count(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text!r}")
    return v


def add_arguments(p: argparse.ArgumentParser) -> None:
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--job", help="job (run) name")
    what.add_argument(
        "--fleet", action="store_true", help="export fleet gauges by group instead of one job (Prometheus, OTLP)"
    )
    p.add_argument(
        "--logger",
        "--logger-name",
        dest="logger_name",
        default=None,
        help="logger name (default: the one the store holds for the job, else goodput_<job>)",
    )
    p.add_argument(
        "--store", default=None, help="store URL or path (default: $MLGOODPUT_STORE or the local SQLite file)"
    )
    p.add_argument("--interval", type=_positive, default=30.0, help="seconds between uploads (default 30)")
    p.add_argument("--tensorboard-dir", default=None, help="write TensorBoard scalars under DIR/goodput")
    p.add_argument("--prometheus-port", type=int, default=None, help="serve Prometheus metrics on this port")
    p.add_argument(
        "--prometheus-addr", default="127.0.0.1", help="address for the Prometheus endpoint (default 127.0.0.1)"
    )
    p.add_argument("--otlp-endpoint", default=None, help="push OTLP metrics to this endpoint")
    p.add_argument("--otlp-protocol", choices=("grpc", "http"), default="grpc")
    p.add_argument("--gcp-project", default=None, help="upload to Google Cloud Monitoring in this project")
    p.add_argument(
        "--gcp-location", default=None, help="location label for Cloud Monitoring (default: metadata server)"
    )
    p.add_argument(
        "--rolling-windows", type=_windows, default=None, help="also upload rolling windows, e.g. 60,300,900"
    )
    p.add_argument("--no-badput", action="store_true", help="leave out the badput breakdown")
    p.add_argument("--quiet", action="store_true", help="no progress line")
    fleet = p.add_argument_group("fleet gauges (with --fleet)")
    fleet.add_argument("--by", default=None, help="group by this label, or `job` (default: team)")
    fleet.add_argument(
        "--range-days",
        type=_days,
        default=None,
        metavar="DAYS",
        help="the range each upload covers, ending then (default 7)",
    )
    fleet.add_argument(
        "--top-groups",
        type=_count,
        default=None,
        metavar="N",
        help="groups exported on their own, by accelerator-hours; the rest as group=other (default 20)",
    )
    fleet.add_argument(
        "--price-per-hour", type=float, default=None, metavar="PRICE", help="price of an accelerator-hour"
    )
    fleet.add_argument("--prices", default=None, metavar="FILE", help="prices by accelerator type (as mlgoodput fleet)")


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "monitor", help="upload a job's goodput to TensorBoard, Prometheus, OTLP or Cloud Monitoring"
    )
    add_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.fleet:
        return run_fleet(args)
    fleet_only = [f"--{k.replace('_', '-')}" for k in _FLEET_OPTIONS if getattr(args, k) is not None]
    if fleet_only:
        raise ValueError(f"{', '.join(fleet_only)} go with --fleet (a job's monitor has no groups)")
    from mlgoodput._format import duration, timestamp
    from mlgoodput.accounting import GoodputCalculator
    from mlgoodput.export import GCPOptions, make_exporter
    from mlgoodput.monitoring import GoodputMonitor

    logger_name = _default_logger(args.store, args.job, args.logger_name)
    exporters: list[Any] = []
    if args.prometheus_port is not None:
        exporters.append(make_exporter("prometheus", port=args.prometheus_port, addr=args.prometheus_addr))
    if args.otlp_endpoint:
        exporters.append(make_exporter("otlp", endpoint=args.otlp_endpoint, protocol=args.otlp_protocol))
    if args.gcp_project:
        exporters.append(
            make_exporter("gcp", gcp_options=GCPOptions(project_id=args.gcp_project, location=args.gcp_location))
        )
    if not exporters and not args.tensorboard_dir:
        raise ValueError(
            "nothing to upload to: give --tensorboard-dir, --prometheus-port, --otlp-endpoint or --gcp-project"
        )
    monitor = GoodputMonitor(
        job_name=args.job,
        logger_name=logger_name,
        tensorboard_dir=args.tensorboard_dir,
        upload_interval=args.interval,
        monitoring_enabled=True,
        include_badput_breakdown=not args.no_badput,
        include_step_deviation=True,
        store=args.store,
        exporters=exporters,
    )
    stop = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        stop.set()

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    running: list[str] = []
    try:
        monitor.start_goodput_uploader()  # a bad exporter (a port or folder in use) raises here
        if monitor.uploader_pid is None:  # the uploader process could not start (the monitor warned why)
            print(
                "mlgoodput monitor: error: the uploader process could not start (see the warning above)",
                file=sys.stderr,
            )
            return 1
        running.append("cumulative")
        if args.rolling_windows:
            monitor.start_rolling_window_goodput_uploader(args.rolling_windows)
            running.append("rolling")
        print(_started_line(args, monitor.endpoints), flush=True)  # the first upload is under way
        calc = (
            None if args.quiet else GoodputCalculator(args.job, logger_name, store=monitor.store_url, save_growth=1.0)
        )
        started = time.time()
        wait_s = 0.0  # the first progress line at once, then one each interval
        while not stop.wait(wait_s):
            wait_s = args.interval
            if calc is not None:
                r = calc.report()
                if not r.total_s > 0:
                    print(
                        f"\r{timestamp(time.time())} {args.job}: no data yet (waiting for the job to record)",
                        end="",
                        file=sys.stderr,
                        flush=True,
                    )
                    continue
                print(
                    f"\r{timestamp(time.time())} {args.job}: goodput {r.goodput_pct:6.2f}%  "
                    f"last step {r.last_step}  disruptions {r.disruptions}  "
                    f"uploading for {duration(round(time.time() - started))} (Ctrl-C to stop)",
                    end="",
                    file=sys.stderr,
                    flush=True,
                )
        if calc is not None:
            print(file=sys.stderr)
        print("mlgoodput monitor: final upload...", file=sys.stderr, flush=True)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        ok = True
        if "rolling" in running:
            ok = monitor.stop_rolling_window_goodput_uploader() and ok
        if "cumulative" in running:
            ok = monitor.stop_goodput_uploader() and ok
        ok = monitor.wait_for_final_uploads() and ok  # the stops hand it to the background
    print("mlgoodput monitor: stopped" + ("" if ok else " (final upload incomplete)"), file=sys.stderr)
    return 0 if ok else 1


#: Options of fleet mode only (None unless given).
_FLEET_OPTIONS = ("by", "range_days", "top_groups", "price_per_hour", "prices")
#: Options of a job's monitor only, refused with --fleet (their defaults are falsy).
_JOB_OPTIONS = ("logger_name", "tensorboard_dir", "gcp_project", "gcp_location", "rolling_windows", "no_badput")


def run_fleet(args: argparse.Namespace) -> int:
    """`monitor --fleet`: one FleetSource in the exporter process, fleet gauges for the range
    ending at each upload (docs/exporting.md, "Fleet gauges"), until Ctrl-C or SIGTERM."""
    from mlgoodput._cli._fleet_gauges import FleetGauges
    from mlgoodput._cli.fleet import read_prices
    from mlgoodput._format import duration, timestamp
    from mlgoodput.export import ExporterProcess, make_exporter
    from mlgoodput.store import resolve_store_url

    wrong = [f"--{k.replace('_', '-')}" for k in _JOB_OPTIONS if getattr(args, k)]
    if wrong:
        raise ValueError(f"{', '.join(wrong)} do not go with --fleet (fleet gauges go to Prometheus and OTLP)")
    exporters: list[Any] = []
    if args.prometheus_port is not None:
        exporters.append(make_exporter("prometheus", port=args.prometheus_port, addr=args.prometheus_addr))
    if args.otlp_endpoint:
        exporters.append(make_exporter("otlp", endpoint=args.otlp_endpoint, protocol=args.otlp_protocol))
    if not exporters:
        raise ValueError("nothing to upload to: give --prometheus-port or --otlp-endpoint")
    url = resolve_store_url(args.store, "--store")
    if url.startswith("memory:"):
        raise ValueError("--store: a memory:// store cannot be read by the exporter process; use a file or database")
    prices = read_prices(args.prices, args.price_per_hour)
    gauges = FleetGauges(
        url,
        by=args.by or "team",
        range_days=7.0 if args.range_days is None else args.range_days,
        top_groups=20 if args.top_groups is None else args.top_groups,
        prices=prices if prices.any else None,
    )
    _check_fleet_store(args.store)  # the arguments first: each error says what to change
    proc = ExporterProcess(exporters, interval_s=args.interval, name="mlgoodput-fleet")
    stop = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        stop.set()

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    started = False
    ok = True
    try:
        proc.start()  # a bad exporter (a port in use with --prometheus-port) raises here
        started = True
        proc.add_source("fleet", gauges)  # its first upload starts now, in the exporter process
        print(_fleet_started_line(args, gauges, proc.addresses), flush=True)
        t0 = time.time()
        wait_s = 0.0
        while not stop.wait(wait_s):
            wait_s = args.interval
            if not args.quiet:
                print(
                    f"\r{timestamp(time.time())} fleet by {gauges.by}: uploading for"
                    f" {duration(round(time.time() - t0))} (Ctrl-C to stop)",
                    end="",
                    file=sys.stderr,
                    flush=True,
                )
        if not args.quiet:
            print(file=sys.stderr)
        print("mlgoodput monitor: final upload...", file=sys.stderr, flush=True)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        if started:
            ok = proc.stop(30.0)
    print("mlgoodput monitor: stopped" + ("" if ok else " (final upload incomplete)"), file=sys.stderr)
    return 0 if ok else 1


def _fleet_started_line(args: argparse.Namespace, gauges: Any, addresses: Sequence[str | None]) -> str:
    """The one line said at start of fleet mode: where the gauges go, what they cover."""
    what = (
        f"fleet gauges by {gauges.by} (the last {gauges.range_days:g} days, top {gauges.top_groups} groups),"
        f" every {args.interval:g} s (Ctrl-C to stop)"
    )
    where = [a for a in addresses if a]
    if args.otlp_endpoint:
        where.append(f"OTLP {args.otlp_endpoint}")
    if args.prometheus_port is not None and not any(a for a in addresses):
        where.insert(0, f"port {args.prometheus_port} on {args.prometheus_addr} once it is free")
    verb = "serving" if args.prometheus_port is not None else "uploading to"
    return f"mlgoodput monitor: {verb} {', '.join(where)} for {what}"


def _check_fleet_store(store: str | None) -> None:
    """A store file in a folder that does not exist, or a database that cannot be reached, is a
    one-line error here (a store file not yet made is fine: jobs will make it)."""
    from mlgoodput._cli._common import CLIError, open_read_store
    from mlgoodput.store import resolve_store_url, store_file

    path = store_file(resolve_store_url(store, "--store"))
    if path is not None and not os.path.exists(path):
        folder = os.path.dirname(path)
        if not os.path.isdir(folder):
            raise CLIError(f"no store at {path} and no folder {folder} for it (check --store or MLGOODPUT_STORE)")
        return
    open_read_store(store, "--store", recover=False).close()


def _started_line(args: argparse.Namespace, endpoints: Sequence[str]) -> str:
    """The one line said at start: where the job's goodput goes (the endpoint's URL first,
    with the port it picked for --prometheus-port 0)."""
    where = [f"TensorBoard {os.path.join(args.tensorboard_dir, 'goodput')}"] if args.tensorboard_dir else []
    if args.otlp_endpoint:
        where.append(f"OTLP {args.otlp_endpoint}")
    if args.gcp_project:
        where.append(f"Cloud Monitoring project {args.gcp_project}")
    every = f"every {args.interval:g} s (Ctrl-C to stop)"
    if args.prometheus_port is None:
        return f"mlgoodput monitor: uploading job {args.job} to {', '.join(where)} {every}"
    also = "".join(f"; {w}" for w in where)
    if endpoints:
        return f"mlgoodput monitor: serving {endpoints[0]} for job {args.job}{also}, {every}"
    return (
        f"mlgoodput monitor: port {args.prometheus_port} on {args.prometheus_addr} is busy; serving job"
        f" {args.job} there once it is free{also}, {every}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run `monitor` without the rest of the command line (used by tests)."""
    p = argparse.ArgumentParser(prog="mlgoodput monitor")
    add_arguments(p)
    return run(p.parse_args(argv))


def _default_logger(store: str | None, job: str, given: str | None = None) -> str:
    """`given`, else the logger the store holds for the job (goodput_<job> before it records
    anything). A store that cannot be reached, or a store file in a folder that does not
    exist, fails here in one line; a store file not yet made is the job's to make."""
    import os

    from mlgoodput._cli._common import CLIError, open_read_store
    from mlgoodput._cli.report import loggers_for, resolve_logger
    from mlgoodput.store import resolve_store_url, store_file

    url = resolve_store_url(store, "--store")
    path = store_file(url)
    if path is not None and not os.path.exists(path):
        # started before the job: fine, it waits for the job's first events; but a folder
        # that does not exist is a typo, not a job to come
        folder = os.path.dirname(path)
        if not os.path.isdir(folder):
            raise CLIError(f"no store at {path} and no folder {folder} for it (check --store or MLGOODPUT_STORE)")
        return given or f"goodput_{job}"
    st = open_read_store(store, "--store", recover=False)
    try:
        if given:
            return given
        if not loggers_for(st, job):
            return f"goodput_{job}"
        return resolve_logger(st, job, None)  # one name, or a clear error naming them all
    finally:
        st.close()
