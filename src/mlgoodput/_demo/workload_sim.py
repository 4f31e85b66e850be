"""A training-like workload on the real clock, recorded with the public recorder API.

Runs as `python -m mlgoodput._demo.workload_sim --store URL --job JOB --ckpt-dir DIR`.
It initializes, prepares (restoring the newest checkpoint file in DIR, if any), loads the
first batch, then runs steps with a compile-heavy first step, overlapped data loading,
an evaluation every `--eval-every` steps and a blocking checkpoint save every
`--ckpt-every` steps. Progress goes to stdout as one JSON object per line (the workload
protocol the demo supervisor reads; see `supervisor.py`); the loss goes to an ML run and
the log lines to the supervisor's console, under the job's name (`_track.py`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from mlgoodput._demo._track import Tracking
from mlgoodput.goodput import Recorder


def say(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def latest_checkpoint(d: Path) -> int | None:
    steps = [int(p.stem.split("_")[1]) for p in d.glob("ckpt_*.json")]
    return max(steps) if steps else None


def save_checkpoint(d: Path, step: int, state: dict[str, Any]) -> None:
    tmp = d / f".ckpt_{step}.tmp"
    tmp.write_text(json.dumps({"step": step, "state": state}))
    os.replace(tmp, d / f"ckpt_{step}.json")  # atomic: a kill leaves the old one or the new one


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--store", required=True)
    ap.add_argument("--job", required=True)
    ap.add_argument("--logger", default=None, help="logger_name (default goodput_JOB)")
    ap.add_argument("--ckpt-dir", required=True, type=Path)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--step-time", type=float, default=0.12)
    ap.add_argument("--ckpt-every", type=int, default=10)
    ap.add_argument("--eval-every", type=int, default=25)
    ap.add_argument("--time-scale", type=float, default=1.0, help="multiply every duration")
    a = ap.parse_args(argv)
    k = a.time_scale

    def work(seconds: float) -> None:
        time.sleep(seconds * k)

    rec = Recorder(a.job, a.logger or f"goodput_{a.job}", True, store=a.store)
    a.ckpt_dir.mkdir(parents=True, exist_ok=True)
    rec.record_job_start_time()
    rec.record_job_submit_time()  # left in the environment by the demo supervisor
    say(phase="start", pid=os.getpid(), steps=a.steps)

    say(phase="init")
    rec.record_tpu_init_start_time()
    work(1.5)  # bring up devices
    rec.record_tpu_init_end_time()

    say(phase="prep")
    rec.record_training_preparation_start_time()
    # the ML run and the console (part of preparing): a real job's configs go here
    track = Tracking(a.job, a.store, {"steps": a.steps, "step_time_s": a.step_time, "ckpt_every": a.ckpt_every}, "JAX")
    work(0.8)  # build the model and optimizer
    state: dict[str, Any] = {"loss": 10.0}
    start = 0
    restored = latest_checkpoint(a.ckpt_dir)
    if restored is not None:
        say(phase="restore", step=restored)
        rec.record_checkpoint_restore_start_time(restored)
        state = json.loads((a.ckpt_dir / f"ckpt_{restored}.json").read_text())["state"]
        work(0.8)  # read and place the weights
        rec.record_checkpoint_restore_end_time(restored)
        start = restored + 1
    # a simulated step does the work of a small model: 40% of the configured CPU peak at full speed
    from mlgoodput import flops

    peak = flops.record_peak(rec, "fp32", device_kinds=["cpu"], measure=False)
    if peak is not None:
        rec.record_step_flops(0.4 * peak[0] * a.step_time * k)
    rec.record_training_preparation_end_time()

    rec.record_data_loading_start_time()
    work(0.5)  # the first batch: nothing to overlap with yet
    rec.record_data_loading_end_time()

    for step in range(start, a.steps):
        rec.record_step_start_time(step)
        if step == start:
            work(1.5)  # trace and compile
        rec.record_data_loading_start_time()  # prefetch the next batch while the device works
        work(a.step_time * 0.3)
        rec.record_data_loading_end_time()
        work(a.step_time * 0.7)
        state["loss"] = round(state["loss"] * 0.97, 6)
        say(phase="step", step=step, steps=a.steps, loss=state["loss"])
        track.step(step, state["loss"])
        if a.eval_every and (step + 1) % a.eval_every == 0:
            rec.record_custom_badput_event_start_time(custom_badput_event_type="eval_step")
            say(phase="eval", step=step)
            work(0.5)
            rec.record_custom_badput_event_end_time(custom_badput_event_type="eval_step")
        if a.ckpt_every and (step + 1) % a.ckpt_every == 0:
            rec.record_checkpoint_save_start_time(step)
            work(0.3)
            save_checkpoint(a.ckpt_dir, step, state)
            rec.record_checkpoint_save_end_time(step)
            say(phase="checkpoint", step=step)
    rec.record_job_end_time()
    rec.close()
    track.close()
    say(phase="done", steps=a.steps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
