"""`mlgoodput profile --run NAME --duration 3s`: capture a trace from running processes of a run."""

from __future__ import annotations

import argparse
import json
import re
from typing import Any

_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|s|m)?\s*$")


def parse_duration(text: str) -> float:
    """`3s`, `500ms`, `2m` or plain seconds, as seconds."""
    m = _DURATION.match(text)
    if not m:
        raise argparse.ArgumentTypeError(f"duration must look like 3s, 500ms or 2m, got {text!r}")
    v = float(m.group(1))
    return v / 1000.0 if m.group(2) == "ms" else v * 60.0 if m.group(2) == "m" else v


def _hosts(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"hosts must be comma-separated process indices, got {text!r}") from None


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "profile",
        help="capture an on-demand profile from the running processes of a run",
        description="Ask every process of a run on this machine (started with on_demand_xprof=True)"
        " to capture a JAX trace into one session of the run's profile directory.",
    )
    p.add_argument("--run", help="run name (or a unique prefix)")
    p.add_argument("--duration", type=parse_duration, default=3.0, help="how long to trace (3s, 500ms, 2m)")
    p.add_argument("--session", default=None, help="session id (default: ondemand_<time>)")
    p.add_argument("--hosts", type=_hosts, default=None, help="only these process indices, e.g. 0,2")
    p.add_argument("--address", default=None, help="HOST:PORT or unix:/path of one process (with --token)")
    p.add_argument("--token", default=None, help="the token of --address")
    p.add_argument("--store", default=None, help="accepted like every command; capture talks to the processes")
    p.add_argument("--json", action="store_true", help="print the replies as JSON")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from mlgoodput.diagnostics import capture

    results = capture(
        args.run, args.duration, session=args.session, hosts=args.hosts, address=args.address, token=args.token
    )
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        for r in results:
            who = f"host {r.get('host')}" + (f" (pid {r['pid']})" if r.get("pid") else "")
            if r.get("ok"):
                print(f"{who}: session {r['session']}: {len(r['files'])} files in {r['path']}")
            else:
                print(f"{who}: failed: {r.get('error')}")
    return 0 if results and all(r.get("ok") for r in results) else 1
