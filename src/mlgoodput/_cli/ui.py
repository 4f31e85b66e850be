"""`mlgoodput ui`: serve the web pages and JSON API over a store."""

from __future__ import annotations

import argparse
import os
from typing import Any

DEFAULT_PORT = 8787


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "ui",
        help="serve a web app over a store: jobs, timelines, runs, console, compare",
        description="Serves the pages and the JSON API (/api/...) on HOST:PORT until interrupted. "
        "Binds to loopback by default; any other address requires the token printed in the URL.",
    )
    p.add_argument("--store", default=None, help="store URL or path (default: $MLGOODPUT_STORE, else the default file)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default: {DEFAULT_PORT}; 0 picks a free one)")
    p.add_argument(
        "--profile-dir",
        action="append",
        default=None,
        metavar="DIR_OR_URL",
        help="a directory (or fsspec URL) whose profile files may be downloaded; repeat for several "
        "(default: $MLGOODPUT_PROFILE_DIR, else the default profile directory runs write to)",
    )
    p.add_argument(
        "--max-profile-bytes",
        type=int,
        default=None,
        metavar="BYTES",
        help="the largest profile file served (default: 1 GiB)",
    )
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from mlgoodput._endpoint import HostPort, check_host, check_port
    from mlgoodput.store import resolve_store_url, store_file

    args.host = check_host(args.host, "--host")
    check_port(args.port, "--port")
    url = resolve_store_url(args.store, "--store")
    path = store_file(url)
    if path is not None and not os.path.exists(path):
        raise LookupError(f"--store: no store at {path} (record a job first, or run `make demo`)")
    from mlgoodput._cli._common import open_read_store
    from mlgoodput.ui import MAX_PROFILE_BYTES, serve

    if args.max_profile_bytes is not None and args.max_profile_bytes <= 0:
        raise ValueError(f"--max-profile-bytes must be a positive number of bytes, got {args.max_profile_bytes}")
    for d in args.profile_dir or ():
        if not d.strip() or "\0" in d:
            raise ValueError(f"--profile-dir must be a directory or a URL, got {d!r}")
    store = open_read_store(url, "--store")  # an unreachable database fails here, in one line
    try:
        return serve(
            store,
            args.host,
            args.port,
            profile_dirs=args.profile_dir,
            max_profile_bytes=args.max_profile_bytes or MAX_PROFILE_BYTES,
        )
    except OSError as e:
        raise LookupError(f"cannot serve on {HostPort(args.host, args.port)}: {e.strerror or e}") from None
