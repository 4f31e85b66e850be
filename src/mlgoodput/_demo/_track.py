"""What a demo workload records beside its goodput events, under the same name: its loss as
an ML run (`mlgoodput.diagnostics`) and its log lines through the live console, so that the
job, run and console pages of `mlgoodput ui` show one training.

The console is the demo supervisor's session (`$MLGOODPUT_CONSOLE`); a workload started
without one logs nowhere. A part that cannot start (an extra not installed) is said once on
stderr and left out: the demo's goodput never depends on it.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

from mlgoodput import _env

log = logging.getLogger("demo")


class Tracking:
    """The run and the console of one demo workload process; `step` never raises."""

    def __init__(self, job: str, store: str, configs: dict[str, Any], framework: str) -> None:
        self.run: Any = None
        self.connected = False
        if os.environ.get(_env.CONSOLE):
            try:
                from mlgoodput import console

                root = logging.getLogger()
                shown, before = root.getEffectiveLevel(), list(root.handlers)
                console.connect()  # lowers the root logger to INFO, for the console's handler
                for h in before:  # a handler a library installed (absl's) shows on the terminal what it did
                    if h.level == logging.NOTSET:
                        h.setLevel(shown)
                self.connected = True
            except (ImportError, OSError, ValueError) as e:
                print(f"demo: logs not sent to the console ({e})", file=sys.stderr, flush=True)
        try:
            from mlgoodput.diagnostics import machinelearning_run

            # the workload id is the job: a restarted attempt continues the same run
            self.run = machinelearning_run(
                name=job, configs=configs, framework=framework, run_workload_id=job, store=store
            )
        except (ImportError, OSError, ValueError) as e:
            print(f"demo: no ML run recorded ({e})", file=sys.stderr, flush=True)

    def step(self, step: int, loss: float, every: int = 1) -> None:
        """Record the loss of `step` in the run, and log it every `every` steps."""
        try:
            if self.run is not None:
                from mlgoodput.diagnostics import metrics

                metrics.record("loss", loss, step=step)
            if step % every == 0:
                log.info("step %d loss %.4f", step, loss)
        except Exception:  # a demo's extras never stop its training
            pass

    def close(self) -> None:
        """End the run and leave the console, delivering what they hold."""
        if self.run is not None:
            self.run.end(10)
        if self.connected:
            from mlgoodput import console

            console.disconnect(5)
