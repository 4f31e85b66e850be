"""A small job that fills every page of `mlgoodput ui`: goodput events (init, preparation,
steps, checkpoints, an evaluation), a console session (logs, a progress bar, usage samples)
and an ML run (configs, a loss metric). It records through the public APIs, as a user would.

    python -m mlgoodput._demo.workload_ui --store PATH --job NAME [--steps N] [--step-s S]
"""

from __future__ import annotations

import argparse
import logging
import math
import time


def run(store: str, job: str, steps: int, step_s: float, *, flush_every: int = 5) -> None:
    from mlgoodput import console
    from mlgoodput.diagnostics import machinelearning_run, metrics
    from mlgoodput.goodput import Recorder

    rec = Recorder(job, f"goodput_{job}", True, store=store)
    log = logging.getLogger("train")
    with console.session(job=job, store=store, display=False, usage=max(0.2, step_s * 4)):
        rec.record_job_start_time()
        log.info("job %s starting: %d steps", job, steps)
        rec.record_tpu_init_start_time()
        time.sleep(step_s * 3)
        rec.record_tpu_init_end_time()
        rec.record_training_preparation_start_time()
        mlrun = machinelearning_run(
            name=job,
            configs={"model": {"layers": 4, "width": 256}, "lr": 3e-4, "batch_size": 64, "steps": steps},
            store=store,
            log_system_metrics=True,
            system_metrics_interval_s=max(0.2, step_s * 4),
        )
        time.sleep(step_s * 2)
        rec.record_training_preparation_end_time()
        bar = console.Progress.new(total=steps, msg="training")
        for s in range(steps):
            rec.record_step_start_time(s)
            time.sleep(step_s * (4 if s == 0 else 1))
            loss = 2.5 * math.exp(-s / max(1, steps / 3)) + 0.1
            metrics.record("loss", loss, step=s)
            bar.advance()
            if s % 10 == 9:
                log.info("step %d loss %.4f", s, loss)
                rec.record_checkpoint_save_start_time(s)
                time.sleep(step_s / 2)
                rec.record_checkpoint_save_end_time(s)
            if s == steps // 2:
                rec.record_custom_badput_event_start_time(custom_badput_event_type="eval")
                log.warning("evaluating at step %d", s)
                time.sleep(step_s * 2)
                rec.record_custom_badput_event_end_time(custom_badput_event_type="eval")
            if s % flush_every == flush_every - 1:
                rec.flush(5)
        bar.close()
        log.info("done")
        rec.record_job_end_time()
        rec.close(10)
        mlrun.flush(10)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--store", required=True)
    ap.add_argument("--job", default="ui-sample")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--step-s", type=float, default=0.05)
    a = ap.parse_args()
    logging.basicConfig(level=logging.INFO)
    run(a.store, a.job, a.steps, a.step_s)


if __name__ == "__main__":
    main()
