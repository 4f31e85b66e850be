"""The `mlgoodput` command: one subcommand per module in `mlgoodput._cli`.

Each module there has `register(subparsers)`, which adds its parser and sets `func`
(args -> exit code). Those modules import their implementation inside `func`, so building
the parser (and `--help`) stays as cheap as starting Python. Every failure is one line on
stderr and a non-zero exit code; `--debug` (or MLGOODPUT_DEBUG=1) adds the traceback, and
one status line per background worker at exit.

Only entry points import this module: the `mlgoodput` script, `python -m mlgoodput`
(`__main__.py`) and `python -m mlgoodput.console`; tests call `main(argv)`. No library module
imports it: only those programs stand above it (docs/architecture.md, "The floors").
"""

from __future__ import annotations

import importlib
import os
import sys

# not `typing.TYPE_CHECKING`: importing typing alone costs a fifth of a bare Python start
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence
    from typing import NoReturn

# (module in mlgoodput._cli) -- one line per subcommand group
_COMMANDS: tuple[str, ...] = (
    "report",
    "console",
    "demo",
    "runs",
    "profile",
    "monitor",
    "dashboards",
    "advise",
    "ui",
    "aggregate",
    "fleet",
)

#: module -> its subcommands and their one-line help, so that `mlgoodput --help` and
#: `--version` answer without argparse or any subcommand module (a bare Python start costs
#: about as much as importing argparse). A module missing here makes `--help` use argparse;
#: tests/cli/test_fast_help.py checks these lines against the real parsers.
_SUMMARY: dict[str, tuple[tuple[str, str], ...]] = {
    "report": (
        ("report", "goodput and the badput breakdown of a job"),
        ("jobs", "list the jobs (and other streams) in a store"),
    ),
    "console": (("console", "the live console: serve, replay logs, usage report"),),
    "demo": (("demo", "run a short job that crashes and restarts, then print its goodput report"),),
    "runs": (("runs", "list ML runs, or show one (configs, metrics, profiles)"),),
    "profile": (("profile", "capture an on-demand profile from the running processes of a run"),),
    "monitor": (("monitor", "upload a job's goodput to TensorBoard, Prometheus, OTLP or Cloud Monitoring"),),
    "dashboards": (("dashboards", "print or install the Grafana dashboard and Prometheus alert rules"),),
    "advise": (("advise", "checkpoint interval advice from measured save cost and interruptions"),),
    "ui": (("ui", "serve a web app over a store: jobs, timelines, runs, console, compare"),),
    "aggregate": (("aggregate", "ship every journal of a store on this node as one shipper, until Ctrl-C"),),
    "fleet": (("fleet", "accelerator hours of every job by team, model or cause, in hours and money"),),
}
_DESCRIPTION = "Goodput and Badput of ML training jobs, runs, and a live console."

#: Exit codes: a usage error (bad argument, unknown job), a failure (store, network, disk),
#: and Ctrl-C as shells report it (128 + SIGINT).
EXIT_USAGE = 2
EXIT_FAILURE = 1
EXIT_INTERRUPTED = 130


def _version() -> str:
    from mlgoodput import __version__

    return f"mlgoodput {__version__}"


def build_parser() -> argparse.ArgumentParser:
    import argparse

    class _Parser(argparse.ArgumentParser):
        """Argument errors in one line (no usage dump); `COMMAND --help` shows the usage."""

        def error(self, message: str) -> NoReturn:
            where = self.prog[len("mlgoodput") :].strip()
            head = f"{where}: " if where else ""
            self.exit(EXIT_USAGE, f"mlgoodput: error: {head}{message} (`{self.prog} --help` shows the usage)\n")

    p = _Parser(
        prog="mlgoodput",
        description=_DESCRIPTION,
    )
    p.add_argument("--version", action="version", version=_version())
    p.add_argument(
        "--debug",
        action="store_true",
        help="show the traceback of a failure and, at exit, the state of each background worker",
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in _COMMANDS:
        mod = importlib.import_module(f"mlgoodput._cli.{name}")
        mod.register(sub)
    return p


def fast_help() -> str | None:
    """The text of `mlgoodput --help`, or None if a subcommand has no summary in `_SUMMARY`."""
    if not all(m in _SUMMARY for m in _COMMANDS):
        return None
    rows = [row for m in _COMMANDS for row in _SUMMARY[m]]
    w = max(len(name) for name, _ in rows)
    lines = [
        "usage: mlgoodput [-h] [--version] [--debug] COMMAND ...",
        "",
        _DESCRIPTION,
        "",
        "commands:",
        *(f"  {name:<{w}}  {text}" for name, text in rows),
        "",
        "options:",
        "  -h, --help  show this help message and exit",
        "  --version   show the version and exit",
        "  --debug     show the traceback of a failure and the background workers' state at exit",
        "",
        "`mlgoodput COMMAND --help` shows the options of a command.",
    ]
    return "\n".join(lines) + "\n"


def describe_error(e: BaseException) -> tuple[str, int]:
    """(one line for a person, exit code) for an exception that ended a command."""
    from mlgoodput._cli import CLIError

    text = " ".join(str(e).split()) or type(e).__name__
    if isinstance(e, CLIError):
        return text, e.exit_code
    if isinstance(e, (ValueError, TypeError, LookupError)):
        return text, EXIT_USAGE
    if isinstance(e, ImportError):
        if "mlgoodput[" in text:  # the message names the extra that holds the package
            return text, EXIT_FAILURE
        return (
            f"{text} (a missing optional dependency: `pip install 'mlgoodput[all]'` installs all but torch)",
            EXIT_FAILURE,
        )
    if isinstance(e, OSError):  # StoreError is an OSError: what failed is in its text
        return text, EXIT_FAILURE
    return f"unexpected {type(e).__name__}: {text} (run again with --debug for the traceback)", EXIT_FAILURE


def _silence_stdout() -> None:
    """The reader of our stdout left (`mlgoodput report | head`): drop what is still buffered."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    from mlgoodput._env import debug_on  # lazy: `mlgoodput --version` stays a bare start

    debug = "--debug" in argv or debug_on()
    argv = [a for a in argv if a != "--debug"]  # accepted anywhere: `mlgoodput report ... --debug`
    if debug:
        from mlgoodput._worker import enable_debug_report

        enable_debug_report()  # one status line per background worker at exit
    if argv == ["--version"]:
        print(_version())
        return 0
    if argv in (["--help"], ["-h"]):
        text = fast_help()
        if text is not None:
            sys.stdout.write(text)
            return 0
    try:
        args = build_parser().parse_args(argv)
        return int(args.func(args) or 0)
    except SystemExit:
        raise
    except KeyboardInterrupt:
        if debug:
            import traceback

            traceback.print_exc()
        print("mlgoodput: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        _silence_stdout()
        return 0
    except Exception as e:
        if debug:
            import traceback

            traceback.print_exc()
        text, code = describe_error(e)
        print(f"mlgoodput: error: {text}", file=sys.stderr)
        return code
