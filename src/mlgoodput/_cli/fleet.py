"""`mlgoodput fleet`: where a store's accelerator hours went over a time range, by group."""

from __future__ import annotations

import argparse
import json
import math
import time
from typing import TYPE_CHECKING, Any

from mlgoodput._cli._common import open_read_store, rich_console

if TYPE_CHECKING:
    from mlgoodput.accounting import FleetReport, Prices

DEFAULT_DAYS = 7
#: JSON keys of --json (docs/fleet.md lists each); a test checks the output against them
TOP_KEYS = ("since", "until", "by", "currency", "buckets", "total", "groups", "days", "jobs", "label_keys")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("fleet", help="accelerator hours of every job by team, model or cause, in hours and money")
    p.add_argument("--store", help="store URL or path (default: $MLGOODPUT_STORE, else the default file)")
    p.add_argument(
        "--since",
        help=f"start of the range, ISO 8601 (UTC unless it names a zone) or UNIX seconds (default:"
        f" {DEFAULT_DAYS} days before --until, from the start of that hour)",
    )
    p.add_argument("--until", help="end of the range, as --since (default: now)")
    p.add_argument("--by", default="team", help="group by this label, or `job` (default: team)")
    p.add_argument("--price-per-hour", type=float, metavar="PRICE", help="price of one accelerator-hour")
    p.add_argument(
        "--prices",
        metavar="FILE",
        help="TOML or JSON file: `currency`, `default` and a `per_hour` table by accelerator type",
    )
    p.add_argument("--top", type=int, default=10, metavar="N", help="jobs shown in the table (default 10)")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables (every job)")
    p.set_defaults(func=cmd_fleet)


def time_range(since: str | None, until: str | None, now: float) -> tuple[float, float]:
    """(since, until) from the arguments: until defaults to now, since to DEFAULT_DAYS before it
    (from the start of that hour, where a job's hours begin)."""
    from mlgoodput.accounting import parse_utc_time

    hi = parse_utc_time(until, "--until") if until else now
    lo = parse_utc_time(since, "--since") if since else math.floor((hi - DEFAULT_DAYS * 86400.0) / 3600.0) * 3600.0
    if not hi > lo:
        raise ValueError(f"--until must be after --since (got {lo!r} and {hi!r})")
    return lo, hi


def read_prices(path: str | None, per_hour: float | None) -> Prices:
    """Prices from --prices FILE and --price-per-hour (the default for types the file leaves out)."""
    from mlgoodput.accounting import Prices

    if per_hour is not None and not (math.isfinite(per_hour) and per_hour >= 0):
        raise ValueError(f"--price-per-hour must be a finite number >= 0, got {per_hour!r}")
    if path is None:
        return Prices(default=per_hour)
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise ValueError(f"--prices: cannot read {path!r}: {e.strerror or e}") from None
    try:
        if path.endswith(".json"):
            d = json.loads(raw)
        else:
            import tomllib

            d = tomllib.loads(raw.decode())
    except (ValueError, UnicodeDecodeError) as e:
        raise ValueError(
            f"--prices: {path!r} is not valid {'JSON' if path.endswith('.json') else 'TOML'}: {e}"
        ) from None
    if not isinstance(d, dict):
        raise ValueError(f"--prices: {path!r} must hold a table")
    unknown = sorted(set(d) - {"currency", "default", "per_hour"})
    if unknown:
        raise ValueError(f"--prices: {path!r}: unknown key {unknown[0]!r} (expected currency, default, per_hour)")
    table = d.get("per_hour", {})
    if not isinstance(table, dict):
        raise ValueError(f"--prices: {path!r}: per_hour must be a table of accelerator type = price")
    by_type = {str(k): _price(v, f"per_hour.{k}", path) for k, v in table.items()}
    default = _price(d["default"], "default", path) if "default" in d else per_hour
    currency = d.get("currency", "USD")
    if not isinstance(currency, str) or not currency.strip():
        raise ValueError(f"--prices: {path!r}: currency must be a non-empty string, got {currency!r}")
    return Prices(default=default, by_type=by_type, currency=currency.strip())


def _price(v: object, where: str, path: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not (math.isfinite(v) and v >= 0):
        raise ValueError(f"--prices: {path!r}: {where} must be a number >= 0, got {v!r}")
    return float(v)


def cmd_fleet(args: argparse.Namespace) -> int:
    from mlgoodput.accounting import FleetSource, job_link

    if args.top < 0:
        raise ValueError(f"--top must be >= 0, got {args.top}")
    if not args.by.strip():
        raise ValueError("--by must name a label (or `job`)")
    since, until = time_range(args.since, args.until, time.time())
    prices = read_prices(args.prices, args.price_per_hour)
    store = open_read_store(args.store)  # ships what killed processes left in journals first
    try:
        r = FleetSource(store).report(since, until, args.by.strip(), prices, job_link)
    finally:
        store.close()
    if args.json:
        print(json.dumps(r.to_dict(), indent=2, allow_nan=False))
    else:
        show(r, args.top)
    return 0


# -- tables ---------------------------------------------------------------------------------------
def _hours(h: float) -> str:
    return f"{h:,.1f}" if h >= 10 else f"{h:,.2f}"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100.0 * v:.1f} %"


