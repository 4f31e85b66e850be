"""The `mlgoodput` command: one subcommand per module in `mlgoodput._cli`.

Each module there has `register(subparsers)`, which adds its parser and sets `func`
(args -> exit code). Nothing imports this module.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# (module in mlgoodput._cli) -- one line per subcommand group
_COMMANDS: tuple[str, ...] = (
    "report",
    "console",
    "demo",
    "runs",
    "profile",
    "monitor",
    "advise",
    "ui",
)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="mlgoodput",
        description="Goodput and Badput of ML training jobs, runs, and a live console.",
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in _COMMANDS:
        mod = importlib.import_module(f"mlgoodput._cli.{name}")
        mod.register(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (ValueError, TypeError, LookupError) as e:
        print(f"mlgoodput: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `mlgoodput jobs | head`: the reader left, which is fine
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (OSError, ImportError) as e:  # a store that cannot be reached, a missing extra
        print(f"mlgoodput: error: {str(e).splitlines()[0] if str(e) else type(e).__name__}", file=sys.stderr)
        return 1
