"""A process that journals events, says so on stdout, and waits to be killed."""

from __future__ import annotations

import sys
import time

from mlgoodput._journal import Journal
from mlgoodput.events import Kind


def main() -> None:
    store, job, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    j = Journal.for_stream(store, "ns", job, 0)
    for i in range(n):
        j.append(Kind.STEP_START, 1000.0 + i, i)
    j.append(Kind.CUSTOM_START, 5000.0, name="eval", attrs={"k": [1, 2]})
    print("ready", flush=True)
    time.sleep(600)


if __name__ == "__main__":
    main()
