"""A training process for the multi-process tests: `_child.py MODE RUN_NAME ARGS...`.

Modes:
  session SESSION_ID   one programmatic xprof session with that id, then exit
  serve STOP_FILE      on-demand profiling on; compute until STOP_FILE exists
"""

from __future__ import annotations

import os
import sys
import time

import jax  # noqa: F401 - the framework whose traces we capture
import jax.numpy as jnp

from mlgoodput.diagnostics import machinelearning_run, metrics, xprof


def work() -> None:
    x = jnp.ones((64, 64))
    (x @ x).block_until_ready()


def main() -> None:
    mode, name = sys.argv[1], sys.argv[2]
    if mode == "session":
        run = machinelearning_run(name=name, run_group="multi")
        metrics.record("host_marker", float(run.process_index), step=1, record_on_all_hosts=True)
        with xprof(session_id=sys.argv[3]):
            work()
        run.end()
        print(run.name, flush=True)
    elif mode == "serve":
        stop = sys.argv[3]
        run = machinelearning_run(name=name, on_demand_xprof=True)
        print(run.name, run.on_demand_address, flush=True)
        step = 0
        while not os.path.exists(stop):
            work()
            metrics.record("loss", 1.0 / (step + 1), step=step)
            step += 1
            time.sleep(0.01)
        run.end()
    else:
        raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
