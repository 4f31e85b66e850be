"""`mlgoodput aggregate`: this node's shipper of a store, in the foreground.

For users who prefer a side process to the node shipper that journals run themselves
(`MLGOODPUT_NODE_SHIPPER=1`): it ships every journal of the store on this machine that was
handed over, and every one a dead process left, in one store transaction a round. It waits
while another process leads, and takes over when that one dies. Ctrl-C (or SIGTERM) stops
it after a last round; what is not stored then stays journaled for the next shipper.
"""

from __future__ import annotations

import argparse
from typing import Any

from mlgoodput._cli._common import positive_seconds


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("aggregate", help="ship every journal of a store on this node as one shipper, until Ctrl-C")
    p.add_argument("--store", help="store URL or path (default: $MLGOODPUT_STORE, else the default file)")
    p.add_argument(
        "--interval-s",
        type=positive_seconds,
        default=0.5,
        metavar="SECONDS",
        help="time between shipping rounds (default: 0.5)",
    )
    p.set_defaults(func=cmd_aggregate)


def cmd_aggregate(args: Any) -> int:
    import signal
    import sys
    import threading

    from mlgoodput._aggregator import NodeShipper
    from mlgoodput._cli import CLIError
    from mlgoodput.store import is_process_local, resolve_store_url

    url = resolve_store_url(args.store, "--store")
    if is_process_local(url):
        raise CLIError(f"--store: {url} lives inside one process: there is nothing to aggregate", 2)

    def stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGTERM, stop)
    shipper = NodeShipper(url, interval_s=args.interval_s)
    shipper.start()
    print(f"mlgoodput: shipping the journals of {url} on this node (Ctrl-C stops)", file=sys.stderr, flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, old)
    ok = shipper.close(10)
    s = shipper.stats()
    rest = "" if ok else "; what is not stored stays journaled for the next shipper"

    def count(n: int, what: str) -> str:
        return f"{n} {what}" if n == 1 else f"{n} {what}s"

    print(
        f"mlgoodput: aggregator stopped: {count(s['events'], 'event')} stored in"
        f" {count(s['transactions'], 'transaction')} over {count(s['rounds'], 'round')}{rest}",
        file=sys.stderr,
        flush=True,
    )
    return 0
