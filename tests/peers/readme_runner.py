"""Runs README code blocks, each in a fresh namespace, in this one process: `readme_runner.py BLOCKS.json`.

BLOCKS.json is a list of [label, source]. A block that raises stops the run with the label
and the traceback on stderr and exit status 1; every block that ran prints `ok <label>`.
Run as `__main__`, so a block's `if __name__ == "__main__":` part runs too.
"""

from __future__ import annotations

import json
import sys
import traceback


def main() -> int:
    with open(sys.argv[1], encoding="utf-8") as f:
        blocks = json.load(f)
    for label, source in blocks:
        namespace = {"__name__": "__main__"}
        try:
            exec(compile(source, f"<README block {label}>", "exec"), namespace)
        except BaseException:
            print(f"FAILED {label}", file=sys.stderr)
            traceback.print_exc()
            return 1
        print(f"ok {label}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