def _money(v: float | None, currency: str | None) -> str:
    return "-" if v is None or currency is None else f"{v:,.2f} {currency}"


#: a bucket in a few words, so a table row of several buckets fits a terminal (`mlgoodput report`
#: has the long words)
SHORT = {
    "tpu_initialization": "accel init",
    "training_prep": "prep",
    "program_startup": "compile",
    "data_loading_sync": "data",
    "unproductive_checkpoint_save_time": "ckpt save",
    "unproductive_checkpoint_restore_time": "ckpt restore",
    "wasted_progress_from_disruption": "wasted",
    "infrastructure_recovery_from_disruption": "recovery",
    "custom_badput_events": "custom",
    "other": "other",
    "elastic_slice_down": "slice down",
    "elastic_scale_up": "scale up",
    "elastic_reinitialization": "elastic reinit",
    "stall": "stall",
}


def _worst(row: dict[str, Any], n: int = 3) -> str:
    """The row's largest badput buckets, in a few words each."""
    got = sorted(((h, b) for b, h in row["badput_hours"].items() if h > 0), reverse=True)[:n]
    return ", ".join(f"{SHORT.get(b, b)} {_hours(h)}" for h, b in got) or "-"


def show(r: FleetReport, top: int) -> None:
    from rich.markup import escape
    from rich.table import Table

    from mlgoodput._format import timestamp

    con = rich_console()
    t = r.total
    cur = r.currency
    con.print(
        f"[bold]Fleet[/bold] {timestamp(r.since)} to {timestamp(r.until)}: {t['jobs']} jobs,"
        f" {_hours(t['accelerator_hours'])} accelerator-hours, goodput {_pct(t['goodput'])},"
        f" lost {_hours(t['lost_hours'])} h" + (f" ({_money(t['cost']['lost'], cur)})" if t["cost"] else "")
    )
    g = Table(title=f"by {escape(r.by)}", title_justify="left")
    for col in (
        "group",
        "jobs",
        "accel-hours",
        "goodput",
        "lost h",
        "lost to (h)",
        "sched",
        "program",
        "MPG",
        "ETTR",
    ):
        g.add_column(col, justify="left" if col in ("group", "lost to (h)") else "right")
    if cur:
        g.add_column(f"lost ({cur})", justify="right")
    rows = [*r.groups, {"key": "all", **t}]
    for i, row in enumerate(rows):
        cells = [
            "(none)" if row["key"] is None else escape(str(row["key"])),
            str(row["jobs"]),
            _hours(row["accelerator_hours"]),
            _pct(row["goodput"]),
            _hours(row["lost_hours"]),
            _worst(dict(row)),
            _pct(row["scheduling_goodput"]),
            _pct(row["program_goodput"]),
            _pct(row["ml_productivity_goodput"]),
            _pct(row["ettr"]),
        ]
        if cur:
            cells.append(_money(row["cost"]["lost"] if row["cost"] else None, cur))
        g.add_row(*cells, style="bold" if i == len(rows) - 1 else None)
    con.print(g)
    if 1 < len(r.days) <= 31:
        d = Table(title="by day (UTC)", title_justify="left")
        for col in ("day", "accel-hours", "goodput", "lost h", "lost to (h)"):
            d.add_column(col, justify="left" if col in ("day", "lost to (h)") else "right")
        for row in r.days:
            d.add_row(
                str(row["day"]),
                _hours(row["accelerator_hours"]),
                _pct(row["goodput"]),
                _hours(row["lost_hours"]),
                _worst(dict(row)),
            )
        con.print(d)
    if top and r.jobs:
        j = Table(
            title=f"jobs that lost the most hours (top {min(top, len(r.jobs))} of {len(r.jobs)})", title_justify="left"
        )
        for col in ("job", "group", "status", "accelerators", "accel-hours", "goodput", "lost h", "lost to (h)"):
            j.add_column(col, justify="left" if col in ("job", "group", "status", "lost to (h)") else "right")
        for row in r.jobs[:top]:
            j.add_row(
                escape(str(row["job"])),
                "(none)" if row["group"] is None else escape(str(row["group"])),
                escape(str(row["status"])),
                str(row["accelerators"]) + ("" if row["accelerators_recorded"] else "?"),
                _hours(row["accelerator_hours"]),
                _pct(row["goodput"]),
                _hours(row["lost_hours"]),
                _worst(dict(row)),
            )
        con.print(j)
        if any(not row["accelerators_recorded"] for row in r.jobs):
            con.print("? accelerators not recorded: counted as 1 (docs/fleet.md)")
