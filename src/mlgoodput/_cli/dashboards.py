"""`mlgoodput dashboards print|install`: the Grafana dashboard and Prometheus rules we ship."""

from __future__ import annotations

import argparse
import os
import re
import sys
from typing import Any

#: name -> (package data file, what it is)
FILES: dict[str, tuple[str, str]] = {
    "grafana": ("grafana-dashboard.json", "Grafana dashboard (import it, pick the Prometheus data source)"),
    "rules": ("prometheus-rules.yml", "Prometheus recording and alert rules (list under rule_files:)"),
}
_THRESHOLD = re.compile(r"(job_name:mlgoodput_goodput_ratio:max < )[0-9.]+")


def _threshold(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a ratio between 0 and 1, got {text!r}") from None
    if not 0 < v < 1:
        raise argparse.ArgumentTypeError(f"expected a ratio between 0 and 1 (0.5 is 50 %), got {text!r}")
    return v


def register(sub: Any) -> None:
    p = sub.add_parser("dashboards", help="print or install the Grafana dashboard and Prometheus alert rules")
    dsub = p.add_subparsers(dest="dashboards_command", metavar="ACTION")
    dsub.required = True
    pr = dsub.add_parser("print", help="print one file to stdout")
    pr.add_argument("which", choices=sorted(FILES), help="grafana (dashboard JSON) or rules (Prometheus YAML)")
    pr.add_argument(
        "--goodput-threshold",
        type=_threshold,
        default=None,
        metavar="RATIO",
        help="alert when goodput stays below RATIO (default 0.5)",
    )
    pr.set_defaults(func=_print)
    ins = dsub.add_parser("install", help="write both files into DIR")
    ins.add_argument("dir", help="directory to write into (created if missing)")
    ins.add_argument(
        "--goodput-threshold",
        type=_threshold,
        default=None,
        metavar="RATIO",
        help="alert when goodput stays below RATIO (default 0.5)",
    )
    ins.add_argument("--force", action="store_true", help="overwrite files that exist")
    ins.set_defaults(func=_install)


def content(which: str, goodput_threshold: float | None = None) -> str:
    """The text of a shipped file, with the goodput alert threshold set when given."""
    from importlib import resources

    text = resources.files("mlgoodput._ops").joinpath(FILES[which][0]).read_text(encoding="utf-8")
    if goodput_threshold is not None and which == "rules":
        text = _THRESHOLD.sub(lambda m: f"{m.group(1)}{goodput_threshold:g}", text)
    return text


def _print(args: argparse.Namespace) -> int:
    sys.stdout.write(content(args.which, args.goodput_threshold))
    return 0


def _install(args: argparse.Namespace) -> int:
    from mlgoodput._cli._common import CLIError

    if os.path.exists(args.dir) and not os.path.isdir(args.dir):
        raise CLIError(f"{args.dir} exists and is not a directory: pass a directory to install into", 2)
    targets = [(os.path.join(args.dir, f), w) for w, (f, _) in FILES.items()]
    taken = [t for t, _ in targets if os.path.exists(t)]
    if taken and not args.force:
        raise CLIError(f"{', '.join(taken)} already exist: pass --force to overwrite", 2)
    try:
        os.makedirs(args.dir, exist_ok=True)
        for path, which in targets:
            with open(path, "w", encoding="utf-8") as f:
                f.write(content(which, args.goodput_threshold))
    except OSError as e:
        raise CLIError(f"cannot write into {args.dir}: {e.strerror or e}") from e
    for path, which in targets:
        print(f"wrote {path}: {FILES[which][1]}")
    print("next: `promtool check rules` on the rules file, then add it to prometheus.yml; import the JSON in Grafana")
    return 0
