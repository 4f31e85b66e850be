"""`python -m mlgoodput.console ACTION ...`: the same as `mlgoodput console ACTION ...`."""

from __future__ import annotations

import argparse
import sys

from mlgoodput._cli import console as _console


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m mlgoodput.console")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    _console.register(sub)
    args = p.parse_args(["console", *(sys.argv[1:] if argv is None else argv)])
    try:
        return int(args.func(args) or 0)
    except (ValueError, TypeError, LookupError) as e:
        print(f"mlgoodput console: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
