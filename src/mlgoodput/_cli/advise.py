"""`mlgoodput advise`: the checkpoint interval that maximizes a job's expected goodput."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from mlgoodput._cli._common import positive_seconds

if TYPE_CHECKING:  # imported when the command runs, so `mlgoodput --help` stays cheap
    from mlgoodput.accounting import Advice, GoodputCalculator


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("advise", help="checkpoint interval advice from measured save cost and interruptions")
    p.add_argument("--job", required=True, help="the job name (job_name of the recorder)")
    p.add_argument("--logger", help="the logger name (default: the one the store holds for the job)")
    p.add_argument("--store", help="store URL or path (default: $MLGOODPUT_STORE, else the default file)")
    p.add_argument(
        "--mtbi-s",
        type=positive_seconds,
        metavar="SECONDS",
        help="assume this mean time between interruptions (default: measured)",
    )
    p.add_argument(
        "--save-s",
        type=positive_seconds,
        metavar="SECONDS",
        help="assume this blocking checkpoint save time (default: measured mean)",
    )
    p.add_argument(
        "--recovery-s",
        type=positive_seconds,
        metavar="SECONDS",
        help="assume this time to recover (default: measured MTTR, else restore time)",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.set_defaults(func=cmd_advise)


def advice_for(calc: GoodputCalculator, **overrides: Any) -> Advice:
    from mlgoodput.accounting import advise

    r = calc.report()
    if r.productivity is None:
        raise LookupError(f"job {calc.job_name!r} has no recorded job start yet: nothing to advise on")
    return advise(r.productivity, r.ideal_step_time_s or None, **overrides)


def _s(v: float | None) -> str:
    from mlgoodput._format import duration

    return duration(v)


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.2f} %"


def format_advice(a: Advice) -> list[str]:
    rows = [
        ("interruptions", str(a.interruptions)),
        ("mean time between interruptions", _s(a.mtbi_s)),
        ("checkpoint save (blocking, mean)", _s(a.save_s)),
        ("time to recover (mean)", _s(a.recovery_s)),
        ("ideal step time", _s(a.step_time_s)),
        ("current interval (work between saves)", _s(a.current_interval_s)),
        ("Young interval sqrt(2 x save x MTBI)", _s(a.young_interval_s)),
        ("Daly interval", _s(a.daly_interval_s)),
        ("optimal interval", _s(a.optimal_interval_s)),
        ("expected goodput at current interval", _pct(a.goodput_current)),
        ("expected goodput at optimal interval", _pct(a.goodput_optimal)),
    ]
    return [f"  {k:<40} {v}" for k, v in rows] + ["", a.recommendation]


def cmd_advise(args: argparse.Namespace) -> int:
    from mlgoodput._cli._common import open_read_store
    from mlgoodput._cli.report import resolve_logger
    from mlgoodput.accounting import GoodputCalculator

    store = open_read_store(args.store)  # an existing store, journals of killed processes shipped first
    try:
        logger = resolve_logger(store, args.job, args.logger)
        calc = GoodputCalculator(args.job, logger, store=store)
        a = advice_for(calc, mtbi_s=args.mtbi_s, save_s=args.save_s, recovery_s=args.recovery_s)
    finally:
        store.close()
    if args.json:
        print(json.dumps(a.to_dict(), indent=2))
    else:
        print(f"Checkpoint interval advice for job {args.job} (logger {logger})")
        print("\n".join(format_advice(a)))
    return 0
