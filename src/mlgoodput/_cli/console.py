"""`mlgoodput console ...`: serve a live console, replay its logs, draw its usage report."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser("console", help="the live console: serve, replay logs, usage report")
    csub = p.add_subparsers(dest="console_command", metavar="ACTION")
    csub.required = True

    s = csub.add_parser("serve", help="start a console server that processes connect to")
    s.add_argument("--address", required=True, help="HOST:PORT, :PORT (127.0.0.1), unix:/path or a plain name")
    s.add_argument("--job", default=None, help="console job name (the store stream); default: console-TIME-PID")
    s.add_argument(
        "--store", default=None, help="store URL or path (default: $MLGOODPUT_STORE or the local SQLite file)"
    )
    s.add_argument("--token", default=None, help="TCP token (default: $MLGOODPUT_CONSOLE_TOKEN, else a new random one)")
    s.add_argument(
        "--in-process-store",
        action="store_true",
        help="write the store on the server's own thread instead of a helper process",
    )
    s.set_defaults(func=_serve)

    lg = csub.add_parser("logs", help="replay (or follow) the stored log lines of a console job")
    lg.add_argument("--job", default=None, help="console job name (default: the most recent one)")
    lg.add_argument("--store", default=None)
    lg.add_argument("--json", action="store_true", help="one JSON object per line")
    lg.add_argument("-f", "--follow", action="store_true", help="keep printing new lines until Ctrl-C")
    lg.add_argument(
        "--process",
        type=int,
        action="append",
        metavar="N",
        help="only lines of console process #N (repeat for several)",
    )
    lg.add_argument(
        "--level",
        type=_level,
        default=None,
        metavar="LEVEL",
        help="only lines at LEVEL or above (DEBUG, INFO, WARNING, ERROR, CRITICAL or a number)",
    )
    lg.add_argument("--grep", default=None, metavar="TEXT", help="only lines whose message contains TEXT (any case)")
    lg.add_argument(
        "--run",
        type=int,
        default=None,
        metavar="N",
        help="only run N of the job name (1 is its first serving; runs are marked in the output)",
    )
    lg.set_defaults(func=_logs)

    u = csub.add_parser("usage-report", help="draw the usage of every process over time (.html or .png)")
    u.add_argument("--job", default=None, help="console job name (default: the most recent one)")
    u.add_argument("--store", default=None)
    u.add_argument("--out", required=True, help="output file: usage.html or usage.png")
    u.set_defaults(func=_usage_report)


def _serve(args: argparse.Namespace) -> int:
    from mlgoodput import _env
    from mlgoodput.console import ConsoleServer

    token = args.token or os.environ.get(_env.CONSOLE_TOKEN) or None
    from mlgoodput.store import resolve_store_url, store_file

    db = store_file(resolve_store_url(args.store, "--store"))
    created = [p for p in ((db, db + "-wal", db + "-shm") if db else ()) if not os.path.exists(p)]
    srv = ConsoleServer(
        args.address, job=args.job, store=args.store, token=token, store_process=not args.in_process_store
    )
    try:
        address = srv.start()
    except OSError as e:
        from mlgoodput._cli._common import CLIError

        srv.stop(1.0)
        for path in created:  # a server that never served leaves no empty store behind
            try:
                os.unlink(path)
            except OSError:
                pass
        raise CLIError(
            f"cannot serve at {args.address}: {e.strerror or e}"
            " (use a local address such as :7000, 127.0.0.1:7000 or unix:/path)"
        ) from e
    # stop on Ctrl-C or SIGTERM from before the address is shown: a Ctrl-C the moment it
    # shows (as print returns) would otherwise end the command as interrupted (130)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    hint = f"export {_env.CONSOLE}={address}"
    if srv.auth:
        hint += f" {_env.CONSOLE_TOKEN}={srv.token}"
    if srv.display is not None:
        srv.display.note(f"connect with: {hint}")
    else:
        print(hint, flush=True)
    while not stop.wait(0.5):
        pass
    srv.stop()
    return 0


def _level(text: str) -> int:
    import logging

    if text.strip().lstrip("-").isdigit():
        return int(text)
    v = logging.getLevelName(text.strip().upper())
    if not isinstance(v, int):
        raise argparse.ArgumentTypeError(f"expected DEBUG, INFO, WARNING, ERROR, CRITICAL or a number, got {text!r}")
    return v


def _pick_job(store: Any, job: str | None) -> str:
    from mlgoodput.console import NAMESPACE

    jobs = [j for j in store.jobs() if j.namespace == NAMESPACE]
    if job:
        if not any(j.job == job for j in jobs):
            known = ", ".join(sorted(j.job for j in jobs)[-5:]) or "none"
            raise LookupError(f"no console job named {job!r} in {store.url} (recent ones: {known})")
        return job
    if not jobs:
        raise LookupError(f"no console jobs in the store {store.url} (`mlgoodput console serve` records them)")
    return str(max(jobs, key=lambda j: j.last_time).job)


def _keep(e: dict[str, Any], args: argparse.Namespace) -> bool:
    if args.run is not None and e.get("run", 1) != args.run:
        return False
    if args.process and e["process"] not in args.process:
        return False
    if args.level is not None and e["levelno"] < args.level:
        return False
    return not (args.grep and args.grep.lower() not in str(e["message"]).lower())


def _logs(args: argparse.Namespace) -> int:
    import time

    from mlgoodput._cli._common import open_read_store
    from mlgoodput.console import log_entries_after

    store = open_read_store(args.store)
    line = _line_writer(args.json)
    state: dict[str, Any] = {}
    shown = {"run": 0}

    def write(e: dict[str, Any]) -> None:
        if not args.json and e.get("run", 1) != shown["run"]:
            if shown["run"] or e.get("run", 1) > 1:  # a job name served more than once
                sys.stdout.write(f"── run {e.get('run', 1)} of job {job} ──\n")
            shown["run"] = e.get("run", 1)
        line(e)

    try:
        job = _pick_job(store, args.job)
        # With --follow, Ctrl-C is how one stops, whenever it comes: also while the stored
        # lines are replayed or as they show (the flush returning), not only in the loop.
        try:
            entries, cursor = log_entries_after(store, job, 0, state)
            for e in entries:
                if _keep(e, args):
                    write(e)
            _say_losses(store, job)
            while args.follow:
                sys.stdout.flush()
                time.sleep(0.5)
                entries, cursor = log_entries_after(store, job, cursor, state)
                for e in entries:
                    if _keep(e, args):
                        write(e)
        except KeyboardInterrupt:
            if not args.follow:
                raise
    finally:
        store.close()
    return 0


def _say_losses(store: Any, job: str) -> None:
    """Records of this console job that were lost, in one line on stderr (stdout stays the log)."""
    from mlgoodput._cli.report import CONSOLE_NAMESPACE, print_losses
    from mlgoodput._recovery import stored_losses

    lost = stored_losses(store, job).get((CONSOLE_NAMESPACE, job), 0)
    if lost:
        sys.stdout.flush()
        print_losses({(CONSOLE_NAMESPACE, job): lost}, sys.stderr)


def _line_writer(as_json: bool) -> Any:
    """How one entry is printed: JSON, plain lines when stdout is not a terminal (never
    wrapped), or colored lines wrapped to the terminal's width."""
    from mlgoodput.console import clean

    if as_json:
        return lambda e: sys.stdout.write(json.dumps(e, ensure_ascii=False) + "\n")

    def plain(e: dict[str, Any]) -> None:
        msg = clean(e["message"])
        line = f"{e['iso_time'][11:23]} [#{e['process']}] {e['level']:<8} {msg}  {clean(os.path.basename(e['file']))}:{e['line']}"
        if e.get("exc"):
            line += "\n" + clean(e["exc"])
        sys.stdout.write(line + "\n")

    if not sys.stdout.isatty():
        return plain
    from rich.text import Text

    from mlgoodput._cli._common import rich_console

    con = rich_console(highlight=False)

    def rich_line(e: dict[str, Any]) -> None:
        t = Text()
        t.append(e["iso_time"][11:23], style="dim")
        t.append(f" [#{e['process']}] ", style="cyan")
        t.append(f"{e['level']:<8} ", style="bold" if e["levelno"] >= 40 else "")
        if e.get("ansi"):
            t.append_text(Text.from_ansi(e["ansi"]))
        else:
            t.append(clean(e["message"]))
        if e.get("exc"):
            t.append("\n" + clean(e["exc"]), style="red")
        t.append(f"  {clean(os.path.basename(e['file']))}:{e['line']}", style="dim")
        con.print(t)

    return rich_line


def _usage_report(args: argparse.Namespace) -> int:
    from mlgoodput._cli._common import CLIError, open_read_store
    from mlgoodput.console import write_usage_report

    folder = os.path.dirname(os.path.abspath(args.out))
    if not os.path.isdir(folder):
        raise CLIError(f"--out: the folder {folder} does not exist (create it, or write elsewhere)", 2)
    store = open_read_store(args.store)
    try:
        job = _pick_job(store, args.job)
        n = write_usage_report(store, job, args.out)
    finally:
        store.close()
    print(f"wrote {args.out}: {n} usage samples of job {job!r}")
    return 0
